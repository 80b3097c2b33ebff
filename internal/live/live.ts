// Live visitors: a Redis sorted set per project (member: profileId, score: last event time).
import type { Redis, RedisKeys } from '../redis/redis';
import { LIVE_WINDOW_MS } from '../ratelimit/gate';

export async function liveVisitors(redis: Redis, keys: RedisKeys, projectId: string, nowMs = Date.now()): Promise<number> {
  const key = keys.live(projectId);
  // Trimmed here rather than on every ingest: the read is rare, the write is hot.
  const results = await redis
    .multi()
    .zremrangebyscore(key, '-inf', `(${nowMs - LIVE_WINDOW_MS}`)
    .zcount(key, `(${nowMs - LIVE_WINDOW_MS}`, '+inf')
    .exec();
  const [err, count] = results?.[1] ?? [new Error('live count: no reply'), 0];
  if (err) throw err;
  return Number(count);
}
