// The one-round-trip gate against the real Redis: device continuity across the salt
// change, rate limit windows, revocation.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Gate, deviceWindow } from './gate';
import { connectRedis, redisKeys } from '../redis/redis';
import { ensureServices, REDIS_URL } from '../../test/support/harness';

ensureServices();
const ns = `gate-${randomBytes(4).toString('hex')}`;
const keys = redisKeys(ns);
const redis = await connectRedis(REDIS_URL, { failFast: true });
const gate = new Gate(redis, keys);
after(async () => {
  const found = await redis.keys(`${ns}:*`);
  if (found.length) await redis.del(...found);
  redis.disconnect();
});

const MIDNIGHT = Date.parse('2026-11-22T00:00:00Z');
const base = { clientId: 'c1', ratePerSecond: 0, projectId: 'p', profileId: '', liveAtMs: null };

test('devices are marked seen only in the 30 minutes before midnight; the old id is tried only in the 30 after', () => {
  assert.deepEqual(deviceWindow(MIDNIGHT - 31 * 60_000), { markSeen: false, tryPrevious: false });
  assert.deepEqual(deviceWindow(MIDNIGHT - 10 * 60_000), { markSeen: true, tryPrevious: false });
  assert.deepEqual(deviceWindow(MIDNIGHT + 10 * 60_000), { markSeen: false, tryPrevious: true });
  assert.deepEqual(deviceWindow(MIDNIGHT + 31 * 60_000), { markSeen: false, tryPrevious: false });
});

test('a visit that crosses midnight keeps the device id made with the previous salt', async () => {
  const before = await gate.ingest({ ...base, deviceId: 'old-salt-id', previousDeviceId: '', markSeen: true, nowMs: MIDNIGHT - 5 * 60_000 });
  assert.equal(before.outcome === 'ok' && before.deviceId, 'old-salt-id');
  const after = await gate.ingest({ ...base, deviceId: 'new-salt-id', previousDeviceId: 'old-salt-id', markSeen: false, nowMs: MIDNIGHT + 5 * 60_000 });
  assert.equal(after.outcome === 'ok' && after.deviceId, 'old-salt-id');
  // A device not seen before midnight gets today's id.
  const fresh = await gate.ingest({ ...base, deviceId: 'other-new', previousDeviceId: 'other-old', markSeen: false, nowMs: MIDNIGHT + 5 * 60_000 });
  assert.equal(fresh.outcome === 'ok' && fresh.deviceId, 'other-new');
});

test('fixed-window rate limit with remaining and reset, and revocation wins over everything', async () => {
  const now = Date.now();
  const client = `c-${randomBytes(3).toString('hex')}`;
  const results = [];
  for (let i = 0; i < 4; i++) {
    results.push(await gate.ingest({ ...base, clientId: client, ratePerSecond: 3, deviceId: 'd', previousDeviceId: '', markSeen: false, nowMs: now }));
  }
  assert.deepEqual(results.map((r) => r.outcome), ['ok', 'ok', 'ok', 'limited']);
  const last = results[3]!;
  assert.ok(last.outcome === 'limited' && last.rate.remaining === 0 && last.rate.resetSeconds >= 1);
  await redis.sadd(keys.revoked, client);
  const revoked = await gate.read(client, 100, 10_000, now);
  assert.equal(revoked.outcome, 'revoked');
});
