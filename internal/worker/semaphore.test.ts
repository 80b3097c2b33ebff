import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Semaphore } from './semaphore';

test('at most `limit` tasks run at once; waiters run in arrival order; a failure frees its slot', async () => {
  const gate = new Semaphore(2);
  let running = 0;
  let most = 0;
  const order: number[] = [];
  const task = (i: number) => gate.run(async () => {
    running++;
    most = Math.max(most, running);
    await new Promise((r) => setTimeout(r, 5));
    order.push(i);
    running--;
    if (i === 1) throw new Error('boom');
    return i;
  });
  const results = await Promise.allSettled([0, 1, 2, 3, 4].map(task));
  assert.equal(most, 2);
  assert.deepEqual(order, [0, 1, 2, 3, 4]);
  assert.equal(results[1]!.status, 'rejected');
  assert.deepEqual(results.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<number>).value), [0, 2, 3, 4]);
  assert.equal(await gate.run(async () => 'free'), 'free');
});

test('a limit below 1 is refused', () => {
  assert.throws(() => new Semaphore(0), RangeError);
});
