// Unique visitors on the rollup path (rollups.ts) against the raw path, on the dataset of
// test/support/insights-rollups-dataset.ts (a database of this file's own): exact up to the
// threshold of sessions, HyperLogLog sketches above it (within the documented error), exact
// whenever the hll extension is missing (a database migrated as on a server without it). The
// rest of the rollup path: rollups.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type pg from 'pg';
import { parsePeriodParams } from '../query/params';
import { resolvePeriod } from '../query/period';
import { DEFAULT_EXACT_VISITORS_MAX, exactVisitorsMaxFrom, loadConfig } from '../config/config';
import { SqlParams } from '../query/filters';
import { HLL_ERROR_BOUND, planFor, rollupMetricsSql } from './rollups';
import { getMetrics, type InsightsOptions } from './service';
import { dropSqlDb } from '../../test/support/sql-db';
import {
  AUTO, dataset, DB_NAME, exec, MANY, NOHLL_NAME, noHll, NOW, pool, query, RAW, refreshedDataset, startNoHll, type Q,
} from '../../test/support/insights-rollups-dataset';

// The database without hll first, beside the dataset; the dataset as the tests of
// rollups.test.ts left it in the one file these came from (see refreshedDataset).
before(async () => {
  startNoHll();
  await refreshedDataset();
});

after(async () => {
  await dropSqlDb(pool, DB_NAME);
  await dropSqlDb(await noHll?.catch(() => undefined), NOHLL_NAME);
});

describe('unique visitors: exact up to the threshold, HyperLogLog sketches above it', () => {
  before(dataset);
  const metricsOf = (projectId: string, q: Q, options: InsightsOptions) => getMetrics(pool, projectId, parsePeriodParams(query(q)), NOW, options);
  /** The `exact` flag of the rollup metrics statement's totals row. */
  async function countedExactly(projectId: string, q: Q, tz: string, exactMax: number): Promise<boolean> {
    const period = resolvePeriod(parsePeriodParams(query(q)), tz, NOW);
    const p = new SqlParams();
    const sql = rollupMetricsSql({ projectId, start: period.start, end: period.end }, period.buckets, p, { exactMax, sketches: true });
    const { rows } = await exec(`SELECT exact FROM (${sql}) m WHERE m.bucket IS NULL`, p.values);
    return rows[0]?.exact === true;
  }

  it('TIDEMARK_EXACT_VISITORS_MAX: default, override, validation', () => {
    assert.equal(DEFAULT_EXACT_VISITORS_MAX, 25_000);
    assert.equal(exactVisitorsMaxFrom({}), DEFAULT_EXACT_VISITORS_MAX);
    assert.equal(loadConfig({}).TIDEMARK_EXACT_VISITORS_MAX, DEFAULT_EXACT_VISITORS_MAX);
    assert.equal(exactVisitorsMaxFrom({ TIDEMARK_EXACT_VISITORS_MAX: '0' }), 0);
    assert.equal(loadConfig({ TIDEMARK_EXACT_VISITORS_MAX: '100000' }).TIDEMARK_EXACT_VISITORS_MAX, 100_000);
    assert.throws(() => exactVisitorsMaxFrom({ TIDEMARK_EXACT_VISITORS_MAX: '-1' }), /TIDEMARK_EXACT_VISITORS_MAX/);
    assert.throws(() => loadConfig({ TIDEMARK_EXACT_VISITORS_MAX: 'many' }), /TIDEMARK_EXACT_VISITORS_MAX/);
  });

  it('the sketches exist here (hll installed) and are refreshed with the other rollups', async () => {
    const { rows } = await exec(
      `SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'hll')::int AS ext,
              (SELECT refresh_fn FROM rollup_registry WHERE relation = 'rollup_visitors_hourly') AS fn,
              (SELECT refresh_fn FROM rollup_registry WHERE relation = 'rollup_visitors_dayparts') AS fn2,
              (SELECT count(*) FROM rollup_visitors_hourly)::int AS n`,
    );
    assert.deepEqual(
      { ...rows[0], n: rows[0]!.n > 500 }, // (~750 hours with sessions are rolled up: see FULL_HOURS)
      { ext: 1, fn: 'tm_refresh_visitors_bucket', fn2: 'tm_refresh_visitors_bucket', n: true },
      'the hll extension is missing: apt-get install postgresql-15-hll (test/ensure-services.sh does so as root)',
    );
  });

  it('exact at and below the threshold, sketches above it (the rest of the answer unchanged)', async () => {
    const q: Q = { range: '30d' };
    const raw = await metricsOf('r_ber', q, RAW);
    const n = raw.metrics.total_sessions;
    assert.ok(n > 100);
    assert.deepEqual(await metricsOf('r_ber', q, { exactVisitorsMax: n }), raw);
    assert.equal(await countedExactly('r_ber', q, 'Europe/Berlin', n), true);
    assert.equal(await countedExactly('r_ber', q, 'Europe/Berlin', n - 1), false);
    // Few visitors per union: the sketches' exact lists give the exact numbers anyway.
    const sketched = await metricsOf('r_ber', q, { exactVisitorsMax: n - 1 });
    assert.deepEqual(sketched, raw);
    // The default threshold (TIDEMARK_EXACT_VISITORS_MAX) is far above these small datasets.
    assert.deepEqual(await metricsOf('r_ber', q, AUTO), raw);
  });

  it('series buckets read the UTC day parts of days without logged hours, hourly sketches elsewhere', async () => {
    const sketches: InsightsOptions = { exactVisitorsMax: 0 };
    // A Berlin day (22:00/23:00 UTC to the next) = a suffix of one UTC day + a prefix of the next.
    const q: Q = { startDate: '2026-10-20', endDate: '2026-10-24' };
    const exact = await metricsOf('r_ber', q, RAW);
    assert.deepEqual(await metricsOf('r_ber', q, sketches), exact);
    // Not what the refresh does: one stored day part emptied on purpose. 2026-10-22 has no
    // logged hour (see before()), so Berlin's 2026-10-22 reads its prefix up to 21:00 UTC.
    const day = '2026-10-22T00:00:00Z';
    const { rows } = await exec(
      `SELECT kind, k FROM rollup_visitors_dayparts WHERE project_id = 'r_ber' AND bucket = $1 AND kind = 'p' ORDER BY k DESC LIMIT 1 OFFSET 2`,
      [day],
    );
    assert.deepEqual(rows[0], { kind: 'p', k: 21 });
    const saved = await exec(`SELECT visitors::text AS v FROM rollup_visitors_dayparts WHERE project_id = 'r_ber' AND bucket = $1 AND kind = 'p' AND k = 21`, [day]);
    await exec(`UPDATE rollup_visitors_dayparts SET visitors = hll_empty(14, 5, -1, 1) WHERE project_id = 'r_ber' AND bucket = $1 AND kind = 'p' AND k = 21`, [day]);
    try {
      const stale = await metricsOf('r_ber', q, sketches);
      const i = exact.series.findIndex((b) => b.date === '2026-10-21T22:00:00.000Z');
      assert.ok(i >= 0);
      assert.ok(stale.series[i]!.unique_visitors < exact.series[i]!.unique_visitors, 'the prefix is read for that bucket');
      assert.deepEqual(stale.series.filter((_, j) => j !== i), exact.series.filter((_, j) => j !== i), 'and for no other');
      // The exact path and hourly sketches of a day with logged hours do not use it.
      assert.deepEqual(await metricsOf('r_ber', q, AUTO), exact);
    } finally {
      await exec(`UPDATE rollup_visitors_dayparts SET visitors = $2::hll WHERE project_id = 'r_ber' AND bucket = $1 AND kind = 'p' AND k = 21`, [day, saved.rows[0]!.v]);
    }
    assert.deepEqual(await metricsOf('r_ber', q, sketches), exact);
  });

  for (const [label, q] of [
    ['day buckets', { startDate: '2026-08-01', endDate: '2026-10-25' }],
    ['week buckets', { startDate: '2026-06-01', endDate: '2026-10-25' }],
    ['month buckets, with logged hours', { startDate: '2026-01-01', endDate: '2026-11-02' }],
  ] as Array<[string, Q]>) {
    it(`several thousand visitors, ${label}: within the documented error (${HLL_ERROR_BOUND * 100}%) of exact`, async () => {
      const exact = await metricsOf(MANY.id, q, RAW);
      assert.equal(await countedExactly(MANY.id, q, 'UTC', 0), false);
      const sketched = await metricsOf(MANY.id, q, { exactVisitorsMax: 0 });
      assert.ok(exact.metrics.unique_visitors > 5000, `${exact.metrics.unique_visitors} visitors`);
      const bound = HLL_ERROR_BOUND;
      const within = (est: number, truth: number, what: string) => {
        assert.ok(Math.abs(est - truth) <= Math.max(bound * truth, 0), `${what}: ${est} vs exact ${truth} (bound ${(bound * 100).toFixed(2)}%)`);
      };
      within(sketched.metrics.unique_visitors, exact.metrics.unique_visitors, 'total');
      assert.equal(sketched.series.length, exact.series.length);
      let large = 0;
      for (const [i, b] of exact.series.entries()) {
        const s = sketched.series[i]!;
        assert.equal(s.date, b.date);
        within(s.unique_visitors, b.unique_visitors, `bucket ${b.date}`);
        if (b.unique_visitors > 1280) large++;
        const { unique_visitors: _x, ...restS } = s;
        const { unique_visitors: _y, ...restB } = b;
        assert.deepEqual(restS, restB, 'everything but unique_visitors is exact');
      }
      const { unique_visitors: _a, ...restS } = sketched.metrics;
      const { unique_visitors: _b, ...restB } = exact.metrics;
      assert.deepEqual(restS, restB);
      if (label === 'week buckets') assert.ok(large > 8, `buckets beyond the sketches' exact lists: ${large}`);
    });
  }
});

describe('unique visitors without the hll extension', () => {
  let db: pg.Pool;

  before(async () => {
    await dataset();
    db = await noHll!;
  });

  it('the migration creates no sketches and registers none; the refresh job still runs', async () => {
    const { rows } = await db.query(
      `SELECT to_regclass('rollup_visitors_hourly') IS NULL AS no_table,
              NOT EXISTS (SELECT 1 FROM rollup_registry WHERE relation = 'rollup_visitors_hourly') AS unregistered,
              (SELECT count(*) FROM rollup_sessions_hourly)::int > 0 AS refreshed`,
    );
    assert.deepEqual(rows[0], { no_table: true, unregistered: true, refreshed: true });
  });

  it('always exact, whatever the threshold, on the rollup path', async () => {
    for (const q of [{ startDate: '2026-06-01', endDate: '2026-10-25' }, { startDate: '2026-09-20', endDate: '2026-10-05' }] as Q[]) {
      const params = parsePeriodParams(query(q));
      assert.equal(planFor(resolvePeriod(params, 'UTC', NOW), params.filters), 'rollup');
      const raw = await getMetrics(db, MANY.id, params, NOW, RAW);
      assert.ok(raw.metrics.unique_visitors > 1000);
      assert.deepEqual(await getMetrics(db, MANY.id, params, NOW, { exactVisitorsMax: 0 }), raw);
      assert.deepEqual(await getMetrics(db, MANY.id, params, NOW, AUTO), raw);
    }
  });
});
