import { test } from 'node:test';
import assert from 'node:assert/strict';
import { funnelQuery } from './analytics-api';
import { defaultSteps, droppedAt, nextStep, pct, windowLabel, windowOptions } from './funnel';

test('the funnel query: the period, the filters, the steps as one JSON array, window and grouping', () => {
  const filters = [{ name: 'country', operator: 'is' as const, value: ['DE'] }];
  assert.deepEqual(funnelQuery({ range: '7d' }, filters, ['screen_view', 'signup'], 48, 'profile_id'), {
    range: '7d', filters: '[{"name":"country","operator":"is","value":["DE"]}]', steps: '["screen_view","signup"]', windowHours: '48', groupBy: 'profile_id',
  });
  const q = funnelQuery({ startDate: '2026-01-01', endDate: '2026-01-31' }, [], ['a,b', 'c"d'], 24, 'session_id');
  assert.deepEqual(q, { startDate: '2026-01-01', endDate: '2026-01-31', steps: '["a,b","c\\"d"]', windowHours: '24', groupBy: 'session_id' });
  assert.deepEqual(JSON.parse(q.steps!), ['a,b', 'c"d'], 'names with commas and quotes survive');
});

test('the window choices and how they read', () => {
  assert.deepEqual([1, 24, 48, 168, 720, 36].map(windowLabel), ['1 hour', '24 hours', '2 days', '7 days', '30 days', '36 hours']);
  assert.deepEqual(windowOptions(24), [1, 6, 12, 24, 48, 72, 168, 336, 720]);
  assert.deepEqual(windowOptions(5), [1, 5, 6, 12, 24, 48, 72, 168, 336, 720], 'a window from the URL is offered too');
});

test('a new funnel starts with the two most frequent events; a new step with one not in it yet', () => {
  assert.deepEqual(defaultSteps(['screen_view', 'signup', 'purchase']), ['screen_view', 'signup']);
  assert.deepEqual(defaultSteps(['only']), ['only', 'only']);
  assert.deepEqual(defaultSteps([]), []);
  assert.equal(nextStep(['screen_view', 'signup', 'purchase'], ['screen_view', 'signup']), 'purchase');
  assert.equal(nextStep(['a', 'b'], ['a', 'b']), 'b', 'every event used: the last step again');
});

test('drop-off counts between steps and percentages as the API rounds them', () => {
  const steps = [
    { step: 1, eventName: 'a', users: 10, conversionRateFromStart: 100, dropoffPercent: 40, isHighestDropoff: true },
    { step: 2, eventName: 'b', users: 6, conversionRateFromStart: 60, dropoffPercent: 16.67, isHighestDropoff: false },
    { step: 3, eventName: 'c', users: 5, conversionRateFromStart: 50, dropoffPercent: null, isHighestDropoff: false },
  ];
  assert.deepEqual(steps.map((_, i) => droppedAt(steps, i)), [4, 1, null]);
  assert.deepEqual([100, 62.5, 83.33, 0, 16.666].map(pct), ['100%', '62.5%', '83.33%', '0%', '16.67%']);
});
