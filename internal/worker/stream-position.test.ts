import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planPosition } from './stream-position';

const A = '2026-11-29T05:00:00.000000001Z';
const B = '2026-11-29T06:00:00.000000002Z';

test('the same stream instance: the position is kept while the stream reaches it', () => {
  assert.deepEqual(planPosition({ seq: 5514, created: A }, { created: A, lastSeq: 6000 }), { seq: 5514, rebased: null, write: false });
  assert.deepEqual(planPosition({ seq: 6000, created: A }, { created: A, lastSeq: 6000 }), { seq: 6000, rebased: null, write: false });
});

test('a recreated stream (another creation time): the position starts again at 0, whatever the new stream holds', () => {
  for (const lastSeq of [0, 20, 5514, 90_000]) {
    const p = planPosition({ seq: 5514, created: A }, { created: B, lastSeq });
    assert.equal(p.seq, 0);
    assert.equal(p.write, true);
    assert.match(p.rebased!, /created again/);
  }
});

test('a fresh row (position 0) just records the instance', () => {
  assert.deepEqual(planPosition({ seq: 0, created: A }, { created: B, lastSeq: 7 }), { seq: 0, rebased: null, write: true });
});

test('the same instance that lost its tail: resume after its last message, so what it numbers next is consumed', () => {
  const p = planPosition({ seq: 5514, created: A }, { created: A, lastSeq: 5000 });
  assert.equal(p.seq, 5000);
  assert.match(p.rebased!, /tail was lost/);
});

test('a position recorded before instances were: adopted when the stream reaches it, else the stream is new', () => {
  assert.deepEqual(planPosition({ seq: 100, created: null }, { created: A, lastSeq: 100 }), { seq: 100, rebased: null, write: true });
  const p = planPosition({ seq: 5514, created: null }, { created: A, lastSeq: 20 });
  assert.equal(p.seq, 0);
  assert.match(p.rebased!, /new stream/);
});
