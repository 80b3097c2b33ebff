import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffMs, FINAL_CODES } from './live';

test('reconnection backs off exponentially to 30 s, with jitter', () => {
  const mid = () => 0.5; // no jitter
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 20].map((a) => backoffMs(a, mid)), [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  assert.equal(backoffMs(0, () => 0), 800);
  assert.equal(backoffMs(0, () => 1), 1200);
});

test('refusals are final; server restarts and timeouts are retried', () => {
  for (const code of [4400, 4401, 4403, 4404]) assert.ok(FINAL_CODES.has(code));
  for (const code of [1001, 1006, 1008, 1011, 1013, 4408, 4429, 4430, 4503]) assert.ok(!FINAL_CODES.has(code));
});
