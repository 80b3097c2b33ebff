// A throwaway PostgreSQL database with every migration of sql/ applied as plain SQL (then the
// functions of sql/functions/, as the migrator does), for the
// tests of the rollup SQL (internal/insights, internal/export): no service, just the schema.
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import type { PageParams } from '../../internal/query/params';
import { routinesSql } from '../../internal/store/migrate';
import { refreshRollups } from '../../internal/store/rollups';

export const SERVER_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const SQL_DIR = new URL('../../sql/', import.meta.url);

/** The migration files of sql/, in order. */
export function migrationFiles(): string[] {
  return readdirSync(SQL_DIR).filter((f) => f.endsWith('.sql')).sort();
}

export function migrationSql(file: string): string {
  return readFileSync(new URL(file, SQL_DIR), 'utf8');
}

/**
 * The functions of sql/functions/ (CREATE OR REPLACE, one current body each), as the migrator
 * applies them before and after the migrations: run it before and after applying migration
 * files by hand (a migration may call one of them).
 */
export const functionsSql = (): Promise<string> => routinesSql();

/**
 * Creates database `name`, applies sql/ (each file through `edit`), and gives a partitioned
 * events table a default partition (tests insert events of any date).
 */
export async function createSqlDb(name: string, o: { max?: number; edit?: (file: string, sql: string) => string } = {}): Promise<pg.Pool> {
  const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  await admin.end();
  const pool = new pg.Pool({ connectionString: `${SERVER_URL}/${name}`, max: o.max ?? 8 });
  await pool.query(await functionsSql());
  for (const file of migrationFiles()) await pool.query(o.edit ? o.edit(file, migrationSql(file)) : migrationSql(file));
  await pool.query(await functionsSql());
  const { rows } = await pool.query("SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'events'::regclass) AS partitioned");
  if (rows[0]?.partitioned) await pool.query('CREATE TABLE events_test PARTITION OF events DEFAULT');
  return pool;
}

/**
 * Closes the pool and drops the database. pool.end() resolves once its clients have SENT their
 * goodbye, not when their server processes are gone; DROP ... WITH (FORCE) then terminates a
 * backend still closing, and the FATAL it sends can reach a closing client as an uncaught
 * error (seen under load in CI). So wait (up to 10 s) for the database's backends to go first.
 */
export async function dropSqlDb(pool: pg.Pool | undefined, name: string): Promise<void> {
  await pool?.end();
  const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
  await admin.connect();
  try {
    for (let i = 0; i < 100; i++) {
      const { rows } = await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]);
      if (rows[0]?.n === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/**
 * Logs the hour of `at` in rollup_invalidations as the worker does when it writes events or
 * sessions of that hour (a new entry, or a new version of this shard's entry).
 */
export async function logHour(db: pg.ClientBase | pg.Pool, projectId: string, at: Date, shard = 0): Promise<void> {
  await db.query(
    `INSERT INTO rollup_invalidations (project_id, bucket, shard) VALUES ($1, date_trunc('hour', $2::timestamptz, 'UTC'), $3)
     ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq')`,
    [projectId, at.toISOString(), shard],
  );
}

/** Query parameters as a request sends them: objects and arrays JSON-encoded. */
export function searchParams(params: Record<string, unknown>): URLSearchParams {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) q.set(k, typeof v === 'object' ? JSON.stringify(v) : String(v));
  return q;
}

/** Every row of a paged read: its pages `limit` rows each, cursor 1, 2, ... up to the first short one. */
export async function allRows<T>(fetch: (params: PageParams) => Promise<T[]>, base: PageParams, limit: number): Promise<T[]> {
  const out: T[] = [];
  for (let cursor = 1; ; cursor++) {
    const page = await fetch({ ...base, cursor, limit });
    out.push(...page);
    if (page.length < limit) return out;
  }
}

/**
 * A worker's late commit: `n` events one second apart from `at` (screen_view, click and the
 * service's session_start in turn; countries ZZ and DE; every 7th a bot) and their hour logged
 * by writer shard `shard`, in one transaction.
 */
export async function insertLateEvents(db: pg.Pool, projectId: string, at: Date, n: number, shard: number): Promise<void> {
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    await c.query(
      `INSERT INTO events (id, project_id, name, device_id, profile_id, created_at, country, path, is_bot)
       SELECT gen_random_uuid(), $1, (ARRAY['screen_view', 'click', 'session_start'])[1 + i % 3], 'late', 'late', $2::timestamptz + i * interval '1 second',
              (ARRAY['ZZ', 'DE'])[1 + i % 2], '/late', i % 7 = 0
       FROM generate_series(0, $3::int - 1) i`,
      [projectId, at.toISOString(), n],
    );
    await logHour(c, projectId, at, shard);
    await c.query('COMMIT');
  } finally {
    c.release();
  }
}

/** Refreshes every logged hour before `before` (the service's refresh job, run to the end). */
export async function refreshAllBefore(db: pg.Pool, before: Date): Promise<void> {
  while ((await refreshRollups(db, false, { before, limit: 500 })).buckets > 0);
}

/**
 * The dataset of the daily-layer tests (event counts per day, the event cube): the projects,
 * their events from `generate`, every hour logged and refreshed before `nowHour`; then late
 * events refreshed into two days (2026-03-10, the Berlin DST day 2026-03-29: rebuilt), and
 * late events left logged in two others (2026-03-15T14, 2026-03-20T23:30: days with a logged
 * hour); ANALYZE.
 */
export async function prepareDailyLayerDataset(
  pool: pg.Pool,
  projects: readonly { id: string; timezone: string }[],
  generate: (projectId: string, index: number) => Promise<void>,
  nowHour: Date,
): Promise<void> {
  for (const [i, p] of projects.entries()) {
    await pool.query('INSERT INTO projects (id, name, timezone) VALUES ($1, $1, $2)', [p.id, p.timezone]);
    await generate(p.id, i);
  }
  await pool.query(`INSERT INTO rollup_invalidations (project_id, bucket) SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events`);
  await refreshAllBefore(pool, nowHour);
  for (const p of projects) {
    await insertLateEvents(pool, p.id, new Date('2026-03-10T05:20:00Z'), 40, 5);
    await insertLateEvents(pool, p.id, new Date('2026-03-29T01:10:00Z'), 40, 5);
  }
  await refreshAllBefore(pool, nowHour);
  for (const p of projects) {
    await insertLateEvents(pool, p.id, new Date('2026-03-15T14:00:00Z'), 30, 5);
    await insertLateEvents(pool, p.id, new Date('2026-03-20T23:30:00Z'), 30, 5);
  }
  await pool.query('ANALYZE');
}

/** The projects of the daily-layer tests: ids `<prefix>_utc`, `_ber`, `_ny`, `_kol` (Asia/Kolkata: no daily rows). */
export function dailyLayerProjects<P extends string>(prefix: P) {
  return [
    { id: `${prefix}_utc`, timezone: 'UTC' },
    { id: `${prefix}_ber`, timezone: 'Europe/Berlin' },
    { id: `${prefix}_ny`, timezone: 'America/New_York' },
    { id: `${prefix}_kol`, timezone: 'Asia/Kolkata' },
  ] as const;
}

/**
 * Their period: events from FROM to TO around both spring DST changes; "now" and its hour.
 * Six weeks: every hour in it is refreshed by 13 functions, more than once in the upgrade
 * tests, so the window is what these files cost (from 2025-12-25 they took ~16 minutes).
 */
export const DAILY_LAYER_TIME = {
  FROM: '2026-02-20T00:00:00Z',
  TO: '2026-04-05T12:00:00Z',
  NOW: new Date('2026-04-05T09:30:00Z'),
  NOW_HOUR: new Date('2026-04-05T09:00:00Z'),
} as const;

/**
 * The hours of DAILY_LAYER_TIME a thinned daily-layer dataset fills completely (sparseHours):
 * the hourly periods of those tests, around New York's (March 8) and Berlin's (March 29) DST
 * changes, in every timezone there.
 */
export const DAILY_LAYER_FULL_HOURS = [
  ['2026-03-06T22:00:00Z', '2026-03-10T05:00:00Z'],
  ['2026-03-28T22:00:00Z', '2026-03-30T05:00:00Z'],
] as const;

/**
 * Events of one project with the column values the one-column rollup tests need (every
 * rolled-up column they filter on, '' values, LIKE and regex metacharacters, bots and the
 * service's session rows), `n` of them at random times in [from, to), seeded; with `full`,
 * only in those hours and sparse hours elsewhere (sparseHours below).
 */
export async function generateColumnEvents(
  db: pg.Pool,
  projectId: string,
  seed: number,
  n: number,
  o: { from?: string; to?: string; botShare: number; full?: HourRanges; every?: number },
): Promise<void> {
  const c = await db.connect();
  try {
    await c.query('SELECT setseed($1)', [seed]);
    await c.query(
      `INSERT INTO events (id, project_id, name, device_id, profile_id, created_at, country, device, os, city, region, path,
                           referrer, utm_campaign, origin, model, is_bot)
       SELECT gen_random_uuid(), $1, n.name, 'dev', 'u' || floor(r.u1 * 500)::int,
         CASE WHEN r.i % 97 = 0 THEN date_trunc('hour', m.t) ELSE m.t END,
         (ARRAY['DE', 'US', 'FR', ''])[1 + floor(r.u3 * r.u3 * 4)::int],
         (ARRAY['desktop', 'mobile', 'tablet', ''])[1 + floor(r.u2 * r.u2 * 4)::int],
         (ARRAY['Windows', 'iOS', 'Android', 'macOS'])[1 + floor(r.u5 * 4)::int],
         (ARRAY['Berlin', 'Paris', 'Austin', 'São Paulo', ''])[1 + floor(r.u4 * 5)::int],
         (ARRAY['Île-de-France', 'Texas', 'Bayern', ''])[1 + floor(r.u4 * r.u6 * 4)::int],
         (ARRAY['/', '/pricing', '/docs', '/a_b', '/100%', E'/x\\\\y', '/DOCS', ''])[1 + floor(r.u6 * r.u2 * 8)::int],
         (ARRAY['https://google.com/', 'https://news.ycombinator.com/item', 'android-app://x', ''])[1 + floor(r.u1 * r.u5 * 4)::int],
         (ARRAY['spring', 'Spring_Sale', 'sale', ''])[1 + floor(r.u3 * 4)::int],
         (ARRAY['https://a.example', 'https://b.example', ''])[1 + floor(r.u6 * 3)::int],
         (ARRAY['iPhone', 'Pixel 8', ''])[1 + floor(r.u5 * r.u1 * 3)::int],
         r.u8 < $5
       FROM (
         SELECT i, $2::timestamptz + random() * ($3::timestamptz - $2::timestamptz) AS t,
           random() AS u1, random() AS u2, random() AS u3, random() AS u4, random() AS u5, random() AS u6,
           random() AS u7, random() AS u8
         FROM generate_series(1, $4::int) i
       ) r
       CROSS JOIN LATERAL (SELECT ${o.full ? sparseHours('r.t', o.full, o.every) : 'r.t'} AS t) m
       CROSS JOIN LATERAL (SELECT (ARRAY['screen_view', 'screen_view', 'click', 'purchase', 'session_start', 'session_end'])[1 + floor(r.u7 * 6)::int] AS name) n`,
      [projectId, o.from ?? DAILY_LAYER_TIME.FROM, o.to ?? DAILY_LAYER_TIME.TO, n, o.botShare],
    );
  } finally {
    c.release();
  }
}

/** Time ranges [from, to) as ISO strings. */
export type HourRanges = readonly (readonly [string, string])[];

/**
 * SQL: the time `t`, or outside the `full` ranges the start of the last hour numbered 0 mod
 * `every` (7 unless a file asks for sparser hours; any `every` up to 23 still leaves an hour
 * with events in every local day, 23-hour DST days included) plus t's minutes. The rollup
 * tests generate their data through it: every hour only where a test needs it (DST days,
 * hourly periods, late events), as many rows in about 24 / `every` hours a day elsewhere
 * (other hours each day, so every local day edge is met), because a setup's cost is per
 * refreshed (project, hour).
 */
export function sparseHours(t: string, full: HourRanges, every = 7): string {
  const inFull = full.map(([a, b]) => `(${t} >= '${a}'::timestamptz AND ${t} < '${b}'::timestamptz)`).join(' OR ');
  return `CASE WHEN ${inFull} THEN ${t} ELSE ${t} - (floor(extract(epoch FROM ${t}) / 3600)::bigint % ${every}) * interval '1 hour' END`;
}
