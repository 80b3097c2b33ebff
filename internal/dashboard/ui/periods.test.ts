import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RANGES, datesOf, isDate, previousOf, todayIn } from './periods';

test('every range of semantics.md is offered', () => {
  assert.deepEqual(RANGES.map((r) => r.value), ['30min', 'lastHour', 'last24h', 'today', 'yesterday', '7d', '30d', '3m', '6m', '12m', 'monthToDate', 'lastMonth', 'yearToDate', 'lastYear']);
});

test("today in the project's timezone, not the browser's", () => {
  const instant = new Date('2026-03-01T23:30:00Z');
  assert.equal(todayIn('UTC', instant), '2026-03-01');
  assert.equal(todayIn('Europe/Berlin', instant), '2026-03-02');
  assert.equal(todayIn('America/Los_Angeles', instant), '2026-03-01');
});

test('the dates of each day-based range, and the period it is compared with', () => {
  const today = '2026-03-15'; // 2026 is not a leap year
  const cases: [string, [string, string] | null, [string, string] | null][] = [
    ['30min', null, null],
    ['lastHour', null, null],
    ['last24h', null, null],
    ['today', ['2026-03-15', '2026-03-15'], ['2026-03-14', '2026-03-14']],
    ['yesterday', ['2026-03-14', '2026-03-14'], ['2026-03-13', '2026-03-13']],
    ['7d', ['2026-03-09', '2026-03-15'], ['2026-03-02', '2026-03-08']],
    ['30d', ['2026-02-14', '2026-03-15'], ['2026-01-15', '2026-02-13']],
    ['3m', ['2026-01-01', '2026-03-15'], ['2025-10-01', '2025-12-31']],
    ['6m', ['2025-10-01', '2026-03-15'], ['2025-04-01', '2025-09-30']],
    ['12m', ['2025-04-01', '2026-03-15'], ['2024-04-01', '2025-03-31']],
    ['monthToDate', ['2026-03-01', '2026-03-15'], ['2026-02-01', '2026-02-15']],
    ['lastMonth', ['2026-02-01', '2026-02-28'], ['2026-01-01', '2026-01-31']],
    ['yearToDate', ['2026-01-01', '2026-03-15'], ['2025-01-01', '2025-03-15']],
    ['lastYear', ['2025-01-01', '2025-12-31'], ['2024-01-01', '2024-12-31']],
  ];
  for (const [range, dates, prev] of cases) {
    const p = { range } as Parameters<typeof datesOf>[0];
    const d = datesOf(p, today);
    assert.deepEqual(d && [d.startDate, d.endDate], dates, `${range} dates`);
    const q = previousOf(p, today);
    assert.deepEqual(q && [q.startDate, q.endDate], prev, `${range} previous`);
  }
  // Month to date on the 31st compares with the whole shorter month before.
  assert.deepEqual(previousOf({ range: 'monthToDate' }, '2026-03-31'), { startDate: '2026-02-01', endDate: '2026-02-28' });
  // Custom dates: the same number of days just before.
  assert.deepEqual(previousOf({ startDate: '2026-03-01', endDate: '2026-03-10' }, today), { startDate: '2026-02-19', endDate: '2026-02-28' });
});

test('dates are checked as the API checks them', () => {
  assert.ok(isDate('2024-02-29'));
  assert.ok(!isDate('2026-02-29'));
  assert.ok(!isDate('2026-2-01'));
  assert.ok(!isDate('yesterday'));
});
