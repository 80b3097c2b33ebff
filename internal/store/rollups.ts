// Keeps the rollups in step with sessions and events (docs/rollups.md):
//   - an hour logged with rebuild (the current hour once it is over, a migration, retention)
//     is recomputed by the refresh functions of rollup_registry;
//   - a past hour whose every change was logged as a delta (sql/025_rollup_deltas.sql) takes
//     the delta: the contribution of the changed sessions and events, computed before and
//     after by the same refresh functions over temporary tables, added per the catalogue
//     (rollup-catalogue.ts). Its cost is the change, not the hour.
// A round takes at most `roundHours` (project, hour) pairs, in transactions of at most
// `transactionHours` pairs, each committed on its own and picked anew in turn across projects
// (one project's backlog of late hours cannot hold another's hour back for more than a
// transaction or two): a transaction's locks (partitions of events, rollup rows) and time,
// and a round's, are bounded whatever the backlog.
// Each transaction is REPEATABLE READ (one snapshot: what a recompute reads and which delta
// rows it consumes agree); log entries are removed afterwards, each only at the version
// read, so an hour changed meanwhile stays logged (and read raw) for the next round.
// This file holds the round: which (project, hour) pairs each transaction takes, and the
// transaction itself; the delta's computation is rollup-deltas.ts, the recompute's
// statements rollup-recompute.ts.
import type { Pool, PoolClient } from './db';
import { catalogueEntry, isCatalogued } from './rollup-catalogue';
import { applyDeltas, pickDeltaRows, vacuumShadows } from './rollup-deltas';
import { refreshCaggs, refreshFunctions, refreshHours, shadowInvalidations } from './rollup-recompute';

export interface RefreshResult {
  /** Log entries (rollup_invalidations rows) dealt with; 0: nothing was due. */
  buckets: number;
  /** (project, hour) pairs the round picked (at most `roundHours`). */
  hours: number;
  /** Transactions it committed (each at most `transactionHours` of the pairs). */
  transactions: number;
  /** Delta hours it recomputed instead, their change being at least the hour (promoteLargeDeltas). */
  promoted: number;
  /** Transactions whose delta was new session_start / session_end rows alone (applyDeltas: only the tables counting those). */
  serviceOnlyDeltas: number;
}

interface RollupKinds {
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

/** ROLLUP_REFRESH_ROUND_HOURS' default: (project, hour) pairs one round takes at most. */
const DEFAULT_ROUND_HOURS = 240;
/** ROLLUP_REFRESH_TRANSACTION_HOURS' default: pairs one of its transactions takes at most. */
const DEFAULT_TRANSACTION_HOURS = 12;

export interface RefreshOptions {
  /** Log entries (rows) one round takes at most; default: no limit but `roundHours`. */
  limit?: number;
  /** Only buckets that ended before this (default: the start of the current hour, whose sessions are still changing every second). */
  before?: Date;
  /**
   * ROLLUP_REFRESH_QUIET_MS: a bucket is recomputed only once nothing changed it for this
   * long (its entries' latest `last_at`), so a burst of late writes into a past hour costs
   * one recompute of the hour, not one per refresh round it spans. 0 (default): at once.
   * A project's deltas go in by the same rule, over its delta log.
   */
  quietMs?: number;
  /**
   * ROLLUP_REFRESH_MAX_DELAY_MS: ... or once its oldest entry waited this long, so an hour
   * that keeps changing (the session_ends that follow every hour for 30 minutes) is still
   * recomputed every so often. Only with quietMs > 0.
   */
  maxDelayMs?: number;
  /** ROLLUP_REFRESH_ROUND_HOURS: (project, hour) pairs a round takes at most (default DEFAULT_ROUND_HOURS). */
  roundHours?: number;
  /** ROLLUP_REFRESH_TRANSACTION_HOURS: pairs one transaction takes at most (default DEFAULT_TRANSACTION_HOURS). */
  transactionHours?: number;
  /**
   * A delta hour whose change is at least what its rollups hold is recomputed instead
   * (promoteLargeDeltas); default true. false: every delta hour takes its delta (the delta
   * tests, whose hours are small).
   */
  recomputeLargeDeltas?: boolean;
}

/** One refresh at a time: its snapshot must follow the previous one's commit. */
const REFRESH_LOCK = 727_274_025;
const HOUR_MS = 3_600_000;

interface Entry {
  project_id: string;
  bucket: Date;
  shard: number;
  version: string;
}

/** A (project, hour) a round takes: recomputed (a due rebuild hour), or brought up to date by its deltas. */
interface Pick {
  project_id: string;
  bucket: Date;
  recompute: boolean;
}

/** A logged (project, hour), as the round's pick reads it. */
interface Candidate {
  project_id: string;
  bucket: Date;
  rebuild: boolean;
  entries: number;
  first_at: Date;
  last_at: Date;
}

const hourKey = (p: string, b: Date | number): string => `${p}\u0000${typeof b === 'number' ? b : b.getTime()}`;
const entryKey = (e: { project_id: string; bucket: Date; shard: number }): string => `${hourKey(e.project_id, e.bucket)}\u0000${e.shard}`;

/**
 * Refreshes up to `roundHours` (project, hour) pairs that are due (see RefreshOptions): hours
 * to recompute that ended before `before`, and hours whose changes were logged as deltas, in
 * transactions of `transactionHours` taken in turn across projects. Reads are exact
 * whatever is due: a logged bucket is read from the raw rows until its entries are refreshed
 * away. Returns the number of log entries it dealt with (0: nothing was due).
 */
export async function refreshRollups(db: Pool, timescale: boolean, opts: RefreshOptions = {}): Promise<RefreshResult> {
  const c = await db.connect();
  try {
    return await refreshRollupsOn(db, c, timescale, opts);
  } finally {
    c.release();
  }
}

/**
 * refreshRollups on a connection of `db` that the caller holds (the rebuild's, which holds a
 * lock of its own on it: a server of one connection, as TimescaleDB in PGlite, has no other).
 */
export async function refreshRollupsOn(db: Pool, c: PoolClient, timescale: boolean, opts: RefreshOptions = {}): Promise<RefreshResult> {
  await c.query('SELECT pg_advisory_lock($1)', [REFRESH_LOCK]);
  try {
    return await refreshRound(db, c, timescale, opts);
  } finally {
    await c.query('SELECT pg_advisory_unlock($1)', [REFRESH_LOCK]);
  }
}

/** Pools whose database has sql/025 (a schema only moves forward: checked until it has). */
const schemaReady = new WeakSet<Pool>();

interface Schema {
  deltas: boolean;
  times: boolean;
}

/** When each project was last served by a transaction, per database: who goes first in the next. */
const served = new WeakMap<Pool, { round: number; last: Map<string, number> }>();

async function refreshRound(db: Pool, c: PoolClient, timescale: boolean, opts: RefreshOptions): Promise<RefreshResult> {
  const before = opts.before ?? new Date(Math.floor(Date.now() / HOUR_MS) * HOUR_MS);
  const quietMs = opts.quietMs ?? 0;
  const maxDelayMs = Math.max(quietMs, opts.maxDelayMs ?? 300_000);
  const kinds = await rollupKinds(c as unknown as Pool);
  // A database not yet migrated to sql/025 (an upgrade under way) logs no deltas: every entry
  // is a recompute.
  const schema: Schema = schemaReady.has(db) ? { deltas: true, times: true } : (await c.query<Schema>(
    `SELECT to_regclass('public.rollup_delta_sessions') IS NOT NULL AS deltas,
            EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'public'
                    AND table_name = 'rollup_invalidations' AND column_name = 'first_at') AS times`)).rows[0]!;
  if (schema.deltas && schema.times) schemaReady.add(db);
  const roundHours = Math.max(1, opts.roundHours ?? DEFAULT_ROUND_HOURS);
  const perTransaction = Math.max(1, opts.transactionHours ?? DEFAULT_TRANSACTION_HOURS);
  const limit = opts.limit ?? Number.POSITIVE_INFINITY;
  const result: RefreshResult = { buckets: 0, hours: 0, transactions: 0, promoted: 0, serviceOnlyDeltas: 0 };
  // Picked anew for each transaction: an hour another project logs meanwhile goes in the next
  // one, not in the next round.
  while (result.hours < roundHours && result.buckets < limit) {
    const picks = await pickHours(db, c, schema, {
      before, quietMs, maxDelayMs, hours: Math.min(perTransaction, roundHours - result.hours), limit: limit - result.buckets,
    });
    if (!picks.length) break;
    const promoteFrom = picks.filter((p) => p.recompute).length;
    const t = await refreshTransaction(c, timescale, kinds, schema, picks, opts.recomputeLargeDeltas ?? true);
    result.buckets += t.dealt;
    if (t.serviceOnly) result.serviceOnlyDeltas++;
    result.promoted += picks.filter((p) => p.recompute).length - promoteFrom;
    result.hours += picks.length;
    result.transactions++;
  }
  if (result.transactions && schema.deltas) await vacuumShadows(c);
  return result;
}

/**
 * The (project, hour) pairs the next transaction takes, at most `hours`: the due hours of
 * each project (recomputes that ended before `before` and are quiet or waited long enough;
 * delta hours of a project whose delta log is quiet or waited long enough), oldest logged
 * first; projects served least recently first, one hour of each in turn. So a project with
 * an hour waiting goes in the next transaction however many hours another has waiting, and
 * one that a full transaction left out goes first in the one after.
 */
async function pickHours(
  db: Pool, c: PoolClient, schema: Schema,
  o: { before: Date; quietMs: number; maxDelayMs: number; hours: number; limit: number },
): Promise<Pick[]> {
  const rebuild = schema.deltas ? 'bool_or(rebuild)' : 'true';
  const times = schema.times ? 'min(first_at) AS first_at, max(last_at) AS last_at' : 'now() AS first_at, now() AS last_at';
  const { rows } = await c.query<Candidate>(
    `SELECT project_id, bucket, ${rebuild} AS rebuild, count(*)::int AS entries, ${times}
     FROM public.rollup_invalidations GROUP BY project_id, bucket`);
  // Projects whose deltas wait: something logged within quietMs, and nothing for maxDelayMs.
  const waiting = new Set<string>();
  if (schema.deltas && o.quietMs > 0 && rows.some((r) => !r.rebuild)) {
    const r = await c.query<{ project_id: string }>(
      `SELECT project_id FROM (SELECT project_id, at FROM public.rollup_delta_sessions UNION ALL SELECT project_id, at FROM public.rollup_delta_events) x
       GROUP BY project_id
       HAVING max(at) > now() - $1 * interval '1 millisecond' AND min(at) > now() - $2 * interval '1 millisecond'`,
      [o.quietMs, o.maxDelayMs]);
    for (const x of r.rows) waiting.add(x.project_id);
  }
  const now = Date.now();
  const byProject = new Map<string, (Candidate & { recompute: boolean })[]>();
  for (const x of rows) {
    if (x.rebuild) {
      if (x.bucket >= o.before) continue;
      const due = o.quietMs <= 0 || x.last_at.getTime() <= now - o.quietMs || x.first_at.getTime() <= now - o.maxDelayMs;
      if (!due) continue;
    } else if (waiting.has(x.project_id)) continue;
    const list = byProject.get(x.project_id) ?? [];
    list.push({ ...x, recompute: x.rebuild });
    byProject.set(x.project_id, list);
  }
  // Delta log rows of hours nobody logged (none are expected; they would otherwise wait
  // forever): taken once the log is empty.
  if (!rows.length && schema.deltas) {
    const orphans = await c.query<{ project_id: string; bucket: Date }>(
      `SELECT DISTINCT project_id, bucket FROM (
         SELECT project_id, date_trunc('hour', started_at, 'UTC') AS bucket FROM public.rollup_delta_sessions
         UNION ALL SELECT project_id, date_trunc('hour', created_at, 'UTC') FROM public.rollup_delta_events) x
       WHERE NOT EXISTS (SELECT 1 FROM public.rollup_invalidations i WHERE i.project_id = x.project_id AND i.bucket = x.bucket)
       LIMIT $1`, [o.hours]);
    for (const x of orphans.rows) {
      if (waiting.has(x.project_id)) continue;
      const list = byProject.get(x.project_id) ?? [];
      list.push({ ...x, rebuild: false, entries: 0, first_at: new Date(0), last_at: new Date(0), recompute: false });
      byProject.set(x.project_id, list);
    }
  }
  let state = served.get(db);
  if (!state) served.set(db, (state = { round: 0, last: new Map() }));
  const lastServed = state.last;
  const queues = [...byProject].map(([project, hours]) => ({
    project,
    hours: hours.sort((a, b) => a.first_at.getTime() - b.first_at.getTime() || a.bucket.getTime() - b.bucket.getTime()),
  }));
  queues.sort((a, b) => (lastServed.get(a.project) ?? -1) - (lastServed.get(b.project) ?? -1)
    || a.hours[0]!.first_at.getTime() - b.hours[0]!.first_at.getTime() || (a.project < b.project ? -1 : a.project > b.project ? 1 : 0));
  const picks: Pick[] = [];
  let entries = 0;
  for (let i = 0, more = true; more && picks.length < o.hours && entries < o.limit; i++) {
    more = false;
    for (const q of queues) {
      const h = q.hours[i];
      if (!h) continue;
      more = true;
      if (picks.length >= o.hours || entries >= o.limit) break;
      picks.push({ project_id: h.project_id, bucket: h.bucket, recompute: h.recompute });
      entries += h.entries;
    }
  }
  state.round++;
  for (const p of picks) lastServed.set(p.project_id, state.round);
  // Projects with nothing logged are forgotten (the map holds the ones with a backlog).
  for (const p of [...lastServed.keys()]) if (!byProject.has(p)) lastServed.delete(p);
  return picks;
}

/**
 * Delta hours whose logged change is at least what their rollups already hold (a backfill into
 * an hour that was empty, a burst of late writes larger than the hour) are recomputed instead,
 * in this transaction, like a rebuild hour (tm_pick.recompute; their entries stay rebuild =
 * false): a delta costs about twice its change (its rows' contribution computed before and
 * after, then merged into each table), a recompute the hour (what was there and the change).
 * Either way the cost is a small multiple of the change; a few late writes into a large hour
 * stay deltas. The sizes compared: the hour's logged sessions and events (the delta log)
 * against the sessions and events its rollups count (rollup_sessions_hourly, events_hourly).
 */
async function promoteLargeDeltas(c: PoolClient, picks: Pick[]): Promise<void> {
  if (!picks.some((p) => !p.recompute)) return;
  const { rows } = await c.query<{ project_id: string; bucket: Date }>(
    `UPDATE tm_pick k SET recompute = true
     WHERE NOT k.recompute AND k.bucket < date_trunc('hour', now(), 'UTC')
       AND (SELECT count(DISTINCT s.session_id) FROM public.rollup_delta_sessions s
            WHERE s.project_id = k.project_id AND s.started_at >= k.bucket AND s.started_at < k.bucket + interval '1 hour')
         + (SELECT count(*) FROM public.rollup_delta_events e
            WHERE e.project_id = k.project_id AND e.created_at >= k.bucket AND e.created_at < k.bucket + interval '1 hour')
         >= coalesce((SELECT sum(r.sessions) FROM public.rollup_sessions_hourly r WHERE r.project_id = k.project_id AND r.bucket = k.bucket), 0)
          + coalesce((SELECT sum(h.count) FROM public.events_hourly h WHERE h.project_id = k.project_id AND h.bucket = k.bucket), 0)
     RETURNING k.project_id, k.bucket`);
  const promoted = new Set(rows.map((r) => hourKey(r.project_id, r.bucket)));
  for (const p of picks) if (promoted.has(hourKey(p.project_id, p.bucket))) p.recompute = true;
}

/**
 * One transaction of a round: the picked hours' deltas (with every delta row of the
 * sessions they reach: a session's delta is computed whole) and recomputes. Returns the
 * number of log entries it dealt with.
 */
async function refreshTransaction(
  c: PoolClient, timescale: boolean, kinds: RollupKinds, schema: Schema, picks: Pick[], promote: boolean,
): Promise<{ dealt: number; serviceOnly: boolean }> {
  const keys = [picks.map((p) => p.project_id), picks.map((p) => p.bucket.toISOString())];
  // Continuous aggregates refresh outside a transaction block, over whole hour ranges (every
  // project of an hour): the picked hours. An entry changed after this read, or of an hour
  // not picked (one a picked session's delta completes), is kept for the next round.
  let caggVersions: Map<string, string> | null = null;
  if (timescale && kinds.caggs.length) {
    const { rows } = await c.query<Entry>(
      `SELECT i.project_id, i.bucket, i.shard, i.version FROM rollup_invalidations i
       JOIN unnest($1::text[], $2::timestamptz[]) AS k(p, b) ON i.project_id = k.p AND i.bucket = k.b`, keys);
    caggVersions = new Map(rows.map((r) => [entryKey(r), r.version]));
    await refreshCaggs(c, kinds.caggs, [...new Set(picks.map((p) => p.bucket.getTime()))].sort((a, b) => a - b));
  }

  await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  let done: Entry[];
  let serviceOnlyDelta = false;
  try {
    await c.query('CREATE TEMP TABLE tm_pick (project_id text, bucket timestamptz, recompute boolean) ON COMMIT DROP');
    await c.query('INSERT INTO tm_pick SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::bool[])', [...keys, picks.map((p) => p.recompute)]);
    const fnRelations = await refreshFunctions(c);
    if (schema.deltas && promote) await promoteLargeDeltas(c, picks);
    // (a recompute pick is a rebuild hour in this snapshot too: only the refresh removes
    // entries, one at a time; or a delta hour promoted to a recompute just now)
    const due = picks.filter((p) => p.recompute);
    const picked = schema.deltas ? await pickDeltaRows(c) : 0;
    const { sketchHours, serviceOnly } = picked > 0 ? await applyDeltas(c, fnRelations) : { sketchHours: [], serviceOnly: false };
    serviceOnlyDelta = serviceOnly;
    // Hours now exact in the rollups: logged, no rebuild entry, no delta row left in this snapshot.
    await c.query(schema.deltas ? `CREATE TEMP TABLE tm_completed ON COMMIT DROP AS
      SELECT DISTINCT h.project_id, h.bucket FROM (
        SELECT project_id, bucket FROM tm_pick WHERE NOT recompute
        UNION SELECT project_id, date_trunc('hour', started_at, 'UTC') FROM tm_d_rows_s
        UNION SELECT project_id, date_trunc('hour', created_at, 'UTC') FROM tm_d_rows_e
      ) h
      WHERE NOT EXISTS (SELECT 1 FROM tm_pick k WHERE k.recompute AND k.project_id = h.project_id AND k.bucket = h.bucket)
        AND EXISTS (SELECT 1 FROM public.rollup_invalidations i WHERE i.project_id = h.project_id AND i.bucket = h.bucket)
        AND NOT EXISTS (SELECT 1 FROM public.rollup_invalidations i WHERE i.project_id = h.project_id AND i.bucket = h.bucket AND i.rebuild)
        AND NOT EXISTS (SELECT 1 FROM public.rollup_delta_sessions s WHERE s.project_id = h.project_id
                        AND s.started_at >= h.bucket AND s.started_at < h.bucket + interval '1 hour')
        AND NOT EXISTS (SELECT 1 FROM public.rollup_delta_events e WHERE e.project_id = h.project_id
                        AND e.created_at >= h.bucket AND e.created_at < h.bucket + interval '1 hour')`
      : 'CREATE TEMP TABLE tm_completed (project_id text, bucket timestamptz) ON COMMIT DROP');
    const completed = (await c.query<{ project_id: string; bucket: Date }>('SELECT project_id, bucket FROM tm_completed ORDER BY bucket, project_id')).rows;
    const nonAdditive = [...fnRelations].filter(([, rels]) => !rels.every(isCatalogued)).map(([fn]) => fn);
    // The refresh functions build a local day when no other hour of it awaits a recompute or
    // a delta: they see a temporary rollup_invalidations holding those hours, from which each
    // recomputed hour goes once it is done.
    const recomputing = due.length > 0 || sketchHours.length > 0 || (completed.length > 0 && nonAdditive.length > 0);
    if (recomputing) await shadowInvalidations(c);
    // Functions whose tables cannot take a delta (the hll sketches' distinct counts): their
    // completed delta hours are recomputed.
    if (nonAdditive.length) await refreshHours(c, nonAdditive, completed, false);
    // Sketch hours something may have left (see the catalogue's `unions`): recomputed.
    const sketchFns = [...fnRelations].filter(([, rels]) => rels.some((r) => catalogueEntry(r)?.unions)).map(([fn]) => fn);
    await refreshHours(c, sketchFns, sketchHours, false);
    // Every due hour's functions, then its shadow entry gone, hour after hour: one statement.
    await refreshHours(c, kinds.refreshFunctions, due, true);
    if (recomputing) {
      await c.query('DROP TABLE pg_temp.rollup_invalidations');
      await c.query('DISCARD PLANS');
    }
    // The entries dealt with, at the version this snapshot read.
    done = (await c.query<Entry>(
      `SELECT i.project_id, i.bucket, i.shard, i.version FROM public.rollup_invalidations i
       JOIN unnest($1::text[], $2::timestamptz[]) AS k(p, b) ON i.project_id = k.p AND i.bucket = k.b`,
      [[...due, ...completed].map((h) => h.project_id), [...due, ...completed].map((h) => h.bucket.toISOString())])).rows;
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  }
  const dealt = done.length;
  if (caggVersions) {
    const versions = caggVersions;
    done = done.filter((e) => versions.get(entryKey(e)) === e.version);
  }
  if (done.length) {
    await c.query(
      `DELETE FROM rollup_invalidations i USING unnest($1::text[], $2::timestamptz[], $3::int4[], $4::int8[]) AS u(p, b, s, v)
       WHERE i.project_id = u.p AND i.bucket = u.b AND i.shard = u.s AND i.version = u.v`,
      [done.map((e) => e.project_id), done.map((e) => e.bucket.toISOString()), done.map((e) => e.shard), done.map((e) => e.version)],
    );
  }
  return { dealt, serviceOnly: serviceOnlyDelta };
}
