// Live push wiring: the WebSocket route on /insights/{projectId}/live, its hub (internal/live)
// and its Redis source, with the same credential rules as the HTTP reads (read or root client
// of the project, revocation from Redis, the project must exist).
import type { Authenticator } from '../auth/auth';
import { NotFoundError, UnauthorizedError } from '../http/errors';
import type { SocketRoute } from '../http/types';
import { LiveHub, type LiveAuthenticate } from '../live/hub';
import { RedisLiveSource } from '../live/source';
import type { Logger } from '../obs/log';
import type { Metrics } from '../obs/metrics';
import type { Gate } from '../ratelimit/gate';
import { createRedis, type Redis, type RedisKeys } from '../redis/redis';

export interface LiveDeps {
  redis: Redis;
  redisUrl: string;
  keys: RedisKeys;
  auth: Authenticator;
  gate: Gate;
  log: Logger;
  metrics: Metrics;
  /** LIVE_MAX_SOCKETS: sockets one API thread accepts. */
  maxSockets: number;
}

export interface LivePush {
  route: SocketRoute;
  hub: LiveHub;
  /** Closes every socket and the subscriber connection. */
  close(): void;
}

export function liveAuthenticate(auth: Authenticator, gate: Gate): LiveAuthenticate {
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
    source: new RedisLiveSource(deps.redis, subscriber, deps.keys, (projectId) => hub.changed(projectId)),
    authenticate: liveAuthenticate(deps.auth, deps.gate),
    maxSockets: deps.maxSockets,
    onError: (err, what) => deps.log.warn({ err: (err as Error)?.message ?? String(err) }, `${what} failed`),
    onStats: ({ sockets, watching }) => {
      deps.metrics.liveSockets.set({ state: 'watching' }, watching);
      deps.metrics.liveSockets.set({ state: 'authenticating' }, sockets - watching);
    },
  });
  deps.metrics.liveSockets.set({ state: 'watching' }, 0);
  deps.metrics.liveSockets.set({ state: 'authenticating' }, 0);
  return {
    hub,
    route: {
      pattern: '/insights/:projectId/live',
      maxMessageBytes: 4096,
      maxBufferedBytes: 64 * 1024,
      accept: (req, socket) => hub.connect(req, socket),
    },
    close: () => {
      hub.close();
      subscriber.disconnect();
    },
  };
}
