// Live visitors: a Redis sorted set per project (member: profileId, score: last event time).
import type { Redis, RedisKeys } from '../redis/redis';
import { LIVE_WINDOW_MS } from '../ratelimit/gate';

export async function liveVisitors(redis: Redis, keys: RedisKeys, projectId: string, nowMs = Date.now()): Promise<number> {
  return redis.zcount(keys.live(projectId), `(${nowMs - LIVE_WINDOW_MS}`, '+inf');
}
