// Many requests share one JetStream round trip, without a timer on the idle path: an op for
// a subject with no publish in flight is published at the end of the event loop's current
// turn (setImmediate: after the requests that arrived together have been read, before any
// timer), so the requests read in one turn share one message per subject and one socket
// write; while a publish is in flight, the ops that arrive for its subject gather into the
// next message, which is published the moment a publish of the subject settles (or at once
// when it reaches `maxOps` or `maxBytes`). So a lone producer pays one JetStream round trip,
// and under load each subject's messages grow with the ack latency. Gathered ops wait behind
// a publish in flight for `maxWaitBehindMs` at most (a healthy ack takes well under a
// millisecond on one host): when NATS stalls, each request still gets its answer (503) one
// publish timeout after it arrived, not after every publish queued before it. Every request
// of a message is answered when that message's publish is acked. The message's format, which
// the worker decodes, is internal/bus/message.ts.
import { randomUUID } from 'node:crypto';
import { encodeBatch, encodeCompressed, ENVELOPE_BYTES } from '../bus/message';
import type { QueuedOp } from '../model/event';

type PublishFn = (subject: string, data: Uint8Array, msgId: string) => Promise<unknown>;

interface BatcherOptions {
  publish: PublishFn;
  maxOps: number;
  /**
   * 0 (the default): no timer at all (see above). Above 0: an op that finds its subject idle
   * waits up to this long for company before it is published (the older, fixed-linger mode).
   */
  maxDelayMs: number;
  /** Keep a message under the server's max payload. */
  maxBytes: number;
  /** Longest wait of gathered ops behind a publish in flight (default 5 ms). */
  maxWaitBehindMs?: number;
  onFlush?: (ops: number, bytes: number, seconds: number, ok: boolean) => void;
}

interface Pending {
  ops: string[];
  bytes: number;
  /** The JetStream message id of the first op, used when the message carries that op alone. */
  loneMsgId: string | undefined;
  /** Settles when the message is acked (or refused): every op of the message shares it. */
  done: Promise<void>;
  resolve: () => void;
  reject: (e: unknown) => void;
  timer: NodeJS.Timeout | null;
}

function newPending(bytes: number, loneMsgId: string | undefined): Pending {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const done = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { ops: [], bytes, loneMsgId, done, resolve, reject, timer: null };
}

export class OpTooLargeError extends Error {}

const DEFAULT_WAIT_BEHIND_MS = 5;

export class Batcher {
  private readonly pending = new Map<string, Pending>();
  /** Publishes in flight per subject (a subject with none publishes its next op at once). */
  private readonly busy = new Map<string, number>();
  private inFlight = new Set<Promise<void>>();

  constructor(private readonly opts: BatcherOptions) {}

  /**
   * Resolves once the op is durably stored in JetStream. `msgId`: the JetStream message id
   * to use when the op travels alone (a deterministic one lets JetStream's duplicate window
   * drop a retried request's copy); a message of several ops gets a random id.
   */
  add(subject: string, op: QueuedOp, msgId?: string): Promise<void> {
    const json = JSON.stringify(op);
    const size = Buffer.byteLength(json);
    // A large op (up to the 1 MiB body limit plus its envelope) travels alone, compressed.
    if (size > this.opts.maxBytes / 4) return this.publishLarge(subject, json, msgId);
    let p = this.pending.get(subject);
    if (p && p.bytes + size + 1 > this.opts.maxBytes) {
      this.flush(subject);
      p = undefined;
    }
    if (!p) {
      p = newPending(ENVELOPE_BYTES, msgId);
      this.pending.set(subject, p);
    }
    const entry = p;
    entry.ops.push(json);
    entry.bytes += size + 1;
    const done = entry.done;
    if (entry.ops.length >= this.opts.maxOps) this.flush(subject);
    else if (!this.busy.get(subject)) {
      if (this.opts.maxDelayMs <= 0) this.flushThisTurn(subject);
      else entry.timer ??= setTimeout(() => this.flush(subject), this.opts.maxDelayMs);
    } else entry.timer ??= setTimeout(() => this.flush(subject), this.opts.maxWaitBehindMs ?? DEFAULT_WAIT_BEHIND_MS);
    return done;
  }

  /** Subjects to publish at the end of this turn of the event loop. */
  private readonly due = new Set<string>();
  private dueScheduled = false;

  private flushThisTurn(subject: string): void {
    this.due.add(subject);
    if (this.dueScheduled) return;
    this.dueScheduled = true;
    setImmediate(() => {
      this.dueScheduled = false;
      for (const s of this.due) {
        if (!this.busy.get(s)) this.flush(s);
        else {
          // A full message of the subject went meanwhile: the rest waits behind it, capped.
          const p = this.pending.get(s);
          if (p) p.timer ??= setTimeout(() => this.flush(s), this.opts.maxWaitBehindMs ?? DEFAULT_WAIT_BEHIND_MS);
        }
      }
      this.due.clear();
    });
  }

  private flush(subject: string): void {
    const p = this.pending.get(subject);
    if (!p) return;
    this.pending.delete(subject);
    if (p.timer) clearTimeout(p.timer);
    const data = encodeBatch(p.ops);
    const msgId = p.ops.length === 1 && p.loneMsgId ? p.loneMsgId : randomUUID();
    const started = process.hrtime.bigint();
    this.busy.set(subject, (this.busy.get(subject) ?? 0) + 1);
    const job = this.opts
      .publish(subject, data, msgId)
      .then(
        () => {
          this.opts.onFlush?.(p.ops.length, data.length, Number(process.hrtime.bigint() - started) / 1e9, true);
          p.resolve();
        },
        (err) => {
          this.opts.onFlush?.(p.ops.length, data.length, Number(process.hrtime.bigint() - started) / 1e9, false);
          p.reject(err);
        },
      )
      .finally(() => {
        this.inFlight.delete(job);
        this.settled(subject);
      });
    this.inFlight.add(job);
  }

  /** A publish of the subject settled: what gathered behind it goes now. */
  private settled(subject: string): void {
    const n = (this.busy.get(subject) ?? 1) - 1;
    if (n > 0) this.busy.set(subject, n);
    else this.busy.delete(subject);
    if (this.pending.has(subject)) this.flush(subject);
  }

  private async publishLarge(subject: string, json: string, msgId: string | undefined): Promise<void> {
    const data = await encodeCompressed(json);
    if (data.length > this.opts.maxBytes) {
      throw new OpTooLargeError(`event of ${Buffer.byteLength(json)} bytes exceeds the queue's message limit even compressed`);
    }
    const job = this.opts.publish(subject, data, msgId ?? randomUUID()).then(() => undefined);
    const tracked = job.catch(() => {}).finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
    await job;
  }

  /** Flushes everything pending and waits for every publish to settle (drain). */
  async flushAll(): Promise<void> {
    for (const subject of [...this.pending.keys()]) this.flush(subject);
    // A publish that settles now flushes what gathered behind it: wait until none is left.
    while (this.inFlight.size || this.pending.size) {
      for (const subject of [...this.pending.keys()]) this.flush(subject);
      await Promise.allSettled([...this.inFlight]);
    }
  }
}
