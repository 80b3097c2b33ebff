// The session-end sweep slots (pure): a session's due time rounds up to the end of its slot,
// so the sessions written within a slot's width share one delayed job.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sweepSlotMs, sweepSlotOf } from './jobs';

test('sweepSlotMs: a 60th of the timeout, between 250 ms and 5 s', () => {
  assert.equal(sweepSlotMs(30 * 60_000), 5000);
  assert.equal(sweepSlotMs(60_000), 1000);
  assert.equal(sweepSlotMs(1500), 250);
  assert.equal(sweepSlotMs(10 * 3600_000), 5000);
});

test('sweepSlotOf: the first slot end at or after the due time; sessions written within a slot share it', () => {
  const T = 30 * 60_000;
  const base = Date.parse('2026-11-29T12:00:00Z'); // a multiple of 5 s
  assert.equal(sweepSlotOf(base, T), base + T, 'due exactly at a slot end');
  assert.equal(sweepSlotOf(base + 1, T), base + T + 5000, 'never before the due time');
  assert.equal(sweepSlotOf(base + 4999, T), base + T + 5000);
  const slots = new Set(Array.from({ length: 1000 }, (_, i) => sweepSlotOf(base + 1 + i * 4, T)));
  assert.equal(slots.size, 1, '1,000 sessions written over 4 s: one slot');
  for (let u = base; u < base + 20_000; u += 777) {
    const s = sweepSlotOf(u, T);
    assert.ok(s >= u + T && s < u + T + sweepSlotMs(T), `${u}: ends within one slot of its due time`);
  }
});
