// Filtered breakdowns on the rollup path against the raw reference path (`path: 'raw'`), on
// the dataset of test/support/insights-filtered-dataset.ts (a database of this file's own):
// prefixed breakdowns (the sessions without a value are one row), breakdowns filtered on other
// cube dimensions from the session cube (sql/012, its pairs sql/016), and breakdowns naming a
// wide dimension and a cube dimension from the daily dimension pairs (sql/019). The rest of
// the filtered rollup path: filtered-rollups.test.ts, filtered-rollups-metrics.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SessionDimension } from '../model/event';
import { parsePageParams, parsePeriodParams, type Filter } from '../query/params';
import { resolvePeriod } from '../query/period';
import { refreshRollups } from '../store/rollups';
import { CUBE_DIMENSIONS } from '../query/planner';
import { planFor } from './rollups';
import { getBreakdown, getMetrics } from './service';
import { allRows } from '../../test/support/sql-db';
import {
  AUTO, changeLogged, dataset, DB_NAME, dropDb, exec, f, HOUR, NOW, pool, query, RAW, REFRESHED_BEFORE, refreshedDataset, twoProjects, type Q,
} from '../../test/support/insights-filtered-dataset';

after(() => dropDb(pool, DB_NAME));
// As in the one file these came from, after the tests of filtered-rollups.test.ts (see refreshedDataset).
before(refreshedDataset);

describe('prefixed breakdowns: the sessions without a value are one row', () => {
  before(dataset);
  for (const options of [RAW, AUTO]) {
    it(`city and browser_version (${options.path ?? 'auto'} path): one '' row, with the parent they share or ''`, async () => {
      const base = parsePageParams(query({ range: '30d' }));
      const { rows } = await exec(
        `SELECT count(*) FILTER (WHERE city = '')::int AS no_city, count(DISTINCT country) FILTER (WHERE city = '')::int AS parents,
                count(*) FILTER (WHERE city = '' AND country = 'DE')::int AS de_no_city,
                count(*) FILTER (WHERE browser_version = '')::int AS no_version
         FROM sessions WHERE project_id = 'f_utc' AND NOT is_bot AND started_at >= $1 AND started_at < $2`,
        [resolvePeriod(base, 'UTC', NOW).start.toISOString(), resolvePeriod(base, 'UTC', NOW).end.toISOString()],
      );
      const r = rows[0]!;
      assert.ok(r.parents >= 2 && r.de_no_city > 0 && r.no_version > 0, JSON.stringify(r)); // '' cities under DE and under ''
      const cities = await allRows((p) => getBreakdown(pool, 'f_utc', 'city', p, NOW, options), base, 50);
      assert.deepEqual(cities.filter((c) => c.name === '').map((c) => [c.prefix, c.sessions]), [['', r.no_city]]);
      // Filtered to DE: every '' city is in DE, so the row says so.
      const de = parsePageParams(query({ range: '30d', filters: [f('country', 'is', 'DE')] }));
      const deCities = await allRows((p) => getBreakdown(pool, 'f_utc', 'city', p, NOW, options), de, 50);
      assert.deepEqual(deCities.filter((c) => c.name === '').map((c) => [c.prefix, c.sessions]), [['DE', r.de_no_city]]);
      // browser_version '' only where the browser is '' too: one row, prefix ''.
      const versions = await allRows((p) => getBreakdown(pool, 'f_utc', 'browser_version', p, NOW, options), base, 50);
      assert.deepEqual(versions.filter((c) => c.name === '').map((c) => [c.prefix, c.sessions]), [['', r.no_version]]);
    });
  }
});

describe('the session cube (sql/012): breakdowns filtered on another dimension', () => {
  before(dataset);
  const day = (d: string, filters: Filter[], limit = 50) => parsePageParams(query({ startDate: d, endDate: d, filters, limit }));
  const mobile = [f('device', 'is', 'mobile')];

  it('has daily rows for whole local days (a 25-hour DST day among them) and none for Kolkata', async () => {
    const { rows } = await exec(
      `SELECT (SELECT hours FROM rollup_session_cube_days WHERE project_id = 'f_ber' AND bucket = '2026-10-24T22:00:00Z') AS ber_dst,
              (SELECT hours FROM rollup_session_cube_days WHERE project_id = 'f_ny' AND bucket = '2026-10-25T04:00:00Z') AS ny,
              (SELECT count(*) FROM rollup_session_cube_days WHERE project_id = 'f_kol')::int AS kolkata,
              (SELECT count(*) FROM rollup_session_cube_days WHERE project_id = 'f_utc' AND bucket = '2026-10-20T00:00:00Z')::int AS utc_even,
              (SELECT count(*) FROM rollup_session_cube_daily WHERE project_id = 'f_utc')::int AS daily_rows`,
    );
    assert.deepEqual(rows[0], { ber_dst: 25, ny: 24, kolkata: 0, utc_even: 1, daily_rows: rows[0].daily_rows });
    assert.ok(rows[0].daily_rows > 100);
  });

  it('keeps per listed day, for each of the 36 pairs of dimensions, the sums of the day\'s combination rows (sql/016)', async () => {
    const dims = CUBE_DIMENSIONS;
    const pairs = dims.flatMap((a, i) => dims.slice(i + 1).map((b) => [a, b] as const));
    assert.equal(pairs.length, 36);
    const diff = async () => (await exec(
      `WITH want AS (
         ${pairs.map(([a, b]) => `SELECT d.project_id, '${a},${b}' AS pair, d.bucket, d.${a} AS a, d.${b} AS b,
            sum(d.sessions) AS sessions, sum(d.bounces) AS bounces, sum(d.timed_sessions) AS timed_sessions, sum(d.duration_ms) AS duration_ms,
            sum(d.screen_views) AS screen_views
            FROM rollup_session_cube_daily d GROUP BY 1, 2, 3, 4, 5`).join(' UNION ALL ')}
       ), got AS (
         SELECT project_id, pair, bucket, a, b, sessions::numeric, bounces::numeric, timed_sessions::numeric, duration_ms, screen_views::numeric FROM rollup_session_cube_pairs_daily
       )
       SELECT (SELECT count(*) FROM ((SELECT * FROM want EXCEPT ALL SELECT * FROM got) UNION ALL (SELECT * FROM got EXCEPT ALL SELECT * FROM want)) x)::int AS n,
              (SELECT count(*) FROM got)::int AS rows,
              (SELECT count(*) FROM (SELECT DISTINCT d.project_id, d.bucket FROM rollup_session_cube_daily d
                                     EXCEPT SELECT project_id, bucket FROM rollup_session_cube_days) x)::int AS unlisted`,
    )).rows[0];
    const built = await diff();
    assert.deepEqual({ ...built, rows: built.rows > 1000 }, { n: 0, rows: true, unlisted: 0 });
    // The migration's fill of days built before it: the same rows.
    await exec('DELETE FROM rollup_session_cube_pairs_daily');
    await exec('SELECT tm_session_cube_pairs(d.project_id, d.bucket) FROM rollup_session_cube_days d');
    assert.deepEqual(await diff(), built);
  });

  it('reads the daily rows of a whole day and the hourly rows of the others (a stale row shows)', async () => {
    // A row the service never wrote, for an hour (or day) it reads: it shows in the answer.
    const fake = (table: string, bucket: string) => table === 'rollup_session_cube_pairs_daily'
      ? `INSERT INTO ${table} (project_id, pair, bucket, a, b, sessions, bounces, timed_sessions, duration_ms)
         VALUES ('f_utc', 'referrer_name,device', '${bucket}', 'Stale', 'mobile', 1000, 0, 0, 0)`
      : `INSERT INTO ${table} (project_id, bucket, referrer_name, referrer_type, utm_source, utm_medium, country, device, browser, os, brand,
         sessions, bounces, timed_sessions, duration_ms)
       VALUES ('f_utc', '${bucket}', 'Stale', '', '', '', '', 'mobile', '', '', '', 1000, 0, 0, 0)`;
    const remove = (table: string) => table === 'rollup_session_cube_pairs_daily'
      ? `DELETE FROM ${table} WHERE project_id = 'f_utc' AND a = 'Stale'`
      : `DELETE FROM ${table} WHERE project_id = 'f_utc' AND referrer_name = 'Stale'`;
    // Two dimensions (referrer_name, device): a whole day reads the pair rows (sql/016); three
    // (with os): the combination rows.
    const threeDims = [...mobile, f('os', 'isNot', 'none')];
    // 10-20 is whole (no logged hour); 10-21 has a logged hour, so it reads hourly rows and raw
    // sessions. (Earlier tests refreshed every logged hour: log one hour of 10-21 again, as a worker would.)
    await exec(`INSERT INTO rollup_invalidations (project_id, bucket) VALUES ('f_utc', '2026-10-21T05:00Z') ON CONFLICT DO NOTHING`);
    const cases = [
      ['2026-10-20', 'rollup_session_cube_pairs_daily', '2026-10-20T00:00Z', mobile, true],
      ['2026-10-20', 'rollup_session_cube_daily', '2026-10-20T00:00Z', mobile, false], // two dimensions: the pair rows, not the combinations
      ['2026-10-20', 'rollup_session_cube_daily', '2026-10-20T00:00Z', threeDims, true],
      ['2026-10-20', 'rollup_session_cube_pairs_daily', '2026-10-20T00:00Z', threeDims, false],
      ['2026-10-20', 'rollup_session_cube_hourly', '2026-10-20T07:00Z', mobile, false], // the day's rows are read, not its hours'
      ['2026-10-21', 'rollup_session_cube_hourly', '2026-10-21T07:00Z', mobile, true],
      ['2026-10-21', 'rollup_session_cube_hourly', '2026-10-21T05:00Z', mobile, false], // a logged hour reads raw sessions
      ['2026-10-21', 'rollup_session_cube_daily', '2026-10-21T00:00Z', threeDims, false], // a day with a logged hour is not read
      ['2026-10-21', 'rollup_session_cube_pairs_daily', '2026-10-21T00:00Z', mobile, false],
    ] as const;
    for (const [d, table, bucket, filters, shows] of cases) {
      const page = day(d, [...filters]);
      const raw = await getBreakdown(pool, 'f_utc', 'referrer_name', page, NOW, RAW);
      assert.deepEqual(await getBreakdown(pool, 'f_utc', 'referrer_name', page, NOW, AUTO), raw, d);
      await exec(fake(table, bucket));
      try {
        const auto = await getBreakdown(pool, 'f_utc', 'referrer_name', page, NOW, AUTO);
        assert.equal(auto.find((r) => r.name === 'Stale')?.sessions, shows ? 1000 : undefined, `${table} ${bucket} ${filters.length} filters`);
      } finally {
        await exec(remove(table));
      }
    }
  });

  it('a change in a whole day, logged as the worker does, shows at once; the refresh rebuilds the day', async () => {
    const page = day('2026-10-22', [f('country', 'is', 'DE'), f('device', 'isNot', 'desktop')]);
    const ask = async () => {
      const raw = await getBreakdown(pool, 'f_utc', 'browser', page, NOW, RAW);
      assert.deepEqual(await getBreakdown(pool, 'f_utc', 'browser', page, NOW, AUTO), raw);
      return raw;
    };
    const days = async () => (await exec(`SELECT count(*)::int AS n FROM rollup_session_cube_days WHERE project_id = 'f_utc' AND bucket = '2026-10-22T00:00Z'`)).rows[0].n;
    assert.equal(await days(), 1);
    const before = await ask();
    const { rows } = await exec(
      `SELECT id, started_at, country, device, browser FROM sessions WHERE project_id = 'f_utc' AND NOT is_bot AND country = 'US'
         AND started_at >= '2026-10-22T00:00Z' AND started_at < '2026-10-23T00:00Z' ORDER BY started_at LIMIT 1`,
    );
    const target = rows[0] as { id: string; started_at: Date; country: string; device: string; browser: string };
    const hour = new Date(Math.floor(target.started_at.getTime() / HOUR) * HOUR).toISOString();
    const change = (country: string, device: string, browser: string) => changeLogged(target.id, hour, { country, device, browser });
    await change('DE', 'tablet', 'Cube Browser');
    try {
      const changed = await ask();
      assert.equal(changed.find((r) => r.name === 'Cube Browser')?.sessions, 1);
      assert.equal(changed.reduce((n, r) => n + r.sessions, 0), before.reduce((n, r) => n + r.sessions, 0) + 1);
      while ((await refreshRollups(pool, false, { before: REFRESHED_BEFORE })).buckets > 0);
      assert.equal(await days(), 1, 'the refresh of the day\'s last logged hour rebuilt it');
      assert.deepEqual(await ask(), changed);
    } finally {
      await change(target.country, target.device, target.browser);
      while ((await refreshRollups(pool, false, { before: REFRESHED_BEFORE })).buckets > 0);
    }
    assert.deepEqual(await ask(), before);
  });
});

describe('breakdowns naming a wide dimension and a cube dimension: the daily dimension pairs (sql/019)', () => {
  before(dataset);
  const CASES: Array<[SessionDimension, Filter[]]> = [
    ['city', [f('device', 'is', 'mobile')]],
    ['city', [f('device', 'isNot', 'mobile'), f('device', 'isNot', '')]],
    ['city', [f('country', 'is', 'US'), f('browser', 'regex', '^(Chrome|Edge)$')]],
    ['region', [f('referrer_name', 'contains', '%')]],
    ['browser_version', [f('os', 'doesNotContain', 'i')]],
    ['os_version', [f('os', 'is', 'Android'), f('device', 'is', 'mobile')]],
    ['referrer', [f('referrer_type', 'isNot', 'search')]],
    ['device', [f('city', 'is', 'Paris')]],
    ['country', [f('city', 'contains', 'Ber')]],
    ['browser', [f('browser_version', 'startsWith', '1')]],
    ['utm_source', [f('city', 'is', '')]],
    ['country', [f('city', 'is', 'Paris'), f('device', 'is', 'mobile')]],
  ];
  const PERIODS: Array<[string, Q]> = [
    ['30d', { range: '30d' }],
    ['today (no whole day)', { range: 'today' }],
    ['a DST day (Berlin 10-25, New York 11-01: 25 h)', { startDate: '2026-10-25', endDate: '2026-11-01' }],
    ['two weeks of whole days', { startDate: '2026-10-18', endDate: '2026-10-31' }],
  ];

  it('builds the same days as the session cube, each with the sums of its raw sessions per pair and values', async () => {
    const { rows: days } = await exec(
      `SELECT (SELECT count(*) FROM ((SELECT project_id, bucket, hours FROM rollup_session_dim_pairs_days
                                      EXCEPT SELECT project_id, bucket, hours FROM rollup_session_cube_days)
                                     UNION ALL (SELECT project_id, bucket, hours FROM rollup_session_cube_days
                                      EXCEPT SELECT project_id, bucket, hours FROM rollup_session_dim_pairs_days)) x)::int AS differ,
              (SELECT count(*) FROM rollup_session_dim_pairs_days)::int AS n,
              (SELECT count(*) FROM rollup_session_dim_pairs_days WHERE project_id = 'f_kol')::int AS kolkata,
              (SELECT count(DISTINCT pair) FROM rollup_session_dim_pairs_daily)::int AS pairs`,
    );
    assert.deepEqual({ ...days[0], n: days[0].n > 20 }, { differ: 0, n: true, kolkata: 0, pairs: 81 });
    // Pairs recomputed from the raw sessions of each listed day.
    for (const [a, parent, b] of [['city', 'country', 'device'], ['referrer', null, 'referrer_name'], ['os_version', 'os', 'browser'], ['region', 'country', 'referrer_type']] as const) {
      const { rows } = await exec(
        `WITH want AS (
           SELECT d.project_id, d.bucket, s.${a} AS a, ${parent ? `s.${parent}` : `''`} AS a_prefix, s.${b} AS b,
                  count(*) AS sessions, count(*) FILTER (WHERE s.is_bounce) AS bounces,
                  count(*) FILTER (WHERE s.duration_ms > 0) AS timed, coalesce(sum(s.duration_ms) FILTER (WHERE s.duration_ms > 0), 0) AS duration_ms,
                  coalesce(sum(s.screen_view_count), 0) AS screen_views
           FROM rollup_session_dim_pairs_days d
           JOIN sessions s ON s.project_id = d.project_id AND s.started_at >= d.bucket AND s.started_at < d.bucket + d.hours * interval '1 hour' AND NOT s.is_bot
           GROUP BY 1, 2, 3, 4, 5
         ), got AS (
           SELECT project_id, bucket, a, a_prefix, b, sessions, bounces, timed_sessions, duration_ms, screen_views
           FROM rollup_session_dim_pairs_daily WHERE pair = $1
         )
         SELECT (SELECT count(*) FROM ((SELECT * FROM want EXCEPT ALL SELECT * FROM got) UNION ALL (SELECT * FROM got EXCEPT ALL SELECT * FROM want)) x)::int AS differ,
                (SELECT count(*) FROM got)::int AS n`,
        [`${a},${b}`],
      );
      assert.equal(rows[0].differ, 0, `${a},${b}`);
      assert.ok(rows[0].n > 50, `${a},${b} has rows`);
    }
  });

  // Each period on two projects (8 tests, was 16): offset 3 puts the DST days on Berlin and New
  // York; every project meets two periods.
  assert.deepEqual(twoProjects(PERIODS.findIndex(([l]) => l.startsWith('a DST day')), 3).map((p) => p.timezone), ['Europe/Berlin', 'America/New_York']);
  for (const [j, [label, q]] of PERIODS.entries()) {
    for (const p of twoProjects(j, 3)) {
      it(`${p.id} (${p.timezone}) ${label}: auto = raw, every page`, async () => {
        for (const [dim, filters] of CASES) {
          const params = parsePeriodParams(query({ ...q, filters }));
          const period = resolvePeriod(params, p.timezone, NOW);
          assert.equal(planFor(period, filters, 'auto', dim), p.timezone === 'Asia/Kolkata' ? 'raw' : 'rollup', `${dim} plan`);
          const base = parsePageParams(query({ ...q, filters }));
          const expected = await allRows((x) => getBreakdown(pool, p.id, dim, x, NOW, RAW), base, 50);
          assert.deepEqual(await allRows((x) => getBreakdown(pool, p.id, dim, x, NOW, AUTO), base, 50), expected, `${dim} ${JSON.stringify(filters)}`);
          assert.deepEqual(await allRows((x) => getBreakdown(pool, p.id, dim, x, NOW, AUTO), base, 2), expected, `${dim} by 2s ${JSON.stringify(filters)}`);
          const total = (await getMetrics(pool, p.id, params, NOW, RAW)).metrics.total_sessions;
          assert.equal(expected.reduce((n, r) => n + r.sessions, 0), total, `${dim} sums to the total`);
          if (label === '30d' && dim === 'city' && filters[0]!.operator === 'is') assert.ok(total > 0);
        }
      });
    }
  }

  it('reads a whole day\'s pair rows (a stale row shows), and raw sessions for the rest', async () => {
    const page = (d0: string, d1: string, filters: Filter[]) => parsePageParams(query({ startDate: d0, endDate: d1, filters, limit: 50 }));
    const mobile = [f('device', 'is', 'mobile')];
    // 10-20 is whole; 10-21 has a logged hour (05:00, logged again as a worker would).
    await exec(`INSERT INTO rollup_invalidations (project_id, bucket) VALUES ('f_utc', '2026-10-21T05:00Z') ON CONFLICT DO NOTHING`);
    const cases: Array<[string, SessionDimension, Filter[], string, string, boolean]> = [
      ['a whole day', 'city', mobile, 'city,device', '2026-10-20T00:00Z', true],
      ['a whole day, the breakdown on the cube side', 'device', [f('city', 'is', 'Stale')], 'city,device', '2026-10-20T00:00Z', true],
      ['a day with a logged hour', 'city', mobile, 'city,device', '2026-10-21T00:00Z', false],
      ['another pair', 'city', mobile, 'city,os', '2026-10-20T00:00Z', false],
    ];
    for (const [label, dim, filters, pair, bucket, shows] of cases) {
      const q = page('2026-10-19', '2026-10-21', filters);
      const raw = await getBreakdown(pool, 'f_utc', dim, q, NOW, RAW);
      assert.deepEqual(await getBreakdown(pool, 'f_utc', dim, q, NOW, AUTO), raw, label);
      await exec(
        `INSERT INTO rollup_session_dim_pairs_daily (project_id, pair, bucket, a, a_prefix, b, sessions, bounces, timed_sessions, duration_ms)
         VALUES ('f_utc', $1, $2, 'Stale', 'XX', 'mobile', 1000, 0, 0, 0)`,
        [pair, bucket],
      );
      try {
        const auto = await getBreakdown(pool, 'f_utc', dim, q, NOW, AUTO);
        const row = dim === 'city' ? auto.find((r) => r.name === 'Stale') : auto.find((r) => r.name === 'mobile');
        const before = dim === 'city' ? 0 : raw.find((r) => r.name === 'mobile')?.sessions ?? 0;
        assert.equal((row?.sessions ?? 0) - before, shows ? 1000 : 0, label);
        if (shows && dim === 'city') assert.equal(row?.prefix, 'XX', 'the prefix is the row\'s a_prefix');
      } finally {
        await exec(`DELETE FROM rollup_session_dim_pairs_daily WHERE project_id = 'f_utc' AND a = 'Stale'`);
      }
    }
  });

  it('a change in a whole day, logged as the worker does, shows at once; the refresh rebuilds the day', async () => {
    const q = parsePageParams(query({ startDate: '2026-10-22', endDate: '2026-10-22', filters: [f('device', 'isNot', 'desktop')], limit: 50 }));
    const ask = async () => {
      const raw = await getBreakdown(pool, 'f_utc', 'city', q, NOW, RAW);
      assert.deepEqual(await getBreakdown(pool, 'f_utc', 'city', q, NOW, AUTO), raw);
      return raw;
    };
    const listed = async () => (await exec(`SELECT count(*)::int AS n FROM rollup_session_dim_pairs_days WHERE project_id = 'f_utc' AND bucket = '2026-10-22T00:00Z'`)).rows[0].n;
    assert.equal(await listed(), 1);
    const before = await ask();
    const { rows } = await exec(
      `SELECT id, started_at, city, device FROM sessions WHERE project_id = 'f_utc' AND NOT is_bot AND device = 'desktop'
         AND started_at >= '2026-10-22T00:00Z' AND started_at < '2026-10-23T00:00Z' ORDER BY started_at LIMIT 1`,
    );
    const target = rows[0] as { id: string; started_at: Date; city: string; device: string };
    const hour = new Date(Math.floor(target.started_at.getTime() / HOUR) * HOUR).toISOString();
    const change = (city: string, device: string) => changeLogged(target.id, hour, { city, device });
    await change('Pair City', 'tablet');
    try {
      const changed = await ask();
      assert.equal(changed.find((r) => r.name === 'Pair City')?.sessions, 1);
      while ((await refreshRollups(pool, false, { before: REFRESHED_BEFORE })).buckets > 0);
      assert.equal(await listed(), 1, 'the refresh of the day\'s last logged hour rebuilt it');
      assert.deepEqual(await ask(), changed);
    } finally {
      await change(target.city, target.device);
      while ((await refreshRollups(pool, false, { before: REFRESHED_BEFORE })).buckets > 0);
    }
    assert.deepEqual(await ask(), before);
  });
});
