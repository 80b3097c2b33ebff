// BullMQ: the delayed session-end checks and the periodic jobs (salt rotation, retention,
// rollup refresh). Queue names and keys carry the namespace.
import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import type { Bus } from '../bus/bus';
import { shardOf } from '../bus/bus';
import { encodeBatch } from '../bus/message';
import type { QueuedSessionCheck } from '../model/event';
import type { Logger } from '../obs/log';
import type { SessionState } from '../sessionize/session';
import type { Pool } from '../store/db';
import { applyRetention, idleOpenSessions, sessionForEndCheck } from '../store/maintenance';
import type { SaltKeeper } from '../ingest/identity';

interface SessionEndJob {
  sessionId: string;
  projectId: string;
  deviceId: string;
}

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

/** The producer side, used by the shard runner: one delayed check per opened session. */
class SessionEndScheduler {
  readonly queue: Queue<SessionEndJob>;
  constructor(redisUrl: string, namespace: string, private readonly timeoutMs: number) {
    this.queue = new Queue<SessionEndJob>('session-end', { connection: connectionFor(redisUrl), prefix: `${namespace}:bull` });
    this.queue.on('error', () => {});
  }

  async schedule(sessions: SessionState[]): Promise<void> {
    await this.queue.addBulk(
      sessions.map((s) => ({
        name: 'check',
        data: { sessionId: s.id, projectId: s.projectId, deviceId: s.deviceId },
        opts: { jobId: `${s.id}-${s.updatedAtMs}`, delay: this.timeoutMs, removeOnComplete: true, removeOnFail: 1000 },
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
    const sessionEnd = new Worker<SessionEndJob>('session-end', (job) => this.checkSessionEnd(job), { connection, prefix, concurrency: 8 });
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

  /** Idle open sessions whose check was never scheduled get one now (job ids dedupe). */
  async sweep(): Promise<number> {
    const idle = await idleOpenSessions(this.o.db, this.o.timeoutMs);
    if (!idle.length) return 0;
    await this.scheduler.queue.addBulk(
      idle.map((s) => ({
        name: 'check',
        data: { sessionId: s.sessionId, projectId: s.projectId, deviceId: s.deviceId },
        opts: { jobId: `${s.sessionId}-${s.updatedAtMs}-sweep`, removeOnComplete: true, removeOnFail: 1000 },
      })),
    );
    return idle.length;
  }

  private async checkSessionEnd(job: Job<SessionEndJob>): Promise<string> {
    const s = await sessionForEndCheck(this.o.db, job.data.sessionId);
    if (!s || s.ended) return 'already ended';
    const idle = Date.now() - s.updatedAtMs;
    if (idle < this.o.timeoutMs) {
      await this.scheduler.queue.add('check', job.data, {
        jobId: `${job.data.sessionId}-${s.updatedAtMs}`, delay: this.o.timeoutMs - idle, removeOnComplete: true, removeOnFail: 1000,
      });
      return 'rescheduled';
    }
    // The shard owner decides, in order with the device's events.
    const op: QueuedSessionCheck = {
      // One check per idle period: a reopened session's next check is a new message, not a duplicate.
      kind: 'session_check', id: `check-${job.data.sessionId}-${s.updatedAtMs}`, projectId: job.data.projectId, deviceId: job.data.deviceId,
      receivedAt: new Date().toISOString(), sessionId: job.data.sessionId,
    };
    const { bus } = this.o;
    await bus.publish(bus.subjectFor(op.projectId, shardOf(op.deviceId, bus.opts.shards)), encodeBatch([JSON.stringify(op)]), op.id);
    return 'checked';
  }

  async close(): Promise<void> {
    if (this.rescheduler) clearInterval(this.rescheduler);
    await Promise.all(this.workers.map((w) => w.close()));
    await Promise.all(this.queues.map((q) => q.close()));
    await this.scheduler.close();
  }
}
