// The reference the rollup tests compare kept tables with: every service-kept rollup table's
// rows of a project, and what recomputing every hour of the project gives.
import type pg from 'pg';
import { refreshRollups } from '../../internal/store/rollups';

type Db = pg.Pool;

/** Every service-kept rollup table's rows of the project, in a stable order. */
export async function rollupSnapshot(db: Db, projectId: string): Promise<Record<string, string[]>> {
  const rels = (await db.query<{ relation: string }>('SELECT relation FROM rollup_registry WHERE refresh_fn IS NOT NULL ORDER BY relation')).rows;
  const out: Record<string, string[]> = {};
  for (const { relation } of rels) {
    const r = await db.query<{ j: string }>(`SELECT to_jsonb(t)::text AS j FROM "${relation}" t WHERE project_id = $1 ORDER BY 1`, [projectId]);
    out[relation] = r.rows.map((x) => x.j);
  }
  return out;
}

/** Refresh rounds until nothing is due before `before`; the rounds that did something. */
export async function drainRefresh(db: Db, before: Date, opts: { recomputeLargeDeltas?: boolean } = {}): Promise<number> {
  let rounds = 0;
  while ((await refreshRollups(db, false, { before, ...opts })).buckets > 0) rounds++;
  return rounds;
}

/** What recomputing every hour of the project gives (logged for recompute, drained, read). */
export async function recomputeAllHours(db: Db, projectId: string, before: Date): Promise<Record<string, string[]>> {
  await db.query(
    `INSERT INTO rollup_invalidations (project_id, bucket, shard, rebuild)
     SELECT $1, b, 0, true FROM (
       SELECT date_trunc('hour', started_at, 'UTC') AS b FROM sessions WHERE project_id = $1
       UNION SELECT date_trunc('hour', created_at, 'UTC') FROM events WHERE project_id = $1) h
     ON CONFLICT (project_id, bucket, shard) DO UPDATE SET rebuild = true, version = nextval('rollup_version_seq')`,
    [projectId],
  );
  await drainRefresh(db, before);
  return rollupSnapshot(db, projectId);
}
