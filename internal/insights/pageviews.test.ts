// `pageviews` on page and breakdown rows (semantics.md, "OpenPanel fidelity"), with numbers
// worked out by hand, on the raw path and on every rollup family the planner may read
// (sql/023_rollup_pageviews.sql): before the refresh (logged hours read raw), after it (the
// rollup rows), and on a database upgraded from 022 (its old rollup rows have no view count).
//
// The day 2026-10-20 (UTC), per project:
//   session A  Chrome/mobile/DE/Berlin, from Google: views /a, /a, /b (and a click)  -> 3 screen views
//   session B  Firefox/desktop/FR/Paris, direct:    views /a                        -> 1
//   session C  a bot, Chrome/mobile/DE/Berlin:      views /a, /b                    -> never counted
// so pages: /a sessions 2, pageviews 3; /b sessions 1, pageviews 1; browsers: Chrome 3, Firefox 1.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { parsePageParams, type Filter } from '../query/params';
import { resolvePeriod } from '../query/period';
import { refreshRollups } from '../store/rollups';
import { createSqlDb, dropSqlDb, migrationFiles, migrationSql, SERVER_URL } from '../../test/support/sql-db';
import { cubeFor, dimensionPairFor, planFor, rollupDimensionFor } from './rollups';
import { getBreakdown, getPages, type InsightsOptions } from './service';

const DB_NAME = `tidemark_test_pageviews_${randomBytes(6).toString('hex')}`;
const UP_NAME = `tidemark_test_pageviews_up_${randomBytes(6).toString('hex')}`;
const NOW = new Date('2026-11-03T09:30:00Z');
const RAW: InsightsOptions = { path: 'raw' };
const AUTO: InsightsOptions = {};
/** UTC: the day reads the daily rows; Berlin: its local day is not a UTC day, so pages read hourly rows. */
const PROJECTS = [{ id: 'pv_utc', timezone: 'UTC' }, { id: 'pv_ber', timezone: 'Europe/Berlin' }] as const;

let pool: pg.Pool;
let up: pg.Pool | undefined;

interface Visit { path: string; at: string; name?: string }
interface Session {
  id: string; device: string; browser: string; country: string; city: string; referrer_name: string;
  started: string; bot: boolean; visits: Visit[];
}

const SESSIONS: Session[] = [
  {
    id: '00000000-0000-7000-8000-00000000000a', device: 'mobile', browser: 'Chrome', country: 'DE', city: 'Berlin', referrer_name: 'Google',
    started: '2026-10-20T10:05:00Z', bot: false,
    visits: [{ path: '/a', at: '2026-10-20T10:05:00Z' }, { path: '/a', at: '2026-10-20T10:06:00Z' },
      { path: '/a', at: '2026-10-20T10:06:30Z', name: 'click' }, { path: '/b', at: '2026-10-20T10:07:00Z' }],
  },
  {
    id: '00000000-0000-7000-8000-00000000000b', device: 'desktop', browser: 'Firefox', country: 'FR', city: 'Paris', referrer_name: '',
    started: '2026-10-20T14:20:00Z', bot: false,
    visits: [{ path: '/a', at: '2026-10-20T14:20:00Z' }],
  },
  {
    id: '00000000-0000-7000-8000-00000000000c', device: 'mobile', browser: 'Chrome', country: 'DE', city: 'Berlin', referrer_name: 'Google',
    started: '2026-10-20T11:00:00Z', bot: true,
    visits: [{ path: '/a', at: '2026-10-20T11:00:00Z' }, { path: '/b', at: '2026-10-20T11:01:00Z' }],
  },
];

async function insertDay(db: pg.Pool, projectId: string): Promise<void> {
  for (const s of SESSIONS) {
    const id = `${s.id.slice(0, -2)}${projectId === 'pv_utc' ? '1' : '2'}${s.id.slice(-1)}`;
    const views = s.visits.filter((v) => !v.name).length;
    const last = s.visits[s.visits.length - 1]!.at;
    await db.query(
      `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, duration_ms, ended, entry_origin, entry_path,
         exit_origin, exit_path, screen_view_count, event_count, is_bounce, is_bot, referrer_name, device, browser, country, city)
       VALUES ($1, $2, $3, $3, $4, $5, extract(epoch FROM $5::timestamptz - $4::timestamptz) * 1000, true, 'https://a.test', $6,
         'https://a.test', $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
      [id, projectId, `dev-${id}`, s.started, last, s.visits[0]!.path, s.visits[s.visits.length - 1]!.path, views, s.visits.length,
        views <= 1, s.bot, s.referrer_name, s.device, s.browser, s.country, s.city],
    );
    for (const v of s.visits) {
      await db.query(
        `INSERT INTO events (id, project_id, name, device_id, profile_id, session_id, created_at, origin, path, title, is_bot,
           referrer_name, device, browser, country, city)
         VALUES (gen_random_uuid(), $1, $2, $3, $3, $4, $5, 'https://a.test', $6, 'T', $7, $8, $9, $10, $11, $12)`,
        [projectId, v.name ?? 'screen_view', `dev-${id}`, id, v.at, v.path, s.bot, s.referrer_name, s.device, s.browser, s.country, s.city],
      );
    }
  }
  await db.query(
    `INSERT INTO rollup_invalidations (project_id, bucket) SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions
     WHERE project_id = $1 ON CONFLICT DO NOTHING`,
    [projectId],
  );
}

async function refreshAll(db: pg.Pool): Promise<void> {
  while ((await refreshRollups(db, false, { before: NOW })).buckets > 0);
}

const f = (name: string, operator: Filter['operator'], ...value: string[]): Filter => ({ name, operator, value });
const day = (filters: Filter[] = []) =>
  parsePageParams(new URLSearchParams({ startDate: '2026-10-20', endDate: '2026-10-20', limit: '50', filters: JSON.stringify(filters) }));

const pageViews = (rows: { path: string; sessions: number; pageviews: number }[]) => rows.map((r) => [r.path, r.sessions, r.pageviews]);
const rowViews = (rows: { name: string; sessions: number; pageviews: number }[]) => rows.map((r) => [r.name, r.sessions, r.pageviews]);

/**
 * Every hand-computed answer, on `path`; on the rollup path each read names the family the
 * planner picks for it (checked) so a family that lost the count shows by name.
 */
async function checkAll(db: pg.Pool, projectId: string, options: InsightsOptions, label: string): Promise<void> {
  const at = `${projectId} ${label}`;
  assert.deepEqual(pageViews(await getPages(db, projectId, day(), NOW, options)), [['/a', 2, 3], ['/b', 1, 1]], `pages ${at}`);
  // the per-dimension hourly rollup (sql/002)
  assert.deepEqual(rowViews(await getBreakdown(db, projectId, 'browser', day(), NOW, options)), [['Chrome', 1, 3], ['Firefox', 1, 1]], `browser ${at}`);
  assert.deepEqual(rowViews(await getBreakdown(db, projectId, 'city', day(), NOW, options)), [['Berlin', 1, 3], ['Paris', 1, 1]], `city ${at}`);
  // filtered on its own dimension: the same rollup with the filter
  assert.deepEqual(rowViews(await getBreakdown(db, projectId, 'browser', day([f('browser', 'is', 'Firefox')]), NOW, options)), [['Firefox', 1, 1]], `browser=Firefox ${at}`);
  // two cube dimensions: the session cube's daily pair rows (sql/016)
  const mobile = [f('device', 'is', 'mobile')];
  assert.ok(cubeFor(mobile, 'referrer_name'));
  assert.deepEqual(rowViews(await getBreakdown(db, projectId, 'referrer_name', day(mobile), NOW, options)), [['Google', 1, 3]], `referrer_name|mobile ${at}`);
  // three cube dimensions: the session cube's combination rows (sql/012)
  const three = [f('device', 'isNot', 'tablet'), f('country', 'isNot', 'US')];
  assert.ok(cubeFor(three, 'browser') && rollupDimensionFor(three, 'browser') === null);
  assert.deepEqual(rowViews(await getBreakdown(db, projectId, 'browser', day(three), NOW, options)), [['Chrome', 1, 3], ['Firefox', 1, 1]], `browser|device,country ${at}`);
  // a wide and a cube dimension: the dimension pairs (sql/019)
  const desktop = [f('device', 'is', 'desktop')];
  assert.ok(dimensionPairFor(desktop, 'city'));
  assert.deepEqual(rowViews(await getBreakdown(db, projectId, 'city', day(desktop), NOW, options)), [['Paris', 1, 1]], `city|desktop ${at}`);
  assert.deepEqual(rowViews(await getBreakdown(db, projectId, 'device', day([f('city', 'is', 'Berlin')]), NOW, options)), [['mobile', 1, 3]], `device|city ${at}`);
}

before(async () => {
  pool = await createSqlDb(DB_NAME);
  for (const p of PROJECTS) {
    await pool.query('INSERT INTO projects (id, name, timezone) VALUES ($1, $1, $2)', [p.id, p.timezone]);
    await insertDay(pool, p.id);
  }
});

after(async () => {
  await dropSqlDb(pool, DB_NAME);
  await dropSqlDb(up, UP_NAME);
});

describe('pageviews on page and breakdown rows', () => {
  it('the planner takes the rollups for these reads (whole hours), the raw tables when asked', () => {
    for (const p of PROJECTS) {
      const period = resolvePeriod(day(), p.timezone, NOW);
      assert.equal(planFor(period, [], 'auto', 'pages'), 'rollup');
      assert.equal(planFor(period, [f('device', 'is', 'mobile')], 'auto', 'referrer_name'), 'rollup');
      assert.equal(planFor(period, [f('device', 'is', 'desktop')], 'auto', 'city'), 'rollup');
      assert.equal(planFor(period, [], 'raw', 'pages'), 'raw');
    }
  });

  it('raw path: views of the page for pages, screen views of the rows\' sessions for breakdowns (bots and clicks left out)', async () => {
    for (const p of PROJECTS) await checkAll(pool, p.id, RAW, 'raw');
  });

  it('rollup path with every hour still logged (the raw tail), then after the refresh (the rollup rows)', async () => {
    for (const p of PROJECTS) await checkAll(pool, p.id, AUTO, 'logged');
    await refreshAll(pool);
    assert.equal((await pool.query('SELECT count(*)::int AS n FROM rollup_invalidations')).rows[0].n, 0);
    for (const p of PROJECTS) await checkAll(pool, p.id, AUTO, 'refreshed');
    // the rollup rows hold the counts themselves
    const { rows } = await pool.query(
      `SELECT (SELECT sum(views) FROM rollup_pages_hourly WHERE project_id = 'pv_utc' AND path = '/a')::int AS pages_hourly,
              (SELECT sum(views) FROM rollup_pages_daily WHERE project_id = 'pv_utc' AND path = '/a')::int AS pages_daily,
              (SELECT sum(screen_views) FROM rollup_session_cube_hourly WHERE project_id = 'pv_utc')::int AS cube_hourly,
              (SELECT sum(screen_views) FROM rollup_session_cube_daily WHERE project_id = 'pv_utc')::int AS cube_daily,
              (SELECT sum(screen_views) FROM rollup_session_cube_pairs_daily WHERE project_id = 'pv_utc' AND pair = 'referrer_name,device')::int AS cube_pairs,
              (SELECT sum(screen_views) FROM rollup_session_dim_pairs_daily WHERE project_id = 'pv_utc' AND pair = 'city,device')::int AS dim_pairs`,
    );
    assert.deepEqual(rows[0], { pages_hourly: 3, pages_daily: 3, cube_hourly: 4, cube_daily: 4, cube_pairs: 4, dim_pairs: 4 });
  });

  it('a database upgraded from 022: its rollup rows had no count; 023 logs their hours, so answers are exact before and after the refresh', async () => {
    const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(UP_NAME)}`);
    await admin.end();
    up = new pg.Pool({ connectionString: `${SERVER_URL}/${UP_NAME}`, max: 4 });
    const files = migrationFiles();
    const at = files.indexOf('023_rollup_pageviews.sql');
    assert.ok(at > 0);
    for (const file of files.slice(0, at)) await up.query(migrationSql(file));
    const { rows: part } = await up.query("SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'events'::regclass) AS partitioned");
    if (part[0]?.partitioned) await up.query('CREATE TABLE events_test PARTITION OF events DEFAULT');
    for (const p of PROJECTS) {
      await up.query('INSERT INTO projects (id, name, timezone) VALUES ($1, $1, $2)', [p.id, p.timezone]);
      await insertDay(up, p.id);
    }
    await refreshAll(up);
    assert.ok((await up.query('SELECT count(*)::int AS n FROM rollup_session_cube_days')).rows[0].n > 0, 'the old layers were built');
    for (const file of files.slice(at)) await up.query(migrationSql(file));
    const { rows } = await up.query(
      `SELECT (SELECT count(DISTINCT (project_id, bucket)) FROM rollup_invalidations)::int AS logged,
              (SELECT count(DISTINCT (project_id, date_trunc('hour', started_at, 'UTC'))) FROM sessions)::int AS hours`,
    );
    assert.equal(rows[0].logged, rows[0].hours, 'every hour with sessions is logged');
    for (const p of PROJECTS) await checkAll(up, p.id, AUTO, 'upgraded, logged');
    await refreshAll(up);
    for (const p of PROJECTS) await checkAll(up, p.id, AUTO, 'upgraded, refreshed');
    const { rows: filled } = await up.query(
      `SELECT (SELECT sum(views) FROM rollup_pages_daily WHERE project_id = 'pv_utc')::int AS pages,
              (SELECT sum(screen_views) FROM rollup_session_cube_daily WHERE project_id = 'pv_utc')::int AS cube,
              (SELECT sum(screen_views) FROM rollup_session_dim_pairs_daily WHERE project_id = 'pv_utc' AND pair = 'city,device')::int AS dim_pairs`,
    );
    assert.deepEqual(filled[0], { pages: 4, cube: 4, dim_pairs: 4 });
  });
});
