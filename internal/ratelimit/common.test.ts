// The gate's shared rules without Redis: the salt change's device window, a script's reply as
// an answer, and the rate-limit headers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deviceWindow, rateHeaders, toResult } from './common';

const MIDNIGHT = Date.parse('2026-11-22T00:00:00Z');

test('devices are marked seen only in the 30 minutes before midnight; the old id is tried only in the 30 after', () => {
  assert.deepEqual(deviceWindow(MIDNIGHT - 31 * 60_000), { markSeen: false, tryPrevious: false });
  assert.deepEqual(deviceWindow(MIDNIGHT - 10 * 60_000), { markSeen: true, tryPrevious: false });
  assert.deepEqual(deviceWindow(MIDNIGHT + 10 * 60_000), { markSeen: false, tryPrevious: true });
  assert.deepEqual(deviceWindow(MIDNIGHT + 31 * 60_000), { markSeen: false, tryPrevious: false });
});

test('a script reply: revoked, limited with the reset of the oldest entry, or admitted with what remains', () => {
  assert.deepEqual(toResult([-1, 0, 0], 10, 1000, ''), { outcome: 'revoked' });
  assert.deepEqual(toResult([0, 10, 2500], 10, 60_000, ''), { outcome: 'limited', rate: { limit: 10, remaining: 0, resetSeconds: 3 } });
  assert.deepEqual(toResult([1, 4, 0], 10, 60_000, 'd'), { outcome: 'ok', rate: { limit: 10, remaining: 6, resetSeconds: 60 }, deviceId: 'd' });
  assert.deepEqual(toResult([1, 0, 0], 0, 1000, 'd'), { outcome: 'ok', rate: null, deviceId: 'd' });
});

test('rate headers: none without a limit, Retry-After only when limited', () => {
  assert.deepEqual(rateHeaders(null), {});
  const rate = { limit: 5, remaining: 0, resetSeconds: 2 };
  assert.deepEqual(rateHeaders(rate), { 'X-RateLimit-Limit': '5', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': '2' });
  assert.equal(rateHeaders(rate, true)['Retry-After'], '2');
});
