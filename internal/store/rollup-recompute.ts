// The recompute of rollup hours (docs/rollups.md), for the refresh round of rollups.ts and the
// delta's two runs of rollup-deltas.ts: the registry's refresh functions over (project, hour)
// pairs in one statement, TimescaleDB's continuous aggregates over hour ranges, which
// function keeps which tables, and the transaction's view of the log that the refresh
// functions read while it recomputes.
import type { PoolClient } from './db';

const HOUR_MS = 3_600_000;

/**
 * Runs refresh functions `fns` for each hour, in order, in one statement (sql/functions/
 * tm_refresh_hours.sql); with `shadowed`, each hour leaves the round's temporary log once done.
 */
export async function refreshHours(c: PoolClient, fns: string[], hours: { project_id: string; bucket: Date }[], shadowed: boolean): Promise<void> {
  if (!fns.length || !hours.length) return;
  await c.query('SELECT public.tm_refresh_hours($1::text[], $2::text[], $3::timestamptz[], $4)', [
    fns, hours.map((h) => h.project_id), hours.map((h) => h.bucket.toISOString()), shadowed,
  ]);
}

export async function refreshCaggs(c: PoolClient, caggs: string[], hours: number[]): Promise<void> {
  if (!caggs.length || !hours.length) return;
  const ranges: [number, number][] = [];
  for (const h of hours) {
    const last = ranges[ranges.length - 1];
    if (last && last[1] === h) last[1] = h + HOUR_MS;
    else ranges.push([h, h + HOUR_MS]);
  }
  for (const [from, to] of ranges) {
    for (const rel of caggs) {
      await c.query('CALL refresh_continuous_aggregate($1::regclass, $2::timestamptz, $3::timestamptz)', [
        rel, new Date(from).toISOString(), new Date(to).toISOString(),
      ]);
    }
  }
}

/** Each service-kept refresh function with the tables it keeps. */
export async function refreshFunctions(c: PoolClient): Promise<Map<string, string[]>> {
  const r = await c.query<{ relation: string; refresh_fn: string }>(
    'SELECT relation, refresh_fn FROM public.rollup_registry WHERE refresh_fn IS NOT NULL ORDER BY refresh_fn, relation');
  const m = new Map<string, string[]>();
  for (const x of r.rows) m.set(x.refresh_fn, [...(m.get(x.refresh_fn) ?? []), x.relation]);
  return m;
}

/**
 * The transaction's view of the log for the refresh functions (tm_day_build builds a day
 * when no other hour of it is logged): a temporary rollup_invalidations, first in the search
 * path, holding every entry of this snapshot but those of the delta hours it completed. An
 * hour whose deltas wait for a later transaction stays in it: its hourly rows lack them, so
 * its day is not built from raw rows now (the delta would then count twice).
 */
export async function shadowInvalidations(c: PoolClient): Promise<void> {
  await c.query(`CREATE TEMP TABLE rollup_invalidations (LIKE public.rollup_invalidations INCLUDING DEFAULTS) ON COMMIT DROP;
    CREATE INDEX ON pg_temp.rollup_invalidations (project_id, bucket);`);
  await c.query(
    `INSERT INTO pg_temp.rollup_invalidations (project_id, bucket, shard, version)
     SELECT i.project_id, i.bucket, i.shard, i.version FROM public.rollup_invalidations i
     WHERE NOT EXISTS (SELECT 1 FROM tm_completed x WHERE x.project_id = i.project_id AND x.bucket = i.bucket)`,
  );
  await c.query('ANALYZE pg_temp.rollup_invalidations');
  // Cached plans of the functions name the real table; a new temporary one invalidates nothing.
  await c.query('DISCARD PLANS');
}
