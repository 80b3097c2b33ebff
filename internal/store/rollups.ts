// Keeps the hourly rollups (sql/002_rollups.sql) in step with sessions: every invalidated
// (project, hour) older than the current hour is recomputed, then its log entry is removed
// only if no worker changed that hour again meanwhile (version check).
import { transaction, type Pool } from './db';

export interface RefreshResult {
  buckets: number;
}

interface Invalidation {
  project_id: string;
  bucket: Date;
  shard: number;
  version: number;
}

/** Every rollup relation (sql/007_rollup_registry.sql). */
export async function rollupRelations(db: Pool): Promise<string[]> {
  const r = await db.query<{ relation: string }>('SELECT relation FROM rollup_registry ORDER BY relation');
  return r.rows.map((x) => x.relation);
}

export interface RollupKinds {
  /** TimescaleDB continuous aggregates, refreshed over hour ranges. */
  caggs: string[];
  /** Tables the service keeps, by their per-(project, hour) refresh functions. */
  keptTables: string[];
  refreshFunctions: string[];
}

export async function rollupKinds(db: Pool): Promise<RollupKinds> {
  const r = await db.query<{ relation: string; refresh_fn: string | null }>('SELECT relation, refresh_fn FROM rollup_registry ORDER BY relation');
  const fns = new Set<string>();
  for (const x of r.rows) if (x.refresh_fn) fns.add(x.refresh_fn);
  return {
    caggs: r.rows.filter((x) => !x.refresh_fn).map((x) => x.relation),
    keptTables: r.rows.filter((x) => x.refresh_fn).map((x) => x.relation),
    refreshFunctions: [...fns].sort(),
  };
}

/** Identifiers from rollup_registry are quoted before they reach SQL text. */
const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;

export interface RefreshOptions {
  /** Entries (rows) taken in one call; default 500. */
  limit?: number;
  /** Only buckets that ended before this (default: the start of the current hour, whose sessions are still changing every second). */
  before?: Date;
  /**
   * ROLLUP_REFRESH_QUIET_MS: a bucket is recomputed only once nothing changed it for this
   * long (its entries' latest `last_at`), so a burst of late writes into a past hour costs
   * one recompute of the hour, not one per refresh round it spans. 0 (default): at once.
   */
  quietMs?: number;
  /**
   * ROLLUP_REFRESH_MAX_DELAY_MS: ... or once its oldest entry waited this long, so an hour
   * that keeps changing (the session_ends that follow every hour for 30 minutes) is still
   * recomputed every so often. Only with quietMs > 0.
   */
  maxDelayMs?: number;
}

/**
 * Refreshes up to `limit` invalidated entries of buckets that ended before `before` and
 * are due (see RefreshOptions). Reads are exact whatever is due: a logged bucket is read
 * from the raw rows until its entries are refreshed away.
 */
export async function refreshRollups(db: Pool, timescale: boolean, opts: RefreshOptions = {}): Promise<RefreshResult> {
  const before = opts.before ?? new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000);
  const quietMs = opts.quietMs ?? 0;
  const { rows } = quietMs > 0
    ? await db.query<Invalidation>(
      `SELECT i.project_id, i.bucket, i.shard, i.version
       FROM (SELECT project_id, bucket FROM rollup_invalidations WHERE bucket < $1
             GROUP BY project_id, bucket
             HAVING max(last_at) <= now() - $3 * interval '1 millisecond'
                 OR min(first_at) <= now() - $4 * interval '1 millisecond') due
       JOIN rollup_invalidations i USING (project_id, bucket)
       ORDER BY i.bucket, i.project_id, i.shard LIMIT $2`,
      [before.toISOString(), opts.limit ?? 500, quietMs, Math.max(quietMs, opts.maxDelayMs ?? 300_000)],
    )
    : await db.query<Invalidation>(
      `SELECT project_id, bucket, shard, version FROM rollup_invalidations WHERE bucket < $1 ORDER BY bucket, project_id, shard LIMIT $2`,
      [before.toISOString(), opts.limit ?? 500],
    );
  if (!rows.length) return { buckets: 0 };
  const kinds = await rollupKinds(db);
  if (timescale) {
    // A continuous aggregate refresh covers every project of an hour; contiguous hours go together.
    const hours = [...new Set(rows.map((r) => r.bucket.getTime()))].sort((a, b) => a - b);
    const ranges: [number, number][] = [];
    for (const h of hours) {
      const last = ranges[ranges.length - 1];
      if (last && last[1] === h) last[1] = h + 3_600_000;
      else ranges.push([h, h + 3_600_000]);
    }
    for (const [from, to] of ranges) {
      for (const rel of kinds.caggs) {
        await db.query('CALL refresh_continuous_aggregate($1::regclass, $2::timestamptz, $3::timestamptz)', [
          rel, new Date(from).toISOString(), new Date(to).toISOString(),
        ]);
      }
    }
  }
  // Service-kept tables: one recompute per (project, hour), however many shards logged it,
  // in the transaction that removes its log entries.
  const byBucket = new Map<string, Invalidation[]>();
  for (const r of rows) {
    const k = `${r.project_id}\u0000${r.bucket.toISOString()}`;
    byBucket.set(k, [...(byBucket.get(k) ?? []), r]);
  }
  for (const group of byBucket.values()) {
    const r = group[0]!;
    await transaction(db, async (c) => {
      for (const fn of kinds.refreshFunctions) {
        await c.query(`SELECT ${ident(fn)}($1::text, $2::timestamptz)`, [r.project_id, r.bucket.toISOString()]);
      }
      await c.query(
        `DELETE FROM rollup_invalidations i USING unnest($3::int4[], $4::int8[]) AS u(s, v)
         WHERE i.project_id = $1 AND i.bucket = $2 AND i.shard = u.s AND i.version = u.v`,
        [r.project_id, r.bucket.toISOString(), group.map((g) => g.shard), group.map((g) => g.version)],
      );
    });
  }
  return { buckets: rows.length };
}
