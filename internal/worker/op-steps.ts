// The worker's op processing as named steps over one OpBatch (op-batch.ts), the way
// ENRICH_STEPS reads (internal/enrich/index.ts): OP_STEPS says what each op kind does to
// the batch, SESSION_ROWS what one sessionized event adds to it. Reading the two tables
// tells the whole story; each step is a small function with its test in op-steps.test.ts.
import { v7 as uuidv7 } from 'uuid';
import { blankEventRecord } from '../enrich';
import { SESSION_DIMENSIONS, type EventRecord, type QueuedOp, type QueuedSessionCheck, type QueuedTrack } from '../model/event';
import { applyEvent, checkEnd, type SessionState, type StepResult as SessionStep } from '../sessionize/session';
import type { ProfileOp } from '../store/writes';
import { currentSession, deviceKey, type OpBatch } from './op-batch';

type OpOf<K extends QueuedOp['kind']> = Extract<QueuedOp, { kind: K }>;
/** Applies one op to the batch. Must not throw on any input the API queues. */
type OpStep<O extends QueuedOp = QueuedOp> = (b: OpBatch, op: O) => void;
/** Adds to the batch what one event, sessionized (`s`), brings; `k` is its device key. */
type SessionRowStep = (b: OpBatch, s: SessionStep, rec: EventRecord, k: string) => void;

// ---- rows -------------------------------------------------------------------------------

export function recordFromOp(op: QueuedTrack): EventRecord {
  return blankEventRecord({
    id: op.id,
    projectId: op.projectId,
    name: op.name,
    deviceId: op.deviceId,
    profileId: op.profileId,
    createdAt: new Date(op.createdAt),
    properties: op.properties,
    groups: op.groups,
    ip: op.ip,
    userAgent: op.userAgent,
    deviceOverrides: op.deviceOverrides ?? null,
    url: op.url,
    title: op.title ?? '',
    referrer: op.referrer ?? '',
  });
}

/** A row for the service's own session_start / session_end event, shaped like the session. */
export function sessionEvent(name: 'session_start' | 'session_end', s: SessionState, template: EventRecord | null): EventRecord {
  const at = name === 'session_start' ? s.startedAt : s.lastEventAt;
  const base = template ? { ...template } : blankEventRecord({ projectId: s.projectId, deviceId: s.deviceId, profileId: s.profileId, isBot: s.isBot });
  const rec: EventRecord = {
    ...base,
    id: uuidv7({ msecs: at }),
    name,
    createdAt: new Date(at),
    properties: {},
    groups: [],
    sessionId: s.id,
    durationMs: null,
  };
  for (const d of SESSION_DIMENSIONS) rec[d] = s.dims[d];
  if (name === 'session_end') {
    rec.origin = s.exitOrigin;
    rec.path = s.exitPath;
    rec.title = '';
  }
  return rec;
}

/** The event's row, in order, findable by id for a later event of the batch. */
function addRow(b: OpBatch, rec: EventRecord): void {
  b.events.push(rec);
  b.byId.set(rec.id, rec);
}

// ---- a track op ---------------------------------------------------------------------------

/** The enriched record, or null when enrichment drops the event (the reason is counted). */
export function enrichEvent(b: OpBatch, op: QueuedTrack): EventRecord | null {
  const result = b.enricher.enrich(recordFromOp(op));
  if (result.ok) return result.event;
  b.drops.push(result.reason);
  return null;
}

/** The isolating retry: an event the store cannot hold goes to op_failures, alone, before it is sessionized. */
export function setAsideUnstorable(b: OpBatch, op: QueuedTrack, rec: EventRecord): boolean {
  const why = b.unstorable?.(rec);
  if (!why) return false;
  b.setAside.push({ opId: op.id, projectId: op.projectId, kind: op.kind, reason: why, op });
  return true;
}

/**
 * semantics.md, "OpenPanel fidelity": a server-side event opens no session and changes none
 * (a bot without an OS, such as Googlebot, keeps its bot sessions). Its row is added now; its
 * session is decided after the batch (joinServerSide): a later event of the batch may identify
 * the session (the batch runs in event time, the producer may have sent that event first).
 */
export function holdServerSide(b: OpBatch, rec: EventRecord, k: string, ownDeviceId: string | undefined): boolean {
  if (!rec.serverSide || rec.isBot) return false;
  b.held.push({ rec, k, atItsTime: currentSession(b, k), own: ownDeviceId });
  addRow(b, rec);
  return true;
}

/** The event through the session state machine, then the rows that brings (SESSION_ROWS). */
export function sessionize(b: OpBatch, rec: EventRecord, k: string): void {
  const s = applyEvent(currentSession(b, k), rec, b.sessionOptions);
  for (let i = 0; i < SESSION_ROWS.length; i++) SESSION_ROWS[i]!(b, s, rec, k);
}

/** OP_STEPS.track: enrich, set aside what the store cannot hold, hold a server-side event, else sessionize. */
export function trackEvent(b: OpBatch, op: QueuedTrack): void {
  const rec = enrichEvent(b, op);
  if (rec === null || setAsideUnstorable(b, op, rec)) return;
  const k = deviceKey(op.projectId, op.deviceId);
  if (!holdServerSide(b, rec, k, op.ownDeviceId)) sessionize(b, rec, k);
}

// ---- what one sessionized event adds (SESSION_ROWS) --------------------------------------

/**
 * session_end rows of the sessions the event ended (it came 30+ minutes after them); no end
 * check due. Such a session, unchanged in this batch before, changes only in `ended` (as
 * an end check's): marked so, it logs no delta of its own (finishBatch).
 */
export function endPrevious(b: OpBatch, s: SessionStep): void {
  for (const ended of s.ended) {
    b.opened.delete(ended.id);
    if (ended.id === s.session.id) continue;
    b.events.push(sessionEvent('session_end', ended, null));
    if (!b.sessions.has(ended.id)) b.endedOnly.set(ended.id, ended);
  }
}

/** session_start rows of the sessions the event started (with its fields); an open one is due an end check. */
export function startNew(b: OpBatch, s: SessionStep, rec: EventRecord): void {
  for (const started of s.started) {
    b.events.push(sessionEvent('session_start', started, rec));
    if (!started.ended) b.opened.set(started.id, started);
  }
}

/** The event's own row, in the session it was counted in. */
export function putEvent(b: OpBatch, s: SessionStep, rec: EventRecord): void {
  rec.sessionId = s.session.id;
  addRow(b, rec);
}

/** A very late event's standalone session ends at once: its session_end follows the event. */
export function endLoneSession(b: OpBatch, s: SessionStep): void {
  if (s.session.ended && s.started.includes(s.session)) b.events.push(sessionEvent('session_end', s.session, null));
}

/** The previous view's time on page: on its row when it is in this batch, else an UPDATE of the stored row. */
export function putViewDuration(b: OpBatch, s: SessionStep): void {
  if (!s.viewDuration) return;
  const inBatch = b.byId.get(s.viewDuration.eventId);
  if (inBatch) inBatch.durationMs = s.viewDuration.durationMs;
  else b.viewDurations.push(s.viewDuration);
}

/** An idle-ended session the event continued: its session_end rows go (this batch's too); a new end check is due. */
export function reopenSession(b: OpBatch, s: SessionStep): void {
  if (!s.reopened) return;
  const id = s.reopened.id;
  b.reopened.add(id);
  for (let i = b.events.length - 1; i >= 0; i--) {
    const e = b.events[i]!;
    if (e.name === 'session_end' && e.sessionId === id) b.events.splice(i, 1);
  }
  b.opened.set(s.current.id, s.current);
}

/** The session rows to write (each once per batch) and the device's state after the event. */
export function keepSession(b: OpBatch, s: SessionStep, _rec: EventRecord, k: string): void {
  for (const t of s.touched) b.sessions.set(t.id, t);
  b.states.set(k, s.current);
}

/** What one sessionized event adds to the batch, in order. */
export const SESSION_ROWS: readonly SessionRowStep[] = [
  endPrevious, // session_end of the sessions it ended (a 30-minute gap)
  startNew, // session_start of the session it started, end check due
  putEvent, // its own row, with its session id
  endLoneSession, // a very late event's standalone session: session_end at once
  putViewDuration, // the previous view's time on page
  reopenSession, // an idle-ended session continued: its session_end rows go
  keepSession, // session rows to write, the device's state
];

// ---- the other ops ------------------------------------------------------------------------

/** OP_STEPS.session_check: the session-end job's check. An idle session ends; one that is active again is due another check. */
export function checkSessionEnd(b: OpBatch, op: QueuedSessionCheck): void {
  const k = deviceKey(op.projectId, op.deviceId);
  const cur = currentSession(b, k);
  const ended = checkEnd(cur, op.sessionId, b.now, b.timeoutMs);
  if (ended) {
    b.events.push(sessionEvent('session_end', ended, null));
    if (!b.sessions.has(ended.id)) b.endedOnly.set(ended.id, ended);
    b.sessions.set(ended.id, ended);
    b.states.set(k, ended);
    b.opened.delete(ended.id);
  } else if (cur && cur.id === op.sessionId && !cur.ended) {
    // Not idle after all (an event overtook the check): schedule the next check.
    b.opened.set(cur.id, cur);
  }
}

/** Profile and group ops are applied in the commit, in batch order (store/profiles.ts applyProfileOps). */
export function queueProfileOp(b: OpBatch, op: ProfileOp): void {
  b.profileOps.push(op);
}

/** Op kind → the step that applies it to the batch. */
export const OP_STEPS: { readonly [K in QueuedOp['kind']]: OpStep<OpOf<K>> } = {
  track: trackEvent, // an event: enriched, sessionized, with its session_start/session_end rows
  session_check: checkSessionEnd, // session_end of an idle session
  identify: queueProfileOp, // profile fields and properties
  increment: queueProfileOp, // increment and decrement (a negative delta)
  group: queueProfileOp, // a group's fields
  assign_group: queueProfileOp, // a profile's groups
};

const stepOf = new Map<string, OpStep>(Object.entries(OP_STEPS) as [string, OpStep][]);

/**
 * The op through the step for its kind. A kind this worker does not know (queued by a newer
 * API) goes with the profile ops, as it always has: the commit applies nothing for it.
 */
export function applyOp(b: OpBatch, op: QueuedOp): void {
  (stepOf.get(op.kind) ?? (queueProfileOp as OpStep))(b, op);
}

// ---- after the last op ----------------------------------------------------------------------

/**
 * The session a server-side event joins: the device's current session when it is of the
 * event's profile and open at the event's time (not ended, the event within the timeout of
 * its last event and not before its start); else null.
 */
export function joinable(s: SessionState | null, ev: EventRecord, timeoutMs: number): SessionState | null {
  if (!s || s.ended || s.isBot || s.profileId !== ev.profileId) return null;
  const at = ev.createdAt.getTime();
  return at >= s.startedAt && at - s.lastEventAt < timeoutMs ? s : null;
}

/**
 * Each held server-side event joins the device's session as the batch leaves it, else as it
 * was at the event's time. Joined: the session's device (OpenPanel's too); else the event's
 * own device, not the browser device it was queued on.
 */
export function joinServerSide(b: OpBatch): void {
  for (const x of b.held) {
    const open = joinable(currentSession(b, x.k), x.rec, b.timeoutMs) ?? joinable(x.atItsTime, x.rec, b.timeoutMs);
    x.rec.sessionId = open ? open.id : null;
    if (!open && x.own) x.rec.deviceId = x.own;
  }
}
