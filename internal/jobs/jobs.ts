// BullMQ: the delayed session-end sweeps and the periodic jobs (salt rotation, retention,
// rollup refresh). Queue names and keys carry the namespace.
//
// Session ends: a session is due a check when it has been idle for the timeout (wall time).
// A committed batch asks for one delayed job per slot (a few seconds wide) in which its
// opened sessions fall due, not one per session: the job id is the slot, so the sessions of
// many batches share it. The job reads the idle open sessions (sessions_open_idx) and
// publishes their checks, many to a message, onto each device's shard, where the owner
// decides in order with the device's events (op-steps.ts checkSessionEnd). The periodic
// sweep does the same as a backstop (a slot job lost with Redis' data).
import { createHash } from 'node:crypto';
import { Queue, Worker, type ConnectionOptions } from 'bullmq';
import { LRUCache } from 'lru-cache';
import type { Bus } from '../bus/bus';
import { shardOf } from '../bus/bus';
import { packBatches } from '../bus/message';
import type { QueuedSessionCheck } from '../model/event';
import type { Logger } from '../obs/log';
import type { SessionState } from '../sessionize/session';
import type { Pool } from '../store/db';
import { applyRetention, idleOpenSessions, oldestActiveOpenSession, type IdleSession } from '../store/maintenance';
import type { SaltKeeper } from '../ingest/identity';

/** The width of a sweep slot: a session ends at most this much after its idle timeout. */
export function sweepSlotMs(timeoutMs: number): number {
  return Math.min(5000, Math.max(250, Math.round(timeoutMs / 60)));
}

/** The slot (its end, ms) in which a session written at `updatedAtMs` falls due. */
export function sweepSlotOf(updatedAtMs: number, timeoutMs: number): number {
  const w = sweepSlotMs(timeoutMs);
  return Math.ceil((updatedAtMs + timeoutMs) / w) * w;
}

/** Checks a message carries at most (the worker takes a message larger than its batch alone). */
export const CHECKS_PER_MESSAGE = 500;
/** Idle sessions a sweep reads a page. */
const SWEEP_PAGE = 2000;

interface PeriodicTask {
  name: string;
  /** Cron pattern (UTC) or a fixed interval. */
  every: { pattern: string } | { everyMs: number };
  run: () => Promise<unknown>;
}

interface JobsOptions {
  redisUrl: string;
  namespace: string;
  bus: Bus;
  db: Pool;
  salts: SaltKeeper;
  log: Logger;
  timeoutMs: number;
  retentionDays: number;
  /** Extra periodic tasks (e.g. rollup refresh). */
  periodic?: PeriodicTask[];
  /** Told how many session-end checks a sweep published (tidemark_session_end_checks_total). */
  onChecks?: (n: number) => void;
}

const connectionFor = (url: string): ConnectionOptions => {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    username: u.username || undefined,
    password: u.password || undefined,
    db: Number(u.pathname.slice(1) || 0),
    maxRetriesPerRequest: null,
  };
};

/** The producer side, used by the shard runner: one delayed sweep per slot in which opened sessions fall due. */
class SessionEndScheduler {
  readonly queue: Queue;
  constructor(redisUrl: string, namespace: string, private readonly timeoutMs: number) {
    this.queue = new Queue('session-end', { connection: connectionFor(redisUrl), prefix: `${namespace}:bull` });
    this.queue.on('error', () => {});
  }

  /** A sweep in the slot of each session's due time (one job per slot however many sessions). */
  schedule(sessions: SessionState[]): Promise<void> {
    return this.scheduleSlots(sessions.map((s) => sweepSlotOf(s.updatedAtMs, this.timeoutMs)));
  }

  async scheduleSlots(slots: number[]): Promise<void> {
    if (!slots.length) return;
    const now = Date.now();
    // A slot's job already waiting makes the add a no-op (same job id).
    await this.queue.addBulk(
      [...new Set(slots)].map((slot) => ({
        name: 'sweep',
        data: { slot },
        opts: { jobId: `sweep-${slot}`, delay: Math.max(0, slot - now), removeOnComplete: true, removeOnFail: 1000 },
      })),
    );
  }

  close(): Promise<void> {
    return this.queue.close();
  }
}

/** The consumer side: runs in worker processes. */
export class JobRunner {
  private readonly workers: Worker[] = [];
  private readonly queues: Queue[] = [];
  private rescheduler: NodeJS.Timeout | null = null;
  readonly scheduler: SessionEndScheduler;

  constructor(private readonly o: JobsOptions) {
    this.scheduler = new SessionEndScheduler(o.redisUrl, o.namespace, o.timeoutMs);
  }

  async start(): Promise<void> {
    const connection = connectionFor(this.o.redisUrl);
    const prefix = `${this.o.namespace}:bull`;
    const sessionEnd = new Worker(
      'session-end',
      // 'sweep', or a per-session 'check' an earlier version scheduled: either way, a sweep.
      () => this.sweep(),
      { connection, prefix, concurrency: 1 },
    );
    sessionEnd.on('error', (err) => this.o.log.warn({ err }, 'session-end worker error'));
    this.workers.push(sessionEnd);

    const tasks: PeriodicTask[] = [
      { name: 'rotate-salt', every: { pattern: '0 0 * * *' }, run: () => this.rotateSalt() },
      { name: 'retention', every: { everyMs: 3600_000 }, run: () => applyRetention(this.o.db, this.o.retentionDays) },
      { name: 'session-sweep', every: { everyMs: Math.max(1000, Math.min(60_000, this.o.timeoutMs)) }, run: () => this.sweep() },
      ...(this.o.periodic ?? []),
    ];
    const maintenance = new Queue('maintenance', { connection, prefix });
    maintenance.on('error', () => {});
    this.queues.push(maintenance);
    const schedule = async () => {
      for (const t of tasks) {
        const repeat = 'pattern' in t.every ? { pattern: t.every.pattern, tz: 'UTC' } : { every: t.every.everyMs };
        await maintenance.upsertJobScheduler(t.name, repeat, { name: t.name, opts: { removeOnComplete: true, removeOnFail: 100 } });
      }
    };
    await schedule();
    // A Redis that restarted empty has lost the schedulers: registering again is idempotent.
    this.rescheduler = setInterval(() => void schedule().catch((err) => this.o.log.warn({ err }, 'could not register periodic jobs')), 60_000);
    this.rescheduler.unref();
    const byName = new Map(tasks.map((t) => [t.name, t]));
    const mw = new Worker(
      'maintenance',
      async (job) => {
        const task = byName.get(job.name);
        if (!task) return;
        return task.run();
      },
      { connection, prefix, concurrency: 1 },
    );
    mw.on('error', (err) => this.o.log.warn({ err }, 'maintenance worker error'));
    mw.on('failed', (job, err) => this.o.log.warn({ err, job: job?.name }, 'periodic job failed'));
    this.workers.push(mw);
    await this.rotateSalt();
  }

  /** Makes sure today's and tomorrow's salts exist and drops old ones. */
  async rotateSalt(): Promise<void> {
    const now = Date.now();
    await this.o.salts.salts(now);
    await this.o.salts.saltFor(new Date(now + 86_400_000).toISOString().slice(0, 10));
    await this.o.salts.prune(now);
  }

  /**
   * Checks published in the last 30 minutes (session id and idle period): a sweep skips them.
   * A published check is stored in JetStream and will be applied, so publishing it again only
   * adds to a backlog (a worker down for an hour would otherwise be sent every idle session's
   * check at every sweep). A session still open after its check was applied has been written
   * since (another idle period: another key), or its device moved on to a newer session.
   */
  private readonly published = new LRUCache<string, true>({ max: 200_000, ttl: 30 * 60_000 });

  /**
   * The idle open sessions' checks, published onto their devices' shards, many to a message
   * (a slot's job and the periodic sweep); a session whose check went out in the last 30
   * minutes is left to it. Then the sweep of the slot in which the oldest open session that is
   * not idle yet falls due: a session that continued after its first check (no new session,
   * so no batch asks for its slot) is covered by this chain. Returns the checks published.
   */
  async sweep(): Promise<number> {
    let published = 0;
    let after: IdleSession | undefined;
    for (;;) {
      const page = await idleOpenSessions(this.o.db, this.o.timeoutMs, SWEEP_PAGE, after);
      const due = page.filter((s) => !this.published.has(`${s.sessionId}-${s.updatedAtMs}`));
      await this.publishChecks(due);
      for (const s of due) this.published.set(`${s.sessionId}-${s.updatedAtMs}`, true);
      published += due.length;
      if (due.length) this.o.onChecks?.(due.length);
      if (page.length < SWEEP_PAGE) break;
      after = page[page.length - 1];
    }
    const next = await oldestActiveOpenSession(this.o.db, this.o.timeoutMs);
    if (next !== null) {
      // A slot still to come (this job's own slot, or one that passed, would be a no-op add).
      const w = sweepSlotMs(this.o.timeoutMs);
      await this.scheduler.scheduleSlots([Math.max(sweepSlotOf(next, this.o.timeoutMs), (Math.floor(Date.now() / w) + 1) * w)]);
    }
    return published;
  }

  private async publishChecks(sessions: IdleSession[]): Promise<void> {
    const { bus } = this.o;
    const bySubject = new Map<string, string[]>();
    const receivedAt = new Date().toISOString();
    for (const s of sessions) {
      const op: QueuedSessionCheck = {
        // One check per idle period: a reopened session's next check is another op.
        kind: 'session_check', id: `check-${s.sessionId}-${s.updatedAtMs}`, projectId: s.projectId, deviceId: s.deviceId,
        receivedAt, sessionId: s.sessionId,
      };
      const subject = bus.subjectFor(s.projectId, shardOf(s.deviceId, bus.shards));
      const list = bySubject.get(subject) ?? [];
      list.push(JSON.stringify(op));
      bySubject.set(subject, list);
    }
    for (const [subject, ops] of bySubject) {
      for (const data of packBatches(ops, bus.maxPayload - 1024, CHECKS_PER_MESSAGE)) {
        // The same checks again within JetStream's duplicate window (a retried publish) are one message.
        await bus.publish(subject, data, `checks-${createHash('sha1').update(data).digest('hex')}`);
      }
    }
  }

  async close(): Promise<void> {
    if (this.rescheduler) clearInterval(this.rescheduler);
    await Promise.all(this.workers.map((w) => w.close()));
    await Promise.all(this.queues.map((q) => q.close()));
    await this.scheduler.close();
  }
}
