// dayBuckets: which periods and series unique visitors can take from the visit days (whole
// local days only), and the days each bucket starts on; periodDays: which periods can take
// their total alone from them (an hourly series of whole days).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolvePeriod } from '../query/period';
import { dayBuckets, periodDays } from './day-visitors';

const now = new Date('2026-10-27T15:20:00Z');

test('a run of whole local days with daily buckets: one start day per bucket, the end day after the last', () => {
  const p = resolvePeriod({ range: '30d', startDate: '2026-10-20', endDate: '2026-10-26' }, 'Europe/Berlin', now);
  assert.equal(p.granularity, 'day');
  const d = dayBuckets(p);
  assert.deepEqual(d, {
    starts: ['2026-10-20', '2026-10-21', '2026-10-22', '2026-10-23', '2026-10-24', '2026-10-25', '2026-10-26'],
    stop: '2026-10-27',
  });
});

test('weekly buckets: the first starts with the period, not the Monday before it', () => {
  const p = resolvePeriod({ range: '30d', startDate: '2026-06-03', endDate: '2026-10-26' }, 'America/New_York', now);
  assert.equal(p.granularity, 'week');
  assert.ok(p.buckets[0]!.getTime() < p.start.getTime(), 'the first week begins before the period');
  const d = dayBuckets(p)!;
  assert.equal(d.starts[0], '2026-06-03');
  assert.equal(d.starts[1], '2026-06-08', 'then Mondays');
  assert.equal(d.stop, '2026-10-27');
  assert.equal(d.starts.length, p.buckets.length);
});

test('a range that ends today covers today whole', () => {
  const d = dayBuckets(resolvePeriod({ range: '30d' }, 'Asia/Tokyo', now))!;
  assert.equal(d.starts.length, 30);
  assert.equal(d.stop, '2026-10-29', 'the day after today in Tokyo (00:20 on the 28th there)');
});

test('hourly series and sliding ranges are not whole days', () => {
  assert.equal(dayBuckets(resolvePeriod({ range: '30d', startDate: '2026-10-25', endDate: '2026-10-25' }, 'Europe/Berlin', now)), null);
  assert.equal(dayBuckets(resolvePeriod({ range: '30min' }, 'UTC', now)), null);
});

test('an hourly series of whole local days takes its total alone from the visit days', () => {
  const yesterday = resolvePeriod({ range: 'yesterday' }, 'Europe/Berlin', now);
  assert.equal(yesterday.granularity, 'hour');
  assert.equal(dayBuckets(yesterday), null);
  assert.deepEqual(periodDays(yesterday), { starts: ['2026-10-26'], stop: '2026-10-27', totalOnly: true });
  // the day summer time ends in Berlin: 25 hourly buckets, one local day
  const change = resolvePeriod({ range: '30d', startDate: '2026-10-25', endDate: '2026-10-25' }, 'Europe/Berlin', now);
  assert.equal(change.buckets.length, 25);
  assert.deepEqual(periodDays(change), { starts: ['2026-10-25'], stop: '2026-10-26', totalOnly: true });
});

test('sliding ranges are not whole days', () => {
  assert.equal(periodDays(resolvePeriod({ range: 'last24h' }, 'UTC', now)), null);
  assert.equal(periodDays(resolvePeriod({ range: 'lastHour' }, 'UTC', now)), null);
  assert.equal(periodDays(resolvePeriod({ range: '30min' }, 'UTC', now)), null);
});
