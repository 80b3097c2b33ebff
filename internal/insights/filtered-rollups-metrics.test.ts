// Filtered metrics on the rollup path against the raw reference path (`path: 'raw'`), on the
// dataset of test/support/insights-filtered-dataset.ts (a database of this file's own): unique
// visitors of filtered metrics, exact up to the threshold and from the per-(hour, dimension,
// value) HyperLogLog sketches above it (sql/010_rollup_visitor_values.sql) within the
// documented error; metrics filtered on two cube dimensions from the daily pair metrics
// (sql/018); sql/010 and sql/018 on an upgraded database, and without hll. The rest of the
// filtered rollup path: filtered-rollups.test.ts, filtered-rollups-breakdowns.test.ts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { SqlParams, splitFilters } from '../query/filters';
import { parsePageParams, parsePeriodParams, type Filter } from '../query/params';
import { resolvePeriod } from '../query/period';
import { refreshRollups } from '../store/rollups';
import { readSource } from '../query/planner';
import { HLL_ERROR_BOUND, HLL_PARAMS, planFor, rollupMetricsSql, type PlanTarget } from './rollups';
import { getBreakdown, getMetrics, type InsightsOptions } from './service';
import { functionsSql } from '../../test/support/sql-db';
import {
  AUTO, changeLogged, createDb, dataset, DB_NAME, dropDb, exec, f, HOUR, MANY, migrate, NOW, plannedFor, pool, query, RAW, REFRESHED_BEFORE,
  refreshedDataset, SKETCHES, SQL_DIR, twoProjects, tzOf, type Q,
} from '../../test/support/insights-filtered-dataset';

after(() => dropDb(pool, DB_NAME));
// As in the one file these came from, after the tests of filtered-rollups.test.ts (see refreshedDataset).
before(refreshedDataset);

describe('unique visitors of filtered metrics: exact up to the threshold, value sketches above it', () => {
  before(dataset);
  const metricsOf = (projectId: string, q: Q, options: InsightsOptions) => getMetrics(pool, projectId, parsePeriodParams(query(q)), NOW, options);
  /** The `exact` flag of the filtered rollup metrics statement's totals row. */
  async function countedExactly(projectId: string, q: Q, exactMax: number): Promise<boolean> {
    const params = parsePeriodParams(query(q));
    const period = resolvePeriod(params, tzOf(projectId), NOW);
    const dimension = plannedFor(params.filters, 'metrics').dimension!;
    const p = new SqlParams();
    const sql = rollupMetricsSql(
      { projectId, start: period.start, end: period.end }, period.buckets, p, { exactMax, sketches: true },
      readSource(`session_dimension:${dimension}`), splitFilters(params.filters).session,
    );
    const { rows } = await exec(`SELECT exact FROM (${sql}) m WHERE m.bucket IS NULL`, p.values);
    return rows[0]?.exact === true;
  }

  it('the value sketches are registered with their refresh function', async () => {
    const { rows } = await exec(`SELECT refresh_fn FROM rollup_registry WHERE relation = 'rollup_visitor_values_hourly'`);
    assert.deepEqual(rows, [{ refresh_fn: 'tm_refresh_visitor_values_bucket' }]);
  });

  it('the period\'s session count (filtered or not) decides: exact at and below the threshold', async () => {
    const q: Q = { range: '30d', filters: [f('country', 'is', 'DE')] };
    const raw = await metricsOf('f_ber', q, RAW);
    const all = (await metricsOf('f_ber', { range: '30d' }, RAW)).metrics.total_sessions;
    assert.ok(raw.metrics.total_sessions > 100 && all > raw.metrics.total_sessions);
    assert.equal(await countedExactly('f_ber', q, all), true);
    assert.equal(await countedExactly('f_ber', q, all - 1), false);
    assert.deepEqual(await metricsOf('f_ber', q, { exactVisitorsMax: all }), raw);
    // The default threshold (TIDEMARK_EXACT_VISITORS_MAX) is far above this small dataset.
    assert.deepEqual(await metricsOf('f_ber', q, AUTO), raw);
  });

  it('above the threshold the answer reads rollup_visitor_values_hourly (a stale sketch shows)', async () => {
    const q: Q = { startDate: '2026-10-20', endDate: '2026-10-20', filters: [f('country', 'is', 'DE')] };
    const exact = await metricsOf('f_utc', q, RAW);
    assert.deepEqual(await metricsOf('f_utc', q, SKETCHES), exact);
    // Not what the refresh does: the DE sketch of one hour that is not logged emptied on purpose.
    const { rows: hours } = await exec(
      `SELECT h.bucket FROM rollup_visitor_values_hourly h
       WHERE h.project_id = 'f_utc' AND h.dimension = 'country' AND h.value = 'DE' AND h.bucket >= '2026-10-20' AND h.bucket < '2026-10-21'
         AND NOT EXISTS (SELECT 1 FROM rollup_invalidations i WHERE i.project_id = h.project_id AND i.bucket = h.bucket)
       ORDER BY h.bucket LIMIT 1`,
    );
    const hour = (hours[0] as { bucket: Date }).bucket;
    const i = hour.getUTCHours();
    const where = `project_id = 'f_utc' AND dimension = 'country' AND value = 'DE' AND bucket = '${hour.toISOString()}'`;
    const saved = await exec(`SELECT visitors::text AS v FROM rollup_visitor_values_hourly WHERE ${where}`);
    assert.equal(saved.rows.length, 1);
    await exec(`UPDATE rollup_visitor_values_hourly SET visitors = hll_empty(14, 5, -1, 1) WHERE ${where}`);
    try {
      const stale = await metricsOf('f_utc', q, SKETCHES);
      assert.ok(stale.metrics.unique_visitors < exact.metrics.unique_visitors);
      assert.ok(stale.series[i]!.unique_visitors < exact.series[i]!.unique_visitors);
      assert.deepEqual(stale.series.filter((_, j) => j !== i), exact.series.filter((_, j) => j !== i), 'no other hour');
      assert.deepEqual(await metricsOf('f_utc', q, AUTO), exact, 'the exact count does not read it');
    } finally {
      await exec(`UPDATE rollup_visitor_values_hourly SET visitors = $1::hll WHERE ${where}`, [saved.rows[0]!.v]);
    }
  });

  // (every 5th hour of these days is logged: hashed raw on the fly)
  for (const [label, q] of [
    ['country is DE, hour buckets', { startDate: '2026-10-12', endDate: '2026-10-13', filters: [f('country', 'is', 'DE')] }],
    ['country isNot US (several values per hour, "" included), day buckets', { startDate: '2026-10-10', endDate: '2026-10-19', filters: [f('country', 'isNot', 'US')] }],
    ['city contains Ber (Berlin and Berlinville), day buckets', { startDate: '2026-10-13', endDate: '2026-10-19', filters: [f('city', 'contains', 'Ber')] }],
  ] as Array<[string, Q]>) {
    it(`thousands of visitors, ${label}: within ${HLL_ERROR_BOUND * 100}% of exact`, async () => {
      const exact = await metricsOf(MANY.id, q, RAW);
      assert.equal(await countedExactly(MANY.id, q, 1000), false);
      const sketched = await metricsOf(MANY.id, q, { exactVisitorsMax: 1000 });
      assert.ok(exact.metrics.unique_visitors > 2000, `${exact.metrics.unique_visitors} visitors`);
      const within = (est: number, truth: number, what: string) =>
        assert.ok(Math.abs(est - truth) <= HLL_ERROR_BOUND * truth, `${what}: ${est} vs exact ${truth}`);
      within(sketched.metrics.unique_visitors, exact.metrics.unique_visitors, 'total');
      let large = 0;
      for (const [i, b] of exact.series.entries()) {
        const s = sketched.series[i]!;
        within(s.unique_visitors, b.unique_visitors, `bucket ${b.date}`);
        if (b.unique_visitors > 1280) large++;
        assert.deepEqual({ ...s, unique_visitors: 0 }, { ...b, unique_visitors: 0 }, 'everything but unique_visitors is exact');
      }
      assert.deepEqual({ ...sketched.metrics, unique_visitors: 0 }, { ...exact.metrics, unique_visitors: 0 });
      if (label.includes('isNot')) assert.ok(large > 5, 'buckets beyond the sketches\' exact lists');
    });
  }
});

// ---------------------------------------------------------------------------------------

describe('metrics filtered on two cube dimensions: the daily pair metrics (sql/018)', () => {
  before(dataset);
  const PAIR_CASES: Array<[string, Filter[]]> = [
    ['country is DE, device is mobile', [f('country', 'is', 'DE'), f('device', 'is', 'mobile')]],
    ['country isNot US keeps "", device isNot ""', [f('country', 'isNot', 'US'), f('device', 'isNot', '')]],
    ['referrer_name contains % (literal), device regex', [f('referrer_name', 'contains', '%'), f('device', 'regex', '^(mobile|tablet)$')]],
    ['browser startsWith Chr, os doesNotContain i', [f('browser', 'startsWith', 'Chr'), f('os', 'doesNotContain', 'i')]],
    ['two filters on country, one on referrer_type', [f('country', 'isNot', 'US'), f('country', 'endsWith', 'E', ''), f('referrer_type', 'is', 'search', 'social')]],
    ['utm_source is "", browser endsWith e', [f('utm_source', 'is', ''), f('browser', 'endsWith', 'e')]],
  ];
  const PERIODS: Array<[string, Q]> = [
    ['30d (day buckets)', { range: '30d' }],
    ['3m (week buckets)', { range: '3m' }],
    ['today (hour buckets: no whole day inside one)', { range: 'today' }],
    ['a DST day (Berlin 10-25: 25 h)', { startDate: '2026-10-25', endDate: '2026-10-25' }],
    ['two weeks of whole days', { startDate: '2026-10-18', endDate: '2026-10-31' }],
  ];

  it('chooses the pair for metrics filtered on two cube dimensions only', () => {
    const key = (filters: Filter[], target: PlanTarget = 'metrics') => plannedFor(filters, target).pairMetrics;
    assert.equal(key([f('country', 'is', 'DE'), f('device', 'is', 'mobile')]), 'country,device');
    assert.equal(key([f('device', 'is', 'mobile'), f('referrer_name', 'is', 'Google'), f('device', 'isNot', '')]), 'referrer_name,device');
    assert.equal(key([f('country', 'is', 'DE')]), null, 'one dimension: its own rollup');
    assert.equal(key([f('country', 'is', 'DE'), f('city', 'is', 'Berlin')]), null, 'a dimension and its parent: the child\'s rollup');
    assert.equal(key([f('country', 'is', 'DE'), f('device', 'is', 'mobile'), f('os', 'is', 'iOS')]), null, 'three dimensions');
    assert.equal(key([f('country', 'is', 'DE'), f('city', 'is', 'Berlin'), f('device', 'is', 'mobile')]), null, 'city is not in the cube');
    assert.equal(key([f('country', 'is', 'DE'), f('path', 'is', '/')]), null, 'an event column');
    assert.equal(key([f('country', 'is', 'DE'), f('device', 'is', 'mobile')], 'browser'), null, 'breakdowns read the session cube');
    assert.equal(key([]), null);
    const period = resolvePeriod(parsePeriodParams(query({ range: '30d' })), 'Europe/Berlin', NOW);
    assert.equal(planFor(period, PAIR_CASES[0]![1]), 'rollup');
    assert.equal(planFor(period, PAIR_CASES[0]![1], 'raw'), 'raw');
    assert.equal(planFor(resolvePeriod(parsePeriodParams(query({ range: '30d' })), 'Asia/Kolkata', NOW), PAIR_CASES[0]![1]), 'raw');
  });

  it('builds the same days as the session cube, each with the metrics of its raw sessions per pair and values', async () => {
    const { rows: days } = await exec(
      `SELECT (SELECT count(*) FROM ((SELECT project_id, bucket, hours FROM rollup_session_pair_metrics_days
                                      EXCEPT SELECT project_id, bucket, hours FROM rollup_session_cube_days)
                                     UNION ALL (SELECT project_id, bucket, hours FROM rollup_session_cube_days
                                      EXCEPT SELECT project_id, bucket, hours FROM rollup_session_pair_metrics_days)) x)::int AS differ,
              (SELECT count(*) FROM rollup_session_pair_metrics_days)::int AS n,
              (SELECT count(*) FROM rollup_session_pair_metrics_days WHERE project_id = 'f_kol')::int AS kolkata,
              (SELECT count(DISTINCT pair) FROM rollup_session_pair_metrics_daily)::int AS pairs`,
    );
    assert.deepEqual({ ...days[0], n: days[0].n > 20 }, { differ: 0, n: true, kolkata: 0, pairs: 36 });
    // Three pairs recomputed from the raw sessions of each listed day (visitors: the sketch of
    // the day's profiles, byte for byte).
    for (const [a, b] of [['country', 'device'], ['referrer_name', 'referrer_type'], ['browser', 'brand']] as const) {
      const { rows } = await exec(
        `WITH want AS (
           SELECT d.project_id, d.bucket, s.${a} AS a, s.${b} AS b, count(*) AS sessions, count(*) FILTER (WHERE s.is_bounce) AS bounces,
                  count(*) FILTER (WHERE s.duration_ms > 0) AS timed, coalesce(sum(s.duration_ms) FILTER (WHERE s.duration_ms > 0), 0) AS duration_ms,
                  sum(s.screen_view_count) AS views, hll_add_agg(hll_hash_text(s.profile_id), ${HLL_PARAMS})::text AS visitors
           FROM rollup_session_pair_metrics_days d
           JOIN sessions s ON s.project_id = d.project_id AND s.started_at >= d.bucket AND s.started_at < d.bucket + d.hours * interval '1 hour' AND NOT s.is_bot
           GROUP BY 1, 2, 3, 4
         ), got AS (
           SELECT project_id, bucket, a, b, sessions, bounces, timed_sessions, duration_ms, screen_views, visitors::text
           FROM rollup_session_pair_metrics_daily WHERE pair = $1
         )
         SELECT (SELECT count(*) FROM ((SELECT * FROM want EXCEPT ALL SELECT * FROM got) UNION ALL (SELECT * FROM got EXCEPT ALL SELECT * FROM want)) x)::int AS differ,
                (SELECT count(*) FROM got)::int AS n`,
        [`${a},${b}`],
      );
      assert.equal(rows[0].differ, 0, `${a},${b}`);
      assert.ok(rows[0].n > 50, `${a},${b} has rows`);
    }
  });

  // Each period on two projects (10 tests, was 20): offset 1 puts Berlin's DST day on UTC and
  // Berlin; every project meets two or three periods.
  assert.deepEqual(twoProjects(PERIODS.findIndex(([l]) => l.includes('Berlin 10-25')), 1).map((p) => p.timezone), ['UTC', 'Europe/Berlin']);
  for (const [j, [label, q]] of PERIODS.entries()) {
    for (const p of twoProjects(j, 1)) {
      it(`${p.id} (${p.timezone}) ${label}: auto = raw, exact and from sketches`, async () => {
        for (const [name, filters] of PAIR_CASES) {
          const params = parsePeriodParams(query({ ...q, filters }));
          const raw = await getMetrics(pool, p.id, params, NOW, RAW);
          assert.deepEqual(await getMetrics(pool, p.id, params, NOW, AUTO), raw, name);
          // At these sizes every sketch union is an exact list: a day or hour counted twice or missed would show.
          assert.deepEqual(await getMetrics(pool, p.id, params, NOW, SKETCHES), raw, `${name} (sketches)`);
          if (label.startsWith('30d') && name.startsWith('country is DE')) assert.ok(raw.metrics.total_sessions > 0);
        }
      });
    }
  }

  it('reads a whole day\'s pair rows (a stale row shows), and raw sessions for the rest', async () => {
    const filters = [f('country', 'is', 'DE'), f('device', 'is', 'mobile')];
    const stale = (bucket: string) => exec(
      `INSERT INTO rollup_session_pair_metrics_daily (project_id, pair, bucket, a, b, sessions, bounces, timed_sessions, duration_ms, screen_views, visitors)
       VALUES ('f_utc', 'country,device', $1, 'DE', 'mobile', 1000, 0, 0, 0, 5000, hll_empty(14, 5, -1, 1))`,
      [bucket],
    );
    // 10-20 is whole; 10-21 has a logged hour (05:00, logged again by the session cube's tests).
    await exec(`INSERT INTO rollup_invalidations (project_id, bucket) VALUES ('f_utc', '2026-10-21T05:00Z') ON CONFLICT DO NOTHING`);
    const cases: Array<[string, Q, string, boolean]> = [
      ['a whole day, day bucket', { startDate: '2026-10-19', endDate: '2026-10-21' }, '2026-10-20T00:00Z', true],
      ['a day with a logged hour', { startDate: '2026-10-19', endDate: '2026-10-21' }, '2026-10-21T00:00Z', false],
      ['a whole day split in hour buckets (a 2-day period)', { startDate: '2026-10-20', endDate: '2026-10-21' }, '2026-10-20T00:00Z', false],
      ['a whole day inside a week bucket', { range: '3m' }, '2026-10-20T00:00Z', true],
      ['the pair of other dimensions', { startDate: '2026-10-19', endDate: '2026-10-21' }, '2026-10-20T00:00Z', false],
    ];
    for (const [label, q, bucket, shows] of cases) {
      const params = parsePeriodParams(query({ ...q, filters: label.startsWith('the pair of other') ? [f('country', 'is', 'DE'), f('os', 'isNot', 'none')] : filters }));
      const raw = await getMetrics(pool, 'f_utc', params, NOW, RAW);
      assert.deepEqual(await getMetrics(pool, 'f_utc', params, NOW, AUTO), raw, label);
      await stale(bucket);
      try {
        const auto = await getMetrics(pool, 'f_utc', params, NOW, AUTO);
        assert.equal(auto.metrics.total_sessions - raw.metrics.total_sessions, shows ? 1000 : 0, `${label}: sessions`);
        assert.equal(auto.metrics.total_screen_views - raw.metrics.total_screen_views, shows ? 5000 : 0, `${label}: screen views`);
      } finally {
        await exec(`DELETE FROM rollup_session_pair_metrics_daily WHERE project_id = 'f_utc' AND sessions = 1000 AND screen_views = 5000`);
      }
    }
  });

  it('a change in a whole day, logged as the worker does, shows at once; the refresh rebuilds the day', async () => {
    const params = parsePeriodParams(query({ startDate: '2026-10-22', endDate: '2026-10-22', filters: [f('country', 'is', 'DE'), f('device', 'isNot', 'desktop')] }));
    const weekly = parsePeriodParams(query({ range: '3m', filters: params.filters }));
    const ask = async () => {
      const raw = await getMetrics(pool, 'f_utc', weekly, NOW, RAW);
      assert.deepEqual(await getMetrics(pool, 'f_utc', weekly, NOW, AUTO), raw);
      assert.deepEqual(await getMetrics(pool, 'f_utc', weekly, NOW, SKETCHES), raw);
      return raw;
    };
    const listed = async () => (await exec(`SELECT count(*)::int AS n FROM rollup_session_pair_metrics_days WHERE project_id = 'f_utc' AND bucket = '2026-10-22T00:00Z'`)).rows[0].n;
    assert.equal(await listed(), 1);
    const before = await ask();
    const { rows } = await exec(
      `SELECT id, started_at, country, device, profile_id FROM sessions WHERE project_id = 'f_utc' AND NOT is_bot AND country = 'US'
         AND started_at >= '2026-10-22T00:00Z' AND started_at < '2026-10-23T00:00Z' ORDER BY started_at LIMIT 1`,
    );
    const target = rows[0] as { id: string; started_at: Date; country: string; device: string; profile_id: string };
    const hour = new Date(Math.floor(target.started_at.getTime() / HOUR) * HOUR).toISOString();
    const change = (country: string, device: string, profile_id: string) => changeLogged(target.id, hour, { country, device, profile_id });
    await change('DE', 'tablet', 'a-visitor-never-seen');
    try {
      const changed = await ask();
      assert.equal(changed.metrics.total_sessions, before.metrics.total_sessions + 1);
      assert.equal(changed.metrics.unique_visitors, before.metrics.unique_visitors + 1);
      while ((await refreshRollups(pool, false, { before: REFRESHED_BEFORE })).buckets > 0);
      assert.equal(await listed(), 1, 'the refresh of the day\'s last logged hour rebuilt it');
      assert.deepEqual(await ask(), changed);
    } finally {
      await change(target.country, target.device, target.profile_id);
      while ((await refreshRollups(pool, false, { before: REFRESHED_BEFORE })).buckets > 0);
    }
    assert.deepEqual(await ask(), before);
  });

  it('an upgraded database logs the first hour of each local day, so the refresh builds the days; answers stay exact', async () => {
    const name = `tidemark_test_frollups_up18_${randomBytes(6).toString('hex')}`;
    const up = await createDb(name);
    try {
      const files = readdirSync(SQL_DIR).filter((x) => x.endsWith('.sql')).sort();
      const upTo = files.indexOf('018_session_pair_metrics.sql');
      assert.ok(upTo > 0);
      await up.query(await functionsSql());
      for (const file of files.slice(0, upTo)) await up.query(readFileSync(new URL(file, SQL_DIR), 'utf8'));
      await up.query(await functionsSql());
      await up.query(`INSERT INTO projects (id, name, timezone) VALUES ('u', 'u', 'Europe/Berlin'), ('k', 'k', 'Asia/Kolkata')`);
      await up.query(
        `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, country, device, screen_view_count)
         SELECT gen_random_uuid(), p, 'd' || g, 'v' || (g % 70), t, t, (ARRAY['DE', 'US', ''])[1 + g % 3], (ARRAY['mobile', 'desktop'])[1 + g % 2], g % 4
         FROM generate_series(1, 900) g, unnest(ARRAY['u', 'k']) p, LATERAL (SELECT '2026-10-01T00:00:00Z'::timestamptz + g * interval '7 minutes' AS t) x`,
      );
      await up.query(`INSERT INTO rollup_invalidations (project_id, bucket) SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions`);
      while ((await refreshRollups(up, false, { before: NOW })).buckets > 0);
      // 018 and 019, then the rest (sql/023 fills its new columns in place and logs nothing)
      for (const file of files.slice(upTo)) await up.query(readFileSync(new URL(file, SQL_DIR), 'utf8'));
      await up.query(await functionsSql());
      const { rows } = await up.query(
        `SELECT array_agg(bucket ORDER BY bucket)::text AS logged FROM rollup_invalidations WHERE project_id = 'u'`,
      );
      // 900 sessions 7 minutes apart from 10-01 00:07Z: Berlin days from 09-30 22:00Z to 10-05 22:00Z.
      const days = ['2026-09-30 22:00:00+00', '2026-10-01 22:00:00+00', '2026-10-02 22:00:00+00', '2026-10-03 22:00:00+00', '2026-10-04 22:00:00+00'];
      assert.equal(rows[0].logged, `{${days.map((d) => `"${d}"`).join(',')}}`);
      assert.equal((await up.query(`SELECT count(*)::int AS n FROM rollup_invalidations WHERE project_id = 'k'`)).rows[0].n, 0, 'Kolkata days have no pair rows');
      const q = parsePeriodParams(query({ startDate: '2026-09-30', endDate: '2026-10-06', filters: [f('country', 'isNot', 'US'), f('device', 'is', 'mobile')] }));
      const raw = await getMetrics(up, 'u', q, NOW, RAW);
      assert.ok(raw.metrics.unique_visitors > 10);
      assert.deepEqual(await getMetrics(up, 'u', q, NOW, SKETCHES), raw);
      while ((await refreshRollups(up, false, { before: NOW })).buckets > 0);
      assert.equal((await up.query(`SELECT count(*)::int AS n FROM rollup_session_pair_metrics_days WHERE project_id = 'u'`)).rows[0].n, days.length);
      assert.deepEqual(await getMetrics(up, 'u', q, NOW, SKETCHES), raw);
      assert.deepEqual(await getMetrics(up, 'u', q, NOW, AUTO), raw);
      // sql/019's dimension pairs, applied in the same upgrade, built the same days.
      assert.equal((await up.query(`SELECT count(*)::int AS n FROM rollup_session_dim_pairs_days WHERE project_id = 'u'`)).rows[0].n, days.length);
      const byCountry = parsePageParams(query({ startDate: '2026-09-30', endDate: '2026-10-06', filters: [f('city', 'is', '')] }));
      assert.deepEqual(await getBreakdown(up, 'u', 'country', byCountry, NOW, AUTO), await getBreakdown(up, 'u', 'country', byCountry, NOW, RAW));
    } finally {
      await dropDb(up, name);
    }
  });

  it('thousands of visitors: the estimate is within the documented error of the exact count', async () => {
    for (const filters of [PAIR_CASES[0]![1], PAIR_CASES[1]![1]]) {
      const params = parsePeriodParams(query({ startDate: '2026-10-10', endDate: '2026-10-19', filters }));
      const raw = await getMetrics(pool, MANY.id, params, NOW, RAW);
      const est = await getMetrics(pool, MANY.id, params, NOW, SKETCHES);
      assert.ok(raw.metrics.unique_visitors > 1500, `${raw.metrics.unique_visitors} visitors`);
      const { unique_visitors: u, ...sums } = est.metrics;
      const { unique_visitors: x, ...rawSums } = raw.metrics;
      assert.deepEqual(sums, rawSums);
      assert.ok(Math.abs(u - x) <= x * HLL_ERROR_BOUND, `${u} vs exact ${x}`);
    }
  });
});

describe('sql/010 on an upgraded database, and without hll', () => {
  before(dataset);
  const UP = `tidemark_test_frollups_up_${randomBytes(6).toString('hex')}`;
  const NOHLL = `tidemark_test_frollups_nohll_${randomBytes(6).toString('hex')}`;
  let up: pg.Pool | undefined;
  let nohll: pg.Pool | undefined;
  after(async () => {
    await dropDb(up, UP);
    await dropDb(nohll, NOHLL);
  });

  it('an upgraded database logs every hour with sessions, so answers stay exact until the refresh', async () => {
    up = await createDb(UP);
    const files = readdirSync(SQL_DIR).filter((x) => x.endsWith('.sql')).sort();
    const upTo = files.indexOf('010_rollup_visitor_values.sql');
    assert.ok(upTo > 0);
    await up.query(await functionsSql());
    for (const file of files.slice(0, upTo)) await up.query(readFileSync(new URL(file, SQL_DIR), 'utf8'));
    await up.query(await functionsSql());
    await up.query(`INSERT INTO projects (id, name, timezone) VALUES ('u', 'u', 'UTC')`);
    await up.query(
      `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, country)
       SELECT gen_random_uuid(), 'u', 'd' || g, 'v' || (g % 40), t, t, (ARRAY['DE', 'US', ''])[1 + g % 3]
       FROM generate_series(1, 300) g, LATERAL (SELECT '2026-10-01T00:00:00Z'::timestamptz + g * interval '7 minutes' AS t) x`,
    );
    await up.query(`INSERT INTO rollup_invalidations (project_id, bucket) SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions`);
    while ((await refreshRollups(up, false, { before: NOW })).buckets > 0);
    for (const file of files.slice(upTo)) await up.query(readFileSync(new URL(file, SQL_DIR), 'utf8'));
    await up.query(await functionsSql());
    const { rows } = await up.query(
      `SELECT (SELECT count(DISTINCT bucket) FROM rollup_invalidations WHERE project_id = 'u')::int AS logged,
              (SELECT count(DISTINCT date_trunc('hour', started_at, 'UTC')) FROM sessions)::int AS hours,
              (SELECT count(*) FROM rollup_visitor_values_hourly)::int AS sketches`,
    );
    assert.equal(rows[0].logged, rows[0].hours);
    assert.equal(rows[0].sketches, 0);
    const q = parsePeriodParams(query({ startDate: '2026-10-01', endDate: '2026-10-02', filters: [f('country', 'isNot', 'US')] }));
    const raw = await getMetrics(up, 'u', q, NOW, RAW);
    assert.ok(raw.metrics.unique_visitors > 10);
    assert.deepEqual(await getMetrics(up, 'u', q, NOW, SKETCHES), raw);
    while ((await refreshRollups(up, false, { before: NOW })).buckets > 0);
    assert.ok((await up.query('SELECT count(*)::int AS n FROM rollup_visitor_values_hourly')).rows[0].n > 0);
    assert.deepEqual(await getMetrics(up, 'u', q, NOW, SKETCHES), raw);
  });

  it('without the hll extension 010 and 018 create and register nothing; filtered metrics stay exact', async () => {
    nohll = await createDb(NOHLL);
    await migrate(nohll, (file, sql) => {
      if (file !== '008_rollup_visitors.sql') return sql;
      assert.match(sql, /pg_available_extensions WHERE name = 'hll'/);
      return sql.replace(/name = 'hll'/g, "name = 'hll_not_on_this_server'");
    });
    const { rows } = await nohll.query(
      `SELECT to_regclass('rollup_visitor_values_hourly') IS NULL AS no_table,
              NOT EXISTS (SELECT 1 FROM rollup_registry WHERE relation = 'rollup_visitor_values_hourly') AS unregistered,
              NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'hll') AS no_extension`,
    );
    assert.deepEqual(rows[0], { no_table: true, unregistered: true, no_extension: true });
    const { rows: pairs } = await nohll.query(
      `SELECT to_regclass('rollup_session_pair_metrics_daily') IS NULL AS no_table,
              NOT EXISTS (SELECT 1 FROM rollup_registry WHERE relation LIKE 'rollup_session_pair_metrics%') AS unregistered`,
    );
    assert.deepEqual(pairs[0], { no_table: true, unregistered: true }, 'sql/018 too');
    await nohll.query(`INSERT INTO projects (id, name, timezone) VALUES ('n', 'n', 'UTC')`);
    await nohll.query(
      `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, country)
       SELECT gen_random_uuid(), 'n', 'd' || g, 'v' || (g % 500), t, t, (ARRAY['DE', 'US', ''])[1 + g % 3]
       FROM generate_series(1, 3000) g, LATERAL (SELECT '2026-10-01T00:00:00Z'::timestamptz + g * interval '1 minute' AS t) x`,
    );
    await nohll.query(`INSERT INTO rollup_invalidations (project_id, bucket) SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions`);
    while ((await refreshRollups(nohll, false, { before: NOW })).buckets > 0);
    const q = parsePeriodParams(query({ startDate: '2026-10-01', endDate: '2026-10-03', filters: [f('country', 'isNot', 'US')] }));
    assert.equal(planFor(resolvePeriod(q, 'UTC', NOW), q.filters), 'rollup');
    const raw = await getMetrics(nohll, 'n', q, NOW, RAW);
    assert.ok(raw.metrics.unique_visitors > 300);
    assert.deepEqual(await getMetrics(nohll, 'n', q, NOW, SKETCHES), raw);
    // Two cube dimensions: the pair metrics do not exist, so the raw sessions.
    const two = parsePeriodParams(query({ startDate: '2026-10-01', endDate: '2026-10-03', filters: [f('country', 'isNot', 'US'), f('device', 'is', '')] }));
    const rawTwo = await getMetrics(nohll, 'n', two, NOW, RAW);
    assert.ok(rawTwo.metrics.total_sessions > 1000);
    assert.deepEqual(await getMetrics(nohll, 'n', two, NOW, SKETCHES), rawTwo);
    // hll installed later: tm_setup_pair_metrics() creates the pair metrics and logs the days.
    await nohll.query('CREATE EXTENSION hll');
    assert.equal((await nohll.query('SELECT tm_setup_pair_metrics() AS ok')).rows[0].ok, true);
    while ((await refreshRollups(nohll, false, { before: NOW })).buckets > 0);
    assert.ok((await nohll.query(`SELECT count(*)::int AS n FROM rollup_session_pair_metrics_days WHERE project_id = 'n'`)).rows[0].n >= 2);
    assert.deepEqual(await getMetrics(nohll, 'n', two, NOW, SKETCHES), rawTwo);
    assert.equal((await nohll.query('SELECT tm_setup_pair_metrics() AS ok')).rows[0].ok, true, 'idempotent');
  });
});
