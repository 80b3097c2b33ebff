// Redis client creation and the key names of one namespace (one place, so two instances
// sharing a Redis never collide).
import { Redis } from 'ioredis';
import { ServiceUnreachableError } from '../store/db';

export type { Redis };

export function redisKeys(ns: string) {
  return {
    /** Sliding-window log of one client's admitted requests (sorted set; written by the scripts in internal/ratelimit/scripts.ts). */
    rate: (scope: string, clientId: string) => `${ns}:rl:log:${scope}:${clientId}`,
    /** Sequence of rate-log members (unique across API processes). */
    rateSeq: `${ns}:rl:seq`,
    revoked: `${ns}:revoked-clients`,
    /** Channel on which the CLI announces a revoked client id (API processes mirror the set). */
    revocations: `${ns}:revocations`,
    /** Pub/sub channel: a project row changed (cli project update); every API process drops its cached copy. */
    projectChanges: `${ns}:project-changes`,
    live: (projectId: string) => `${ns}:live:${projectId}`,
    /** Pub/sub channel told when a project's live count may have changed (the ingest gate script builds it as the live key + ':changed'). */
    liveChanged: (projectId: string) => `${ns}:live:${projectId}:changed`,
    seen: (deviceId: string) => `${ns}:seen:${deviceId}`,
    /** The device of a profile's latest browser event (server-side events join its session: internal/ingest/handler.ts). */
    profileDevice: (projectId: string, profileId: string) => `${ns}:pdev:${projectId}:${profileId}`,
    salts: `${ns}:salts`,
    shardOwner: (shard: number) => `${ns}:shard-owner:${shard}`,
    workers: `${ns}:workers`,
    queuePrefix: `${ns}:bull`,
  };
}
export type RedisKeys = ReturnType<typeof redisKeys>;

/** A client for request paths: fails fast instead of queueing commands while Redis is down. */
export function createRedis(url: string, opts: { failFast?: boolean } = {}): Redis {
  const r = new Redis(url, {
    lazyConnect: true,
    // Concurrent requests' commands share socket writes.
    enableAutoPipelining: true,
    enableOfflineQueue: !opts.failFast,
    maxRetriesPerRequest: opts.failFast ? 0 : null,
    connectTimeout: 3000,
    retryStrategy: (times) => Math.min(times * 100, 1000),
  });
  r.on('error', () => {}); // reconnects by itself; callers see command errors
  return r;
}

export async function connectRedis(url: string, opts: { failFast?: boolean } = {}): Promise<Redis> {
  const r = createRedis(url, opts);
  let cause: unknown = null;
  r.on('error', (e) => (cause ??= e)); // the socket error says more than "Connection is closed"
  try {
    await r.connect();
    await r.ping();
  } catch (err) {
    r.disconnect();
    throw new ServiceUnreachableError('Redis', url, cause ?? err);
  }
  return r;
}
