import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AVERAGE_ROW, percentText, reached, shade, weeksReached } from './retention';

test('the API\'s fractions read as whole percentages', () => {
  assert.deepEqual([1, 0.67, 0.5, 0.05, 0].map(percentText), ['100%', '67%', '50%', '5%', '0%']);
});

test('cells are shaded by their share: darker for more, none for 0, text readable on it', () => {
  assert.deepEqual(shade(0), { background: 'transparent', color: 'var(--muted)' });
  assert.deepEqual(shade(1), { background: 'rgba(79, 70, 229, 0.92)', color: '#fff' });
  assert.deepEqual(shade(0.5), { background: 'rgba(79, 70, 229, 0.5)', color: 'var(--text)' });
  assert.deepEqual(shade(0.1), { background: 'rgba(79, 70, 229, 0.16)', color: 'var(--text)' });
  assert.deepEqual(shade(7), shade(1), 'out of range is clamped');
  const alpha = (f: number) => Number(/, ([\d.]+)\)$/.exec(shade(f).background)![1]);
  assert.ok(alpha(0.2) < alpha(0.4) && alpha(0.4) < alpha(0.8), 'monotonic');
});

test('a cohort has reached the whole weeks since its Monday; the average row those some cohort has', () => {
  const today = '2026-11-25'; // a Wednesday
  assert.equal(weeksReached('2026-11-23', today), 0);
  assert.equal(weeksReached('2026-11-16', today), 1);
  assert.equal(weeksReached('2026-09-07', today), 11);
  const row = (cohort_interval: string) => ({ cohort_interval, sum: 1, values: [], percentages: [] });
  const rows = [row(AVERAGE_ROW), row('2026-11-09'), row('2026-11-16')];
  assert.deepEqual([0, 1, 2, 3].map((k) => reached(rows, rows[2]!, k, today)), [true, true, false, false]);
  assert.deepEqual([0, 1, 2, 3].map((k) => reached(rows, rows[0]!, k, today)), [true, true, true, false]);
});
