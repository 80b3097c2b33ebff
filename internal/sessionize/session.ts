// The session state machine (semantics.md "Page views and sessions"): plain functions over
// plain data. A session is a maximal run of one device's events less than `timeoutMs`
// apart in event time. The caller owns persistence; this only decides.
import { SCREEN_VIEW, SESSION_DIMENSIONS, type EventRecord, type SessionDimension } from '../model/event';

export interface SessionState {
  id: string;
  projectId: string;
  deviceId: string;
  profileId: string;
  startedAt: number;
  lastEventAt: number;
  screenViewCount: number;
  eventCount: number;
  entryOrigin: string;
  entryPath: string;
  exitOrigin: string;
  exitPath: string;
  isBot: boolean;
  dims: Record<SessionDimension, string>;
  ended: boolean;
  /** Wall-clock ms when an event of this session was last processed (idle check). */
  updatedAtMs: number;
  /** The latest real event: a screen view waits here for its time on page. */
  lastEvent: { id: string; createdAt: number; isScreenView: boolean } | null;
  /**
   * The funnel steps (sql/036_session_steps.sql): the names of the session's non-bot events
   * other than screen views in time order, '' before a name at the same instant as the one
   * before it; null once not known in order (see addStep). With the first and last step's
   * times (null when there is none).
   */
  stepNames: string[] | null;
  stepFirstAt: number | null;
  stepLastAt: number | null;
}

export interface SessionOptions {
  timeoutMs: number;
  newId: () => string;
  /** Wall-clock now. */
  nowMs: number;
}

/** What one event did; the caller turns it into rows. */
export interface StepResult {
  /** The device's current session after the event. */
  current: SessionState;
  /** Session the event was counted in (the current one, or a standalone one for a late event). */
  session: SessionState;
  /** Sessions whose row must be written (new or changed). */
  touched: SessionState[];
  /** Sessions that started with this event (session_start is due). */
  started: SessionState[];
  /** Sessions that ended because this event came 30+ minutes later (session_end is due). */
  ended: SessionState[];
  /** A screen view whose time on page is now known. */
  viewDuration: { eventId: string; createdAt: number; durationMs: number } | null;
  /** The session had been ended (idle) and this event, within the timeout, continues it. */
  reopened: SessionState | null;
}

export const sessionDurationMs = (s: SessionState): number => s.lastEventAt - s.startedAt;
export const isBounce = (s: SessionState): boolean => s.screenViewCount <= 1;

function newSession(ev: EventRecord, at: number, opts: SessionOptions): SessionState {
  const dims = {} as Record<SessionDimension, string>;
  for (const d of SESSION_DIMENSIONS) dims[d] = ev[d];
  return {
    id: opts.newId(),
    projectId: ev.projectId,
    deviceId: ev.deviceId,
    profileId: ev.profileId,
    startedAt: at,
    lastEventAt: at,
    screenViewCount: 0,
    eventCount: 0,
    entryOrigin: '',
    entryPath: '',
    exitOrigin: '',
    exitPath: '',
    isBot: ev.isBot,
    dims,
    ended: false,
    updatedAtMs: opts.nowMs,
    lastEvent: null,
    stepNames: [],
    stepFirstAt: null,
    stepLastAt: null,
  };
}

/** The most step entries a session keeps, and their bytes (they are in a btree index). */
export const MAX_STEP_ENTRIES = 32;
export const MAX_STEP_BYTES = 1024;

/**
 * Adds a step event to the session's steps (a new array: states are shared). An event before
 * the latest step (its place is not known without the times), or past the limits, leaves the
 * names unknown (null) for good: the funnel reads such a session's events instead.
 */
function addStep(s: SessionState, name: string, at: number): void {
  s.stepFirstAt = s.stepFirstAt === null ? at : Math.min(s.stepFirstAt, at);
  const last = s.stepLastAt;
  s.stepLastAt = last === null ? at : Math.max(last, at);
  if (s.stepNames === null) return;
  if (last !== null && at < last) {
    s.stepNames = null;
    return;
  }
  const next = last !== null && at === last ? [...s.stepNames, '', name] : [...s.stepNames, name];
  let bytes = 0;
  for (const n of next) bytes += Buffer.byteLength(n) + 1;
  s.stepNames = next.length > MAX_STEP_ENTRIES || bytes > MAX_STEP_BYTES ? null : next;
}

function count(s: SessionState, ev: EventRecord, at: number, latest: boolean): void {
  s.eventCount++;
  // semantics.md, "OpenPanel fidelity": once the device is identified (an event whose
  // profileId is not the deviceId), the whole session belongs to that profile.
  if (ev.profileId !== ev.deviceId && ev.profileId !== '' && s.profileId !== ev.profileId) s.profileId = ev.profileId;
  if (ev.name !== SCREEN_VIEW && !ev.isBot) addStep(s, ev.name, at);
  if (ev.name === SCREEN_VIEW) {
    s.screenViewCount++;
    if (!s.entryPath && !s.entryOrigin) {
      s.entryOrigin = ev.origin;
      s.entryPath = ev.path;
    }
    if (latest) {
      s.exitOrigin = ev.origin;
      s.exitPath = ev.path;
    }
  }
  if (latest) {
    s.lastEventAt = at;
    s.lastEvent = { id: ev.id, createdAt: at, isScreenView: ev.name === SCREEN_VIEW };
  }
}

/**
 * Applies one real event (never session_start/session_end) of a device to its current
 * session. Events are expected in time order per device; a late event joins the current
 * session when it is within the timeout of its start, else it becomes a standalone session.
 */
export function applyEvent(current: SessionState | null, ev: EventRecord, opts: SessionOptions): StepResult {
  const at = ev.createdAt.getTime();
  if (!current) {
    const s = newSession(ev, at, opts);
    count(s, ev, at, true);
    return { current: s, session: s, touched: [s], started: [s], ended: [], viewDuration: null, reopened: null };
  }
  const s = { ...current, updatedAtMs: opts.nowMs };
  if (at >= s.lastEventAt) {
    if (at - s.lastEventAt >= opts.timeoutMs) {
      const closed = s.ended ? [] : [{ ...s, ended: true }];
      const next = newSession(ev, at, opts);
      count(next, ev, at, true);
      return { current: next, session: next, touched: [...closed, next], started: [next], ended: closed, viewDuration: null, reopened: null };
    }
    const prev = s.lastEvent;
    const viewDuration = prev && prev.isScreenView ? { eventId: prev.id, createdAt: prev.createdAt, durationMs: at - prev.createdAt } : null;
    const reopened = s.ended ? s : null; // an event within the timeout continues an idle-ended session
    s.ended = false;
    count(s, ev, at, true);
    return { current: s, session: s, touched: [s], started: [], ended: [], viewDuration, reopened };
  }
  if (at > s.startedAt - opts.timeoutMs) {
    // Late but inside the session's span (or just before it): counted, not the latest.
    count(s, ev, at, false);
    return { current: s, session: s, touched: [s], started: [], ended: [], viewDuration: null, reopened: null };
  }
  const lone = newSession(ev, at, opts);
  count(lone, ev, at, true);
  lone.ended = true;
  return { current: s, session: lone, touched: [lone], started: [lone], ended: [lone], viewDuration: null, reopened: null };
}

/** The session-end check: ends the session when nothing arrived for `timeoutMs` of wall time. */
export function checkEnd(current: SessionState | null, sessionId: string, nowMs: number, timeoutMs: number): SessionState | null {
  if (!current || current.id !== sessionId || current.ended || nowMs - current.updatedAtMs < timeoutMs) return null;
  return { ...current, ended: true };
}
