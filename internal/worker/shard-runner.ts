// Runs one shard: consume its subject in order, process a batch, commit it (with the
// shard's JetStream position, fenced), then ack. A failed batch is retried as a whole;
// nothing is acked before its effects are committed.
import { LRUCache } from 'lru-cache';
import type { Bus, BusMessage } from '../bus/bus';
import { decodeBatch } from '../bus/message';
import { eventRecordProblem } from '../bus/storable';
import type { Enricher } from '../enrich';
import type { EventRecord, QueuedOp } from '../model/event';
import type { Logger } from '../obs/log';
import type { Metrics } from '../obs/metrics';
import type { SessionState } from '../sessionize/session';
import type { Pool } from '../store/db';
import { PartitionKeeper } from '../store/partitions';
import { appliedKeys, type AppliedKey, claimShardPosition, commitShardBatch, commitSkipped, isDataError, loadLatestSessions, ShardFencedError } from '../store/writes';
import { keepFirstPerKey, keyedOf } from './keys';
import { processOps } from './processor';
import type { Semaphore } from './semaphore';
import { planPosition } from './stream-position';

/** Why PostgreSQL cannot store an enriched event (the API's rules, asked again on the isolating retry). */
function unstorable(rec: EventRecord): string | null {
  const p = eventRecordProblem(rec);
  return p ? `not storable: ${p.path.join('.')}: ${p.message}` : null;
}

export interface ShardRunnerDeps {
  bus: Bus;
  db: Pool;
  enricher: Enricher;
  partitions: PartitionKeeper;
  log: Logger;
  metrics: Metrics;
  timeoutMs: number;
  batchMax: number;
  /** Devices this shard keeps in its session cache (WORKER_SESSION_CACHE / TIDEMARK_SHARDS). */
  cacheMax: number;
  /**
   * Shared by the runners of one worker: a runner holds a slot from taking its batch until
   * the batch is committed and acked, so the worker has at most that many write
   * transactions open, and a runner waiting for a slot takes a bigger batch.
   */
  commits?: Semaphore;
  /** Events by COPY (default); false: by INSERT (see WORKER_EVENTS_COPY). */
  copyEvents?: boolean;
  /**
   * WORKER_LINGER_MS: a batch smaller than batchMax waits up to this long after its first
   * message arrived for more, so that a trickle of events shares one transaction (its fixed
   * cost: the shard position, the commit's WAL flush) instead of paying one each. 0: at once.
   */
  lingerMs?: number;
  /** Called after commit (outside the commit slot) with the sessions that opened (their end check is scheduled). */
  onOpened: (sessions: SessionState[]) => Promise<void>;
  now?: () => number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class ShardRunner {
  private stopping = false;
  private finished = false;
  private stopped: Promise<void> | null = null;
  private readonly cache: LRUCache<string, SessionState>;
  private queue: BusMessage[] = [];
  /** Sessions opened by committed batches, whose end checks are still to be scheduled. */
  private opened: SessionState[] = [];
  /** Each queued message's ops, decoded once (null: undecodable). */
  private readonly decoded = new WeakMap<BusMessage, QueuedOp[] | null>();
  /** When each queued message arrived (performance.now()), for WORKER_LINGER_MS. */
  private readonly arrivedAt = new WeakMap<BusMessage, number>();
  private wake: (() => void) | null = null;
  private highestSeen = 0;
  private committed = 0;
  private messages: { stop(): void; close(): Promise<void | Error> } | null = null;
  /** Counts the consumers opened: a message or notification of an earlier one is ignored. */
  private generation = 0;
  /** The highest delivery (consumer) sequence received from the current consumer. */
  private delivered = 0;
  /** Why the consumer must be reopened at the committed position (null: it need not). */
  private rewind: string | null = null;
  private rewinds = 0;
  private lastRewindAt = -Infinity;
  /** The stream instance (creation time) the committed position counts in. */
  private instance: string | null = null;
  /** Since when (ms) the consumer could not be opened, the batches have failed, a commit has run; and why. */
  private openingSince: number | null = null;
  private failingSince: number | null = null;
  private committingSince: number | null = null;
  private lastProblem = '';

  constructor(readonly shard: number, private readonly deps: ShardRunnerDeps) {
    this.cache = new LRUCache<string, SessionState>({ max: Math.max(1, deps.cacheMax) });
  }

  start(): void {
    this.stopped = this.run()
      .catch((err) => {
        this.deps.log.error({ err, shard: this.shard }, 'shard runner stopped on error');
      })
      .finally(() => {
        this.finished = true;
      });
  }

  /** The runner stopped by itself (fenced, or failed to start): its lease should go. */
  get done(): boolean {
    return this.finished;
  }

  /** Finishes the batch in hand (committed and acked), then stops consuming. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    this.messages?.stop();
    await this.stopped;
  }

  /**
   * Why this shard cannot be written now (null: it can): its consumer could not be opened for
   * 5 s (no stream, say), its batches have failed for 5 s, or one commit has run for 20 s
   * (PostgreSQL stalled). /readyz reports it.
   */
  problem(): string | null {
    const now = Date.now();
    if (this.openingSince !== null && now - this.openingSince >= 5000) return `shard ${this.shard}: its consumer cannot be opened: ${this.lastProblem}`;
    if (this.failingSince !== null && now - this.failingSince >= 5000) return `shard ${this.shard}: batches fail to commit: ${this.lastProblem}`;
    if (this.committingSince !== null && now - this.committingSince >= 20_000) {
      return `shard ${this.shard}: a batch has been committing for ${Math.round((now - this.committingSince) / 1000)} s`;
    }
    return null;
  }

  private async run(): Promise<void> {
    const { log } = this.deps;
    let committed = await this.resume();
    log.info({ shard: this.shard, from: committed + 1 }, 'shard taken');
    let failures = 0;
    while (!this.stopping) {
      if (this.rewind) {
        committed = await this.reopen();
        continue;
      }
      if (!this.queue.length) {
        await new Promise<void>((r) => {
          this.wake = r;
          setTimeout(r, 1000).unref();
        });
        this.wake = null;
        continue;
      }
      await this.linger();
      const outcome = this.deps.commits ? await this.deps.commits.run(() => this.step(committed, failures)) : await this.step(committed, failures);
      // Out of the commit slot: a slow Redis must not hold up the other shards' commits
      // (a check that is never scheduled is found by the sweep).
      await this.scheduleOpened();
      committed = outcome.committed;
      failures = outcome.failures;
      if (outcome.fenced) break;
      if (outcome.backoffMs) await sleep(outcome.backoffMs);
    }
    await this.messages?.close().catch(() => {});
  }

  /**
   * Opens the shard's consumer at `from` and consumes it. Deliveries must come without a gap:
   * the shard's messages are committed in order, so one that never arrived (its delivery lost
   * with a connection or a stream leader, while the consumer counts it as delivered) would be
   * redelivered only after ack_wait, behind later messages already committed, and skipped.
   * A gap in the delivery sequence, an idle heartbeat naming a delivery not received, or a
   * consumer gone asks for a rewind instead: the consumer is reopened at the committed
   * position (in PostgreSQL, with the batches), as NATS's ordered consumers do.
   */
  private async open(from: number): Promise<void> {
    const gen = ++this.generation;
    this.delivered = 0;
    this.highestSeen = from - 1;
    const consumer = await this.deps.bus.openShard(this.shard, from);
    const messages = await consumer.consume({
      max_messages: Math.max(100, this.deps.batchMax),
      // A lost delivery at the tail (nothing after it to show the gap) shows in the next idle
      // heartbeat, not after ack_wait.
      expires: 10_000,
      // The server sends a heartbeat every 500 ms to a waiting pull request; after two missed
      // ones the library asks again. A pull request can be gone with no word from the server
      // (nats-server 2.9 under load here, later servers in their issue tracker: no 408, the
      // shard's messages pending): the default heartbeat (expires / 2) left such a shard
      // stopped for 7-12 s while the others went on; now for about a second
      // (test/worker-lost-pull.test.ts).
      idle_heartbeat: 500,
      callback: (m) => this.receive(gen, m),
    });
    this.messages = messages;
    void (async () => {
      for await (const s of messages.status()) {
        if (gen !== this.generation) break;
        if (s.type === 'heartbeat' && s.lastConsumerSequence > this.delivered) {
          this.askRewind(`the consumer delivered up to ${s.lastConsumerSequence}, the runner received up to ${this.delivered}`);
        } else if (s.type === 'consumer_deleted' || s.type === 'consumer_not_found') {
          this.askRewind(`the shard consumer is gone (${s.type})`);
        }
      }
    })().catch(() => {});
  }

  private receive(gen: number, m: BusMessage): void {
    // An earlier consumer's, or one being replaced: the reopened consumer delivers it again.
    if (gen !== this.generation || this.rewind) return;
    const dseq = m.info.deliverySequence;
    if (dseq > this.delivered + 1) {
      this.askRewind(`delivery ${this.delivered + 1} of the shard consumer never arrived (got ${dseq})`);
      return;
    }
    this.delivered = Math.max(this.delivered, dseq);
    // Already committed (its ack was lost): ack again. Held in the queue: ignore.
    if (m.seq <= this.committed) return void m.ack();
    if (m.seq <= this.highestSeen) return;
    this.highestSeen = m.seq;
    this.arrivedAt.set(m, performance.now());
    this.queue.push(m);
    this.wake?.();
  }

  private askRewind(why: string): void {
    if (this.rewind || this.stopping) return;
    this.rewind = why;
    this.deps.metrics.workerErrors.inc({ kind: 'rewind' });
    this.deps.log.warn({ shard: this.shard, from: this.committed + 1, why }, 'shard consumer reopened at the committed position');
    this.wake?.();
  }

  /**
   * Finds where the shard resumes in the stream as it is now (planPosition: a stream created
   * again is consumed from its start), then opens its consumer there; retried until it works
   * or the runner stops. Returns the committed position.
   */
  private async resume(): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      try {
        const committed = await this.position();
        if (this.stopping) return committed;
        this.rewind = null;
        await this.open(committed + 1);
        // Created again between the look and the consumer: the consumer counts in the new one.
        const now = await this.deps.bus.streamInstance();
        if (now?.created !== this.instance) this.askRewind('the stream changed while its consumer was opened');
        this.openingSince = null;
        return committed;
      } catch (err) {
        if (this.stopping) return this.committed;
        this.openingSince ??= Date.now();
        this.lastProblem = (err as Error).message;
        // No stream (or no stream leader) yet, say: try again, as a failed batch is.
        this.deps.log.warn({ why: this.lastProblem, shard: this.shard, attempt }, 'could not open the shard consumer; retrying');
        await sleep(Math.min(5000, 200 * 2 ** Math.min(attempt, 5)));
      }
    }
  }

  /** The committed position in the stream as it is now, rebased when the stream is another instance (planPosition). */
  private async position(): Promise<number> {
    const { bus, db, log, metrics } = this.deps;
    const instance = await bus.streamInstance();
    if (!instance) throw new Error(`stream ${bus.streamName} does not exist`);
    const committed = await claimShardPosition(db, bus.streamName, this.shard, instance.created, (stored) => {
      const plan = planPosition(stored, instance);
      if (plan.rebased) {
        metrics.positionsRebased.inc();
        log.error({ shard: this.shard, from: stored.seq, to: plan.seq, why: plan.rebased }, 'shard position rebased onto the stream as it is now');
      }
      return plan;
    });
    this.instance = instance.created;
    this.committed = committed;
    return committed;
  }

  /** Drops what is queued (not committed, not acked) and consumes again from after the committed position. */
  private async reopen(): Promise<number> {
    // Rewinds in a row (a consumer that keeps losing deliveries) back off as failed batches do.
    const now = performance.now();
    this.rewinds = now - this.lastRewindAt < 10_000 ? this.rewinds + 1 : 0;
    this.lastRewindAt = now;
    if (this.rewinds > 0) await sleep(Math.min(5000, 100 * 2 ** Math.min(this.rewinds, 6)));
    this.queue = [];
    const old = this.messages;
    this.messages = null;
    old?.stop();
    await old?.close().catch(() => {});
    return this.resume();
  }

  /**
   * Waits (WORKER_LINGER_MS after the oldest queued message arrived, at most) while the queue
   * holds fewer than batchMax ops, so a trickle of events shares one transaction. Returns at
   * once when stopping, when the batch is full, or when lingering is off.
   */
  private async linger(): Promise<void> {
    const lingerMs = this.deps.lingerMs ?? 0;
    if (lingerMs <= 0) return;
    const until = (this.arrivedAt.get(this.queue[0]!) ?? 0) + lingerMs;
    while (!this.stopping && this.queuedOps() < this.deps.batchMax) {
      const left = until - performance.now();
      if (left <= 0) return;
      await new Promise<void>((r) => {
        this.wake = r;
        setTimeout(r, left).unref();
      });
      this.wake = null;
    }
  }

  /** Ops queued (whole messages; an undecodable message counts as none). */
  private queuedOps(): number {
    let n = 0;
    for (const m of this.queue) {
      n += this.opsOf(m)?.length ?? 0;
      if (n >= this.deps.batchMax) break;
    }
    return n;
  }

  /** Takes a batch from the queue, commits it, acks it; the caller backs off after a failure. */
  private async step(committed: number, failures: number): Promise<{ committed: number; failures: number; fenced?: boolean; backoffMs?: number }> {
    const { log } = this.deps;
    const batch = this.takeBatch();
    const stale = batch.filter((m) => m.seq <= committed);
    for (const m of stale) m.ack();
    const fresh = batch.filter((m) => m.seq > committed);
    if (!fresh.length) return { committed, failures };
    this.committingSince = Date.now();
    try {
      // After repeated data errors, commit message by message to find and set aside the bad one.
      committed = failures >= 2 && fresh.length >= 1 ? await this.commitIsolating(fresh, committed) : await this.commit(fresh, committed);
      this.committed = committed;
      for (const m of fresh) m.ack();
      failures = 0;
      this.failingSince = null;
    } catch (err) {
      if (err instanceof ShardFencedError) {
        log.warn({ shard: this.shard }, 'shard moved to another worker; stopping');
        this.deps.metrics.workerErrors.inc({ kind: 'fenced' });
        this.stopping = true;
        return { committed, failures, fenced: true };
      }
      failures++;
      this.failingSince ??= Date.now();
      this.lastProblem = (err as Error).message;
      this.deps.metrics.workerErrors.inc({ kind: 'commit' });
      log.error({ err, shard: this.shard, attempt: failures }, 'batch failed; retrying');
      this.cache.clear(); // reload session states from the store on retry
      this.deps.partitions.forget();
      this.queue.unshift(...fresh);
      for (const m of fresh) m.working();
      return { committed, failures, backoffMs: Math.min(5000, 100 * 2 ** Math.min(failures, 6)) };
    } finally {
      this.committingSince = null;
    }
    return { committed, failures };
  }

  /**
   * One message per transaction, its profile ops guarded: a profile op PostgreSQL refuses as
   * data is set aside alone (op_failures) and the rest of its message commits; a message
   * PostgreSQL still refuses as data is dead-lettered.
   */
  private async commitIsolating(msgs: BusMessage[], fromSeq: number): Promise<number> {
    let committed = fromSeq;
    for (const m of msgs) {
      try {
        committed = await this.commit([m], committed, true);
      } catch (err) {
        if (!isDataError(err)) throw err;
        let ops: { id: string; projectId: string; kind: string }[] = [];
        try {
          ops = decodeBatch(m.data).ops;
        } catch {}
        this.cache.clear();
        await commitSkipped(this.deps.db, {
          stream: this.deps.bus.streamName, shard: this.shard, fromSeq: committed, toSeq: m.seq, ops,
          reason: `PostgreSQL refused the batch: ${(err as Error).message}`,
        });
        this.deps.metrics.workerErrors.inc({ kind: 'dead_letter' });
        this.deps.log.error({ err, seq: m.seq, shard: this.shard, ops: ops.length }, 'message dead-lettered to op_failures');
        committed = m.seq;
      }
      this.committed = committed;
      m.ack();
    }
    return committed;
  }

  private takeBatch(): BusMessage[] {
    // Whole messages (each a micro-batch of ops) up to batchMax ops; at least one message.
    const out: BusMessage[] = [];
    let ops = 0;
    while (this.queue.length) {
      const n = this.opsOf(this.queue[0]!)?.length ?? 0;
      if (out.length && ops + n > this.deps.batchMax) break;
      out.push(this.queue.shift()!);
      ops += n;
    }
    return out;
  }

  private async scheduleOpened(): Promise<void> {
    if (!this.opened.length) return;
    const opened = this.opened;
    this.opened = [];
    await this.deps.onOpened(opened).catch((err) => this.deps.log.warn({ err }, 'could not schedule session end checks'));
  }

  /** The message's ops (decoded on first use); null when it cannot be read. */
  private opsOf(m: BusMessage): QueuedOp[] | null {
    let ops = this.decoded.get(m);
    if (ops !== undefined) return ops;
    try {
      ops = decodeBatch(m.data).ops;
    } catch (err) {
      // A message we cannot read would block the shard forever: recorded and skipped.
      this.deps.log.error({ err, seq: m.seq, shard: this.shard }, 'undecodable message skipped');
      this.deps.metrics.workerErrors.inc({ kind: 'decode' });
      ops = null;
    }
    this.decoded.set(m, ops);
    return ops;
  }

  /**
   * `guarded` (the isolating retry): an event PostgreSQL could not store is set aside alone
   * before it is sessionized, and profile ops run one by one under savepoints (applyProfileOps).
   */
  private async commit(msgs: BusMessage[], fromSeq: number, guarded = false): Promise<number> {
    const { bus, db, metrics } = this.deps;
    let ops: QueuedOp[] = [];
    for (const m of msgs) ops.push(...(this.opsOf(m) ?? []));
    // At most one op per (project, idempotency key): a retried copy is dropped here.
    const keyed = keyedOf(ops);
    let opKeys: AppliedKey[] = [];
    if (keyed.length) {
      const kept = keepFirstPerKey(ops, await appliedKeys(db, keyed));
      ops = kept.ops;
      opKeys = kept.keys;
      if (kept.dropped) this.deps.log.debug({ shard: this.shard, dropped: kept.dropped }, 'retried ops dropped by idempotency key');
    }
    const processed = await processOps(ops, {
      enricher: this.deps.enricher,
      cache: this.cache,
      loadSessions: (keys) => loadLatestSessions(db, keys),
      timeoutMs: this.deps.timeoutMs,
      nowMs: this.deps.now ?? Date.now,
      ...(guarded ? { unstorable } : {}),
    });
    await this.deps.partitions.ensureFor(processed.events);
    const toSeq = msgs[msgs.length - 1]!.seq;
    const started = process.hrtime.bigint();
    const { failures } = await commitShardBatch(db, {
      stream: bus.streamName, shard: this.shard, fromSeq, toSeq,
      events: processed.events, viewDurations: processed.viewDurations, sessions: processed.sessions,
      reopenedSessionIds: processed.reopenedSessionIds, endedOnlySessionIds: processed.endedOnlySessionIds,
      profileOps: processed.profileOps, opKeys, setAside: processed.setAside,
    }, { copy: this.deps.copyEvents ?? true, guarded });
    metrics.workerCommitDuration.observe(Number(process.hrtime.bigint() - started) / 1e9);
    metrics.workerBatchOps.observe(ops.length);
    metrics.workerEvents.inc(processed.events.length);
    for (const f of failures) {
      metrics.opFailures.inc({ kind: f.kind });
      this.deps.log.warn({ opId: f.opId, projectId: f.projectId, kind: f.kind, reason: f.reason }, 'operation not applied (op_failures)');
    }
    for (const [k, s] of processed.states) this.cache.set(k, s);
    this.opened.push(...processed.opened);
    return toSeq;
  }
}
