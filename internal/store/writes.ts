// The worker's writes: one transaction per shard batch holding the events, the session rows,
// the profile/group operations and the shard's committed JetStream position. The events'
// COPY and the insert that skips stored rows are event-inserts.ts; the monthly partitions
// of events, partitions.ts.
import type { EventRecord } from '../model/event';
import { SESSION_DIMENSIONS } from '../model/event';
import type { SessionState } from '../sessionize/session';
import { createHash } from 'node:crypto';
import { transaction, type Pool, type PoolClient } from './db';
import { arrayLiteral, copyEvents, eventKey, EventStoredError, firstOfEachEvent, insertEventsSkippingStored } from './event-inserts';
import { applyProfileOps, recordOpFailures, type OpFailure, type ProfileOp } from './profiles';
export { isDataError } from './profiles';

export type { ProfileOp } from './profiles';

export interface ShardBatch {
  stream: string;
  shard: number;
  /** Committed position before this batch (compare-and-set fence) and after it. */
  fromSeq: number;
  toSeq: number;
  events: EventRecord[];
  viewDurations: { eventId: string; createdAt: number; durationMs: number }[];
  sessions: SessionState[];
  /** Sessions reopened after an idle end: their session_end rows go. */
  reopenedSessionIds: string[];
  /**
   * Sessions whose only change in this batch is their idle end (`ended`, which no rollup
   * reads, and their session_end row): not logged as a session delta; their session_end row
   * counts as an event of its own (docs/rollups.md).
   */
  endedOnlySessionIds?: string[];
  profileOps: ProfileOp[];
  /** Idempotency keys of the ops this batch applies (recorded in the same transaction). */
  opKeys?: AppliedKey[];
  /** Ops set aside alone (the isolating retry: events PostgreSQL could not store), kept in op_failures. */
  setAside?: (OpFailure & { op: unknown })[];
}

/** An op applied under a producer's idempotency key. */
export interface AppliedKey {
  projectId: string;
  key: string;
  opId: string;
}

/**
 * Another transaction recorded one of this batch's idempotency keys after the batch was
 * filtered (two shards raced on one key): the batch is retried, and the retry drops the op.
 */
export class KeyAppliedElsewhereError extends Error {}

/** The idempotency keys among `keys` that an earlier batch applied. */
export async function appliedKeys(db: Pool, keys: { projectId: string; key: string }[]): Promise<Set<string>> {
  if (!keys.length) return new Set();
  const r = await db.query<{ project_id: string; key: string }>(
    `SELECT k.project_id, k.key FROM op_keys k
     JOIN unnest($1::text[], $2::text[]) AS u(project_id, key) ON k.project_id = u.project_id AND k.key = u.key`,
    [keys.map((k) => k.projectId), keys.map((k) => k.key)],
  );
  return new Set(r.rows.map((x) => keyOf(x.project_id, x.key)));
}

export const keyOf = (projectId: string, key: string) => `${projectId}\u0000${key}`;

/** Records the batch's idempotency keys; the statement returns how many it recorded (checked by the caller). */
function recordKeys(q: Statement, keys: AppliedKey[]): void {
  if (!keys.length) return;
  q.cte('keys', `INSERT INTO op_keys (project_id, key, op_id)
     SELECT * FROM unnest(${q.p(keys.map((k) => k.projectId))}::text[], ${q.p(keys.map((k) => k.key))}::text[], ${q.p(keys.map((k) => k.opId))}::text[])
     ON CONFLICT DO NOTHING`, true);
}

/**
 * One statement of data-modifying CTEs (each runs once, to completion, on the statement's
 * snapshot), so a batch's small writes cost one round trip to PostgreSQL, not one each. Its
 * parts must not depend on one another's effects: none reads a row another writes.
 */
class Statement {
  readonly params: unknown[] = [];
  private readonly ctes: string[] = [];
  private readonly results: string[] = [];

  /** A parameter placeholder for `v`. */
  p(v: unknown): string {
    this.params.push(v);
    return `$${this.params.length}`;
  }

  /** A data-modifying part; `counted`: the statement returns how many rows it returned, as `name`. */
  cte(name: string, sql: string, counted = false): void {
    this.ctes.push(`${name} AS (${sql}${counted ? ' RETURNING 1' : ''})`);
    if (counted) this.results.push(`(SELECT count(*)::int FROM ${name}) AS ${name}`);
  }

  /** Runs the statement; it returns the counted parts' counts. */
  async run(c: PoolClient): Promise<Record<string, number>> {
    if (!this.ctes.length) return {};
    const out = this.results.length ? this.results.join(', ') : '1 AS done';
    const text = `WITH ${this.ctes.join(',\n')}\nSELECT ${out}`;
    // Named after its text, so each connection parses and plans each shape once (a batch has
    // one of a few dozen shapes: which parts it has), not once per batch.
    const name = `tm_${createHash('sha1').update(text).digest('base64url').slice(0, 20)}`;
    const r = await c.query({ name, text, values: this.params });
    return r.rows[0] ?? {};
  }
}

/** Another worker committed this shard past our starting point: we no longer own it. */
export class ShardFencedError extends Error {}

export async function committedSeq(db: Pool, stream: string, shard: number): Promise<number> {
  await db.query('INSERT INTO shard_offsets (stream, shard) VALUES ($1, $2) ON CONFLICT DO NOTHING', [stream, shard]);
  const r = await db.query<{ stream_seq: number }>('SELECT stream_seq FROM shard_offsets WHERE stream = $1 AND shard = $2', [stream, shard]);
  return Number(r.rows[0]?.stream_seq ?? 0);
}

/**
 * Reads a shard's committed position and the stream instance it counts in (null: recorded
 * before instances were), lets `decide` say where it resumes, and writes that down with
 * `created` when asked, under the row's lock so two claims cannot interleave. Moving the
 * position also fences out a previous owner still committing from the old one.
 */
export async function claimShardPosition(
  db: Pool, stream: string, shard: number, created: string,
  decide: (stored: { seq: number; created: string | null }) => { seq: number; write: boolean },
): Promise<number> {
  return transaction(db, async (c) => {
    await c.query('INSERT INTO shard_offsets (stream, shard, stream_created) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [stream, shard, created]);
    const r = await c.query<{ stream_seq: string; stream_created: string | null }>(
      'SELECT stream_seq, stream_created FROM shard_offsets WHERE stream = $1 AND shard = $2 FOR UPDATE', [stream, shard],
    );
    const row = r.rows[0]!;
    const plan = decide({ seq: Number(row.stream_seq), created: row.stream_created });
    if (plan.write) {
      await c.query('UPDATE shard_offsets SET stream_seq = $3, stream_created = $4, updated_at = now() WHERE stream = $1 AND shard = $2', [stream, shard, plan.seq, created]);
    }
    return plan.seq;
  });
}

function updateViewDurations(q: Statement, d: ShardBatch['viewDurations']): void {
  if (!d.length) return;
  q.cte('durations', `UPDATE events e SET duration_ms = u.ms
     FROM unnest(${q.p(d.map((x) => x.eventId))}::uuid[], ${q.p(d.map((x) => new Date(x.createdAt).toISOString()))}::timestamptz[],
                 ${q.p(d.map((x) => x.durationMs))}::int8[]) AS u(id, at, ms)
     WHERE e.created_at = u.at AND e.id = u.id`);
}

/** A sessions column: its name, the element type of its unnest parameter, its value, and its own type when that differs. */
type SessionColumn = [string, string, (s: SessionState) => unknown, string?];
const SESSION_COLUMNS: SessionColumn[] = [
  ['id', 'uuid', (s) => s.id],
  ['project_id', 'text', (s) => s.projectId],
  ['device_id', 'text', (s) => s.deviceId],
  ['profile_id', 'text', (s) => s.profileId],
  ['started_at', 'timestamptz', (s) => new Date(s.startedAt).toISOString()],
  ['last_event_at', 'timestamptz', (s) => new Date(s.lastEventAt).toISOString()],
  ['duration_ms', 'int8', (s) => s.lastEventAt - s.startedAt],
  ['ended', 'bool', (s) => s.ended],
  ['entry_origin', 'text', (s) => s.entryOrigin],
  ['entry_path', 'text', (s) => s.entryPath],
  ['exit_origin', 'text', (s) => s.exitOrigin],
  ['exit_path', 'text', (s) => s.exitPath],
  ['screen_view_count', 'int4', (s) => s.screenViewCount],
  ['event_count', 'int4', (s) => s.eventCount],
  ['is_bounce', 'bool', (s) => s.screenViewCount <= 1],
  ['is_bot', 'bool', (s) => s.isBot],
  ['last_event_id', 'uuid', (s) => s.lastEvent?.id ?? null],
  ['last_event_is_view', 'bool', (s) => s.lastEvent?.isScreenView ?? false],
  ['updated_at', 'timestamptz', (s) => new Date(s.updatedAtMs).toISOString()],
  // a text[] literal per session (an array of arrays would need equal lengths), cast back
  ['step_names', 'text', (s) => (s.stepNames === null ? null : arrayLiteral(s.stepNames)), 'text[]'],
  ['step_first_at', 'timestamptz', (s) => (s.stepFirstAt === null ? null : new Date(s.stepFirstAt).toISOString())],
  ['step_last_at', 'timestamptz', (s) => (s.stepLastAt === null ? null : new Date(s.stepLastAt).toISOString())],
  ...SESSION_DIMENSIONS.map((d): SessionColumn => [d, 'text', (s) => s.dims[d]]),
];
const SESSION_MUTABLE = [
  'profile_id', 'last_event_at', 'duration_ms', 'ended', 'entry_origin', 'entry_path', 'exit_origin', 'exit_path',
  'screen_view_count', 'event_count', 'is_bounce', 'last_event_id', 'last_event_is_view', 'updated_at',
  'step_names', 'step_first_at', 'step_last_at',
];

function upsertSessions(q: Statement, sessions: SessionState[]): void {
  if (!sessions.length) return;
  const unnest = SESSION_COLUMNS.map(([, t, get]) => `${q.p(sessions.map(get))}::${t}[]`).join(', ');
  const names = SESSION_COLUMNS.map(([n]) => n).join(', ');
  const values = SESSION_COLUMNS.map(([n, , , stored]) => (stored ? `u.${n}::${stored}` : `u.${n}`)).join(', ');
  q.cte('sessions_up', `INSERT INTO sessions (${names})
     SELECT ${values} FROM unnest(${unnest}) AS u(${names})
     ON CONFLICT (started_at, id) DO UPDATE SET ${SESSION_MUTABLE.map((n) => `${n} = EXCLUDED.${n}`).join(', ')}`);
}

const HOUR_MS = 3_600_000;

/**
 * Which writes are logged as rollup deltas (sql/025_rollup_deltas.sql): those into an hour
 * that ended before this batch (`cutoff`, the start of the current UTC hour). A session
 * started before it is "late": its old row and every event write of it are logged, since
 * its pages rows (by the session's start hour) depend on all its views. Writes of the current
 * hour are not: that hour is recomputed once when it is over (rebuild). Nor are writes into a
 * past hour that its rollups do not cover yet (`unbuilt`: a backfill into an hour that held
 * nothing): it is logged for a recompute instead, which costs what the hour holds, while a
 * delta costs about twice its change (computed before and after, then merged) plus its log. A session starting in such an hour is not late; an event
 * in one is logged only for a late session of another hour.
 */
interface DeltaScope {
  cutoff: number;
  lateSessions: Set<string>;
  /** Past hours to recompute rather than take deltas: hourKey -> [project, hour start ms]. */
  unbuilt: Map<string, [string, number]>;
}

const hourOf = (ms: number): number => Math.floor(ms / HOUR_MS) * HOUR_MS;
const hourKey = (projectId: string, ms: number): string => `${projectId}\u0000${hourOf(ms)}`;

async function deltaScope(c: PoolClient, all: SessionState[], events: EventRecord[], endedOnly: readonly string[] = [], now = Date.now()): Promise<DeltaScope> {
  const cutoff = hourOf(now);
  const skip = new Set(endedOnly);
  const sessions = skip.size ? all.filter((s) => !skip.has(s.id)) : all;
  const past = new Map<string, [string, number]>();
  for (const s of sessions) if (s.startedAt < cutoff) past.set(hourKey(s.projectId, s.startedAt), [s.projectId, hourOf(s.startedAt)]);
  for (const e of events) {
    const at = e.createdAt.getTime();
    if (at < cutoff) past.set(hourKey(e.projectId, at), [e.projectId, hourOf(at)]);
  }
  const unbuilt = new Map<string, [string, number]>();
  if (past.size) {
    // Neither rollup of the hour's sessions nor of its events has a row (a recompute or a
    // delta would have written one: an hour with any session or event has an events_hourly
    // row, bots' events included). The recompute this batch logs reads its rows; a concurrent
    // refresh that misses them leaves the entry (its version moves with this commit). (An
    // hour already awaiting a recompute with rows still takes its deltas' log: a write into it
    // must not postpone its recompute, docs/rollups.md.)
    const r = await c.query<{ p: string; b: Date }>(
      `SELECT u.p, u.b FROM unnest($1::text[], $2::timestamptz[]) AS u(p, b)
       WHERE NOT EXISTS (SELECT 1 FROM rollup_sessions_hourly r WHERE r.project_id = u.p AND r.bucket = u.b)
         AND NOT EXISTS (SELECT 1 FROM events_hourly h WHERE h.project_id = u.p AND h.bucket = u.b)`,
      [[...past.values()].map((x) => x[0]), [...past.values()].map((x) => new Date(x[1]).toISOString())]);
    for (const x of r.rows) unbuilt.set(hourKey(x.p, x.b.getTime()), [x.p, x.b.getTime()]);
  }
  const lateSessions = new Set(sessions.filter((s) => s.startedAt < cutoff && !unbuilt.has(hourKey(s.projectId, s.startedAt))).map((s) => s.id));
  return { cutoff, lateSessions, unbuilt };
}

const lateEvent = (scope: DeltaScope, projectId: string, createdAtMs: number, sessionId: string | null): boolean =>
  (createdAtMs < scope.cutoff && !scope.unbuilt.has(hourKey(projectId, createdAtMs))) || (sessionId !== null && scope.lateSessions.has(sessionId));

/** The old rows of the late sessions this batch upserts (NULL: new), before the upsert. */
async function logSessionDeltas(c: PoolClient, scope: DeltaScope, sessions: SessionState[]): Promise<void> {
  const late = sessions.filter((s) => scope.lateSessions.has(s.id));
  if (!late.length) return;
  await c.query(
    // Each old row by its primary key (LATERAL: a lookup per session). As a join, a young
    // sessions table without statistics was hashed whole for every batch: 57 µs a logged
    // session at 7,000 sessions (bench/rollup-cost.ts), growing with the table.
    `INSERT INTO rollup_delta_sessions (project_id, session_id, started_at, old)
     SELECT u.p, u.id, u.st, o.old FROM unnest($1::text[], $2::uuid[], $3::timestamptz[]) AS u(p, id, st)
     LEFT JOIN LATERAL (SELECT to_jsonb(s) AS old FROM sessions s WHERE s.started_at = u.st AND s.id = u.id) o ON true`,
    [late.map((s) => s.projectId), late.map((s) => s.id), late.map((s) => new Date(s.startedAt).toISOString())],
  );
}

/** Events inserted by this batch that are late (their hour or their session's). */
async function logInsertedEvents(c: PoolClient, scope: DeltaScope, events: EventRecord[], inserted: Set<string>): Promise<void> {
  const late = events.filter((e) => inserted.has(eventKey(e.id, e.createdAt.getTime())) && lateEvent(scope, e.projectId, e.createdAt.getTime(), e.sessionId));
  if (!late.length) return;
  await c.query(
    `INSERT INTO rollup_delta_events (project_id, event_id, created_at, session_id, op)
     SELECT p, id, at, sid, 'i' FROM unnest($1::text[], $2::uuid[], $3::timestamptz[], $4::uuid[]) AS u(p, id, at, sid)`,
    [late.map((e) => e.projectId), late.map((e) => e.id), late.map((e) => e.createdAt.toISOString()), late.map((e) => e.sessionId)],
  );
}

/** Old rows of late events about to change their duration (a view followed by the next one). */
async function logUpdatedEvents(c: PoolClient, scope: DeltaScope, d: ShardBatch['viewDurations']): Promise<void> {
  // Only a batch with a late session or a view of a past hour can have one: no statement
  // otherwise (nor without any view: its join would still lock every partition of events).
  if (!d.length || (!scope.lateSessions.size && !d.some((x) => x.createdAt < scope.cutoff))) return;
  await c.query(
    `INSERT INTO rollup_delta_events (project_id, event_id, created_at, session_id, op, old)
     SELECT e.project_id, e.id, e.created_at, e.session_id, 'u', to_jsonb(e)
     FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, at)
     JOIN events e ON e.created_at = u.at AND e.id = u.id
     WHERE (e.created_at < $3::timestamptz
            AND NOT EXISTS (SELECT 1 FROM unnest($5::text[], $6::timestamptz[]) AS x(p, b)
                            WHERE x.p = e.project_id AND x.b = date_trunc('hour', e.created_at, 'UTC')))
        OR e.session_id = ANY($4::uuid[])`,
    [d.map((x) => x.eventId), d.map((x) => new Date(x.createdAt).toISOString()), new Date(scope.cutoff).toISOString(), [...scope.lateSessions],
      [...scope.unbuilt.values()].map((x) => x[0]), [...scope.unbuilt.values()].map((x) => new Date(x[1]).toISOString())],
  );
}

/**
 * Logs the (project, hour) buckets whose sessions or events changed, in this shard's own
 * rows (no waiting on other shards): the hour a session started in (session rollups) and
 * the hour of created_at of every event inserted or deleted (event rollups,
 * sql/009_event_rollups.sql; a view's changed duration counts only in pages rows, which are
 * by the session's start hour). `rebuild` is false for an hour before the cutoff (its changes
 * are logged as deltas) and true for the current hour; a true stays true, and its last_at
 * (ROLLUP_REFRESH_QUIET_MS) moves only with writes that need the recompute. Always an UPDATE
 * of the version on conflict, so the row lock orders this commit against a concurrent
 * rollup refresh.
 */
function invalidateRollups(
  q: Statement,
  shard: number,
  scope: DeltaScope,
  sessions: SessionState[],
  events: { projectId: string; createdAtMs: number }[] = [],
): void {
  if (!sessions.length && !events.length) return;
  const keys = new Map<string, [string, number]>();
  const add = (projectId: string, ms: number) => {
    const bucket = Math.floor(ms / HOUR_MS) * HOUR_MS;
    keys.set(`${projectId}\u0000${bucket}`, [projectId, bucket]);
  };
  for (const s of sessions) add(s.projectId, s.startedAt);
  for (const e of events) add(e.projectId, e.createdAtMs);
  const rows = [...keys.values()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1]));
  q.cte('invalidations', `INSERT INTO rollup_invalidations (project_id, bucket, shard, rebuild)
     SELECT p, b, ${q.p(shard)}::int, r
     FROM unnest(${q.p(rows.map((r) => r[0]))}::text[], ${q.p(rows.map((r) => new Date(r[1]).toISOString()))}::timestamptz[],
                 ${q.p(rows.map((r) => r[1] >= scope.cutoff || scope.unbuilt.has(hourKey(r[0], r[1]))))}::bool[]) WITH ORDINALITY AS u(p, b, r, i) ORDER BY i
     ON CONFLICT (project_id, bucket, shard) DO UPDATE
       SET version = nextval('rollup_version_seq'), rebuild = rollup_invalidations.rebuild OR EXCLUDED.rebuild,
           -- last_at (ROLLUP_REFRESH_QUIET_MS) moves with writes into the current hour, into a
           -- delta hour, and into a past hour its rollups do not cover whose recompute was
           -- logged after the hour (a backfill: one recompute once it is quiet); a write into
           -- an hour that was logged while current and awaits its recompute does not hold it back
           last_at = CASE WHEN (EXCLUDED.rebuild AND EXCLUDED.bucket >= ${q.p(new Date(scope.cutoff).toISOString())}::timestamptz)
                            OR NOT rollup_invalidations.rebuild
                            OR (EXCLUDED.rebuild AND rollup_invalidations.first_at >= rollup_invalidations.bucket + interval '1 hour')
                       THEN now() ELSE rollup_invalidations.last_at END`);
}

/** Loads the latest session of each device (the sessionizer's state after a restart). */
export async function loadLatestSessions(db: Pool, keys: { projectId: string; deviceId: string }[]): Promise<SessionState[]> {
  if (!keys.length) return [];
  const r = await db.query(
    `SELECT s.* FROM unnest($1::text[], $2::text[]) AS k(project_id, device_id)
     CROSS JOIN LATERAL (
       SELECT * FROM sessions s WHERE s.project_id = k.project_id AND s.device_id = k.device_id
       ORDER BY s.started_at DESC LIMIT 1) s`,
    [keys.map((k) => k.projectId), keys.map((k) => k.deviceId)],
  );
  return r.rows.map((row) => {
    const dims = {} as SessionState['dims'];
    for (const d of SESSION_DIMENSIONS) dims[d] = row[d];
    const last = new Date(row.last_event_at).getTime();
    return {
      id: row.id, projectId: row.project_id, deviceId: row.device_id, profileId: row.profile_id,
      startedAt: new Date(row.started_at).getTime(), lastEventAt: last,
      screenViewCount: row.screen_view_count, eventCount: row.event_count,
      entryOrigin: row.entry_origin, entryPath: row.entry_path, exitOrigin: row.exit_origin, exitPath: row.exit_path,
      isBot: row.is_bot, dims, ended: row.ended, updatedAtMs: new Date(row.updated_at).getTime(),
      lastEvent: row.last_event_id ? { id: row.last_event_id, createdAt: last, isScreenView: row.last_event_is_view } : null,
      stepNames: row.step_names,
      stepFirstAt: row.step_first_at === null ? null : new Date(row.step_first_at).getTime(),
      stepLastAt: row.step_last_at === null ? null : new Date(row.step_last_at).getTime(),
    } satisfies SessionState;
  });
}

/** Moves the shard's committed position, only if it still is where this batch started (the statement returns 0 or 1). */
function advanceShardIn(q: Statement, b: { stream: string; shard: number; fromSeq: number; toSeq: number }): void {
  q.cte('fence', `UPDATE shard_offsets SET stream_seq = ${q.p(b.toSeq)}, updated_at = now()
     WHERE stream = ${q.p(b.stream)} AND shard = ${q.p(b.shard)} AND stream_seq = ${q.p(b.fromSeq)}`, true);
}

/** Moves the shard's committed position alone (a dead-lettered message), fenced as a batch is. */
async function advanceShard(c: PoolClient, b: { stream: string; shard: number; fromSeq: number; toSeq: number }): Promise<void> {
  const q = new Statement();
  advanceShardIn(q, b);
  checkFence(await q.run(c), b);
}

function checkFence(done: Record<string, number>, b: { shard: number; fromSeq: number }): void {
  if (done.fence !== 1) throw new ShardFencedError(`shard ${b.shard} moved past ${b.fromSeq}`);
}

/**
 * Writes one shard batch atomically, fenced on the shard's committed position, in one
 * transaction of four round trips when nothing in it is late: `BEGIN`, the events by COPY,
 * one statement of CTEs for the rest (Statement), `COMMIT`. If one of the events is stored
 * already (a redelivery), the whole transaction is redone with an insert that skips stored
 * rows. `copy: false`: always that insert (engines without COPY FROM STDIN).
 */
export async function commitShardBatch(db: Pool, b: ShardBatch, opts: { copy?: boolean; guarded?: boolean } = {}): Promise<{ failures: OpFailure[] }> {
  const events = firstOfEachEvent(b.events);
  const guarded = opts.guarded ?? false;
  if (opts.copy === false) return writeShardBatch(db, b, events, insertEventsSkippingStored, guarded);
  try {
    return await writeShardBatch(db, b, events, copyEvents, guarded);
  } catch (err) {
    if (!(err instanceof EventStoredError)) throw err;
    return writeShardBatch(db, b, events, insertEventsSkippingStored, guarded);
  }
}

async function writeShardBatch(
  db: Pool,
  b: ShardBatch,
  events: EventRecord[],
  insertEvents: (c: PoolClient, events: EventRecord[]) => Promise<Set<string>>,
  guarded: boolean,
): Promise<{ failures: OpFailure[] }> {
  return transaction(db, async (c) => {
    const scope = await deltaScope(c, b.sessions, events, b.endedOnlySessionIds);
    // Hours whose event counts change: of the events inserted and deleted. (A view's duration
    // counts only in pages rows, which are by the session's start hour, logged with it.)
    const eventHours = events.map((e) => ({ projectId: e.projectId, createdAtMs: e.createdAt.getTime() }));
    if (b.reopenedSessionIds.length) {
      // Before the insert: a reopened session may end again within this very batch.
      const gone = await c.query<{ project_id: string; id: string; session_id: string | null; created_at: Date; old: unknown }>(
        `DELETE FROM events e WHERE session_id = ANY($1::uuid[]) AND name = 'session_end'
         RETURNING e.project_id, e.id, e.session_id, e.created_at, to_jsonb(e) AS old`,
        [b.reopenedSessionIds],
      );
      const late = gone.rows.filter((r) => lateEvent(scope, r.project_id, r.created_at.getTime(), r.session_id));
      if (late.length) {
        await c.query(
          `INSERT INTO rollup_delta_events (project_id, event_id, created_at, session_id, op, old)
           SELECT p, id, at, sid, 'd', old FROM unnest($1::text[], $2::uuid[], $3::timestamptz[], $4::uuid[], $5::jsonb[]) AS u(p, id, at, sid, old)`,
          [late.map((r) => r.project_id), late.map((r) => r.id), late.map((r) => r.created_at.toISOString()), late.map((r) => r.session_id),
            late.map((r) => JSON.stringify(r.old))],
        );
      }
      for (const r of gone.rows) eventHours.push({ projectId: r.project_id, createdAtMs: r.created_at.getTime() });
    }
    const inserted = await insertEvents(c, events);
    // The old rows of late events and sessions are logged before the statement that changes them.
    await logInsertedEvents(c, scope, events, inserted);
    await logUpdatedEvents(c, scope, b.viewDurations);
    await logSessionDeltas(c, scope, b.sessions);
    // The rest in one statement: the fenced position, the idempotency keys, the views'
    // durations, the sessions and the hours to refresh. (The fence is checked here, after the
    // events: a worker that lost the shard is rolled back all the same, and one whose events
    // another committed meets them first, as a stored event.)
    const q = new Statement();
    advanceShardIn(q, b);
    const keys = b.opKeys ?? [];
    recordKeys(q, keys);
    updateViewDurations(q, b.viewDurations);
    upsertSessions(q, b.sessions);
    invalidateRollups(q, b.shard, scope, b.sessions, eventHours);
    const done = await q.run(c);
    checkFence(done, b);
    if (keys.length && done.keys !== keys.length) {
      throw new KeyAppliedElsewhereError(`${keys.length - (done.keys ?? 0)} idempotency key(s) applied by another batch`);
    }
    const failures = await applyProfileOps(c, b.profileOps, { guarded });
    const aside = b.setAside ?? [];
    await recordOpFailures(c, aside);
    return { failures: [...aside.map(({ op: _op, ...f }) => f), ...failures] };
  });
}


/**
 * Dead-letters one message that PostgreSQL cannot store: its ops go to op_failures (NUL
 * stripped so the record itself is storable) and the shard moves past it, fenced.
 */
export async function commitSkipped(db: Pool, b: { stream: string; shard: number; fromSeq: number; toSeq: number; ops: { id: string; projectId: string; kind: string }[]; reason: string }): Promise<void> {
  await transaction(db, async (c) => {
    await advanceShard(c, b);
    await recordOpFailures(c, b.ops.map((o) => ({ opId: o.id, projectId: o.projectId, kind: o.kind, reason: b.reason, op: o })));
  });
}
