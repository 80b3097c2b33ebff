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
import type { Pool, PoolClient } from './db';
import { catalogueEntry, isCatalogued, measuresOf, ROLLUP_CATALOGUE, type RollupEntry } from './rollup-catalogue';

export interface RefreshResult {
  /** Log entries (rollup_invalidations rows) dealt with; 0: nothing was due. */
  buckets: number;
  /** (project, hour) pairs the round picked (at most `roundHours`). */
  hours: number;
  /** Transactions it committed (each at most `transactionHours` of the pairs). */
  transactions: number;
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

/** ROLLUP_REFRESH_ROUND_HOURS' default: (project, hour) pairs one round takes at most. */
export const DEFAULT_ROUND_HOURS = 240;
/** ROLLUP_REFRESH_TRANSACTION_HOURS' default: pairs one of its transactions takes at most. */
export const DEFAULT_TRANSACTION_HOURS = 12;

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
    await c.query('SELECT pg_advisory_lock($1)', [REFRESH_LOCK]);
    try {
      return await refreshRound(db, c, timescale, opts);
    } finally {
      await c.query('SELECT pg_advisory_unlock($1)', [REFRESH_LOCK]);
    }
  } finally {
    c.release();
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
  const result: RefreshResult = { buckets: 0, hours: 0, transactions: 0 };
  // Picked anew for each transaction: an hour another project logs meanwhile goes in the next
  // one, not in the next round.
  while (result.hours < roundHours && result.buckets < limit) {
    const picks = await pickHours(db, c, schema, {
      before, quietMs, maxDelayMs, hours: Math.min(perTransaction, roundHours - result.hours), limit: limit - result.buckets,
    });
    if (!picks.length) break;
    result.buckets += await refreshTransaction(c, timescale, kinds, schema, picks);
    result.hours += picks.length;
    result.transactions++;
  }
  if (result.transactions && schema.deltas) await vacuumShadows(c);
  return result;
}

/**
 * Every transaction that applies deltas empties the shadow tables with DELETE (cheap on
 * their few rows; TRUNCATE of ~130 tables cost 50-400 ms a transaction): their dead rows are
 * vacuumed here, after the round's transactions, once there are enough of them, so a long
 * backlog (many transactions) does not leave every scan of a shadow table reading dead rows
 * when autovacuum is slow or off (seen with autovacuum off: 570,000 dead rows in one shadow
 * table after an hour of backlog, and one call of the refresh functions over 12 hours grown
 * from a few seconds to over 20).
 */
async function vacuumShadows(c: PoolClient): Promise<void> {
  const { rows } = await c.query<{ rel: string }>(
    `SELECT format('%I.%I', schemaname, relname) AS rel FROM pg_stat_all_tables
     WHERE schemaname IN ($1, $2) AND n_dead_tup >= 1000 ORDER BY 1`, [BEFORE, AFTER]);
  if (rows.length) await c.query(`VACUUM (SKIP_LOCKED) ${rows.map((r) => r.rel).join(', ')}`);
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
 * One transaction of a round: the picked hours' deltas (with every delta row of the
 * sessions they reach: a session's delta is computed whole) and recomputes. Returns the
 * number of log entries it dealt with.
 */
async function refreshTransaction(c: PoolClient, timescale: boolean, kinds: RollupKinds, schema: Schema, picks: Pick[]): Promise<number> {
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
  try {
    await c.query('CREATE TEMP TABLE tm_pick (project_id text, bucket timestamptz, recompute boolean) ON COMMIT DROP');
    await c.query('INSERT INTO tm_pick SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::bool[])', [...keys, picks.map((p) => p.recompute)]);
    const fnRelations = await refreshFunctions(c);
    // (a recompute pick is a rebuild hour in this snapshot too: only the refresh removes entries, one at a time)
    const due = picks.filter((p) => p.recompute);
    const picked = schema.deltas ? await pickDeltaRows(c) : 0;
    const sketchHours = picked > 0 ? await applyDeltas(c, fnRelations) : [];
    // Hours now exact in the rollups: logged, no rebuild entry, no delta row left in this snapshot.
    await c.query(schema.deltas ? `CREATE TEMP TABLE tm_completed ON COMMIT DROP AS
      SELECT DISTINCT h.project_id, h.bucket FROM (
        SELECT project_id, bucket FROM tm_pick WHERE NOT recompute
        UNION SELECT project_id, date_trunc('hour', started_at, 'UTC') FROM tm_d_rows_s
        UNION SELECT project_id, date_trunc('hour', created_at, 'UTC') FROM tm_d_rows_e
      ) h
      WHERE EXISTS (SELECT 1 FROM public.rollup_invalidations i WHERE i.project_id = h.project_id AND i.bucket = h.bucket)
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
  return dealt;
}

/**
 * The delta log rows this transaction consumes, into tm_d_rows_s and tm_d_rows_e: those of
 * the picked hours (a session's by its start hour, an event's by its own), and every row of
 * the sessions they name, so that each session's delta is computed whole (its events are
 * read together with it, before and after). Returns how many rows.
 */
async function pickDeltaRows(c: PoolClient): Promise<number> {
  await c.query(`CREATE TEMP TABLE tm_d_sids ON COMMIT DROP AS
    SELECT s.session_id FROM public.rollup_delta_sessions s
    JOIN tm_pick k ON s.project_id = k.project_id AND s.started_at >= k.bucket AND s.started_at < k.bucket + interval '1 hour'
    UNION
    SELECT e.session_id FROM public.rollup_delta_events e
    JOIN tm_pick k ON e.project_id = k.project_id AND e.created_at >= k.bucket AND e.created_at < k.bucket + interval '1 hour'
    WHERE e.session_id IS NOT NULL`);
  await c.query('ANALYZE tm_d_sids');
  const s = await c.query(`CREATE TEMP TABLE tm_d_rows_s ON COMMIT DROP AS
    SELECT * FROM public.rollup_delta_sessions WHERE session_id IN (SELECT session_id FROM tm_d_sids)`);
  const e = await c.query(`CREATE TEMP TABLE tm_d_rows_e ON COMMIT DROP AS
    SELECT * FROM public.rollup_delta_events WHERE seq IN (
      SELECT seq FROM public.rollup_delta_events WHERE session_id IN (SELECT session_id FROM tm_d_sids)
      UNION
      SELECT d.seq FROM public.rollup_delta_events d
      JOIN tm_pick k ON d.project_id = k.project_id AND d.created_at >= k.bucket AND d.created_at < k.bucket + interval '1 hour')`);
  return (s.rowCount ?? 0) + (e.rowCount ?? 0);
}

/**
 * Runs refresh functions `fns` for each hour, in order, in one statement (sql/functions/
 * tm_refresh_hours.sql); with `shadowed`, each hour leaves the round's temporary log once done.
 */
async function refreshHours(c: PoolClient, fns: string[], hours: { project_id: string; bucket: Date }[], shadowed: boolean): Promise<void> {
  if (!fns.length || !hours.length) return;
  await c.query('SELECT public.tm_refresh_hours($1::text[], $2::text[], $3::timestamptz[], $4)', [
    fns, hours.map((h) => h.project_id), hours.map((h) => h.bucket.toISOString()), shadowed,
  ]);
}

async function refreshCaggs(c: PoolClient, caggs: string[], hours: number[]): Promise<void> {
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
async function refreshFunctions(c: PoolClient): Promise<Map<string, string[]>> {
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
async function shadowInvalidations(c: PoolClient): Promise<void> {
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

interface ColumnInfo {
  name: string;
  nullable: boolean;
}

/** The columns of each relation, in one catalog query. */
async function columnsOf(c: PoolClient, relations: string[]): Promise<Map<string, ColumnInfo[]>> {
  const r = await c.query<{ rel: string; name: string; nullable: boolean }>(
    `SELECT cl.relname AS rel, a.attname AS name, NOT a.attnotnull AS nullable
     FROM pg_attribute a JOIN pg_class cl ON cl.oid = a.attrelid JOIN pg_namespace n ON n.oid = cl.relnamespace
     WHERE n.nspname = 'public' AND cl.relname = ANY($1::text[]) AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY cl.relname, a.attnum`, [relations]);
  const m = new Map<string, ColumnInfo[]>();
  for (const x of r.rows) m.set(x.rel, [...(m.get(x.rel) ?? []), { name: x.name, nullable: x.nullable }]);
  return m;
}

/** The schemas that shadow sessions, events and the rollup tables in a delta's two runs. */
const BEFORE = 'tm_delta_before';
const AFTER = 'tm_delta_after';
const SHADOWED_SOURCES = ['sessions', 'events', 'rollup_invalidations'];

/**
 * The shadow tables: unlogged copies of the sources and of every catalogued table, in two
 * schemas, made once and remade when the columns of what they copy change (their signature
 * is the schemas' comment). Only the refresh uses them, one at a time (REFRESH_LOCK).
 */
async function ensureShadows(c: PoolClient, relations: string[]): Promise<void> {
  const all = [...SHADOWED_SOURCES, ...relations];
  const sig = (await c.query<{ sig: string; stored: string | null }>(
    `SELECT md5(string_agg(cl.relname || ':' || a.attname || ':' || a.atttypid::text, ',' ORDER BY cl.relname, a.attnum)) AS sig,
            obj_description(to_regnamespace($2), 'pg_namespace') AS stored
     FROM pg_attribute a JOIN pg_class cl ON cl.oid = a.attrelid JOIN pg_namespace n ON n.oid = cl.relnamespace
     WHERE n.nspname = 'public' AND cl.relname = ANY($1::text[]) AND a.attnum > 0 AND NOT a.attisdropped`, [all, AFTER])).rows[0]!;
  if (sig.stored === sig.sig) return;
  const ddl: string[] = [];
  for (const schema of [BEFORE, AFTER]) {
    ddl.push(`DROP SCHEMA IF EXISTS ${schema} CASCADE;`, `CREATE SCHEMA ${schema};`);
    for (const rel of all) ddl.push(`CREATE UNLOGGED TABLE ${schema}.${ident(rel)} (LIKE public.${ident(rel)} INCLUDING DEFAULTS);`);
  }
  ddl.push(`COMMENT ON SCHEMA ${AFTER} IS '${sig.sig}';`);
  await c.query(ddl.join('\n'));
}

/**
 * Applies every pending delta (the log rows visible in this snapshot, then deleted): the
 * logged sessions and events as they were before (the earliest logged state) go into the
 * shadow schema tm_delta_before, as they are now into tm_delta_after; each additive refresh
 * function runs for every hour those rows touch, once with each schema first in the search
 * path, so it reads the shadow sessions and events and writes the shadow rollup tables. The
 * difference (after - before) is added to the real tables, into hours that await no
 * recompute and days that are built (catalogue `days`).
 */
async function applyDeltas(
  c: PoolClient,
  fnRelations: Map<string, string[]>,
): Promise<{ project_id: string; bucket: Date }[]> {
  const additive = [...fnRelations].filter(([, rels]) => rels.every(isCatalogued));
  const relations = additive.flatMap(([, rels]) => rels);
  await ensureShadows(c, relations);
  const shadows = [...SHADOWED_SOURCES, ...relations];
  await c.query([BEFORE, AFTER].flatMap((schema) => shadows.map((t) => `DELETE FROM ${schema}.${ident(t)};`)).join('\n'));

  // The rows pickDeltaRows took for this transaction (not every logged row: a round is bounded).
  await c.query(`CREATE TEMP TABLE tm_d_sessions ON COMMIT DROP AS
    SELECT DISTINCT ON (session_id) project_id, session_id, started_at, old FROM tm_d_rows_s ORDER BY session_id, seq`);
  await c.query(`CREATE TEMP TABLE tm_d_events ON COMMIT DROP AS
    SELECT DISTINCT ON (created_at, event_id) project_id, event_id, created_at, session_id, op, old
    FROM tm_d_rows_e ORDER BY created_at, event_id, seq`);
  // Every hour awaiting a recompute in this snapshot (its recompute covers its deltas).
  await c.query(`CREATE TEMP TABLE tm_rebuild ON COMMIT DROP AS
    SELECT DISTINCT project_id, bucket FROM public.rollup_invalidations WHERE rebuild`);
  // Row counts for the planner: the joins below must take the events by index, whatever the hour's size.
  await c.query('ANALYZE tm_d_sessions, tm_d_events, tm_rebuild');
  // After: every event of a logged session and every logged event, as they are now.
  await c.query(`INSERT INTO ${AFTER}.events
    SELECT DISTINCT ON (x.created_at, x.id) x.* FROM (
      SELECT e.* FROM public.events e JOIN tm_d_sessions d ON e.session_id = d.session_id AND e.project_id = d.project_id
      UNION ALL
      SELECT e.* FROM public.events e JOIN tm_d_events d ON e.created_at = d.created_at AND e.id = d.event_id
    ) x ORDER BY x.created_at, x.id`);
  await c.query(`INSERT INTO ${AFTER}.sessions SELECT s.* FROM public.sessions s
    JOIN tm_d_sessions d ON s.started_at = d.started_at AND s.id = d.session_id`);
  // Before: the earliest logged row of each session (none: it is new); the events without
  // those logged (an insert was not there, a change or deletion was as logged).
  await c.query(`INSERT INTO ${BEFORE}.sessions SELECT (jsonb_populate_record(NULL::public.sessions, d.old)).*
    FROM tm_d_sessions d WHERE d.old IS NOT NULL`);
  await c.query(`INSERT INTO ${BEFORE}.events
    SELECT n.* FROM ${AFTER}.events n WHERE NOT EXISTS (SELECT 1 FROM tm_d_events d WHERE d.created_at = n.created_at AND d.event_id = n.id)
    UNION ALL
    SELECT (jsonb_populate_record(NULL::public.events, d.old)).* FROM tm_d_events d WHERE d.op IN ('u', 'd')`);
  const { rows: hours } = await c.query<{ project_id: string; bucket: Date }>(`
    SELECT DISTINCT project_id, bucket FROM (
      SELECT project_id, date_trunc('hour', started_at, 'UTC') AS bucket FROM ${BEFORE}.sessions
      UNION ALL SELECT project_id, date_trunc('hour', started_at, 'UTC') FROM ${AFTER}.sessions
      UNION ALL SELECT project_id, date_trunc('hour', created_at, 'UTC') FROM ${BEFORE}.events
      UNION ALL SELECT project_id, date_trunc('hour', created_at, 'UTC') FROM ${AFTER}.events
    ) h ORDER BY bucket, project_id`);
  const path = (await c.query<{ search_path: string }>('SHOW search_path')).rows[0]!.search_path;
  for (const schema of [BEFORE, AFTER]) {
    // The functions' cached plans are made again for this search path.
    await c.query(`SET LOCAL search_path = ${schema}, ${path}`);
    await c.query('DISCARD PLANS');
    await refreshHours(c, additive.map(([fn]) => fn), hours, false);
  }
  await c.query(`SET LOCAL search_path = ${path}`);
  await c.query('DISCARD PLANS');

  const columns = await columnsOf(c, relations);
  // A kept table never ANALYZEd (new, or autovacuum off) has no statistics: the planner would
  // take any of its indexes for as selective as another when a delta probes it. Once per table
  // (reltuples is -1 until the first ANALYZE or VACUUM; pg_class needs no superuser, unlike
  // pg_statistic).
  const unanalyzed = await c.query<{ rel: string }>(
    `SELECT cl.relname AS rel FROM pg_class cl JOIN pg_namespace n ON n.oid = cl.relnamespace
     WHERE n.nspname = 'public' AND cl.relname = ANY($1::text[]) AND cl.relkind = 'r' AND cl.reltuples < 0`,
    [relations.filter((r) => catalogueEntry(r))]);
  if (unanalyzed.rows.length) await c.query(`ANALYZE ${unanalyzed.rows.map((r) => `public.${ident(r.rel)}`).join(', ')}`);
  for (const rel of relations) {
    const entry = catalogueEntry(rel);
    if (entry) await mergeDelta(c, entry, columns.get(rel) ?? []);
  }
  if (relations.includes('event_properties_raw_hours')) {
    // A numeric text too long for numeric: the key's hour is read raw, and keeps no rows.
    await c.query(`INSERT INTO public.event_properties_raw_hours
      SELECT DISTINCT r.* FROM ${AFTER}.event_properties_raw_hours r
      WHERE NOT EXISTS (SELECT 1 FROM tm_rebuild x WHERE x.project_id = r.project_id AND x.bucket = r.bucket)
      ON CONFLICT DO NOTHING`);
    await c.query(`DELETE FROM public.event_properties_hourly h USING public.event_properties_raw_hours r
      WHERE h.project_id = r.project_id AND h.bucket = r.bucket AND h.key = r.key
        AND (r.project_id, r.bucket) IN (SELECT project_id, bucket FROM ${AFTER}.event_properties_raw_hours)`);
  }
  // A built day whose daily rows this delta could not reach (its bucket is not the local day
  // the project's timezone gives the hour now: the refresh functions build and the deltas
  // reach tm_local_day's) is no longer listed: reads take its hours. A delta that leaves a
  // table's day unchanged (a late screen view in the day of the uncharted events) reaches it
  // all the same.
  const daysTables = [...new Set(ROLLUP_CATALOGUE.map((e) => e.days).filter((d): d is string => !!d && relations.includes(d)))];
  for (const days of daysTables) {
    await c.query(`DELETE FROM public.${ident(days)} d
      WHERE EXISTS (SELECT 1 FROM unnest($1::text[], $2::timestamptz[]) AS h(p, b)
                    CROSS JOIN LATERAL public.tm_local_day(h.p, h.b) ld
                    WHERE h.p = d.project_id AND h.b >= d.bucket AND h.b < d.bucket + d.hours * interval '1 hour'
                      AND ld.d0 IS DISTINCT FROM d.bucket)`,
    [hours.map((h) => h.project_id), hours.map((h) => h.bucket.toISOString())]);
  }

  // Hours whose sketches may have lost an element: a deleted event's, and the start hour of a
  // session whose profile changed.
  const { rows: sketchHours } = await c.query<{ project_id: string; bucket: Date }>(`
    SELECT project_id, bucket FROM (
      SELECT project_id, date_trunc('hour', created_at, 'UTC') AS bucket FROM tm_d_events WHERE op = 'd'
      UNION
      SELECT d.project_id, date_trunc('hour', d.started_at, 'UTC') FROM tm_d_sessions d
      JOIN public.sessions s ON s.started_at = d.started_at AND s.id = d.session_id
      WHERE d.old IS NOT NULL AND d.old ->> 'profile_id' IS DISTINCT FROM s.profile_id
    ) h WHERE NOT EXISTS (SELECT 1 FROM tm_rebuild r WHERE r.project_id = h.project_id AND r.bucket = h.bucket)`);

  await promoteUnbuiltDays(c, hours, daysTables);

  await c.query('DELETE FROM public.rollup_delta_sessions WHERE seq IN (SELECT seq FROM tm_d_rows_s)');
  await c.query('DELETE FROM public.rollup_delta_events WHERE seq IN (SELECT seq FROM tm_d_rows_e)');
  await c.query('DROP TABLE pg_temp.tm_d_sessions, pg_temp.tm_d_events, pg_temp.tm_rebuild');
  return sketchHours;
}

/**
 * A past local day that deltas reached but no recompute has built (a backfill into days that
 * were empty: every write to them was a delta) gets one of its hours logged for a recompute,
 * which builds the day's rows; after that, deltas keep it. Only days that are over, of whole
 * UTC hours (tm_local_day of sql/015, as the refresh functions build them), with no hour
 * awaiting a recompute already.
 */
async function promoteUnbuiltDays(c: PoolClient, hours: { project_id: string; bucket: Date }[], daysTables: string[]): Promise<void> {
  if (!daysTables.length || !hours.length) return;
  const unbuilt = daysTables.map((d) => `NOT EXISTS (SELECT 1 FROM public.${ident(d)} x WHERE x.project_id = h.p AND x.bucket = ld.d0)`).join(' OR ');
  await c.query(
    `INSERT INTO public.rollup_invalidations (project_id, bucket, shard, rebuild)
     SELECT h.p, max(h.b), -1, true
     FROM unnest($1::text[], $2::timestamptz[]) AS h(p, b)
     CROSS JOIN LATERAL public.tm_local_day(h.p, h.b) ld
     WHERE ld.d0 IS NOT NULL
       AND ld.d1 <= date_trunc('hour', now())
       AND NOT EXISTS (SELECT 1 FROM tm_rebuild r WHERE r.project_id = h.p AND r.bucket >= ld.d0 AND r.bucket < ld.d1)
       AND (${unbuilt})
     GROUP BY h.p, ld.d0
     ON CONFLICT (project_id, bucket, shard) DO UPDATE SET rebuild = true, version = nextval('rollup_version_seq'), last_at = now()`,
    [hours.map((h) => h.project_id), hours.map((h) => h.bucket.toISOString())],
  );
}

/** Adds (now - before) of one catalogued table into its real rows, where the bucket may take it. */
async function mergeDelta(c: PoolClient, e: RollupEntry, columns: ColumnInfo[]): Promise<void> {
  const measures = measuresOf(e);
  const keys = columns.filter((col) => !measures.has(col.name));
  const k = keys.map((col) => ident(col.name));
  const mins = e.mins ?? [];
  const maxes = e.maxes ?? [];
  const latest = e.latest?.cols ?? [];
  const unions = e.unions ?? [];
  // A row of the before-run carries NULL in every latest column: never the latest.
  const order = [...latest.slice(0, 1).map((col) => `(${ident(col)} IS NULL)`), ...(e.latest?.by ?? []).map((b) => `${ident(b)} DESC NULLS LAST`)].join(', ');
  const now = [...k, ...e.sums.map(ident), ...mins.map(ident), ...maxes.map(ident), ...latest.map(ident), ...unions.map(ident)].join(', ');
  const before = [...k, ...e.sums.map((m) => `-${ident(m)}`), ...[...mins, ...maxes, ...latest, ...unions].map(() => 'NULL')].join(', ');
  const combine = [
    ...k,
    ...e.sums.map((m) => `sum(${ident(m)}) AS ${ident(m)}`),
    ...mins.map((m) => `min(${ident(m)}) AS ${ident(m)}`),
    ...maxes.map((m) => `max(${ident(m)}) AS ${ident(m)}`),
    ...latest.map((m) => `(array_agg(${ident(m)} ORDER BY ${order}))[1] AS ${ident(m)}`),
    ...unions.map((m) => `hll_union_agg(${ident(m)}) AS ${ident(m)}`),
  ].join(', ');
  const measureList = [...e.sums, ...mins, ...maxes, ...latest, ...unions];
  const cols = [...k, ...measureList.map(ident)].join(', ');
  const keep = e.presence ? `sum(${ident(e.presence)}) > 0` : unions.map((m) => `bool_or(${ident(m)} IS NOT NULL)`).join(' AND ');
  const eligible = e.grain === 'hour'
    ? 'NOT EXISTS (SELECT 1 FROM tm_rebuild r WHERE r.project_id = x.project_id AND r.bucket = x.bucket)'
    : e.days
      ? `EXISTS (SELECT 1 FROM public.${ident(e.days)} dd WHERE dd.project_id = x.project_id AND dd.bucket = x.bucket
           AND NOT EXISTS (SELECT 1 FROM tm_rebuild r WHERE r.project_id = dd.project_id
                           AND r.bucket >= dd.bucket AND r.bucket < dd.bucket + dd.hours * interval '1 hour'))`
      : `NOT EXISTS (SELECT 1 FROM tm_rebuild r WHERE r.project_id = x.project_id
           AND r.bucket >= x.bucket AND r.bucket < x.bucket + interval '1 day')`;
  const match = keys.map((col) => col.nullable
    ? `t.${ident(col.name)} IS NOT DISTINCT FROM d.${ident(col.name)}`
    : `t.${ident(col.name)} = d.${ident(col.name)}`).join(' AND ');
  const rel = ident(e.relation);
  // The delta rows in an ANALYZEd temporary table, not a CTE: without their statistics the
  // planner takes (project_id, bucket) for a selective join key and joins each delta row to
  // every stored row of its hour (a merge join on that prefix, or a nested loop probing the
  // bucket index), quadratic in a large hour (40 events of 35,000 numeric properties: 1.5M
  // rows, more than 18 minutes); with them it probes the stored rows by their whole key.
  await c.query(`CREATE TEMP TABLE tm_d_merge ON COMMIT DROP AS
      SELECT ${combine} FROM (
        SELECT ${now} FROM ${AFTER}.${rel}
        UNION ALL
        SELECT ${before} FROM ${BEFORE}.${rel}
      ) x
      WHERE ${eligible}
      GROUP BY ${k.join(', ')}`);
  await c.query('ANALYZE pg_temp.tm_d_merge');
  await c.query(`
    WITH d AS NOT MATERIALIZED (SELECT * FROM pg_temp.tm_d_merge),
    o AS (DELETE FROM public.${rel} t USING d WHERE ${match} RETURNING ${[...keys.map((col) => col.name), ...measureList].map((m) => `t.${ident(m)}`).join(', ')})
    INSERT INTO public.${rel} (${cols})
    SELECT ${combine} FROM (SELECT ${cols} FROM o UNION ALL SELECT ${cols} FROM d) x
    GROUP BY ${k.join(', ')}
    HAVING ${keep}`);
  await c.query('DROP TABLE pg_temp.tm_d_merge');
}

