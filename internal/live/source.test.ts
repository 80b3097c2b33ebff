// The live source's revocation check (which closes revoked clients' open sockets) against the
// real Redis: the thread's own mirror first, so a revocation Redis lost (FLUSHALL) still closes them.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { RedisLiveSource } from './source';
import { connectRedis, createRedis, redisKeys } from '../redis/redis';
import { ensureServices, REDIS_URL } from '../../test/support/harness';

ensureServices();
const ns = `livesrc-${randomBytes(4).toString('hex')}`;
const keys = redisKeys(ns);
const redis = await connectRedis(REDIS_URL, { failFast: true });
const subscriber = createRedis(REDIS_URL);
after(async () => {
  await redis.del(keys.revoked);
  redis.disconnect();
  subscriber.disconnect();
});

test('revoked: the mirror\'s clients and Redis\' set; the mirror alone when Redis cannot answer', async () => {
  const mirror = new Set(['lost-by-redis']);
  const source = new RedisLiveSource(redis, subscriber, keys, () => {}, (id) => mirror.has(id));
  await redis.sadd(keys.revoked, 'in-redis');
  assert.deepEqual([...(await source.revoked(['lost-by-redis', 'in-redis', 'fine']))].sort(), ['in-redis', 'lost-by-redis']);
  // Without a mirror (the default), Redis' set only.
  assert.deepEqual([...(await new RedisLiveSource(redis, subscriber, keys, () => {}).revoked(['lost-by-redis', 'in-redis']))], ['in-redis']);
  // Redis away: what the mirror knows still closes sockets; with nothing known, the error is the caller's.
  const down = await connectRedis(REDIS_URL, { failFast: true });
  down.disconnect();
  const offline = new RedisLiveSource(down, subscriber, keys, () => {}, (id) => mirror.has(id));
  assert.deepEqual([...(await offline.revoked(['lost-by-redis', 'fine']))], ['lost-by-redis']);
  await assert.rejects(offline.revoked(['fine']));
});
