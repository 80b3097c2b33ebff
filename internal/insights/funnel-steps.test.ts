// The level a session's step names reach in a funnel, against a brute force over every chain.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseFunnelParams } from './funnel';
import { levelOfSteps, stepInstants, stepsSummaryApplies } from './funnel-steps';

test('levels: in order, other events between ignored, one step per instant, a repeated step needs its own event', () => {
  const steps = ['a', 'b', 'c'];
  assert.equal(levelOfSteps([], steps), 0);
  assert.equal(levelOfSteps(['x', 'b', 'c'], steps), 0);
  assert.equal(levelOfSteps(['a'], steps), 1);
  assert.equal(levelOfSteps(['b', 'a', 'x', 'b', 'c'], steps), 3);
  assert.equal(levelOfSteps(['a', 'c', 'b'], steps), 2);
  assert.equal(levelOfSteps(['a', '', 'b', 'c'], steps), 1); // a and b at one instant: b cannot follow a
  assert.equal(levelOfSteps(['x', '', 'a', 'b', '', 'c'], steps), 2); // b and c share an instant
  assert.equal(levelOfSteps(['a', 'a'], ['a', 'a']), 2);
  assert.equal(levelOfSteps(['a', '', 'a'], ['a', 'a']), 1);
});

/** The longest prefix of steps matched at strictly increasing instants, by trying every chain. */
function bruteLevel(names: readonly string[], steps: readonly string[]): number {
  const at = stepInstants(names);
  const best = (from: number, k: number): number => {
    if (k === steps.length) return k;
    let b = k;
    for (let i = from; i < at.length; i++) if (at[i]!.includes(steps[k]!)) b = Math.max(b, best(i + 1, k + 1));
    return b;
  };
  return best(0, 0);
}

test('levels equal a brute force over every chain, for random names with ties', () => {
  let seed = 7;
  const rnd = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const alphabet = ['a', 'b', 'c', 'd'];
  for (let trial = 0; trial < 3000; trial++) {
    const names: string[] = [];
    const len = 1 + rnd(8);
    for (let i = 0; i < len; i++) {
      if (i > 0 && rnd(4) === 0) names.push('');
      names.push(alphabet[rnd(alphabet.length)]!);
    }
    const steps = Array.from({ length: 2 + rnd(3) }, () => alphabet[rnd(alphabet.length)]!);
    assert.equal(levelOfSteps(names, steps), bruteLevel(names, steps), `${JSON.stringify(names)} ${JSON.stringify(steps)}`);
  }
});

test('the steps answer only unfiltered funnels by session whose steps are not screen views', () => {
  const q = (s: string) => parseFunnelParams(new URLSearchParams(s));
  assert.equal(stepsSummaryApplies(q('steps=a&steps=b')), true);
  assert.equal(stepsSummaryApplies(q('steps=a&steps=b&groupBy=profile_id')), false);
  assert.equal(stepsSummaryApplies(q('steps=screen_view&steps=b')), false);
  assert.equal(stepsSummaryApplies(q('steps=a&steps=b&filters=' + encodeURIComponent(JSON.stringify([{ name: 'country', operator: 'is', value: ['DE'] }])))), false);
});
