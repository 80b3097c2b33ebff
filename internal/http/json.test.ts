import assert from 'node:assert/strict';
import { test } from 'node:test';
import { stringifySliced } from './json';

test('stringifySliced gives exactly JSON.stringify for answer-like values', async () => {
  const values: unknown[] = [
    null, 1, 'a"b\u2028', true, [], {}, [1, 'x', null], { a: undefined, b: () => 1, c: [undefined, () => 1, NaN, Infinity], d: new Date(0) },
    { nested: { deeper: [{ x: 1 }, [2, [3, { y: '\u0000' }]]] }, empty: { k: {} } },
    Array.from({ length: 200 }, (_, i) => ({ i, s: `v${i}`, o: { p: i % 2 ? null : [i] } })),
    { '2': 'two', '1': 'one', b: 1, a: 2 },
  ];
  for (const v of values) assert.equal(await stringifySliced(v), JSON.stringify(v));
});

test('stringifySliced: a small answer is returned at once; a big one gives way to the event loop', async () => {
  assert.equal(typeof stringifySliced({ metrics: { a: 1 } }), 'string');
  const big = { series: Array.from({ length: 100 }, (_, s) => ({ id: `s${s}`, data: Array.from({ length: 1440 }, (_, i) => ({ date: new Date(i * 60_000).toISOString(), count: i * s })) })) };
  let ticks = 0;
  const timer = setInterval(() => ticks++, 0);
  const out = stringifySliced(big, 2);
  assert.ok(out instanceof Promise);
  assert.equal(await out, JSON.stringify(big));
  clearInterval(timer);
  assert.ok(ticks > 0, 'timers ran while it serialized');
});
