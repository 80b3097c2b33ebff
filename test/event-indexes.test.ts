// The indexes every event and session write maintains are the ones docs/operating.md lists
// ("Only the indexes a read needs"), and the reads of the five event indexes that sql/039 merged
// into two are still index-only ranges of the two: active users' activity (bots and the
// service's session rows left out on the index entry), the insights pages' screen views and a
// funnel's steps (funnel's own test checks its plan too).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import type pg from 'pg';
import { activityWhere } from '../internal/insights/activity';
import { SqlParams } from '../internal/query/filters';
import { createSqlDb, dropSqlDb } from './support/sql-db';

const DB_NAME = `event_indexes_${process.pid}`;
const PROJECT = 'p_idx';
let pool: pg.Pool;

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Filter?: string;
  Plans?: PlanNode[];
}
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

before(async () => {
  pool = await createSqlDb(DB_NAME);
  // 400 events over two days: views, custom events, the service's session rows, some bots'.
  await pool.query(
    `INSERT INTO events (id, project_id, name, device_id, profile_id, session_id, created_at, origin, path, is_bot, duration_ms)
     SELECT gen_random_uuid(), $1,
            (ARRAY['screen_view', 'screen_view', 'click', 'session_start', 'session_end'])[1 + i % 5],
            'd' || (i % 40), CASE WHEN i % 7 = 0 THEN 'user-' || (i % 40) ELSE 'd' || (i % 40) END,
            gen_random_uuid(), timestamptz '2024-05-01 00:00:00+00' + i * interval '7 minutes',
            'https://a.example', '/p' || (i % 9), i % 11 = 0, 1000
     FROM generate_series(1, 400) i`,
    [PROJECT],
  );
  await pool.query('VACUUM ANALYZE events');
});

after(async () => {
  await dropSqlDb(pool, DB_NAME);
});

/** The index names in the first column of docs/operating.md's table of indexes. */
function documentedIndexes(): string[] {
  const doc = readFileSync(new URL('../docs/operating.md', import.meta.url), 'utf8');
  const names: string[] = [];
  for (const line of doc.split('\n')) {
    const cell = /^\s*\| ([^|]+) \|/.exec(line)?.[1];
    if (!cell) continue;
    for (const m of cell.matchAll(/`((?:events|sessions)_[a-z_]+)`/g)) names.push(m[1]!);
  }
  return [...new Set(names)].sort();
}

/** The index of the partitioned table that partition index `name` belongs to (itself if none). */
async function parentIndex(name: string): Promise<string> {
  const { rows } = await pool.query<{ parent: string }>(
    `SELECT p.relname AS parent FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
     WHERE c.relname = $1`,
    [name],
  );
  return rows[0]?.parent ?? name;
}

async function plan(sql: string, values: unknown[]): Promise<PlanNode[]> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL enable_seqscan = off'); // tiny tables: see the index path
    await client.query('SET LOCAL enable_bitmapscan = off');
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${sql}`, values);
    await client.query('ROLLBACK');
    return nodes(rows[0]!['QUERY PLAN'][0]!.Plan).filter((n) => n['Relation Name']?.startsWith('events'));
  } finally {
    client.release();
  }
}

test('the indexes on events and sessions are exactly the ones docs/operating.md lists', async () => {
  const { rows } = await pool.query<{ name: string }>(
    "SELECT indexname AS name FROM pg_indexes WHERE schemaname = 'public' AND tablename IN ('events', 'sessions') ORDER BY 1",
  );
  assert.deepEqual(rows.map((r) => r.name), documentedIndexes());
  // sql/039: five event indexes became two
  for (const gone of ['events_project_time_idx', 'events_activity_idx', 'events_project_name_time_idx', 'events_funnel_idx', 'events_views_idx']) {
    assert.ok(!rows.some((r) => r.name === gone), gone);
  }
  assert.equal(rows.filter((r) => r.name.startsWith('events_')).length, 7);
});

test("active users' activity is an index-only range of events_time_idx, bots and session rows left out on the entry", async () => {
  const p = new SqlParams();
  const where = activityWhere(p, PROJECT, '2024-05-01T00:00:00Z', '2024-05-03T00:00:00Z', false);
  const scans = await plan(`SELECT e.profile_id, e.created_at FROM events e WHERE ${where}`, p.values);
  assert.ok(scans.length >= 1);
  for (const scan of scans) {
    assert.equal(scan['Node Type'], 'Index Only Scan', JSON.stringify(scan));
    assert.equal(await parentIndex(scan['Index Name']!), 'events_time_idx');
    assert.match(scan.Filter ?? '', /is_bot/);
    assert.match(scan.Filter ?? '', /session_start/);
  }
  const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events e WHERE ${where}`, p.values);
  const want = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND NOT is_bot AND name NOT IN ('session_start', 'session_end')`,
    [PROJECT],
  );
  assert.equal(rows[0]!.n, want.rows[0]!.n);
  assert.ok(rows[0]!.n > 0);
});

test("the pages' screen views and a funnel's steps are index-only ranges of events_name_time_idx", async () => {
  const views = await plan(
    `SELECT e.session_id, e.origin, e.path, e.created_at, e.duration_ms FROM events e
     WHERE e.project_id = $1 AND e.name = $2 AND e.created_at >= $3 AND e.created_at < $4`,
    [PROJECT, 'screen_view', '2024-05-01T00:00:00Z', '2024-05-03T00:00:00Z'],
  );
  const steps = await plan(
    `SELECT e.session_id, e.profile_id, e.created_at FROM events e
     WHERE e.project_id = $1 AND e.name = $2 AND e.created_at >= $3 AND e.created_at < $4 AND NOT e.is_bot`,
    [PROJECT, 'click', '2024-05-01T00:00:00Z', '2024-05-03T00:00:00Z'],
  );
  for (const scan of [...views, ...steps]) {
    assert.equal(scan['Node Type'], 'Index Only Scan', JSON.stringify(scan));
    assert.equal(await parentIndex(scan['Index Name']!), 'events_name_time_idx');
  }
  assert.ok(views.length >= 1 && steps.length >= 1);
});
