// Many requests share one JetStream round trip: ops are grouped per subject and flushed as
// one message at `maxOps`, at `maxBytes`, or `maxDelayMs` after the first op; every request
// of the message is answered when that message's publish is acked.
import { randomUUID } from 'node:crypto';
import type { QueuedBatch, QueuedOp } from '../model/event';

export type PublishFn = (subject: string, data: Uint8Array, msgId: string) => Promise<unknown>;

export interface BatcherOptions {
  publish: PublishFn;
  maxOps: number;
  maxDelayMs: number;
  /** Keep a message under the server's max payload. */
  maxBytes: number;
  onFlush?: (ops: number, bytes: number, seconds: number, ok: boolean) => void;
}

interface Pending {
  ops: string[];
  bytes: number;
  waiters: { resolve: () => void; reject: (e: unknown) => void }[];
  timer: NodeJS.Timeout | null;
}

export class OpTooLargeError extends Error {}

const HEAD = '{"v":1,"ops":[';
const TAIL = ']}';

export class Batcher {
  private readonly pending = new Map<string, Pending>();
  private inFlight = new Set<Promise<void>>();

  constructor(private readonly opts: BatcherOptions) {}

  /** Resolves once the op is durably stored in JetStream. */
  add(subject: string, op: QueuedOp): Promise<void> {
    const json = JSON.stringify(op);
    const size = Buffer.byteLength(json);
    if (size + HEAD.length + TAIL.length > this.opts.maxBytes) {
      return Promise.reject(new OpTooLargeError(`event of ${size} bytes exceeds the queue's message limit`));
    }
    let p = this.pending.get(subject);
    if (p && p.bytes + size + 1 > this.opts.maxBytes) {
      this.flush(subject);
      p = undefined;
    }
    if (!p) {
      p = { ops: [], bytes: HEAD.length + TAIL.length, waiters: [], timer: null };
      this.pending.set(subject, p);
    }
    const entry = p;
    entry.ops.push(json);
    entry.bytes += size + 1;
    const done = new Promise<void>((resolve, reject) => entry.waiters.push({ resolve, reject }));
    if (entry.ops.length >= this.opts.maxOps) this.flush(subject);
    else if (!entry.timer) {
      entry.timer = this.opts.maxDelayMs <= 0 ? setImmediate(() => this.flush(subject)) as unknown as NodeJS.Timeout
        : setTimeout(() => this.flush(subject), this.opts.maxDelayMs);
    }
    return done;
  }

  private flush(subject: string): void {
    const p = this.pending.get(subject);
    if (!p) return;
    this.pending.delete(subject);
    if (p.timer) clearTimeout(p.timer);
    const body = `${HEAD}${p.ops.join(',')}${TAIL}`;
    const data = Buffer.from(body);
    const started = process.hrtime.bigint();
    const job = this.opts
      .publish(subject, data, randomUUID())
      .then(
        () => {
          this.opts.onFlush?.(p.ops.length, data.length, Number(process.hrtime.bigint() - started) / 1e9, true);
          for (const w of p.waiters) w.resolve();
        },
        (err) => {
          this.opts.onFlush?.(p.ops.length, data.length, Number(process.hrtime.bigint() - started) / 1e9, false);
          for (const w of p.waiters) w.reject(err);
        },
      )
      .finally(() => this.inFlight.delete(job));
    this.inFlight.add(job);
  }

  /** Flushes everything pending and waits for every publish to settle (drain). */
  async flushAll(): Promise<void> {
    for (const subject of [...this.pending.keys()]) this.flush(subject);
    await Promise.allSettled([...this.inFlight]);
  }
}

export function decodeBatch(data: Uint8Array): QueuedBatch {
  return JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')) as QueuedBatch;
}
