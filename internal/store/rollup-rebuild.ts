// The repair tool (`cli rollups rebuild`, docs/operating.md "Rebuilding rollups"): a project's
// rollups of a span of hours recomputed from the raw rows, whatever they hold now. Rollups are
// kept as data arrives (docs/rollups.md); recomputing from raw rows is what a repair does (an
// operator who restored a table, a bug fixed in a refresh function) and what the tests compare
// with, not part of the write path.
//
// The span is taken a chunk of hours at a time: the chunk's hours that hold anything (raw
// events or sessions, or rows in the sessions' or events' hourly rollups) are logged in
// rollup_invalidations for a recompute, under a shard no worker uses, and the service's own
// refresh rounds (rollups.ts) recompute them, so a rebuild takes the same locks, transactions
// and fairness across projects as the running service, which may take part of the work
// meanwhile. Reads take a logged hour raw (exact) until it is recomputed: a chunk costs reads
// speed for its hours, never correctness. Each finished chunk is recorded in rollup_rebuilds
// (sql/037), so the same command goes on from there after a stop.
import type { Pool, PoolClient } from './db';
import { refreshRollupsOn, type RefreshOptions } from './rollups';

const HOUR_MS = 3_600_000;
/** rollup_invalidations.shard of a rebuild's entries: no worker's (they count from 0). */
export const REBUILD_SHARD = -1;
/** Hours logged at a time: a refresh round's worth (ROLLUP_REFRESH_ROUND_HOURS' default). */
export const DEFAULT_CHUNK_HOURS = 240;
/** One rebuild of a project at a time (a session advisory lock: it goes with the connection). */
const REBUILD_LOCK = 727_274_037;

export class RebuildRangeError extends Error {}

export interface RebuildProgress {
  projectId: string;
  /** Hours recomputed so far, this run and the runs before it of the same span. */
  hoursDone: number;
  hoursTotal: number;
  /** Where the next chunk starts (`to` when done). */
  next: Date;
  elapsedMs: number;
}

export interface RebuildOptions {
  projectId: string;
  /** Rounded down to the hour. */
  from: Date;
  /** Rounded up to the hour; at most the start of the current hour (the refresh's own). */
  to: Date;
  timescale: boolean;
  chunkHours?: number;
  /** The service's refresh settings (quiet time, round and transaction sizes). */
  refresh?: Omit<RefreshOptions, 'before' | 'limit'>;
  onProgress?: (p: RebuildProgress) => void;
  /** Stop after this many chunks (a rebuild stopped half way, for the tests). */
  maxChunks?: number;
  now?: Date;
}

export interface RebuildResult {
  projectId: string;
  from: Date;
  to: Date;
  /** Hours this run recomputed. */
  hours: number;
  /** Hours of the span that hold anything (this run and the runs before it). */
  hoursTotal: number;
  /** Where this run took up a span that an earlier run had left; null: from the start. */
  resumedFrom: Date | null;
  /** The whole span is done (false: stopped by maxChunks; the same span goes on from `next`). */
  done: boolean;
  seconds: number;
}

const floorHour = (t: number) => Math.floor(t / HOUR_MS) * HOUR_MS;
const ceilHour = (t: number) => Math.ceil(t / HOUR_MS) * HOUR_MS;

/** The span a rebuild of [from, to) takes: whole UTC hours, none at or after the current hour. */
export function rebuildSpan(from: Date, to: Date, now: Date): { from: Date; to: Date } {
  const lo = floorHour(from.getTime());
  const hi = Math.min(ceilHour(to.getTime()), floorHour(now.getTime()));
  if (!(lo < hi)) {
    throw new RebuildRangeError(`nothing to rebuild between ${new Date(lo).toISOString()} and ${new Date(hi).toISOString()}`
      + ' (--from must be before --to, and before the current hour: the refresh recomputes the current hour when it is over)');
  }
  return { from: new Date(lo), to: new Date(hi) };
}

/**
 * The hours of [from, to) that hold anything for the project: raw events or sessions, or rows
 * in rollup_sessions_hourly or events_hourly (rollups left where the raw rows are gone). One
 * index probe per hour and table.
 */
async function spanHours(c: PoolClient, projectId: string, from: Date, to: Date): Promise<Date[]> {
  const { rows } = await c.query<{ h: Date }>(
    `SELECT g.h FROM generate_series($2::timestamptz, $3::timestamptz - interval '1 hour', interval '1 hour') AS g(h)
     WHERE EXISTS (SELECT 1 FROM events e WHERE e.project_id = $1 AND e.created_at >= g.h AND e.created_at < g.h + interval '1 hour')
        OR EXISTS (SELECT 1 FROM sessions s WHERE s.project_id = $1 AND s.started_at >= g.h AND s.started_at < g.h + interval '1 hour')
        OR EXISTS (SELECT 1 FROM rollup_sessions_hourly r WHERE r.project_id = $1 AND r.bucket = g.h)
        OR EXISTS (SELECT 1 FROM events_hourly r WHERE r.project_id = $1 AND r.bucket = g.h)
     ORDER BY g.h`,
    [projectId, from.toISOString(), to.toISOString()],
  );
  return rows.map((r) => r.h);
}

/** The rebuild's entries of [from, to) the refresh has not recomputed yet. */
async function pending(c: PoolClient, projectId: string, from: Date, to: Date): Promise<number> {
  const { rows } = await c.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM rollup_invalidations WHERE project_id = $1 AND shard = $2 AND bucket >= $3 AND bucket < $4',
    [projectId, REBUILD_SHARD, from.toISOString(), to.toISOString()],
  );
  return rows[0]!.n;
}

/**
 * Recomputes the project's rollups of every hour of the span that holds anything, a chunk at a
 * time (see the header); takes up where an earlier run of the same span stopped.
 */
export async function rebuildRollups(db: Pool, o: RebuildOptions): Promise<RebuildResult> {
  const started = Date.now();
  const now = o.now ?? new Date();
  const { from, to } = rebuildSpan(o.from, o.to, now);
  const chunkMs = Math.max(1, Math.floor(o.chunkHours ?? DEFAULT_CHUNK_HOURS)) * HOUR_MS;
  // One connection for all of it (its lock, the refresh rounds, the log): see refreshRollupsOn.
  const c = await db.connect();
  try {
    const got = await c.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [REBUILD_LOCK, o.projectId]);
    if (!got.rows[0]!.ok) throw new RebuildRangeError(`a rebuild of project "${o.projectId}" is running already`);
    try {
      await c.query(
        `INSERT INTO rollup_rebuilds (project_id, from_at, to_at, next_at) VALUES ($1, $2, $3, $2)
         ON CONFLICT (project_id, from_at, to_at) DO NOTHING`,
        [o.projectId, from.toISOString(), to.toISOString()],
      );
      const job = (await c.query<{ next_at: Date; hours_done: number }>(
        'SELECT next_at, hours_done FROM rollup_rebuilds WHERE project_id = $1 AND from_at = $2 AND to_at = $3',
        [o.projectId, from.toISOString(), to.toISOString()],
      )).rows[0]!;
      const resumedFrom = job.next_at.getTime() > from.getTime() ? job.next_at : null;
      const before = new Date(floorHour(now.getTime()));
      let hoursDone = job.hours_done;
      // The hours left, found once (a write into one meanwhile is logged by the worker anyway).
      const left = await spanHours(c, o.projectId, job.next_at, to);
      const hoursTotal = hoursDone + left.length;
      let hours = 0;
      let chunks = 0;
      const progress = (next: Date, ofChunk = 0) =>
        o.onProgress?.({ projectId: o.projectId, hoursDone: hoursDone + ofChunk, hoursTotal, next, elapsedMs: Date.now() - started });
      progress(job.next_at);
      let c0 = job.next_at;
      for (; c0 < to && (o.maxChunks === undefined || chunks < o.maxChunks); chunks++) {
        const c1 = new Date(Math.min(c0.getTime() + chunkMs, to.getTime()));
        const list = left.filter((h) => h >= c0 && h < c1);
        if (list.length) {
          // Due at once, even while a worker writes into the hour: first_at long past, so the
          // refresh's ROLLUP_REFRESH_MAX_DELAY_MS has passed for it.
          await c.query(
            `INSERT INTO rollup_invalidations (project_id, bucket, shard, rebuild, first_at, last_at)
             SELECT $1, b, $3, true, 'epoch', 'epoch' FROM unnest($2::timestamptz[]) AS u(b)
             ON CONFLICT (project_id, bucket, shard) DO UPDATE
               SET rebuild = true, version = nextval('rollup_version_seq'), first_at = 'epoch', last_at = 'epoch'`,
            [o.projectId, list.map((d) => d.toISOString()), REBUILD_SHARD],
          );
          for (let waiting = list.length; waiting > 0;) {
            const r = await refreshRollupsOn(db, c, o.timescale, { ...o.refresh, before });
            if (r.buckets === 0) await new Promise((res) => setTimeout(res, 1_000)); // the service's refresh holds them: let it finish
            waiting = await pending(c, o.projectId, c0, c1);
            if (waiting > 0) progress(c0, list.length - waiting);
          }
        }
        hours += list.length;
        hoursDone += list.length;
        await c.query(
          `UPDATE rollup_rebuilds SET next_at = $4, hours_done = $5, updated_at = now()
           WHERE project_id = $1 AND from_at = $2 AND to_at = $3`,
          [o.projectId, from.toISOString(), to.toISOString(), c1.toISOString(), hoursDone],
        );
        c0 = c1;
        progress(c0);
      }
      const done = c0.getTime() >= to.getTime();
      if (done) {
        await c.query('DELETE FROM rollup_rebuilds WHERE project_id = $1 AND from_at = $2 AND to_at = $3',
          [o.projectId, from.toISOString(), to.toISOString()]);
      }
      return { projectId: o.projectId, from, to, hours, hoursTotal, resumedFrom, done, seconds: (Date.now() - started) / 1000 };
    } finally {
      await c.query('SELECT pg_advisory_unlock($1, hashtext($2))', [REBUILD_LOCK, o.projectId]);
    }
  } finally {
    c.release();
  }
}

/** The project's first hour with a raw row (the default start of a rebuild); null: none. */
export async function firstRawHour(db: Pool, projectId: string): Promise<Date | null> {
  const { rows } = await db.query<{ t: Date | null }>(
    `SELECT least((SELECT min(created_at) FROM events WHERE project_id = $1),
                  (SELECT min(started_at) FROM sessions WHERE project_id = $1)) AS t`,
    [projectId],
  );
  const t = rows[0]?.t;
  return t ? new Date(floorHour(t.getTime())) : null;
}

/** The end of an unfinished rebuild of the project that starts at `from`'s hour; null: none. */
export async function unfinishedRebuildEnd(db: Pool, projectId: string, from: Date): Promise<Date | null> {
  const { rows } = await db.query<{ to_at: Date }>(
    'SELECT to_at FROM rollup_rebuilds WHERE project_id = $1 AND from_at = $2 ORDER BY updated_at DESC LIMIT 1',
    [projectId, new Date(floorHour(from.getTime())).toISOString()],
  );
  return rows[0]?.to_at ?? null;
}
