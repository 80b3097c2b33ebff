import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_STATE, parseState, stateToSearch, withFilter } from './state';
import { change, compact, duration, formatMetric } from './format';

test('a view survives the URL, without credentials, and defaults stay out of it', () => {
  const s = { ...DEFAULT_STATE, project: 'shop-1', period: { startDate: '2026-03-01', endDate: '2026-03-10' }, metric: 'bounce_rate' as const,
    filters: [{ name: 'country', operator: 'is' as const, value: ['DE'] }], tabs: { sources: 'utm_source', geo: 'city', devices: 'device' } };
  const search = stateToSearch(s);
  assert.ok(!/secret|client/i.test(search));
  assert.deepEqual(parseState(search), s);
  assert.equal(stateToSearch({ ...DEFAULT_STATE, project: 'p' }), '?project=p');
  assert.deepEqual(parseState('?range=30d').period, { range: '30d' });
});

test('a hand-edited URL falls back to defaults for what it gets wrong', () => {
  const s = parseState('?range=90d&metric=x&filters=%5B%7B%22name%22%3A%22secret%22%7D%5D&geo=planet&from=2026-02-30&to=2026-03-01');
  assert.deepEqual(s.period, DEFAULT_STATE.period);
  assert.equal(s.metric, DEFAULT_STATE.metric);
  assert.deepEqual(s.filters, []);
  assert.equal(s.tabs.geo, 'country');
  assert.deepEqual(parseState('?filters=not-json').filters, []);
});

test('a filter on the same dimension replaces the previous one', () => {
  const a = withFilter([], { name: 'country', operator: 'is', value: ['DE'] });
  const b = withFilter(a, { name: 'browser', operator: 'is', value: ['Firefox'] });
  const c = withFilter(b, { name: 'country', operator: 'is', value: ['FR'] });
  assert.deepEqual(c.map((f) => `${f.name}=${f.value[0]}`), ['browser=Firefox', 'country=FR']);
});

test('numbers, durations and changes as people read them', () => {
  assert.deepEqual([compact(950), compact(1234), compact(12_345), compact(1_250_000), compact(2.5)], ['950', '1.2k', '12.3k', '1.3M', '2.5']);
  assert.deepEqual([duration(42), duration(185), duration(3725)], ['42s', '3m 05s', '1h 02m']);
  assert.equal(formatMetric('bounce_rate', 41.666), '41.7%');
  assert.equal(formatMetric('views_per_session', 2.5), '2.5');
  assert.deepEqual(change('unique_visitors', 120, 100), { text: '+20%', direction: 'up', good: true, spoken: 'up 20% from 100' });
  assert.equal(change('bounce_rate', 30, 40).good, true, 'a lower bounce rate is good news');
  assert.equal(change('bounce_rate', 30, 40).text, '−25%');
  assert.equal(change('total_sessions', 5, 0).text, 'new');
  assert.equal(change('total_sessions', 5, null).text, '—');
});
