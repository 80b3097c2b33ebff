import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Range } from './params';
import { bucketStarts, granularityFor, instantOfWallClock, resolvePeriod, type Granularity } from './period';

// Tuesday 2026-03-10 15:45:30 UTC. New York is on EDT (-4) since 2026-03-08, Kolkata is
// +05:30 (21:15:30), Auckland is on NZDT (+13), where it is already Wednesday 03-11 04:45:30.
const NOW = new Date('2026-03-10T15:45:30Z');

/** [range, start, end, granularity, bucket count, first bucket] */
type Case = [Range, string, string, Granularity, number, string];

const CASES: Record<string, Case[]> = {
  UTC: [
    ['30min', '2026-03-10T15:15:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 1, '2026-03-10T15:00:00.000Z'],
    ['lastHour', '2026-03-10T14:45:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 2, '2026-03-10T14:00:00.000Z'],
    ['last24h', '2026-03-09T15:45:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 25, '2026-03-09T15:00:00.000Z'],
    ['today', '2026-03-10T00:00:00.000Z', '2026-03-11T00:00:00.000Z', 'hour', 24, '2026-03-10T00:00:00.000Z'],
    ['yesterday', '2026-03-09T00:00:00.000Z', '2026-03-10T00:00:00.000Z', 'hour', 24, '2026-03-09T00:00:00.000Z'],
    ['7d', '2026-03-04T00:00:00.000Z', '2026-03-11T00:00:00.000Z', 'day', 7, '2026-03-04T00:00:00.000Z'],
    ['30d', '2026-02-09T00:00:00.000Z', '2026-03-11T00:00:00.000Z', 'day', 30, '2026-02-09T00:00:00.000Z'],
    ['90d', '2025-12-11T00:00:00.000Z', '2026-03-11T00:00:00.000Z', 'day', 90, '2025-12-11T00:00:00.000Z'],
    ['3m', '2026-01-01T00:00:00.000Z', '2026-04-01T00:00:00.000Z', 'day', 90, '2026-01-01T00:00:00.000Z'],
    ['6m', '2025-10-01T00:00:00.000Z', '2026-04-01T00:00:00.000Z', 'week', 27, '2025-09-29T00:00:00.000Z'],
    ['12m', '2025-04-01T00:00:00.000Z', '2026-04-01T00:00:00.000Z', 'month', 12, '2025-04-01T00:00:00.000Z'],
    ['monthToDate', '2026-03-01T00:00:00.000Z', '2026-03-11T00:00:00.000Z', 'day', 10, '2026-03-01T00:00:00.000Z'],
    ['lastMonth', '2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z', 'day', 28, '2026-02-01T00:00:00.000Z'],
    ['yearToDate', '2026-01-01T00:00:00.000Z', '2026-03-11T00:00:00.000Z', 'day', 69, '2026-01-01T00:00:00.000Z'],
    ['lastYear', '2025-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z', 'month', 12, '2025-01-01T00:00:00.000Z'],
  ],
  'America/New_York': [
    ['30min', '2026-03-10T15:15:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 1, '2026-03-10T15:00:00.000Z'],
    ['lastHour', '2026-03-10T14:45:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 2, '2026-03-10T14:00:00.000Z'],
    ['last24h', '2026-03-09T15:45:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 25, '2026-03-09T15:00:00.000Z'],
    ['today', '2026-03-10T04:00:00.000Z', '2026-03-11T04:00:00.000Z', 'hour', 24, '2026-03-10T04:00:00.000Z'],
    ['yesterday', '2026-03-09T04:00:00.000Z', '2026-03-10T04:00:00.000Z', 'hour', 24, '2026-03-09T04:00:00.000Z'],
    // Crosses the spring-forward of 03-08: starts on EST (-5), ends on EDT (-4).
    ['7d', '2026-03-04T05:00:00.000Z', '2026-03-11T04:00:00.000Z', 'day', 7, '2026-03-04T05:00:00.000Z'],
    ['30d', '2026-02-09T05:00:00.000Z', '2026-03-11T04:00:00.000Z', 'day', 30, '2026-02-09T05:00:00.000Z'],
    ['90d', '2025-12-11T05:00:00.000Z', '2026-03-11T04:00:00.000Z', 'day', 90, '2025-12-11T05:00:00.000Z'],
    ['3m', '2026-01-01T05:00:00.000Z', '2026-04-01T04:00:00.000Z', 'day', 90, '2026-01-01T05:00:00.000Z'],
    ['6m', '2025-10-01T04:00:00.000Z', '2026-04-01T04:00:00.000Z', 'week', 27, '2025-09-29T04:00:00.000Z'],
    ['12m', '2025-04-01T04:00:00.000Z', '2026-04-01T04:00:00.000Z', 'month', 12, '2025-04-01T04:00:00.000Z'],
    ['monthToDate', '2026-03-01T05:00:00.000Z', '2026-03-11T04:00:00.000Z', 'day', 10, '2026-03-01T05:00:00.000Z'],
    ['lastMonth', '2026-02-01T05:00:00.000Z', '2026-03-01T05:00:00.000Z', 'day', 28, '2026-02-01T05:00:00.000Z'],
    ['yearToDate', '2026-01-01T05:00:00.000Z', '2026-03-11T04:00:00.000Z', 'day', 69, '2026-01-01T05:00:00.000Z'],
    ['lastYear', '2025-01-01T05:00:00.000Z', '2026-01-01T05:00:00.000Z', 'month', 12, '2025-01-01T05:00:00.000Z'],
  ],
  'Asia/Kolkata': [
    // Local hours start at :30 UTC.
    ['30min', '2026-03-10T15:15:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 2, '2026-03-10T14:30:00.000Z'],
    ['lastHour', '2026-03-10T14:45:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 2, '2026-03-10T14:30:00.000Z'],
    ['last24h', '2026-03-09T15:45:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 25, '2026-03-09T15:30:00.000Z'],
    ['today', '2026-03-09T18:30:00.000Z', '2026-03-10T18:30:00.000Z', 'hour', 24, '2026-03-09T18:30:00.000Z'],
    ['yesterday', '2026-03-08T18:30:00.000Z', '2026-03-09T18:30:00.000Z', 'hour', 24, '2026-03-08T18:30:00.000Z'],
    ['7d', '2026-03-03T18:30:00.000Z', '2026-03-10T18:30:00.000Z', 'day', 7, '2026-03-03T18:30:00.000Z'],
    ['30d', '2026-02-08T18:30:00.000Z', '2026-03-10T18:30:00.000Z', 'day', 30, '2026-02-08T18:30:00.000Z'],
    ['90d', '2025-12-10T18:30:00.000Z', '2026-03-10T18:30:00.000Z', 'day', 90, '2025-12-10T18:30:00.000Z'],
    ['3m', '2025-12-31T18:30:00.000Z', '2026-03-31T18:30:00.000Z', 'day', 90, '2025-12-31T18:30:00.000Z'],
    ['6m', '2025-09-30T18:30:00.000Z', '2026-03-31T18:30:00.000Z', 'week', 27, '2025-09-28T18:30:00.000Z'],
    ['12m', '2025-03-31T18:30:00.000Z', '2026-03-31T18:30:00.000Z', 'month', 12, '2025-03-31T18:30:00.000Z'],
    ['monthToDate', '2026-02-28T18:30:00.000Z', '2026-03-10T18:30:00.000Z', 'day', 10, '2026-02-28T18:30:00.000Z'],
    ['lastMonth', '2026-01-31T18:30:00.000Z', '2026-02-28T18:30:00.000Z', 'day', 28, '2026-01-31T18:30:00.000Z'],
    ['yearToDate', '2025-12-31T18:30:00.000Z', '2026-03-10T18:30:00.000Z', 'day', 69, '2025-12-31T18:30:00.000Z'],
    ['lastYear', '2024-12-31T18:30:00.000Z', '2025-12-31T18:30:00.000Z', 'month', 12, '2024-12-31T18:30:00.000Z'],
  ],
  'Pacific/Auckland': [
    // Local date is already 2026-03-11.
    ['30min', '2026-03-10T15:15:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 1, '2026-03-10T15:00:00.000Z'],
    ['lastHour', '2026-03-10T14:45:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 2, '2026-03-10T14:00:00.000Z'],
    ['last24h', '2026-03-09T15:45:30.000Z', '2026-03-10T15:45:30.001Z', 'hour', 25, '2026-03-09T15:00:00.000Z'],
    ['today', '2026-03-10T11:00:00.000Z', '2026-03-11T11:00:00.000Z', 'hour', 24, '2026-03-10T11:00:00.000Z'],
    ['yesterday', '2026-03-09T11:00:00.000Z', '2026-03-10T11:00:00.000Z', 'hour', 24, '2026-03-09T11:00:00.000Z'],
    ['7d', '2026-03-04T11:00:00.000Z', '2026-03-11T11:00:00.000Z', 'day', 7, '2026-03-04T11:00:00.000Z'],
    ['30d', '2026-02-09T11:00:00.000Z', '2026-03-11T11:00:00.000Z', 'day', 30, '2026-02-09T11:00:00.000Z'],
    ['90d', '2025-12-11T11:00:00.000Z', '2026-03-11T11:00:00.000Z', 'day', 90, '2025-12-11T11:00:00.000Z'],
    ['3m', '2025-12-31T11:00:00.000Z', '2026-03-31T11:00:00.000Z', 'day', 90, '2025-12-31T11:00:00.000Z'],
    ['6m', '2025-09-30T11:00:00.000Z', '2026-03-31T11:00:00.000Z', 'week', 27, '2025-09-28T11:00:00.000Z'],
    ['12m', '2025-03-31T11:00:00.000Z', '2026-03-31T11:00:00.000Z', 'month', 12, '2025-03-31T11:00:00.000Z'],
    ['monthToDate', '2026-02-28T11:00:00.000Z', '2026-03-11T11:00:00.000Z', 'day', 11, '2026-02-28T11:00:00.000Z'],
    ['lastMonth', '2026-01-31T11:00:00.000Z', '2026-02-28T11:00:00.000Z', 'day', 28, '2026-01-31T11:00:00.000Z'],
    ['yearToDate', '2025-12-31T11:00:00.000Z', '2026-03-11T11:00:00.000Z', 'day', 70, '2025-12-31T11:00:00.000Z'],
    ['lastYear', '2024-12-31T11:00:00.000Z', '2025-12-31T11:00:00.000Z', 'month', 12, '2024-12-31T11:00:00.000Z'],
  ],
};

const iso = (dates: Date[]) => dates.map((d) => d.toISOString());

/** Buckets are strictly ascending, the first contains the start, the last starts before the end. */
function assertBucketsCover(buckets: Date[], start: Date, end: Date): void {
  assert.ok(buckets.length > 0);
  assert.ok(buckets[0]!.getTime() <= start.getTime());
  assert.ok(buckets.at(-1)!.getTime() < end.getTime());
  for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i]!.getTime() > buckets[i - 1]!.getTime());
  if (buckets.length > 1) assert.ok(buckets[1]!.getTime() > start.getTime());
}

describe('resolvePeriod: every range', () => {
  for (const [timezone, cases] of Object.entries(CASES)) {
    for (const [range, start, end, granularity, count, firstBucket] of cases) {
      it(`${range} in ${timezone}`, () => {
        const p = resolvePeriod({ range }, timezone, NOW);
        assert.equal(p.start.toISOString(), start);
        assert.equal(p.end.toISOString(), end);
        assert.equal(p.granularity, granularity);
        assert.equal(p.buckets.length, count);
        assert.equal(p.buckets[0]?.toISOString(), firstBucket);
        assert.equal(p.timezone, timezone);
        assertBucketsCover(p.buckets, p.start, p.end);
      });
    }
  }
});

describe('resolvePeriod: buckets in detail', () => {
  it('Kolkata 7d: days start at 18:30 UTC', () => {
    const p = resolvePeriod({ range: '7d' }, 'Asia/Kolkata', NOW);
    assert.deepEqual(iso(p.buckets), [
      '2026-03-03T18:30:00.000Z', '2026-03-04T18:30:00.000Z', '2026-03-05T18:30:00.000Z',
      '2026-03-06T18:30:00.000Z', '2026-03-07T18:30:00.000Z', '2026-03-08T18:30:00.000Z',
      '2026-03-09T18:30:00.000Z',
    ]);
  });

  it('New York 7d: days shift by one hour after the spring-forward', () => {
    const p = resolvePeriod({ range: '7d' }, 'America/New_York', NOW);
    assert.deepEqual(iso(p.buckets), [
      '2026-03-04T05:00:00.000Z', '2026-03-05T05:00:00.000Z', '2026-03-06T05:00:00.000Z',
      '2026-03-07T05:00:00.000Z', '2026-03-08T05:00:00.000Z', '2026-03-09T04:00:00.000Z',
      '2026-03-10T04:00:00.000Z',
    ]);
  });

  it('Auckland 12m: months switch between +13 and +12', () => {
    const p = resolvePeriod({ range: '12m' }, 'Pacific/Auckland', NOW);
    assert.deepEqual(iso(p.buckets), [
      '2025-03-31T11:00:00.000Z', '2025-04-30T12:00:00.000Z', '2025-05-31T12:00:00.000Z',
      '2025-06-30T12:00:00.000Z', '2025-07-31T12:00:00.000Z', '2025-08-31T12:00:00.000Z',
      '2025-09-30T11:00:00.000Z', '2025-10-31T11:00:00.000Z', '2025-11-30T11:00:00.000Z',
      '2025-12-31T11:00:00.000Z', '2026-01-31T11:00:00.000Z', '2026-02-28T11:00:00.000Z',
    ]);
  });

  it('UTC 6m: weeks start on Mondays', () => {
    const p = resolvePeriod({ range: '6m' }, 'UTC', NOW);
    for (const b of p.buckets) assert.equal(b.getUTCDay(), 1, b.toISOString());
    assert.equal(p.buckets.at(-1)?.toISOString(), '2026-03-30T00:00:00.000Z');
  });

  it('Kolkata lastHour: buckets on local hours', () => {
    const p = resolvePeriod({ range: 'lastHour' }, 'Asia/Kolkata', NOW);
    assert.deepEqual(iso(p.buckets), ['2026-03-10T14:30:00.000Z', '2026-03-10T15:30:00.000Z']);
  });
});

describe('resolvePeriod: DST days in Europe/Berlin', () => {
  it('2026-03-29 has 23 hourly buckets', () => {
    const p = resolvePeriod({ range: '7d', startDate: '2026-03-29', endDate: '2026-03-29' }, 'Europe/Berlin', NOW);
    assert.equal(p.start.toISOString(), '2026-03-28T23:00:00.000Z');
    assert.equal(p.end.toISOString(), '2026-03-29T22:00:00.000Z');
    assert.equal(p.granularity, 'hour');
    assert.equal(p.buckets.length, 23);
    // 01:00 CET is followed by 03:00 CEST: consecutive buckets one real hour apart.
    assert.equal(p.buckets[1]?.toISOString(), '2026-03-29T00:00:00.000Z');
    assert.equal(p.buckets[2]?.toISOString(), '2026-03-29T01:00:00.000Z');
    assert.equal(p.buckets[22]?.toISOString(), '2026-03-29T21:00:00.000Z');
  });

  it('2026-10-25 has 25 hourly buckets', () => {
    const p = resolvePeriod({ range: '7d', startDate: '2026-10-25', endDate: '2026-10-25' }, 'Europe/Berlin', NOW);
    assert.equal(p.start.toISOString(), '2026-10-24T22:00:00.000Z');
    assert.equal(p.end.toISOString(), '2026-10-25T23:00:00.000Z');
    assert.equal(p.granularity, 'hour');
    assert.equal(p.buckets.length, 25);
    assert.equal(p.buckets[24]?.toISOString(), '2026-10-25T22:00:00.000Z');
  });

  it('today on the DST days (range)', () => {
    assert.equal(resolvePeriod({ range: 'today' }, 'Europe/Berlin', new Date('2026-03-29T12:00:00Z')).buckets.length, 23);
    assert.equal(resolvePeriod({ range: 'today' }, 'Europe/Berlin', new Date('2026-10-25T12:00:00Z')).buckets.length, 25);
    assert.equal(resolvePeriod({ range: 'yesterday' }, 'Europe/Berlin', new Date('2026-10-26T12:00:00Z')).buckets.length, 25);
  });

  it('a week across the change keeps local midnights', () => {
    const p = resolvePeriod({ range: '7d', startDate: '2026-03-27', endDate: '2026-03-31' }, 'Europe/Berlin', NOW);
    assert.equal(p.granularity, 'day');
    assert.deepEqual(iso(p.buckets), [
      '2026-03-26T23:00:00.000Z', '2026-03-27T23:00:00.000Z', '2026-03-28T23:00:00.000Z',
      '2026-03-29T22:00:00.000Z', '2026-03-30T22:00:00.000Z',
    ]);
  });

  it('3 months across the fall-back are still 92 days: day buckets', () => {
    const p = resolvePeriod({ range: '3m' }, 'Europe/Berlin', new Date('2026-10-10T12:00:00Z'));
    assert.equal(p.start.toISOString(), '2026-07-31T22:00:00.000Z');
    assert.equal(p.end.toISOString(), '2026-10-31T23:00:00.000Z');
    assert.equal(p.granularity, 'day');
    assert.equal(p.buckets.length, 92);
  });
});

describe('resolvePeriod: explicit dates and granularity thresholds', () => {
  const explicit = (startDate: string, endDate: string, tz = 'UTC') =>
    resolvePeriod({ range: '7d', startDate, endDate }, tz, NOW);

  it('dates win over the range and are inclusive', () => {
    const p = explicit('2026-01-05', '2026-01-06');
    assert.equal(p.start.toISOString(), '2026-01-05T00:00:00.000Z');
    assert.equal(p.end.toISOString(), '2026-01-07T00:00:00.000Z');
    assert.equal(p.granularity, 'hour');
    assert.equal(p.buckets.length, 48);
  });

  it('uses the project timezone', () => {
    const p = explicit('2026-01-05', '2026-01-05', 'America/New_York');
    assert.equal(p.start.toISOString(), '2026-01-05T05:00:00.000Z');
    assert.equal(p.end.toISOString(), '2026-01-06T05:00:00.000Z');
  });

  it('3 days: day; 92 days: day; 93 days: week; 186 days: week; 187 days: month', () => {
    assert.equal(explicit('2026-01-01', '2026-01-03').granularity, 'day');
    assert.equal(explicit('2026-01-01', '2026-04-02').granularity, 'day'); // 92 days
    assert.equal(explicit('2026-01-01', '2026-04-03').granularity, 'week'); // 93 days
    assert.equal(explicit('2026-01-01', '2026-07-05').granularity, 'week'); // 186 days
    const month = explicit('2026-01-15', '2026-07-20'); // 187 days
    assert.equal(month.granularity, 'month');
    assert.equal(month.buckets[0]?.toISOString(), '2026-01-01T00:00:00.000Z');
    assert.equal(month.buckets.length, 7);
  });

  it('yearToDate late in the year has month buckets', () => {
    const p = resolvePeriod({ range: 'yearToDate' }, 'UTC', new Date('2026-08-15T10:00:00Z'));
    assert.equal(p.granularity, 'month');
    assert.equal(p.buckets.length, 8);
  });

  it('granularityFor thresholds', () => {
    const day = 86_400_000;
    assert.equal(granularityFor(2 * day), 'hour');
    assert.equal(granularityFor(2 * day + 1), 'day');
    assert.equal(granularityFor(92 * day), 'day');
    assert.equal(granularityFor(186 * day), 'week');
    assert.equal(granularityFor(186 * day + 1), 'month');
  });
});

describe('wall clock conversion', () => {
  it('skipped midnight starts the day at 01:00 (America/Santiago 2026-09-06)', () => {
    const p = resolvePeriod({ range: '7d', startDate: '2026-09-06', endDate: '2026-09-06' }, 'America/Santiago', NOW);
    assert.equal(p.start.toISOString(), '2026-09-06T04:00:00.000Z');
    assert.equal(p.buckets.length, 23);
  });

  it('an ambiguous wall time gives the earlier instant', () => {
    // 02:30 happens twice in Berlin on 2026-10-25: 00:30Z (CEST) and 01:30Z (CET).
    assert.equal(new Date(instantOfWallClock(Date.UTC(2026, 9, 25, 2, 30), 'Europe/Berlin')).toISOString(), '2026-10-25T00:30:00.000Z');
  });

  it('hour buckets of an arbitrary span', () => {
    const b = bucketStarts(Date.parse('2026-10-25T00:10:00Z'), Date.parse('2026-10-25T02:00:00Z'), 'hour', 'Europe/Berlin');
    assert.deepEqual(iso(b), ['2026-10-25T00:00:00.000Z', '2026-10-25T01:00:00.000Z']);
  });
});
