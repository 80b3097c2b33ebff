// Live push wiring: the WebSocket route on /insights/{projectId}/live, its hub (internal/live)
// and its Redis source, with the same credential rules as the HTTP reads (read or root client
// of the project, revocation from the gate's mirror and Redis, the project must exist).
import type { Authenticator } from '../auth/auth';
import { NotFoundError, UnauthorizedError } from '../http/errors';
import type { SocketRoute } from '../http/types';
import { LIVE_REFUSAL_REASONS, LiveHub, type LiveAuthenticate } from '../live/hub';
import { RedisLiveSource } from '../live/source';
import type { Logger } from '../obs/log';
import type { Metrics } from '../obs/metrics';
import type { Gate } from '../ratelimit/gate';
import { createRedis, type Redis, type RedisKeys } from '../redis/redis';

interface LiveDeps {
  redis: Redis;
  redisUrl: string;
  keys: RedisKeys;
  auth: Authenticator;
  gate: Gate;
  log: Logger;
  metrics: Metrics;
  /** LIVE_MAX_SOCKETS: authenticated sockets one API thread holds. */
  maxSockets: number;
  /** LIVE_MAX_SOCKETS_PER_PROJECT: authenticated sockets of one project on one API thread. */
  maxSocketsPerProject: number;
  /** LIVE_MAX_AUTHENTICATING: sockets not yet authenticated on one API thread. */
  maxAuthenticating: number;
}

/** The 4 KiB a client may send in one message (its credentials); more closes the socket with 1009. */
const LIVE_MAX_MESSAGE_BYTES = 4096;
/**
 * The largest message read to its end so that it can be refused with 1009 and a close frame;
 * uWebSockets.js drops a connection announcing a bigger one at once, without a close frame
 * (1006). A socket holds at most this much of a message it has not finished sending, so the
 * authenticating budget bounds what unauthenticated sockets can make the thread hold.
 */
const LIVE_MAX_FRAME_BYTES = 1024 * 1024;

export interface LivePush {
  route: SocketRoute;
  hub: LiveHub;
  /** Closes every socket and the subscriber connection. */
  close(): void;
}

function liveAuthenticate(auth: Authenticator, gate: Gate): LiveAuthenticate {
  return async ({ clientId, clientSecret }, projectId) => {
    const client = await auth.forReadCredentials(clientId, clientSecret, projectId);
    if (await gate.isRevoked(client.id)) throw new UnauthorizedError('invalid client credentials');
    if (!projectId || projectId.includes('\u0000') || !(await auth.project(projectId))) throw new NotFoundError(`project ${projectId} not found`);
    return { clientId: client.id };
  };
}

export function livePush(deps: LiveDeps): LivePush {
  // A subscriber connection of its own (subscriber mode takes the whole connection); it queues
  // its SUBSCRIBEs while Redis is away and resubscribes after a reconnect.
  const subscriber = createRedis(deps.redisUrl);
  const hub: LiveHub = new LiveHub({
    source: new RedisLiveSource(deps.redis, subscriber, deps.keys, (projectId) => hub.changed(projectId), (clientId) => deps.gate.revokedLocally(clientId)),
    authenticate: liveAuthenticate(deps.auth, deps.gate),
    maxSockets: deps.maxSockets,
    maxSocketsPerProject: deps.maxSocketsPerProject,
    maxAuthenticating: deps.maxAuthenticating,
    onError: (err, what) => deps.log.warn({ err: (err as Error)?.message ?? String(err) }, `${what} failed`),
    onStats: ({ authenticating, watching }) => {
      deps.metrics.liveSockets.set({ state: 'watching' }, watching);
      deps.metrics.liveSockets.set({ state: 'authenticating' }, authenticating);
    },
    onRefused: (reason) => deps.metrics.liveRefusals.inc({ reason }),
  });
  deps.metrics.liveSockets.set({ state: 'watching' }, 0);
  deps.metrics.liveSockets.set({ state: 'authenticating' }, 0);
  for (const reason of LIVE_REFUSAL_REASONS) deps.metrics.liveRefusals.inc({ reason }, 0);
  return {
    hub,
    route: {
      pattern: '/insights/:projectId/live',
      maxMessageBytes: LIVE_MAX_MESSAGE_BYTES,
      maxFrameBytes: LIVE_MAX_FRAME_BYTES,
      maxBufferedBytes: 64 * 1024,
      accept: (req, socket) => hub.connect(req, socket),
    },
    close: () => {
      hub.close();
      subscriber.disconnect();
    },
  };
}
