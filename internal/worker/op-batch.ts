// The one typed record a shard batch is built in: what the op steps (op-steps.ts) read and
// append to, from the first op to the rows of the transaction. Works on copies of the
// session states: the caller adopts them only after the commit.
import { v7 as uuidv7 } from 'uuid';
import type { DropReason, Enricher } from '../enrich';
import type { EventRecord } from '../model/event';
import type { SessionOptions, SessionState } from '../sessionize/session';
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
   * this enriched event (internal/bus/storable.ts), or null. Such an event is set aside
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

/** A server-side event whose session is decided after the batch (joinServerSide). */
interface HeldEvent {
  rec: EventRecord;
  /** The device it was queued on. */
  k: string;
  /** That device's session at the event's time. */
  atItsTime: SessionState | null;
  /** The device of its own (QueuedTrack.ownDeviceId), kept when it joins no session. */
  own: string | undefined;
}

/** The batch being built. Steps append to the collections; nothing here is written until the commit. */
export interface OpBatch {
  readonly enricher: Pick<Enricher, 'enrich'>;
  readonly cache: SessionCache;
  readonly unstorable: ((rec: EventRecord) => string | null) | undefined;
  readonly timeoutMs: number;
  /** Wall-clock now, read once per batch. */
  readonly now: number;
  readonly sessionOptions: SessionOptions;
  /** Device key → its session as the batch leaves it so far (over the cache). */
  readonly states: Map<string, SessionState>;
  /** Rows of the events table, in order. */
  readonly events: EventRecord[];
  /** This batch's events by id (a view's time on page lands on its row here). */
  readonly byId: Map<string, EventRecord>;
  /** Time on page of views stored by earlier batches. */
  readonly viewDurations: ShardBatch['viewDurations'];
  /** Session rows to write, by id (each once, however many events touched it). */
  readonly sessions: Map<string, SessionState>;
  /** Open sessions due an end check, by id. */
  readonly opened: Map<string, SessionState>;
  /** Idle-ended sessions an event continued: their session_end rows go. */
  readonly reopened: Set<string>;
  /** Sessions an end check ended before anything else in the batch touched them, as it left them. */
  readonly endedOnly: Map<string, SessionState>;
  readonly profileOps: ProfileOp[];
  readonly drops: DropReason[];
  readonly setAside: NonNullable<ShardBatch['setAside']>;
  readonly held: HeldEvent[];
}

type OpBatchDeps = Pick<ProcessDeps, 'cache' | 'timeoutMs' | 'unstorable'> & { enricher: Pick<Enricher, 'enrich'> };

/** An empty batch at wall time `now` over `states` (sessions loaded from the store for devices not in the cache). */
export function newOpBatch(deps: OpBatchDeps, now: number, states = new Map<string, SessionState>()): OpBatch {
  return {
    enricher: deps.enricher,
    cache: deps.cache,
    unstorable: deps.unstorable,
    timeoutMs: deps.timeoutMs,
    now,
    sessionOptions: { timeoutMs: deps.timeoutMs, newId: () => uuidv7(), nowMs: now },
    states,
    events: [],
    byId: new Map(),
    viewDurations: [],
    sessions: new Map(),
    opened: new Map(),
    reopened: new Set(),
    endedOnly: new Map(),
    profileOps: [],
    drops: [],
    setAside: [],
    held: [],
  };
}

/** The device's session as the batch has it now: changed in this batch, else cached, else none. */
export function currentSession(b: OpBatch, k: string): SessionState | null {
  return b.states.get(k) ?? b.cache.get(k) ?? null;
}

/** The rows of the transaction and what the caller adopts after it. */
export function finishBatch(b: OpBatch): ProcessedBatch {
  // Ended only: the batch's row of the session is still the one its end check left (a later
  // step writes a copy), and no event of the batch but its session_end belongs to it.
  const withEvents = new Set(b.events.filter((e) => e.name !== 'session_end' && e.sessionId).map((e) => e.sessionId));
  const endedOnly = [...b.endedOnly].filter(([id, s]) => b.sessions.get(id) === s && !withEvents.has(id)).map(([id]) => id);
  return {
    endedOnlySessionIds: endedOnly,
    events: b.events,
    viewDurations: b.viewDurations,
    sessions: [...b.sessions.values()],
    reopenedSessionIds: [...b.reopened],
    profileOps: b.profileOps,
    states: b.states,
    opened: [...b.opened.values()],
    drops: b.drops,
    setAside: b.setAside,
  };
}
