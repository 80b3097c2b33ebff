// Runs the TimescaleDB code path for real on TimescaleDB 2.23 in PGlite (WASM PostgreSQL 17),
// served over the wire protocol by test/support/timescale.ts, through the `pg` driver.
//   node --import tsx --test test/timescale.test.ts
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { refreshRollups } from '../internal/store/rollups';
import { functionsSql, migrationFiles, migrationSql } from './support/sql-db';
import { startTimescale, type Timescale } from './support/timescale';

const SCHEMA = new URL('../sql/001_init.sql', import.meta.url);

// Generous: start-up is ~2 s on an idle 2-core machine but >10 s under load.
const SLOW = { timeout: 180_000 };
const NORMAL = { timeout: 60_000 };

let engine: Timescale;
let pool: pg.Pool;
let schemaMs = 0;

async function rows<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]> {
  return (await pool.query(sql, params)).rows as T[];
}

async function refresh(view: string, from: string | null = null, to: string | null = null): Promise<void> {
  await pool.query('CALL refresh_continuous_aggregate($1::regclass, $2::timestamptz, $3::timestamptz)', [
    view,
    from,
    to,
  ]);
}

/** Expects `sql` to fail; returns the error for its message/detail/hint. */
async function failure(sql: string): Promise<pg.DatabaseError> {
  try {
    await pool.query(sql);
  } catch (err) {
    assert.ok(err instanceof pg.DatabaseError, String(err));
    return err;
  }
  assert.fail(`expected an error from: ${sql}`);
}

async function insertSessions(
  projectId: string,
  list: { device: string; at: string; country?: string; bounce?: boolean; durationMs?: number }[],
): Promise<void> {
  await pool.query(
    `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at,
                           country, is_bounce, duration_ms)
     SELECT gen_random_uuid(), $1, d, d, t, t, c, b, ms
     FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::boolean[], $6::bigint[]) AS u(d, t, c, b, ms)`,
    [
      projectId,
      list.map((s) => s.device),
      list.map((s) => s.at),
      list.map((s) => s.country ?? ''),
      list.map((s) => s.bounce ?? true),
      list.map((s) => s.durationMs ?? 0),
    ],
  );
}

before(async () => {
  engine = await startTimescale();
  pool = new pg.Pool({ connectionString: engine.url, max: 1 });
  const sql = await readFile(SCHEMA, 'utf8');
  const t0 = performance.now();
  await pool.query('CREATE EXTENSION IF NOT EXISTS timescaledb');
  await pool.query(sql); // the whole file as one simple-protocol query, like a migration runner
  schemaMs = Math.round(performance.now() - t0);
}, SLOW);

after(async () => {
  await pool?.end();
  await engine?.stop();
}, SLOW);

test('engine: TimescaleDB 2.23 on PostgreSQL 17 over the wire protocol', NORMAL, async (t) => {
  t.diagnostic(`engine start-up ${JSON.stringify(engine.timings)}; schema applied in ${schemaMs} ms`);
  const [v] = await rows<{ pg: string; ts: string; license: string }>(
    `SELECT current_setting('server_version_num') AS pg,
            (SELECT extversion FROM pg_extension WHERE extname = 'timescaledb') AS ts,
            current_setting('timescaledb.license') AS license`,
  );
  assert.match(v!.pg, /^17/);
  assert.equal(v!.ts, '2.23.0-dev');
  assert.equal(v!.license, 'timescale'); // TSL features (continuous aggregates, compression) on
  // Several statements in one simple query, and the extended protocol with parameters.
  const multi = (await pool.query('SELECT 1 AS a; SELECT 2 AS b')) as unknown as pg.QueryResult[];
  assert.deepEqual(multi.map((r) => r.rows[0]), [{ a: 1 }, { b: 2 }]);
  assert.deepEqual(await rows('SELECT $1::int + 1 AS x', [41]), [{ x: 42 }]);
  // No background workers: job rows exist but never run by themselves.
  const [stats] = await rows<{ n: number }>(
    'SELECT count(*)::int AS n FROM timescaledb_information.job_stats WHERE total_runs > 0',
  );
  assert.equal(stats!.n, 0);
});

test('schema: 001_init.sql makes events and sessions hypertables', NORMAL, async () => {
  assert.deepEqual(await rows('SELECT tm_timescale() AS ts'), [{ ts: true }]);
  const hypertables = await rows(
    `SELECT h.hypertable_name AS name, d.column_name AS col, d.time_interval::text AS chunk
     FROM timescaledb_information.hypertables h
     JOIN timescaledb_information.dimensions d USING (hypertable_schema, hypertable_name)
     ORDER BY 1`,
  );
  assert.deepEqual(hypertables, [
    { name: 'events', col: 'created_at', chunk: '1 day' },
    { name: 'sessions', col: 'started_at', chunk: '7 days' },
  ]);
  const tables = await rows<{ t: string }>(
    `SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`,
  );
  assert.deepEqual(
    tables.map((r) => r.t),
    ['clients', 'events', 'groups', 'op_failures', 'profiles', 'projects', 'sessions', 'shard_offsets'],
  );
  // Indexes on the hypertables: ours only (create_default_indexes => false: the default
  // time index would repeat the leading column of the (time, id) primary keys).
  const idx = await rows<{ i: string }>(
    `SELECT indexname AS i FROM pg_indexes WHERE tablename IN ('events', 'sessions') ORDER BY 1`,
  );
  assert.deepEqual(
    idx.map((r) => r.i),
    [
      'events_pkey',
      'events_project_name_time_idx',
      'events_project_profile_idx',
      'events_project_time_idx',
      'events_session_idx',
      'sessions_device_idx',
      'sessions_id_idx',
      'sessions_pkey',
      'sessions_project_start_idx',
    ],
  );
});

test('continuous aggregate over sessions: refresh, update, real-time rows', NORMAL, async () => {
  await pool.query(
    `CREATE MATERIALIZED VIEW t_sessions_hourly
     WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
     SELECT project_id, time_bucket('1 hour', started_at) AS bucket, country,
            count(*) AS sessions, sum(is_bounce::int) AS bounces
     FROM sessions GROUP BY 1, 2, 3 WITH NO DATA`,
  );
  const view = () =>
    rows(
      `SELECT to_char(bucket AT TIME ZONE 'UTC', 'HH24:MI') AS h, country,
              sessions::int AS s, bounces::int AS b
       FROM t_sessions_hourly WHERE project_id = 'cagg' ORDER BY 1, 2`,
    );
  await insertSessions('cagg', [
    { device: 'd1', at: '2024-01-01T10:05Z', country: 'DE' },
    { device: 'd2', at: '2024-01-01T10:15Z', country: 'DE' },
    { device: 'd3', at: '2024-01-01T11:15Z', country: 'FR' },
  ]);
  const expected1 = [
    { h: '10:00', country: 'DE', s: 2, b: 2 },
    { h: '11:00', country: 'FR', s: 1, b: 1 },
  ];
  // Nothing materialized yet: real-time aggregation computes everything from sessions.
  assert.deepEqual(await view(), expected1);

  await refresh('t_sessions_hourly');
  const [mat] = await rows<{ n: number }>(
    `SELECT count(*)::int AS n FROM _timescaledb_internal.${
      (
        await rows<{ t: string }>(
          `SELECT materialization_hypertable_name AS t FROM timescaledb_information.continuous_aggregates
           WHERE view_name = 't_sessions_hourly'`,
        )
      )[0]!.t
    }`,
  );
  assert.equal(mat!.n, 2, 'refresh materialized both buckets');
  assert.deepEqual(await view(), expected1);

  // Sessions rows are updated as events arrive: the materialized bucket is stale until the
  // next refresh (real-time aggregation only covers buckets above the watermark)...
  await pool.query(`UPDATE sessions SET is_bounce = false WHERE project_id = 'cagg' AND device_id = 'd1'`);
  assert.deepEqual(await view(), expected1);
  // ...and the invalidation log makes the refresh re-materialize exactly that bucket.
  await refresh('t_sessions_hourly');
  const expected2 = [
    { h: '10:00', country: 'DE', s: 2, b: 1 },
    { h: '11:00', country: 'FR', s: 1, b: 1 },
  ];
  assert.deepEqual(await view(), expected2);

  // Above the watermark (12:00 after the refresh): visible at once, without a refresh.
  await insertSessions('cagg', [{ device: 'd4', at: '2024-01-01T12:30Z', country: 'US' }]);
  assert.deepEqual(await view(), [...expected2, { h: '12:00', country: 'US', s: 1, b: 1 }]);
  // Below the watermark: invisible until refreshed.
  await insertSessions('cagg', [{ device: 'd5', at: '2024-01-01T10:30Z', country: 'DE' }]);
  assert.deepEqual((await view())[0], { h: '10:00', country: 'DE', s: 2, b: 1 });
  await refresh('t_sessions_hourly', '2024-01-01T00:00Z', '2024-01-02T00:00Z');
  assert.deepEqual((await view())[0], { h: '10:00', country: 'DE', s: 3, b: 2 });

  // DELETE is tracked too.
  await pool.query(`DELETE FROM sessions WHERE project_id = 'cagg' AND device_id = 'd3'`);
  await refresh('t_sessions_hourly');
  assert.deepEqual(
    (await view()).map((r) => r.h),
    ['10:00', '12:00'],
  );

  const info = await rows(
    `SELECT view_name, materialized_only, finalized FROM timescaledb_information.continuous_aggregates
     WHERE view_name = 't_sessions_hourly'`,
  );
  assert.deepEqual(info, [{ view_name: 't_sessions_hourly', materialized_only: false, finalized: true }]);
  await pool.query('ALTER MATERIALIZED VIEW t_sessions_hourly SET (timescaledb.materialized_only = true)');
  await pool.query('ALTER MATERIALIZED VIEW t_sessions_hourly SET (timescaledb.materialized_only = false)');
});

test('continuous aggregates: aggregate functions, DISTINCT, time zones, joins', NORMAL, async () => {
  const at = (m: number) => new Date(Date.parse('2024-02-01T00:00:00Z') + m * 60_000).toISOString();
  await insertSessions(
    'aggs',
    Array.from({ length: 120 }, (_, i) => ({
      device: `d${i % 7}`,
      at: at(i),
      country: ['DE', 'FR', 'US'][i % 3]!,
      bounce: i % 4 === 0,
      durationMs: i * 10,
    })),
  );
  await pool.query(`INSERT INTO projects (id, name, timezone) VALUES ('aggs', 'Aggs', 'Europe/Berlin')`);
  await pool.query(
    `CREATE MATERIALIZED VIEW t_aggs WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
     SELECT project_id, time_bucket('1 hour', started_at) AS bucket,
            count(*) AS n, count(DISTINCT device_id) AS visitors, sum(duration_ms) AS total_ms,
            avg(duration_ms) AS avg_ms, min(duration_ms) AS min_ms, max(duration_ms) AS max_ms,
            stddev(duration_ms) AS sd_ms, bool_or(is_bounce) AS any_bounce,
            count(*) FILTER (WHERE is_bounce) AS bounces,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50_ms,
            array_agg(DISTINCT country ORDER BY country) AS countries,
            string_agg(DISTINCT country, ',' ORDER BY country) AS country_list,
            first(country, started_at) AS first_country, last(country, started_at) AS last_country
     FROM sessions GROUP BY 1, 2 WITH NO DATA`,
  );
  await refresh('t_aggs');
  const got = await rows(
    `SELECT to_char(bucket AT TIME ZONE 'UTC', 'HH24') AS h, n::int, visitors::int, total_ms::int,
            avg_ms::float8, min_ms::int, max_ms::int, round(sd_ms, 3)::float8 AS sd_ms, any_bounce,
            bounces::int, p50_ms, countries, country_list, first_country, last_country
     FROM t_aggs WHERE project_id = 'aggs' ORDER BY bucket`,
  );
  const direct = await rows(
    `SELECT to_char(time_bucket('1 hour', started_at) AT TIME ZONE 'UTC', 'HH24') AS h, count(*)::int AS n,
            count(DISTINCT device_id)::int AS visitors, sum(duration_ms)::int AS total_ms,
            avg(duration_ms)::float8 AS avg_ms, min(duration_ms)::int AS min_ms, max(duration_ms)::int AS max_ms,
            round(stddev(duration_ms), 3)::float8 AS sd_ms, bool_or(is_bounce) AS any_bounce,
            (count(*) FILTER (WHERE is_bounce))::int AS bounces,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50_ms,
            array_agg(DISTINCT country ORDER BY country) AS countries,
            string_agg(DISTINCT country, ',' ORDER BY country) AS country_list,
            first(country, started_at) AS first_country, last(country, started_at) AS last_country
     FROM sessions WHERE project_id = 'aggs' GROUP BY 1 ORDER BY 1`,
  );
  assert.equal(got.length, 2);
  assert.deepEqual(got, direct);
  assert.deepEqual(got[0], {
    h: '00', n: 60, visitors: 7, total_ms: 17700, avg_ms: 295, min_ms: 0, max_ms: 590,
    sd_ms: 174.642, any_bounce: true, bounces: 15, p50_ms: 295, countries: ['DE', 'FR', 'US'],
    country_list: 'DE,FR,US', first_country: 'DE', last_country: 'US',
  });

  // Buckets in a project's time zone, and a join with a plain table.
  await pool.query(
    `CREATE MATERIALIZED VIEW t_local_days WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
     SELECT s.project_id, time_bucket('1 day', s.started_at, 'Europe/Berlin') AS day, p.timezone, count(*) AS n
     FROM sessions s JOIN projects p ON p.id = s.project_id GROUP BY 1, 2, 3 WITH NO DATA`,
  );
  await refresh('t_local_days');
  assert.deepEqual(
    await rows(`SELECT day, timezone, n::int FROM t_local_days WHERE project_id = 'aggs'`),
    [{ day: new Date('2024-01-31T23:00:00Z'), timezone: 'Europe/Berlin', n: 120 }],
  );

  // Rejected queries (exact texts for the rollup design).
  const win = await failure(
    `CREATE MATERIALIZED VIEW t_bad_window WITH (timescaledb.continuous) AS
     SELECT project_id, time_bucket('1 hour', started_at) AS bucket, count(*) AS n,
            lag(count(*)) OVER (ORDER BY time_bucket('1 hour', started_at)) AS prev
     FROM sessions GROUP BY 1, 2 WITH NO DATA`,
  );
  assert.equal(win.message, 'invalid continuous aggregate query');
  assert.equal(win.detail, 'Window function support not enabled.');
  const nobucket = await failure(
    `CREATE MATERIALIZED VIEW t_bad_nobucket WITH (timescaledb.continuous) AS
     SELECT project_id, count(*) AS n FROM sessions GROUP BY 1 WITH NO DATA`,
  );
  assert.equal(nobucket.message, 'continuous aggregate view must include a valid time bucket function');
  const inTx = await failure(`BEGIN; CALL refresh_continuous_aggregate('t_aggs', NULL, NULL); COMMIT`);
  assert.equal(inTx.message, 'refresh_continuous_aggregate() cannot run inside a transaction block');
  await pool.query('ROLLBACK');
  const small = await failure(
    `CALL refresh_continuous_aggregate('t_aggs', '2024-02-01 00:10+00', '2024-02-01 00:20+00')`,
  );
  assert.equal(small.message, 'refresh window too small');
  // Toolkit hyperfunctions are not in this build.
  const hll = await failure(`SELECT approx_count_distinct(device_id) FROM sessions`);
  assert.match(hll.message, /^function approx_count_distinct\(text\) does not exist$/);
});

test('hierarchical continuous aggregates refresh bottom-up', NORMAL, async () => {
  await insertSessions(
    'hier',
    Array.from({ length: 48 }, (_, i) => ({
      device: `d${i}`,
      at: new Date(Date.parse('2024-03-01T00:00:00Z') + i * 3_600_000).toISOString(),
      bounce: i % 2 === 0,
    })),
  );
  await pool.query(
    `CREATE MATERIALIZED VIEW t_hier_hour WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
     SELECT project_id, time_bucket('1 hour', started_at) AS bucket, count(*) AS sessions, sum(is_bounce::int) AS bounces
     FROM sessions GROUP BY 1, 2 WITH NO DATA`,
  );
  await pool.query(
    `CREATE MATERIALIZED VIEW t_hier_day WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
     SELECT project_id, time_bucket('1 day', bucket) AS day, sum(sessions) AS sessions, sum(bounces) AS bounces
     FROM t_hier_hour GROUP BY 1, 2 WITH NO DATA`,
  );
  const days = () =>
    rows(`SELECT sessions::int AS s, bounces::int AS b FROM t_hier_day WHERE project_id = 'hier' ORDER BY day`);
  assert.deepEqual(await days(), [{ s: 24, b: 12 }, { s: 24, b: 12 }]); // real-time through both levels
  await refresh('t_hier_hour');
  await refresh('t_hier_day');
  assert.deepEqual(await days(), [{ s: 24, b: 12 }, { s: 24, b: 12 }]);

  await pool.query(`UPDATE sessions SET is_bounce = true WHERE project_id = 'hier' AND started_at < '2024-03-02'`);
  await refresh('t_hier_day'); // the day level sees no change until the hour level is refreshed
  assert.deepEqual(await days(), [{ s: 24, b: 12 }, { s: 24, b: 12 }]);
  await refresh('t_hier_hour');
  await refresh('t_hier_day');
  assert.deepEqual(await days(), [{ s: 24, b: 24 }, { s: 24, b: 12 }]);

  const dropErr = await failure('DROP MATERIALIZED VIEW t_hier_hour');
  assert.equal(dropErr.message, 'cannot drop view t_hier_hour because other objects depend on it');
});

test('insert rate through the socket (10k events, batches of 1000 via unnest)', NORMAL, async (t) => {
  const N = 10_000;
  const batch = 1_000;
  const base = Date.parse('2024-04-01T00:00:00Z');
  const t0 = performance.now();
  for (let off = 0; off < N; off += batch) {
    const n = Array.from({ length: batch }, (_, k) => off + k);
    await pool.query(
      `INSERT INTO events (id, project_id, name, device_id, profile_id, created_at, path, properties, country)
       SELECT u.id, 'rate', u.name, u.dev, u.dev, u.at, u.path, u.props, u.country
       FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::jsonb[], $7::text[])
         AS u(id, name, dev, at, path, props, country)`,
      [
        n.map(() => crypto.randomUUID()),
        n.map((i) => (i % 3 ? 'screen_view' : 'click')),
        n.map((i) => `dev${i % 500}`),
        n.map((i) => new Date(base + i * 6_000).toISOString()),
        n.map((i) => `/page/${i % 40}`),
        n.map((i) => JSON.stringify({ plan: i % 2 ? 'pro' : 'free', i })),
        n.map((i) => ['DE', 'FR', 'US'][i % 3]!),
      ],
    );
  }
  const ms = performance.now() - t0;
  t.diagnostic(`${N} events in ${Math.round(ms)} ms = ${Math.round(N / (ms / 1000))} rows/s`);
  assert.deepEqual(await rows(`SELECT count(*)::int AS n FROM events WHERE project_id = 'rate'`), [{ n: N }]);
  const [chunks] = await rows<{ n: number }>(`SELECT count(*)::int AS n FROM show_chunks('events')`);
  assert.ok(chunks!.n >= 1);
});

test('harness: one connection at a time, session reset between clients, large messages', NORMAL, async () => {
  // Messages far over one TCP read (pglite-socket's own handler crashes the engine on these).
  const big = 'x'.repeat(3_000_000);
  assert.deepEqual(await rows('SELECT length($1::text) AS n', [big]), [{ n: 3_000_000 }]);
  const [wide] = await rows<{ z: string }>(`SELECT repeat('z', 5000000) AS z`);
  assert.equal(wide!.z.length, 5_000_000);

  // A second client waits until the first (the pool's) disconnects...
  const other = new pg.Client({ connectionString: engine.url });
  other.on('error', () => {});
  const connected = other.connect().then(() => 'connected');
  let poolEnded = false;
  try {
    const tooEarly = await Promise.race([connected, new Promise((r) => setTimeout(() => r('waiting'), 300))]);
    assert.equal(tooEarly, 'waiting');
    // ...and must not inherit the first client's session: leave an open transaction and state.
    const first = await pool.connect();
    await first.query('CREATE TEMP TABLE t_tmp (x int)');
    await first.query(`SET application_name = 'leaky'`);
    await first.query('SET search_path TO pg_catalog');
    await first.query('BEGIN');
    await first.query(`INSERT INTO public.projects (id, name) VALUES ('uncommitted', 'x')`);
    first.release(true); // closes the connection with the transaction still open
    await pool.end();
    poolEnded = true;
    assert.equal(await connected, 'connected');
    const state = await other.query(
      `SELECT to_regclass('pg_temp.t_tmp') IS NULL AS no_temp, current_setting('application_name') AS app,
              (SELECT count(*)::int FROM projects WHERE id = 'uncommitted') AS leaked,
              current_setting('client_min_messages') AS cmm, current_setting('search_path') AS path`,
    );
    assert.deepEqual(state.rows, [{ no_temp: true, app: '', leaked: 0, cmm: 'notice', path: '"$user", public' }]);
  } finally {
    if (!poolEnded) await pool.end();
    await connected.catch(() => {});
    await other.end().catch(() => {});
    pool = new pg.Pool({ connectionString: engine.url, max: 1 });
  }
});

test('harness: reopening a data dir (LOADs run) keeps hypertables and caggs writable', SLOW, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tidemark-tsdb-'));
  const dataDir = join(dir, 'pgdata');
  try {
    const one = await startTimescale({ dataDir });
    const c1 = new pg.Client(one.url);
    await c1.connect();
    await c1.query('CREATE TABLE m (ts timestamptz NOT NULL, v int)');
    await c1.query(`SELECT create_hypertable('m', 'ts')`);
    await c1.query(
      `CREATE MATERIALIZED VIEW m_hourly WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
       SELECT time_bucket('1 hour', ts) AS bucket, sum(v) AS v FROM m GROUP BY 1 WITH NO DATA`,
    );
    await c1.query(`INSERT INTO m VALUES ('2024-01-01 10:00+00', 1)`);
    await c1.query(`CALL refresh_continuous_aggregate('m_hourly', NULL, NULL)`);
    await c1.end();
    await one.stop();

    const two = await startTimescale({ dataDir });
    t.diagnostic(`fresh data dir start-up ${JSON.stringify(one.timings)}; reopen ${JSON.stringify(two.timings)}`);
    const c2 = new pg.Client(two.url);
    await c2.connect();
    try {
      await c2.query(`INSERT INTO m VALUES ('2024-01-01 10:30+00', 2), ('2024-01-01 11:30+00', 4)`);
      await c2.query(`CALL refresh_continuous_aggregate('m_hourly', NULL, NULL)`);
      const r = await c2.query('SELECT v::int FROM m_hourly ORDER BY bucket');
      assert.deepEqual(r.rows, [{ v: 3 }, { v: 4 }]);
    } finally {
      await c2.end();
      await two.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('upgrade: sql/023 fills the view counts of existing rollup rows in place, logs nothing, as the refresh would', SLOW, async (t) => {
  // An engine of its own: the migrations 001-022, rollups refreshed, then 023.
  const own = await startTimescale();
  const db = new pg.Pool({ connectionString: own.url, max: 1 });
  try {
    const files = migrationFiles();
    const at = files.indexOf('023_rollup_pageviews.sql');
    assert.ok(at > 0);
    const t0 = performance.now();
    await db.query(await functionsSql());
    for (const f of files.slice(0, at)) await db.query(migrationSql(f));
    await db.query(await functionsSql());
    t.diagnostic(`001-022 applied in ${Math.round(performance.now() - t0)} ms`);
    assert.equal((await db.query('SELECT tm_timescale() AS ts')).rows[0].ts, true);
    await db.query(`INSERT INTO projects (id, name, timezone) VALUES ('t', 't', 'America/New_York')`);
    // 200 sessions 13 minutes apart over New York's 25-hour 11-01, 0-3 views each
    await db.query(
      `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, entry_origin, entry_path, screen_view_count,
         device, city, country)
       SELECT md5('t' || g)::uuid, 't', 'd' || g, 'd' || g, t, t + greatest(g % 4 - 1, 0) * interval '1 minute', 'o', '/p' || (g % 3), g % 4,
              (ARRAY['mobile', 'desktop'])[1 + g % 2], (ARRAY['Berlin', ''])[1 + g % 2], 'DE'
       FROM generate_series(1, 200) g, LATERAL (SELECT '2026-10-31T00:00:00Z'::timestamptz + g * interval '13 minutes' AS t) x`,
    );
    await db.query(
      `INSERT INTO events (id, project_id, name, device_id, profile_id, session_id, created_at, origin, path)
       SELECT gen_random_uuid(), 't', 'screen_view', s.device_id, s.device_id, s.id, s.started_at + k * interval '1 minute', 'o',
              CASE WHEN k = 0 THEN s.entry_path ELSE '/p' || ((get_byte(decode(md5(s.id::text), 'hex'), 0) + k) % 3) END
       FROM sessions s, generate_series(0, s.screen_view_count - 1) k`,
    );
    const logAll = `INSERT INTO rollup_invalidations (project_id, bucket) SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions`;
    const before = new Date('2026-11-05T00:00:00Z');
    await db.query(logAll);
    while ((await refreshRollups(db, true, { before })).buckets > 0);
    await db.query(migrationSql('023_rollup_pageviews.sql'));
    await db.query(await functionsSql());
    assert.equal((await db.query('SELECT count(*)::int AS n FROM rollup_invalidations')).rows[0].n, 0, '023 logs nothing');
    const { rows: filled } = await db.query(
      `SELECT (SELECT sum(views) FROM rollup_pages_hourly)::int AS pages_hourly, (SELECT sum(views) FROM rollup_pages_daily)::int AS pages_daily,
              (SELECT sum(screen_views) FROM rollup_session_cube_hourly)::int AS cube_hourly,
              (SELECT sum(screen_views) FROM rollup_session_cube_daily)::int AS cube_daily,
              (SELECT sum(screen_views) FROM rollup_session_cube_pairs_daily WHERE pair = 'country,device')::int AS cube_pairs,
              (SELECT sum(screen_views) FROM rollup_session_dim_pairs_daily WHERE pair = 'city,device')::int AS dim_pairs,
              (SELECT sum(screen_view_count) FROM sessions)::int AS views`,
    );
    const views = filled[0].views as number;
    assert.ok(views > 100);
    assert.deepEqual(filled[0], { pages_hourly: views, pages_daily: views, cube_hourly: views, cube_daily: views, cube_pairs: views, dim_pairs: views, views });
    // every row as a refresh of every hour writes it
    const tables = ['rollup_pages_hourly', 'rollup_pages_daily', 'rollup_session_cube_hourly', 'rollup_session_cube_daily',
      'rollup_session_cube_pairs_daily', 'rollup_session_dim_pairs_daily'];
    const snapshot = async () => {
      const out: Record<string, string[]> = {};
      for (const table of tables) out[table] = (await db.query(`SELECT coalesce(array_agg(t::text ORDER BY t::text), '{}') AS r FROM ${table} t`)).rows[0].r;
      return out;
    };
    const migrated = await snapshot();
    await db.query(logAll);
    while ((await refreshRollups(db, true, { before })).buckets > 0);
    assert.deepEqual(migrated, await snapshot());
  } finally {
    await db.end();
    await own.stop();
  }
});

test('upgrade: sql/026 turns the session continuous aggregates into tables the service keeps, logs every hour with sessions for a recompute (a pending delta\'s too), and the refresh writes every session', SLOW, async (t) => {
  // An engine of its own: the migrations 001-025, rollups refreshed (the aggregates
  // materialized), one more session logged for a delta, then 026.
  const own = await startTimescale();
  const db = new pg.Pool({ connectionString: own.url, max: 1 });
  try {
    const files = migrationFiles();
    const at = files.indexOf('026_session_rollups_kept.sql');
    assert.ok(at > 0);
    const t0 = performance.now();
    await db.query(await functionsSql());
    for (const f of files.slice(0, at)) await db.query(migrationSql(f));
    await db.query(await functionsSql());
    t.diagnostic(`001-025 applied in ${Math.round(performance.now() - t0)} ms`);
    const dims = (await db.query('SELECT relation FROM rollup_dimensions ORDER BY relation')).rows.map((r) => r.relation as string);
    const sessionRollups = ['rollup_sessions_hourly', ...dims].sort();
    const caggs = async () => (await db.query(
      `SELECT view_name FROM timescaledb_information.continuous_aggregates WHERE view_schema = 'public' AND view_name = ANY($1::text[])`, [sessionRollups],
    )).rowCount;
    assert.equal(await caggs(), sessionRollups.length, 'before 026: continuous aggregates');
    await db.query(`INSERT INTO projects (id, name, timezone) VALUES ('t', 't', 'UTC')`);
    // 300 sessions 7 minutes apart, every tenth a bot; countries, cities, bounces, durations
    const insertSessions = (from: number, to: number) => db.query(
      `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, entry_origin, entry_path, screen_view_count,
         is_bounce, duration_ms, is_bot, device, city, country, browser, browser_version)
       SELECT md5('t' || g)::uuid, 't', 'd' || g, 'd' || g, t, t + (g % 5) * interval '1 minute', 'o', '/p' || (g % 3), 1 + g % 4,
              g % 4 = 0, (g % 5) * 60000, g % 10 = 0, (ARRAY['mobile', 'desktop'])[1 + g % 2], (ARRAY['Berlin', '', 'Lyon'])[1 + g % 3],
              (ARRAY['DE', 'FR'])[1 + g % 2], 'Firefox', (120 + g % 3)::text
       FROM generate_series($1::int, $2::int) g, LATERAL (SELECT '2026-10-01T00:00:00Z'::timestamptz + g * interval '7 minutes' AS t) x`,
      [from, to],
    );
    await insertSessions(1, 300);
    const logAll = `INSERT INTO rollup_invalidations (project_id, bucket) SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions
                    ON CONFLICT DO NOTHING`;
    const before = new Date('2026-11-05T00:00:00Z');
    await db.query(logAll);
    while ((await refreshRollups(db, true, { before })).buckets > 0);
    // A late session into a materialized hour, logged as a delta would be (no recompute).
    await insertSessions(301, 301);
    await db.query(`INSERT INTO rollup_invalidations (project_id, bucket, rebuild)
                    SELECT project_id, date_trunc('hour', started_at, 'UTC'), false FROM sessions WHERE id = md5('t301')::uuid`);

    await db.query(migrationSql('026_session_rollups_kept.sql'));
    await db.query(await functionsSql());
    assert.equal(await caggs(), 0, 'after 026: no session continuous aggregate');
    const kinds = await db.query(`SELECT relname, relkind::text FROM pg_class WHERE relname = ANY($1::text[]) AND relnamespace = 'public'::regnamespace ORDER BY relname`, [sessionRollups]);
    assert.deepEqual(kinds.rows, sessionRollups.map((relname) => ({ relname, relkind: 'r' })), 'plain tables');
    const registry = await db.query('SELECT relation, refresh_fn FROM rollup_registry WHERE relation = ANY($1::text[]) ORDER BY relation', [sessionRollups]);
    assert.deepEqual(registry.rows, sessionRollups.map((relation) => ({ relation, refresh_fn: 'tm_refresh_rollup_bucket' })), 'kept by the service');
    const events = await db.query(`SELECT count(*)::int AS n FROM timescaledb_information.continuous_aggregates WHERE view_name LIKE 'events\\_%'`);
    assert.ok(events.rows[0].n > 0, 'the event aggregates stay continuous aggregates');
    const humans = (await db.query('SELECT count(*)::int AS n FROM sessions WHERE NOT is_bot')).rows[0].n as number;
    const hours = (await db.query(`SELECT count(DISTINCT date_trunc('hour', started_at, 'UTC'))::int AS n FROM sessions WHERE NOT is_bot`)).rows[0].n as number;
    const pending = await db.query('SELECT bool_and(rebuild) AS rebuild, count(DISTINCT bucket)::int AS hours FROM rollup_invalidations');
    assert.deepEqual(pending.rows, [{ rebuild: true, hours }], 'every hour with sessions is recomputed (the one with a pending delta too), never added to');
    assert.equal((await db.query('SELECT count(*)::int AS n FROM rollup_sessions_hourly')).rows[0].n, 0, 'a migration computes no rollup row');

    const snapshot = async () => {
      const out: Record<string, string[]> = {};
      for (const table of sessionRollups) out[table] = (await db.query(`SELECT coalesce(array_agg(t::text ORDER BY t::text), '{}') AS r FROM ${table} t`)).rows[0].r;
      return out;
    };
    while ((await refreshRollups(db, true, { before })).buckets > 0);
    const refreshed = await snapshot();
    const total = (await db.query('SELECT sum(sessions)::int AS n FROM rollup_sessions_hourly')).rows[0].n;
    assert.equal(total, humans, 'every human session, the late one too; no bot');
    assert.equal((await db.query('SELECT sum(sessions)::int AS n FROM rollup_city_hourly')).rows[0].n, humans);
    await db.query(logAll);
    while ((await refreshRollups(db, true, { before })).buckets > 0);
    assert.deepEqual(await snapshot(), refreshed, 'the rows a recompute of every hour writes');
  } finally {
    await db.end();
    await own.stop();
  }
});
