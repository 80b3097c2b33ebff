// Turns the ops of one shard batch into the rows of one transaction: enrich each event,
// sessionize it by device, emit session_start/session_end, collect profile operations.
// Works on copies of the session states: the caller adopts them only after the commit.
import { v7 as uuidv7 } from 'uuid';
import { blankEventRecord, type DropReason, type Enricher } from '../enrich';
import { SESSION_DIMENSIONS, type EventRecord, type QueuedOp, type QueuedTrack } from '../model/event';
import { applyEvent, checkEnd, type SessionState } from '../sessionize/session';
import type { ProfileOp, ShardBatch } from '../store/writes';

export const deviceKey = (projectId: string, deviceId: string) => `${projectId}\u0000${deviceId}`;

export interface SessionCache {
  get(key: string): SessionState | undefined;
}

export interface ProcessDeps {
  enricher: Enricher;
  cache: SessionCache;
  /** Latest session per device from the store, for devices not in the cache. */
  loadSessions: (keys: { projectId: string; deviceId: string }[]) => Promise<SessionState[]>;
  timeoutMs: number;
  nowMs: () => number;
  /**
   * The worker's isolating retry (shard-runner commitIsolating): why PostgreSQL cannot store
   * this enriched event (internal/ingest/storable.ts), or null. Such an event is set aside
   * alone (op_failures) before it is sessionized; the rest of its message is stored.
   */
  unstorable?: (rec: EventRecord) => string | null;
}

export interface ProcessedBatch extends Omit<ShardBatch, 'stream' | 'shard' | 'fromSeq' | 'toSeq'> {
  /** Device states after the batch, to adopt into the cache once committed. */
  states: Map<string, SessionState>;
  /** Sessions that started in this batch and are still open (their end check gets scheduled). */
  opened: SessionState[];
  drops: DropReason[];
}

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
function sessionEvent(name: 'session_start' | 'session_end', s: SessionState, template: EventRecord | null): EventRecord {
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

/** Event time of an op for ordering (receipt time for ops that are not events). */
const opTime = (op: QueuedOp): number => Date.parse(op.kind === 'track' ? op.createdAt : op.receivedAt);

export async function processOps(input: QueuedOp[], deps: ProcessDeps): Promise<ProcessedBatch> {
  // Concurrent requests of one device can reach the stream slightly out of order (the API
  // awaits Redis before queueing): a stable sort by event time restores each device's order.
  const ops = input
    .map((op, i) => ({ op, i, t: opTime(op) }))
    .sort((a, b) => a.t - b.t || a.i - b.i)
    .map((x) => x.op);
  const states = new Map<string, SessionState>();
  const missing = new Map<string, { projectId: string; deviceId: string }>();
  for (const op of ops) {
    if (op.kind !== 'track' && op.kind !== 'session_check') continue;
    const k = deviceKey(op.projectId, op.deviceId);
    if (!deps.cache.get(k)) missing.set(k, { projectId: op.projectId, deviceId: op.deviceId });
  }
  if (missing.size) {
    for (const s of await deps.loadSessions([...missing.values()])) states.set(deviceKey(s.projectId, s.deviceId), s);
  }
  const current = (k: string): SessionState | null => states.get(k) ?? deps.cache.get(k) ?? null;

  const now = deps.nowMs();
  const opts = { timeoutMs: deps.timeoutMs, newId: () => uuidv7(), nowMs: now };
  const events: EventRecord[] = [];
  const byId = new Map<string, EventRecord>();
  const viewDurations: ShardBatch['viewDurations'] = [];
  const sessions = new Map<string, SessionState>();
  const opened = new Map<string, SessionState>();
  const reopened = new Set<string>();
  const profileOps: ProfileOp[] = [];
  const drops: DropReason[] = [];
  const setAside: NonNullable<ShardBatch['setAside']> = [];
  const serverSide: { rec: EventRecord; k: string; atItsTime: SessionState | null; own: string | undefined }[] = [];

  for (const op of ops) {
    switch (op.kind) {
      case 'track': {
        const result = deps.enricher.enrich(recordFromOp(op));
        if (!result.ok) {
          drops.push(result.reason);
          break;
        }
        const rec = result.event;
        const why = deps.unstorable?.(rec);
        if (why) {
          setAside.push({ opId: op.id, projectId: op.projectId, kind: op.kind, reason: why, op });
          break;
        }
        const k = deviceKey(op.projectId, op.deviceId);
        if (rec.serverSide && !rec.isBot) {
          // semantics.md, "OpenPanel fidelity": a server-side event opens no session and
          // changes none (a bot without an OS, such as Googlebot, keeps its bot sessions). It
          // joins the device's session when that session is open at its time and of its profile
          // (the API queued it on the device of the profile's latest browser event); else it is
          // stored without a session.
          // Decided after the batch: a later event of the batch may identify the session (the
          // batch runs in event time, the producer may have sent that event first).
          serverSide.push({ rec, k, atItsTime: current(k), own: op.ownDeviceId });
          events.push(rec);
          byId.set(rec.id, rec);
          break;
        }
        const step = applyEvent(current(k), rec, opts);
        rec.sessionId = step.session.id;
        for (const ended of step.ended) {
          if (ended.id !== step.session.id) events.push(sessionEvent('session_end', ended, null));
          opened.delete(ended.id);
        }
        for (const started of step.started) {
          events.push(sessionEvent('session_start', started, rec));
          if (!started.ended) opened.set(started.id, started);
        }
        events.push(rec);
        byId.set(rec.id, rec);
        if (step.session.ended && step.started.includes(step.session)) events.push(sessionEvent('session_end', step.session, null));
        if (step.viewDuration) {
          const inBatch = byId.get(step.viewDuration.eventId);
          if (inBatch) inBatch.durationMs = step.viewDuration.durationMs;
          else viewDurations.push(step.viewDuration);
        }
        if (step.reopened) {
          reopened.add(step.reopened.id);
          // A session_end of this session written earlier in this batch is void as well.
          for (let i = events.length - 1; i >= 0; i--) {
            const e = events[i]!;
            if (e.name === 'session_end' && e.sessionId === step.reopened.id) events.splice(i, 1);
          }
          opened.set(step.current.id, step.current);
        }
        for (const t of step.touched) sessions.set(t.id, t);
        states.set(k, step.current);
        break;
      }
      case 'session_check': {
        const k = deviceKey(op.projectId, op.deviceId);
        const cur = current(k);
        const ended = checkEnd(cur, op.sessionId, now, deps.timeoutMs);
        if (ended) {
          events.push(sessionEvent('session_end', ended, null));
          sessions.set(ended.id, ended);
          states.set(k, ended);
          opened.delete(ended.id);
        } else if (cur && cur.id === op.sessionId && !cur.ended) {
          // Not idle after all (an event overtook the check): schedule the next check.
          opened.set(cur.id, cur);
        }
        break;
      }
      default:
        profileOps.push(op);
    }
  }
  // The device's session as the batch leaves it, else as it was at the event's time.
  for (const x of serverSide) {
    const open = joinable(current(x.k), x.rec, deps.timeoutMs) ?? joinable(x.atItsTime, x.rec, deps.timeoutMs);
    x.rec.sessionId = open ? open.id : null;
    // Joined: the session's device (OpenPanel's too). Else the event's own device, not the
    // browser device it was queued on.
    if (!open && x.own) x.rec.deviceId = x.own;
  }
  return {
    events,
    viewDurations,
    sessions: [...sessions.values()],
    reopenedSessionIds: [...reopened],
    profileOps,
    states,
    opened: [...opened.values()],
    drops,
    setAside,
  };
}
