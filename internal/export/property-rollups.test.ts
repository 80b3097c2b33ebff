// Property segments of /export/charts from the hourly property rollups
// (sql/013_event_property_rollups.sql, ./property-rollups.ts) against the raw path, on a real
// PostgreSQL: a fresh database with the migrations of sql/ and the events of
// test/support/export-property-dataset.ts (March 2026 in four timezones, property values of
// every kind), the rollups refreshed for part of the hours only (the rest stays in
// rollup_invalidations, some refreshed hours are logged again, late events land in refreshed
// hours as the worker logs them), and every request is asked both ways: the JSON must be
// identical. The upgrade and TimescaleDB tests, on databases of their own:
// property-rollups-migrations.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { seriesRead } from './charts';
import { parseChartParams } from './params';
import { EVENT_ROLLUP_DIMENSIONS } from '../query/planner';
import { bucketStarts, resolvePeriod } from '../query/period';
import { coveringDesign } from '../../test/support/covering';
import { dropSqlDb } from '../../test/support/sql-db';
import {
  bd, both, chartBothWays, createDataset, DB_NAME, exec, LONG_HOUR, NOW, pool, PROJECTS, query, REFRESHED_BEFORE, refreshAll, s, SEGMENTS,
} from '../../test/support/export-property-dataset';

/**
 * Runs `fn` on every item, `n` at a time (a comparison holds two of the pool's connections),
 * and takes no more items once one has failed.
 */
async function eachLimit<T>(items: readonly T[], n: number, fn: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (!failed && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  }));
}

/** Whether the current period of a request reads the property rollups for its first item. */
function usesPropertyRollup(projectId: string, q: Record<string, unknown>, now = NOW): boolean {
  const params = parseChartParams(query(q));
  const tz = PROJECTS.find((p) => p.id === projectId)!.timezone;
  const period = resolvePeriod({ range: params.range, startDate: params.startDate, endDate: params.endDate }, tz, now);
  const interval = params.interval ?? period.granularity;
  if (interval === 'minute') return false;
  const buckets = interval === period.granularity ? period.buckets : bucketStarts(period.start.getTime(), period.end.getTime(), interval, tz);
  const item = params.series[0]!;
  return seriesRead({ ...period, buckets }, item, [...item.filters, ...params.filters], params.breakdowns, 'auto').kind === 'propertyRollup';
}

const PERIODS: Record<string, unknown>[] = [
  { range: '30d' },
  { range: '7d' },
  { range: 'today' },
  { range: 'last24h' },
  { startDate: '2026-03-01', endDate: '2026-03-31' },
  { startDate: '2026-03-27', endDate: '2026-03-30', interval: 'hour' },
  { startDate: '2026-03-07', endDate: '2026-03-09', interval: 'hour' },
  { startDate: '2026-03-02', endDate: '2026-03-29', interval: 'week' },
  { startDate: '2026-02-26', endDate: '2026-04-01', interval: 'month' },
];
/** Shapes of a segment (the property and breakdowns vary). */
const SHAPES = (segment: string): Record<string, unknown>[] => [
  { series: s({ name: 'purchase', segment, property: 'properties.amount' }) },
  { series: s({ name: '*', segment, property: 'properties.amount' }), breakdowns: bd('country') },
  { series: s({ name: 'purchase', segment, property: 'properties.amount' }), breakdowns: bd('path'), limit: 3 },
  { series: s({ name: '*', segment, property: 'amount' }), breakdowns: bd('name') },
  { series: s({ name: 'add_to_cart', segment, property: 'properties.qty' }, { name: 'purchase', segment, property: 'properties.price', id: 'X' }), breakdowns: bd('browser') },
  { series: s({ name: 'purchase', segment, property: 'properties.qty' }), breakdowns: bd('utm_source'), limit: 2 },
  { series: s({ name: '*', segment, property: 'properties.price' }), breakdowns: bd('city') },
  { series: s({ name: 'purchase', segment, property: 'properties.nope' }), breakdowns: bd('country') },
];

// The tests on the dataset run in order (some change it and put it back).
describe('export property rollups', { concurrency: 2 }, () => {
  describe('on one dataset', { concurrency: 1 }, () => {
    before(createDataset);
    after(() => dropSqlDb(pool, DB_NAME));

    it('the refresh keeps, per hour, name, key and column value, the count, sum, min and max of the numeric values', async () => {
      const registry = await exec(`SELECT relation FROM rollup_registry WHERE refresh_fn = 'tm_refresh_event_properties' ORDER BY relation`);
      assert.deepEqual(registry.rows.map((r) => r.relation), ['event_properties_hourly', 'event_properties_raw_hours']);
      const re = `'^[ \\t\\n\\r\\f\\v]*[-+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]{1,3})?[ \\t\\n\\r\\f\\v]*$'`;
      const unpivot = `CROSS JOIN LATERAL (VALUES ('', ''), ${EVENT_ROLLUP_DIMENSIONS.map((d) => `('${d}', e.${d})`).join(', ')}) v(dimension, value)`;
      const notLogged = (a: string) => `NOT EXISTS (SELECT 1 FROM rollup_invalidations i WHERE i.project_id = ${a}.project_id AND i.bucket = date_trunc('hour', ${a}.created_at, 'UTC'))`;
      const diff = await exec(
        `WITH raw AS (
           SELECT e.project_id, date_trunc('hour', e.created_at, 'UTC') AS bucket, k.key, v.dimension, e.name, v.value,
                  count(*) AS count, sum((e.properties ->> k.key)::numeric)::text AS sum,
                  -- min / max compare as numbers: of equal values (0 and 0.000) either may be kept
                  min((e.properties ->> k.key)::numeric) AS min, max((e.properties ->> k.key)::numeric) AS max
           FROM events e ${unpivot} CROSS JOIN (VALUES ('amount'), ('qty'), ('price')) k(key)
           WHERE NOT e.is_bot AND e.name NOT IN ('session_start', 'session_end') AND e.created_at < $1 AND ${notLogged('e')}
             AND (e.properties ->> k.key) ~ ${re}
             AND NOT EXISTS (SELECT 1 FROM event_properties_raw_hours h WHERE h.project_id = e.project_id AND h.key = k.key
                               AND h.bucket = date_trunc('hour', e.created_at, 'UTC'))
           GROUP BY 1, 2, 3, 4, 5, 6
         ), kept AS (
           SELECT r.project_id, r.bucket, r.key, r.dimension, r.name, r.value, r.count, r.sum::text, r.min, r.max
           FROM event_properties_hourly r
           WHERE r.bucket < $1 AND NOT EXISTS (SELECT 1 FROM rollup_invalidations i WHERE i.project_id = r.project_id AND i.bucket = r.bucket)
         )
         SELECT (SELECT count(*) FROM raw) AS n, (SELECT count(*) FROM kept) AS kept,
                (SELECT count(*) FROM (SELECT * FROM raw EXCEPT ALL SELECT * FROM kept) a) AS missing,
                (SELECT count(*) FROM (SELECT * FROM kept EXCEPT ALL SELECT * FROM raw) b) AS extra`,
        [REFRESHED_BEFORE.toISOString()],
      );
      const row = diff.rows[0];
      assert.ok(Number(row.n) > 10_000, `groups compared: ${row.n}`);
      assert.equal(Number(row.missing), 0);
      assert.equal(Number(row.extra), 0);
      assert.equal(Number(row.kept), Number(row.n), 'only the keys amount, qty and price hold numeric values');
      // The hour with a numeric text longer than 1000 characters keeps no rows of that key.
      const long = await exec(
        `SELECT project_id, key FROM event_properties_raw_hours WHERE bucket = $1 ORDER BY project_id`, [LONG_HOUR],
      );
      assert.deepEqual(long.rows, PROJECTS.map((p) => ({ project_id: p.id, key: 'amount' })).sort((a, b) => a.project_id.localeCompare(b.project_id)));
      const none = await exec(`SELECT count(*)::int AS n FROM event_properties_hourly WHERE bucket = $1 AND key = 'amount'`, [LONG_HOUR]);
      assert.equal(none.rows[0].n, 0);
      // Keys longer than 200 bytes are not rolled up (the read side sends them raw).
      const keys = await exec(`SELECT DISTINCT key FROM event_properties_hourly ORDER BY key`);
      assert.deepEqual(keys.rows.map((r) => r.key), ['amount', 'price', 'qty']);
    });

    it('an average over the rollups is the raw avg(numeric), digit for digit', async () => {
      // avg(numeric) is numeric_div(sum, count): the sum of per-group sums has the same digits
      // and display scale, so sum(sums) / sum(counts) is the same text, however the values are
      // split into groups (hours).
      const values = ['1', '2', '2.5', '3', '1000', '-0.1', '0.125', '2.50', '1.2345678901234567890123456789', '-150', '0.025', '7', '0.000', '1e-2'];
      const { rows } = await exec(
        `WITH v AS (
           SELECT x::numeric AS v, (ord * 7919) % 5 AS g FROM unnest($1::text[]) WITH ORDINALITY AS u(x, ord)
           UNION ALL
           SELECT round((random() * 1000 - 300)::numeric, (i % 7)), i % 13 FROM generate_series(1, 20000) i
         ), grouped AS (SELECT g, count(*) AS n, sum(v) AS s FROM v GROUP BY g)
         SELECT (SELECT avg(v)::text FROM v) AS raw, (SELECT (sum(s) / sum(n))::text FROM grouped) AS rolled,
                (SELECT avg(v)::text FROM v WHERE g = 3) AS raw3, (SELECT (sum(s) / sum(n))::text FROM grouped WHERE g = 3) AS rolled3,
                (SELECT avg(v)::text FROM v WHERE g < 5 AND v < 100) AS small`,
        [values],
      );
      assert.equal(rows[0].rolled, rows[0].raw);
      assert.equal(rows[0].rolled3, rows[0].raw3);
      for (const n of [1, 2, 3, 7, 14]) {
        const sub = values.slice(0, n);
        const r = await exec(
          `WITH v AS (SELECT x::numeric AS v, ord % 3 AS g FROM unnest($1::text[]) WITH ORDINALITY AS u(x, ord)),
                grouped AS (SELECT g, count(*) AS n, sum(v) AS s FROM v GROUP BY g)
           SELECT (SELECT avg(v)::text FROM v) AS raw, (SELECT (sum(s) / sum(n))::text FROM grouped) AS rolled`,
          [sub],
        );
        assert.equal(r.rows[0].rolled, r.rows[0].raw, `values ${sub.join(', ')}`);
      }
    });

    it('/export/charts: the rollup path equals the raw path (segments, breakdowns, periods, timezones, previous)', async () => {
      let rolled = 0;
      let compared = 0;
      let nonZero = 0;
      // A covering design (test/support/covering.ts) instead of the cross product projects ×
      // segments × periods × shapes × previous (1,248 requests): the "shapes" are every
      // (segment, shape), and each is asked once with every period it was asked with before
      // (every shape with the first five periods, the first three shapes with every period),
      // the project rotating as (period + shape) mod 3 and `previous` by a second rotation, so
      // every (project, period), (project, segment and shape), (project, previous), (period,
      // previous) and (segment and shape, previous) pair is met (the design is checked): 208.
      const variants = SEGMENTS.flatMap((segment) => SHAPES(segment));
      const shapesPer = SHAPES('property_sum').length;
      const design = coveringDesign(PROJECTS.slice(0, 3), PERIODS, variants, (pi, j) => !(pi > 4 && j % shapesPer > 2));
      const requests: [string, Record<string, unknown>][] = design.map((c) => [c.project.id, { ...c.period, ...c.shape, previous: c.previous }]);
      assert.equal(requests.length, SEGMENTS.length * (5 * shapesPer + (PERIODS.length - 5) * 3));
      await eachLimit(requests, 4, async ([projectId, q]) => {
        const chart = await chartBothWays(pool, projectId, q);
        compared++;
        if (usesPropertyRollup(projectId, q)) rolled++;
        if (chart.series.some((x) => x.data.some((d) => d.count !== 0))) nonZero++;
      });
      assert.equal(compared, requests.length);
      // a third of them at least (400 of the cross product's 1,248 before)
      assert.ok(rolled >= compared / 3, `requests on the property rollup path: ${rolled} of ${compared}`);
      assert.ok(nonZero >= compared * 0.8, `requests with data: ${nonZero} of ${compared}`);
      // Something to compare: data in the hours the charts cover, with decimals and negatives.
      const march = await chartBothWays(pool, 'q_ber', { startDate: '2026-03-01', endDate: '2026-03-31', series: s({ name: '*', segment: 'property_sum', property: 'properties.amount' }), breakdowns: bd('country') });
      assert.ok(march.series.length >= 5 && march.metrics.sum !== 0, `${march.series.length} series, sum ${march.metrics.sum}`);
      const min = await chartBothWays(pool, 'q_ny', { range: '30d', series: s({ name: 'purchase', segment: 'property_min', property: 'properties.amount' }) });
      assert.ok(min.series[0]!.metrics.count <= -150, `min ${min.series[0]!.metrics.count}`);
      // A `now` in the middle of an hour with events: the partial hours at both edges are raw.
      await eachLimit(SEGMENTS, 4, async (segment) => {
        await chartBothWays(pool, 'q_utc', { range: 'last24h', series: s({ name: '*', segment, property: 'properties.amount' }), breakdowns: bd('city') }, new Date('2026-03-10T13:30:00.123Z'));
        await chartBothWays(pool, 'q_ny', { range: '7d', previous: true, series: s({ name: 'purchase', segment, property: 'properties.amount' }) }, new Date('2026-03-10T13:30:00.123Z'));
      });
    });

    it('the rollup path really reads the rollups (a stale row shows on auto, not on raw)', async () => {
      const { rows } = await exec(
        `SELECT bucket FROM event_properties_hourly r WHERE project_id = 'q_utc' AND key = 'price' AND dimension = 'country' AND name = 'purchase' AND value = 'DE'
           AND bucket >= '2026-03-03' AND bucket < $1
           AND NOT EXISTS (SELECT 1 FROM rollup_invalidations i WHERE i.project_id = r.project_id AND i.bucket = r.bucket)
         ORDER BY bucket LIMIT 1 OFFSET 20`,
        [REFRESHED_BEFORE.toISOString()],
      );
      const bucket = rows[0].bucket as Date;
      const where = `project_id = 'q_utc' AND key = 'price' AND bucket = $1 AND name = 'purchase' AND (dimension = '' OR (dimension = 'country' AND value = 'DE'))`;
      await exec(`UPDATE event_properties_hourly SET sum = sum + 1000000, max = max + 1000000, count = count + 1 WHERE ${where}`, [bucket]);
      try {
        const day = Math.floor((bucket.getTime() - Date.parse('2026-03-01T00:00:00Z')) / 86_400_000);
        for (const [segment, breakdowns] of [['property_sum', []], ['property_max', bd('country')], ['property_sum', bd('country')]] as const) {
          const q = { startDate: '2026-03-01', endDate: '2026-03-31', series: s({ name: 'purchase', segment, property: 'properties.price' }), breakdowns };
          const [a, r] = await both(pool, 'q_utc', q);
          const sa = a.series.find((x) => x.names[1] === (breakdowns.length ? 'DE' : undefined))!;
          const sr = r.series.find((x) => x.names[1] === (breakdowns.length ? 'DE' : undefined))!;
          assert.ok(sa.data[day]!.count >= sr.data[day]!.count + 999_000, `${segment}: ${sa.data[day]!.count} vs raw ${sr.data[day]!.count}`);
          assert.ok(sa.metrics.count >= sr.metrics.count + 999_000);
          sa.data.forEach((d, i) => { if (i !== day) assert.equal(d.count, sr.data[i]!.count); });
        }
      } finally {
        await exec(`UPDATE event_properties_hourly SET sum = sum - 1000000, max = max - 1000000, count = count - 1 WHERE ${where}`, [bucket]);
      }
      await chartBothWays(pool, 'q_utc', { startDate: '2026-03-01', endDate: '2026-03-31', series: s({ name: 'purchase', segment: 'property_max', property: 'properties.price' }), breakdowns: bd('country') });
    });

    it('ineligible series stay raw (filters, two breakdowns, property breakdowns, minute buckets, Asia/Kolkata, long keys)', async () => {
      // Every rolled-up row of amount made absurd: an eligible series shows it, the others must not.
      await exec(`CREATE TABLE saved_props AS SELECT * FROM event_properties_hourly WHERE key = 'amount'`);
      await exec(`UPDATE event_properties_hourly SET sum = sum + 1000000, min = min - 1000000, max = max + 1000000, count = count + 1000 WHERE key = 'amount'`);
      try {
        const item = (segment: string, extra: Record<string, unknown> = {}) => s({ name: 'purchase', segment, property: 'properties.amount', ...extra });
        const month = { startDate: '2026-03-01', endDate: '2026-03-31' };
        for (const segment of SEGMENTS) {
          const eligible = { ...month, series: item(segment), breakdowns: bd('country') };
          assert.ok(usesPropertyRollup('q_ber', eligible));
          const [a, r] = await both(pool, 'q_ber', eligible);
          assert.notDeepEqual(a, r, `${segment}: the tampered rows are read`);
          const cases: [string, Record<string, unknown>][] = [
            ['q_ber', { ...month, series: item(segment, { filters: [{ name: 'device', operator: 'is', value: [''] }] }), breakdowns: bd('country') }],
            ['q_ber', { ...month, series: item(segment), filters: [{ name: 'path', operator: 'isNot', value: ['/x'] }] }],
            ['q_ber', { ...month, series: item(segment), breakdowns: bd('country', 'browser') }],
            ['q_ber', { ...month, series: item(segment), breakdowns: bd('properties.qty') }],
            ['q_ber', { startDate: '2026-03-10', endDate: '2026-03-10', interval: 'minute', series: item(segment) }],
            ['q_kol', { ...month, series: item(segment), breakdowns: bd('country') }],
            ['q_ber', { ...month, series: s({ name: 'purchase', segment, property: `properties.${'k'.repeat(201)}` }) }],
            ['q_ber', { ...month, series: s({ name: 'purchase', segment, property: `properties.${'é'.repeat(101)}` }) }],
          ];
          for (const [project, q] of cases) {
            assert.equal(usesPropertyRollup(project, q), false, JSON.stringify(q));
            await chartBothWays(pool, project, { ...q, previous: true });
          }
        }
        // Asia/Kolkata hours start at half past a UTC hour: raw at every interval.
        const kolHours = { startDate: '2026-03-10', endDate: '2026-03-11', interval: 'hour', series: item('property_sum') };
        assert.equal(usesPropertyRollup('q_kol', kolHours), false);
        await chartBothWays(pool, 'q_kol', kolHours);
      } finally {
        await exec(`DELETE FROM event_properties_hourly WHERE key = 'amount'`);
        await exec(`INSERT INTO event_properties_hourly SELECT * FROM saved_props`);
        await exec('DROP TABLE saved_props');
      }
      for (const segment of SEGMENTS) {
        await chartBothWays(pool, 'q_kol', { startDate: '2026-03-10', endDate: '2026-03-11', interval: 'hour', series: s({ name: '*', segment, property: 'properties.amount' }), breakdowns: bd('country') });
      }
    });

    it('after the refresh has caught up (logged hours and late events rolled up) the answers are still the raw ones', async () => {
      await refreshAll(pool, new Date(Math.floor(NOW.getTime() / 3_600_000) * 3_600_000));
      const left = await exec(`SELECT count(*)::int AS n FROM rollup_invalidations WHERE bucket < $1`, [new Date(Math.floor(NOW.getTime() / 3_600_000) * 3_600_000)]);
      assert.equal(left.rows[0].n, 0);
      // Every (segment and shape, period) pair once, the project rotating (a covering design as
      // above: every (project, period) and (project, segment and shape) pair met), all with the
      // previous period as before: 60 requests instead of the 180 of every project.
      const design = coveringDesign(PROJECTS.slice(0, 3), [PERIODS[0]!, PERIODS[4]!, PERIODS[5]!], SEGMENTS.flatMap((segment) => SHAPES(segment).slice(0, 5)));
      const requests: [string, Record<string, unknown>][] = design.map((c) => [c.project.id, { ...c.period, ...c.shape, previous: true }]);
      await eachLimit(requests, 4, async ([projectId, q]) => void (await chartBothWays(pool, projectId, q)));
    });
  });
});
