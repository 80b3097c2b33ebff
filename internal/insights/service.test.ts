// Integration tests of the insights service against a real PostgreSQL: a fresh database
// per run, the migrations of sql/, a seeded generated dataset inserted directly, and the
// expected numbers computed in TypeScript from the generated rows (never by SQL): the dataset
// and that reference are test/support/insights-service-dataset.ts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { BadRequestError, NotFoundError } from '../http/errors';
import { SESSION_DIMENSIONS } from '../model/event';
import { withTimeout } from '../query/db';
import { QueryTimeoutError } from '../query/errors';
import { parsePageParams, parsePeriodParams, type Filter } from '../query/params';
import { refreshRollups } from '../store/rollups';
import { allRows, dropSqlDb, functionsSql, searchParams } from '../../test/support/sql-db';
import {
  expectedBreakdown, expectedMetrics, expectedPages, generate, insertDataset, type GenSession, type Scenario,
} from '../../test/support/insights-service-dataset';
import { getBreakdown, getMetrics, getPages, type MetricsResponse, type PageRow } from './service';

const SERVER_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const DB_NAME = `tidemark_test_insights_${randomBytes(6).toString('hex')}`;
const SQL_DIR = new URL('../../sql/', import.meta.url);

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// ---------------------------------------------------------------------------------------
// Database

let pool: pg.Pool;
const data = new Map<string, GenSession[]>();
const PROJECTS = [
  { id: 'p_utc', timezone: 'UTC' },
  { id: 'p_ny', timezone: 'America/New_York' },
  { id: 'p_kol', timezone: 'Asia/Kolkata' },
  { id: 'p_ber', timezone: 'Europe/Berlin' },
  { id: 'p_empty', timezone: 'Pacific/Auckland' },
];

before(async () => {
  const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${DB_NAME}`);
  await admin.end();
  pool = new pg.Pool({ connectionString: `${SERVER_URL}/${DB_NAME}`, max: 8 });
  const client = await pool.connect();
  try {
    await client.query(await functionsSql());
    for (const file of readdirSync(SQL_DIR).filter((f) => f.endsWith('.sql')).sort()) {
      await client.query(readFileSync(new URL(file, SQL_DIR), 'utf8'));
    }
    await client.query(await functionsSql());
    const { rows } = await client.query<{ partitioned: boolean }>(
      "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'events'::regclass) AS partitioned",
    );
    if (rows[0]?.partitioned) await client.query('CREATE TABLE events_test PARTITION OF events DEFAULT');
    for (const p of PROJECTS) {
      await client.query('INSERT INTO projects (id, name, timezone) VALUES ($1, $1, $2)', [p.id, p.timezone]);
      if (p.id === 'p_empty') continue;
      const sessions = generate(20260310);
      data.set(p.id, sessions);
      await insertDataset(client, p.id, sessions);
    }
    // As the worker does: every hour with sessions is logged for the rollup refresh. The
    // hours before 2026-03-10 12:00Z are then rolled up, the later ones stay in the log, so
    // unfiltered queries read rollups and the raw tail together (rollups.ts). Not p_kol's:
    // Asia/Kolkata buckets are never whole UTC hours, so its reads are raw and its rollups
    // would be a quarter of the refresh for nothing (unrefreshed, a rollup read would show).
    await client.query(
      `INSERT INTO rollup_invalidations (project_id, bucket)
       SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions WHERE project_id <> 'p_kol'`,
    );
    while ((await refreshRollups(pool, false, { before: new Date('2026-03-10T12:00:00Z') })).buckets > 0);
    await client.query('ANALYZE');
  } finally {
    client.release();
  }
});

after(() => dropSqlDb(pool, DB_NAME));

// ---------------------------------------------------------------------------------------
// Helpers

const query = searchParams;

const NOW = new Date('2026-03-12T10:00:00Z');

interface Check {
  project: string;
  q: Record<string, string | number | Filter[]>;
  start: string;
  end: string;
  buckets: string[];
  now?: Date;
}

/** Metrics + series, pages, and all 18 breakdowns (summing to total_sessions) vs expected. */
async function checkEverything(c: Check): Promise<MetricsResponse> {
  const now = c.now ?? NOW;
  const params = parsePageParams(query(c.q));
  const sc: Scenario = { sessions: data.get(c.project)!, start: Date.parse(c.start), end: Date.parse(c.end), filters: params.filters };
  const metrics = await getMetrics(pool, c.project, parsePeriodParams(query(c.q)), now);
  assert.deepEqual(metrics, expectedMetrics(sc, c.buckets), 'metrics');
  const pages = await allRows((p) => getPages(pool, c.project, p, now), params, 50);
  assert.deepEqual(pages, expectedPages(sc), 'pages');
  await Promise.all(
    SESSION_DIMENSIONS.map(async (dim) => {
      const rows = await allRows((p) => getBreakdown(pool, c.project, dim, p, now), params, 50);
      assert.deepEqual(rows, expectedBreakdown(sc, dim), `breakdown ${dim}`);
      assert.equal(rows.reduce((sum, r) => sum + r.sessions, 0), metrics.metrics.total_sessions, `${dim} sums to total`);
    }),
  );
  return metrics;
}

const everyHour = (from: string, count: number) => Array.from({ length: count }, (_, i) => new Date(Date.parse(from) + i * HOUR).toISOString());
const everyDay = (from: string, count: number) => Array.from({ length: count }, (_, i) => new Date(Date.parse(from) + i * DAY).toISOString());

// ---------------------------------------------------------------------------------------
// Tests

describe('insights service (PostgreSQL)', () => {
  it('the dataset has what the tests rely on', () => {
    const sessions = data.get('p_utc')!;
    const inMain = sessions.filter((s) => s.startedAt < Date.parse('2026-03-16T00:00:00Z'));
    assert.ok(inMain.some((s) => s.isBot));
    assert.ok(inMain.some((s) => s.durationMs === 0 && !s.isBot));
    assert.ok(inMain.some((s) => s.lastEventAt > s.startedAt + HOUR));
    assert.ok(inMain.some((s) => s.events.some((e) => e.profileId.startsWith('member-'))));
    assert.ok(inMain.some((s) => s.events.some((e) => e.path === '/promo/50%_off')));
    assert.ok(inMain.some((s) => s.screenViewCount === 0));
  });

  it('UTC, three explicit days: day buckets', async () => {
    const m = await checkEverything({
      project: 'p_utc',
      q: { startDate: '2026-03-09', endDate: '2026-03-11' },
      start: '2026-03-09T00:00:00Z',
      end: '2026-03-12T00:00:00Z',
      buckets: everyDay('2026-03-09T00:00:00.000Z', 3),
    });
    assert.ok(m.metrics.total_sessions > 50);
    assert.ok(m.metrics.unique_visitors < m.metrics.total_sessions);
    assert.ok(m.metrics.bounce_rate > 0 && m.metrics.bounce_rate < 100);
  });

  it('UTC, range 7d with a fixed now', async () => {
    await checkEverything({
      project: 'p_utc',
      q: { range: '7d' },
      start: '2026-03-06T00:00:00Z',
      end: '2026-03-13T00:00:00Z',
      buckets: everyDay('2026-03-06T00:00:00.000Z', 7),
    });
  });

  it('UTC, range today: 24 hourly buckets', async () => {
    await checkEverything({
      project: 'p_utc',
      q: { range: 'today' },
      start: '2026-03-10T00:00:00Z',
      end: '2026-03-11T00:00:00Z',
      buckets: everyHour('2026-03-10T00:00:00.000Z', 24),
      now: new Date('2026-03-10T18:00:00Z'),
    });
  });

  it('New York (UTC-5/-4): days across the spring-forward of 2026-03-08', async () => {
    await checkEverything({
      project: 'p_ny',
      q: { startDate: '2026-03-07', endDate: '2026-03-09' },
      start: '2026-03-07T05:00:00Z',
      end: '2026-03-10T04:00:00Z',
      buckets: ['2026-03-07T05:00:00.000Z', '2026-03-08T05:00:00.000Z', '2026-03-09T04:00:00.000Z'],
    });
  });

  it('New York: 2026-03-08 has 23 hourly buckets', async () => {
    const m = await checkEverything({
      project: 'p_ny',
      q: { startDate: '2026-03-08', endDate: '2026-03-08' },
      start: '2026-03-08T05:00:00Z',
      end: '2026-03-09T04:00:00Z',
      buckets: everyHour('2026-03-08T05:00:00.000Z', 23),
    });
    assert.equal(m.series.length, 23);
  });

  it('Kolkata (UTC+05:30): day and hour buckets at :30', async () => {
    await checkEverything({
      project: 'p_kol',
      q: { startDate: '2026-03-09', endDate: '2026-03-11' },
      start: '2026-03-08T18:30:00Z',
      end: '2026-03-11T18:30:00Z',
      buckets: everyDay('2026-03-08T18:30:00.000Z', 3),
    });
    await checkEverything({
      project: 'p_kol',
      q: { startDate: '2026-03-10', endDate: '2026-03-10' },
      start: '2026-03-09T18:30:00Z',
      end: '2026-03-10T18:30:00Z',
      buckets: everyHour('2026-03-09T18:30:00.000Z', 24),
    });
  });

  it('Berlin 2026-03-29 (23 h) and 2026-10-25 (25 h)', async () => {
    const spring = await checkEverything({
      project: 'p_ber',
      q: { startDate: '2026-03-29', endDate: '2026-03-29' },
      start: '2026-03-28T23:00:00Z',
      end: '2026-03-29T22:00:00Z',
      buckets: everyHour('2026-03-28T23:00:00.000Z', 23),
    });
    assert.equal(spring.series.length, 23);
    assert.ok(spring.metrics.total_sessions > 0);
    const autumn = await checkEverything({
      project: 'p_ber',
      q: { startDate: '2026-10-25', endDate: '2026-10-25' },
      start: '2026-10-24T22:00:00Z',
      end: '2026-10-25T23:00:00Z',
      buckets: everyHour('2026-10-24T22:00:00.000Z', 25),
    });
    assert.equal(autumn.series.length, 25);
    assert.ok(autumn.metrics.total_sessions > 0);
  });

  it('bots, session_start/session_end and other projects do not count', async () => {
    const params = parsePeriodParams(query({ startDate: '2026-03-01', endDate: '2026-03-31' }));
    const m = await getMetrics(pool, 'p_utc', params, NOW);
    const sessions = data.get('p_utc')!.filter((s) => s.startedAt < Date.parse('2026-04-01T00:00:00Z'));
    const humans = sessions.filter((s) => !s.isBot);
    assert.equal(m.metrics.total_sessions, humans.length);
    assert.equal(m.metrics.total_screen_views, humans.reduce((n, s) => n + s.events.filter((e) => e.name === 'screen_view').length, 0));
    const pages = await getPages(pool, 'p_utc', { ...params, cursor: 1, limit: 50 }, NOW);
    assert.ok(pages.every((p) => p.title !== 'marker'));
    const ghost = await getMetrics(pool, 'p_utc', parsePeriodParams(query({ startDate: '2026-03-01', endDate: '2026-03-31', filters: [{ name: 'properties.plan', operator: 'is', value: ['ghost'] }] })), NOW);
    assert.equal(ghost.metrics.total_sessions, 0);
    const reserved = await getMetrics(pool, 'p_utc', parsePeriodParams(query({ startDate: '2026-03-01', endDate: '2026-03-31', filters: [{ name: 'name', operator: 'is', value: ['session_start', 'session_end'] }] })), NOW);
    assert.equal(reserved.metrics.total_sessions, 0);
  });

  it('an empty project: zeros and every bucket', async () => {
    const m = await getMetrics(pool, 'p_empty', parsePeriodParams(query({ range: '7d' })), NOW);
    const zero = { bounce_rate: 0, unique_visitors: 0, total_sessions: 0, avg_session_duration: 0, total_screen_views: 0, views_per_session: 0 };
    assert.deepEqual(m.metrics, zero);
    assert.equal(m.series.length, 7);
    // Auckland is UTC+13 on 2026-03-12 10:00Z = 23:00 local: 7d is 03-06 .. 03-12 local.
    assert.equal(m.series[0]?.date, '2026-03-05T11:00:00.000Z');
    for (const row of m.series) assert.deepEqual({ ...row, date: undefined }, { ...zero, date: undefined });
    assert.deepEqual(await getPages(pool, 'p_empty', parsePageParams(query({})), NOW), []);
    assert.deepEqual(await getBreakdown(pool, 'p_empty', 'country', parsePageParams(query({})), NOW), []);
  });

  it('an unknown project is a NotFoundError', async () => {
    await assert.rejects(getMetrics(pool, 'nope', parsePeriodParams(query({})), NOW), NotFoundError);
    await assert.rejects(getPages(pool, 'nope', parsePageParams(query({})), NOW), NotFoundError);
    await assert.rejects(getBreakdown(pool, 'nope', 'city', parsePageParams(query({})), NOW), NotFoundError);
  });

  it('pagination: pages of 3 add up, the last is partial, past the end is []', async () => {
    const base = parsePageParams(query({ startDate: '2026-03-05', endDate: '2026-03-15' }));
    const all = await getPages(pool, 'p_utc', { ...base, limit: 50 }, NOW);
    assert.ok(all.length > 6 && all.length % 3 !== 0, `need a partial last page, have ${all.length} rows`);
    const pages: PageRow[][] = [];
    for (let cursor = 1; cursor <= Math.ceil(all.length / 3); cursor++) pages.push(await getPages(pool, 'p_utc', { ...base, cursor, limit: 3 }, NOW));
    assert.deepEqual(pages.flat(), all);
    assert.equal(pages.at(-1)!.length, all.length % 3);
    assert.deepEqual(await getPages(pool, 'p_utc', { ...base, cursor: pages.length + 1, limit: 3 }, NOW), []);
    assert.deepEqual(await getPages(pool, 'p_utc', { ...base, cursor: 1_000_000, limit: 50 }, NOW), []);

    const cities = await getBreakdown(pool, 'p_utc', 'city', { ...base, limit: 50 }, NOW);
    const firstTwo = await getBreakdown(pool, 'p_utc', 'city', { ...base, cursor: 1, limit: 2 }, NOW);
    const next = await getBreakdown(pool, 'p_utc', 'city', { ...base, cursor: 2, limit: 2 }, NOW);
    assert.deepEqual([...firstTwo, ...next], cities.slice(0, 4));
    assert.equal(firstTwo.length, 2);
    assert.deepEqual(await getBreakdown(pool, 'p_utc', 'city', { ...base, cursor: 99, limit: 2 }, NOW), []);
    // default limit 10
    assert.equal((await getPages(pool, 'p_utc', base, NOW)).length, Math.min(10, all.length));
  });

  it('prefixed breakdowns keep same-named values apart (Paris, US vs Paris, FR; Chrome vs Edge 120)', async () => {
    const base = parsePageParams(query({ startDate: '2026-03-05', endDate: '2026-03-15', limit: 50 }));
    const cities = await getBreakdown(pool, 'p_utc', 'city', base, NOW);
    assert.deepEqual(cities.filter((c) => c.name === 'Paris').map((c) => c.prefix).sort(), ['FR', 'US']);
    const versions = await getBreakdown(pool, 'p_utc', 'browser_version', base, NOW);
    assert.deepEqual(versions.filter((c) => c.name === '120').map((c) => c.prefix).sort(), ['Chrome', 'Edge']);
    const countries = await getBreakdown(pool, 'p_utc', 'country', base, NOW);
    assert.ok(countries.every((c) => !('prefix' in c)));
    assert.ok(countries.some((c) => c.name === ''));
  });

  const FILTER_CASES: Array<[string, Filter[]]> = [
    ['column is (session-level)', [{ name: 'country', operator: 'is', value: ['DE', 'IN'] }]],
    ['column isNot (session-level, includes empty)', [{ name: 'country', operator: 'isNot', value: ['US'] }]],
    ['utm_source is: the session value, not later events', [{ name: 'utm_source', operator: 'is', value: ['google'] }]],
    ['utm_source isNot: the session value, not later events', [{ name: 'utm_source', operator: 'isNot', value: ['google'] }]],
    ['column contains (event-level)', [{ name: 'path', operator: 'contains', value: ['docs'] }]],
    ['column doesNotContain', [{ name: 'path', operator: 'doesNotContain', value: ['docs', 'pricing'] }]],
    ['column startsWith', [{ name: 'path', operator: 'startsWith', value: ['/docs/'] }]],
    ['column endsWith', [{ name: 'origin', operator: 'endsWith', value: ['docs.tidemark.dev'] }]],
    ['column regex', [{ name: 'path', operator: 'regex', value: ['^/(pricing|signup)$'] }]],
    ['session column regex', [{ name: 'referrer_name', operator: 'regex', value: ['^(Google|Twitter)$'] }]],
    ['case-sensitive is', [{ name: 'path', operator: 'is', value: ['/docs/api'] }]],
    ['LIKE wildcards are literal', [{ name: 'path', operator: 'contains', value: ['%_'] }]],
    ['name is', [{ name: 'name', operator: 'is', value: ['purchase'] }]],
    ['profile_id is (event-level)', [{ name: 'profile_id', operator: 'startsWith', value: ['member-'] }]],
    ['property is', [{ name: 'properties.plan', operator: 'is', value: ['pro'] }]],
    ['property isNot (missing is empty)', [{ name: 'properties.plan', operator: 'isNot', value: ['pro'] }]],
    ['property contains, case-sensitive', [{ name: 'properties.plan', operator: 'contains', value: ['Enter'] }]],
    ['property contains, wrong case', [{ name: 'properties.plan', operator: 'contains', value: ['ENTER'] }]],
    ['property doesNotContain', [{ name: 'properties.plan', operator: 'doesNotContain', value: ['e'] }]],
    ['property startsWith', [{ name: 'properties.plan', operator: 'startsWith', value: ['fr'] }]],
    ['property endsWith', [{ name: 'properties.plan', operator: 'endsWith', value: ['prise'] }]],
    ['property regex', [{ name: 'properties.plan', operator: 'regex', value: ['^(pro|free)$'] }]],
    ['numeric property as text', [{ name: 'properties.amount', operator: 'is', value: ['49'] }]],
    ['property is empty (missing)', [{ name: 'properties.button', operator: 'is', value: [''] }]],
    [
      'session + event filters, event filters on the same event',
      [
        { name: 'country', operator: 'is', value: ['US'] },
        { name: 'path', operator: 'startsWith', value: ['/docs'] },
        { name: 'properties.section', operator: 'is', value: ['marketing'] },
      ],
    ],
    [
      'two event filters together',
      [
        { name: 'name', operator: 'is', value: ['screen_view'] },
        { name: 'properties.section', operator: 'is', value: ['docs'] },
        { name: 'device', operator: 'isNot', value: ['mobile'] },
      ],
    ],
  ];

  for (const [label, filters] of FILTER_CASES) {
    it(`filter: ${label}`, async () => {
      await checkEverything({
        project: 'p_utc',
        q: { startDate: '2026-03-05', endDate: '2026-03-15', filters },
        start: '2026-03-05T00:00:00Z',
        end: '2026-03-16T00:00:00Z',
        buckets: everyDay('2026-03-05T00:00:00.000Z', 11),
      });
    });
  }

  it('each filter case selects some sessions (or none where expected)', async () => {
    const count = async (filters: Filter[]) =>
      (await getMetrics(pool, 'p_utc', parsePeriodParams(query({ startDate: '2026-03-05', endDate: '2026-03-15', filters })), NOW)).metrics.total_sessions;
    const all = await count([]);
    for (const [label, filters] of FILTER_CASES) {
      const n = await count(filters);
      if (label.includes('wrong case') || label.includes('same event')) assert.equal(n, 0, label);
      else assert.ok(n > 0 && n <= all, `${label}: ${n} of ${all}`);
    }
  });

  it('an invalid regex is a 400 naming the value', async () => {
    const params = parsePageParams(query({ filters: [{ name: 'path', operator: 'is', value: ['/'] }, { name: 'path', operator: 'regex', value: ['^ok$', '(unclosed'] }] }));
    for (const run of [
      () => getMetrics(pool, 'p_utc', params, NOW),
      () => getPages(pool, 'p_utc', params, NOW),
      () => getBreakdown(pool, 'p_utc', 'browser', params, NOW),
    ]) {
      await assert.rejects(run(), (err: unknown) => {
        assert.ok(err instanceof BadRequestError);
        assert.deepEqual(err.issues[0]?.path, ['filters', '1', 'value', '1']);
        return true;
      });
    }
  });

  it('a statement past the timeout is a QueryTimeoutError (503) and the pool stays usable', async () => {
    await assert.rejects(withTimeout(pool, 50, (db) => db.query('SELECT pg_sleep(2)')), (err: unknown) => {
      assert.ok(err instanceof QueryTimeoutError);
      assert.equal(err.status, 503);
      return true;
    });
    const m = await getMetrics(pool, 'p_utc', parsePeriodParams(query({ range: 'today' })), NOW, { statementTimeoutMs: 10_000 });
    assert.equal(typeof m.metrics.total_sessions, 'number');
  });

  it('the timeout is set per transaction only', async () => {
    const inside = await withTimeout(pool, 1234, async (db) => (await db.query<{ t: string }>("SELECT current_setting('statement_timeout') AS t")).rows[0]?.t);
    assert.equal(inside, '1234ms');
    const outside = await pool.query<{ t: string }>("SELECT current_setting('statement_timeout') AS t");
    assert.equal(outside.rows[0]?.t, '0');
  });
});
