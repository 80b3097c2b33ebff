// The pages read of a logged hour (the current hour, or a late one not yet refreshed) reads
// each of its views once, whatever the planner thinks the hour holds. The hour's sessions are
// new, so their statistics are not gathered yet and the planner estimates one session: it once
// nested the hour's index range scan under the sessions, reading the whole hour once per
// session (760 sessions: 577,000 rows for 760 views, a second of PostgreSQL per read, and a
// dashboard's reads 503 at their budget on a busy machine). And it plans only the partitions
// of events inside the period, not every month the project ever wrote.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type pg from 'pg';
import { SqlParams } from '../internal/query/filters';
import { rollupPagesSql } from '../internal/insights/rollups';
import { createSqlDb, dropSqlDb, logHour } from './support/sql-db';

const DB_NAME = `pages_log_hour_${process.pid}`;
const PROJECT = 'p_busy';
const SESSIONS = 600;
const HOUR = 3_600_000;
let pool: pg.Pool;
const hour = new Date(Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR);

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Subplan Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}

/** Rows scans of events (any partition) produced or read and dropped, in the subtree of `node`. */
function eventRowsRead(node: PlanNode): number {
  const own = node['Relation Name']?.startsWith('events')
    ? ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1)
    : 0;
  return own + (node.Plans ?? []).reduce((n, p) => n + eventRowsRead(p), 0);
}

/** Every node of a plan, depth first. */
function nodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodes)];
}

before(async () => {
  pool = await createSqlDb(DB_NAME);
  // A partition a month for ten years back (as a project with a long history has), beside the
  // default partition the test database has.
  for (let m = 1; m <= 120; m++) {
    const lo = new Date(Date.UTC(2016, m - 1, 1));
    const hi = new Date(Date.UTC(2016, m, 1));
    await pool.query(`CREATE TABLE events_m${m} PARTITION OF events FOR VALUES FROM ('${lo.toISOString()}') TO ('${hi.toISOString()}')`);
  }
  // Statistics as a new hour has them: none (autovacuum would gather them after the inserts).
  await pool.query('ALTER TABLE sessions SET (autovacuum_enabled = false)');
  await pool.query('ALTER TABLE events_test SET (autovacuum_enabled = false)');
  await pool.query(
    `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, duration_ms, screen_view_count, is_bounce, is_bot,
       entry_origin, entry_path, exit_origin, exit_path)
     SELECT gen_random_uuid(), $1, 'd' || g, 'd' || g, $2::timestamptz + g * interval '5 seconds', $2::timestamptz + g * interval '5 seconds',
       0, 1, true, false, 'https://busy.example', '/p' || (g % 4), 'https://busy.example', '/p' || (g % 4)
     FROM generate_series(1, $3::int) g`,
    [PROJECT, hour.toISOString(), SESSIONS],
  );
  await pool.query(
    `INSERT INTO events (id, project_id, name, device_id, profile_id, session_id, created_at, origin, path, title)
     SELECT gen_random_uuid(), s.project_id, 'screen_view', s.device_id, s.profile_id, s.id, s.started_at, s.entry_origin, s.entry_path, 'Page'
     FROM sessions s WHERE s.project_id = $1`,
    [PROJECT],
  );
  await logHour(pool, PROJECT, hour);
});

after(() => dropSqlDb(pool, DB_NAME));

test('pages of a logged hour read each view of it once, and plan only the period\'s partitions of events', async () => {
  const start = new Date(hour.getTime() - 22 * HOUR);
  const end = new Date(hour.getTime() + 2 * HOUR);
  const p = new SqlParams();
  const sql = rollupPagesSql({ projectId: PROJECT, start, end }, p, 10, 0, 'screen_view');

  const rows = (await pool.query(sql, p.values)).rows as { path: string; sessions: string; views: string }[];
  assert.deepEqual(rows.map((r) => [r.path, Number(r.sessions), Number(r.views)]), [0, 1, 2, 3].map((i) => [`/p${i}`, SESSIONS / 4, SESSIONS / 4]));

  const explained = await pool.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, p.values);
  const plan = (explained.rows[0]['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan;
  const tv = nodes(plan).find((n) => n['Subplan Name'] === 'CTE tv');
  assert.ok(tv, 'the plan has the views of the logged hours (CTE tv)');
  // The hour's views, once (a nested range scan per session read SESSIONS x SESSIONS).
  assert.ok(eventRowsRead(tv) <= SESSIONS, `the logged hour's views read ${eventRowsRead(tv)} rows of events for ${SESSIONS} views`);
  // Partitions planned: the period's (this month's, maybe last month's) and the default, not the 120 of the past.
  const partitions = new Set(nodes(plan).map((n) => n['Relation Name']).filter((r): r is string => r?.startsWith('events_m') ?? false));
  assert.equal(partitions.size, 0, `partitions of past months in the plan: ${[...partitions].join(', ')}`);
});

test("the hour's refresh (tm_refresh_pages_bucket) reads each view of it once, whatever the statistics say", async () => {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    const read = async () => Number((await c.query<{ n: string }>(
      `SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) AS n FROM pg_stat_xact_user_tables WHERE relname LIKE 'events%'`)).rows[0]!.n);
    const before = await read();
    await c.query('SELECT tm_refresh_pages_bucket($1, $2)', [PROJECT, hour]);
    const rowsRead = (await read()) - before;
    const rows = (await c.query<{ path: string; sessions: string; views: string }>(
      'SELECT path, sessions, views FROM rollup_pages_hourly WHERE project_id = $1 AND bucket = $2 ORDER BY path', [PROJECT, hour])).rows;
    assert.deepEqual(rows.map((r) => [r.path, Number(r.sessions), Number(r.views)]), [0, 1, 2, 3].map((i) => [`/p${i}`, SESSIONS / 4, SESSIONS / 4]));
    // Once per view, with room for an index's overhead; per session it was SESSIONS x SESSIONS
    // (10 s of PostgreSQL for a 10,000-event hour of bench/rollup-cost.ts --live).
    assert.ok(rowsRead <= 3 * SESSIONS, `the refresh read ${rowsRead} rows of events for ${SESSIONS} views`);
  } finally {
    await c.query('ROLLBACK');
    c.release();
  }
});
