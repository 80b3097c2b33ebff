// Keeps the hourly rollups (sql/002_rollups.sql) in step with sessions: every invalidated
// (project, hour) older than the current hour is recomputed, then its log entry is removed
// only if no worker changed that hour again meanwhile (version check).
import type { Pool } from './db';

export interface RefreshResult {
  buckets: number;
}

interface Invalidation {
  project_id: string;
  bucket: Date;
  shard: number;
  version: number;
}

export async function rollupRelations(db: Pool): Promise<string[]> {
  const r = await db.query<{ relation: string }>('SELECT relation FROM rollup_dimensions ORDER BY dimension');
  return ['rollup_sessions_hourly', ...r.rows.map((x) => x.relation)];
}

/**
 * Refreshes up to `limit` invalidated buckets that ended before `before` (default: the
 * start of the current hour, whose sessions are still changing every second).
 */
export async function refreshRollups(db: Pool, timescale: boolean, opts: { limit?: number; before?: Date } = {}): Promise<RefreshResult> {
  const before = opts.before ?? new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000);
  const { rows } = await db.query<Invalidation>(
    `SELECT project_id, bucket, shard, version FROM rollup_invalidations WHERE bucket < $1 ORDER BY bucket, project_id, shard LIMIT $2`,
    [before.toISOString(), opts.limit ?? 500],
  );
  if (!rows.length) return { buckets: 0 };
  if (timescale) {
    // A continuous aggregate refresh covers every project of an hour; contiguous hours go together.
    const hours = [...new Set(rows.map((r) => r.bucket.getTime()))].sort((a, b) => a - b);
    const ranges: [number, number][] = [];
    for (const h of hours) {
      const last = ranges[ranges.length - 1];
      if (last && last[1] === h) last[1] = h + 3_600_000;
      else ranges.push([h, h + 3_600_000]);
    }
    const relations = await rollupRelations(db);
    for (const [from, to] of ranges) {
      for (const rel of relations) {
        await db.query('CALL refresh_continuous_aggregate($1::regclass, $2::timestamptz, $3::timestamptz)', [
          rel, new Date(from).toISOString(), new Date(to).toISOString(),
        ]);
      }
    }
    await db.query(
      `DELETE FROM rollup_invalidations i USING unnest($1::text[], $2::timestamptz[], $3::int4[], $4::int8[]) AS u(p, b, s, v)
       WHERE i.project_id = u.p AND i.bucket = u.b AND i.shard = u.s AND i.version = u.v`,
      [rows.map((r) => r.project_id), rows.map((r) => r.bucket.toISOString()), rows.map((r) => r.shard), rows.map((r) => r.version)],
    );
    return { buckets: rows.length };
  }
  // One recompute per (project, hour), however many shards logged it.
  const byBucket = new Map<string, Invalidation[]>();
  for (const r of rows) {
    const k = `${r.project_id}\u0000${r.bucket.toISOString()}`;
    byBucket.set(k, [...(byBucket.get(k) ?? []), r]);
  }
  for (const group of byBucket.values()) {
    const r = group[0]!;
    const c = await db.connect();
    try {
      await c.query('BEGIN');
      await c.query('SELECT tm_refresh_rollup_bucket($1, $2)', [r.project_id, r.bucket.toISOString()]);
      await c.query(
        `DELETE FROM rollup_invalidations i USING unnest($3::int4[], $4::int8[]) AS u(s, v)
         WHERE i.project_id = $1 AND i.bucket = $2 AND i.shard = u.s AND i.version = u.v`,
        [r.project_id, r.bucket.toISOString(), group.map((g) => g.shard), group.map((g) => g.version)],
      );
      await c.query('COMMIT');
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      c.release();
    }
  }
  return { buckets: rows.length };
}
