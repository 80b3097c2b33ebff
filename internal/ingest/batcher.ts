// Many requests share one JetStream round trip: ops are grouped per subject and flushed as
// one message at `maxOps`, at `maxBytes`, or `maxDelayMs` after the first op; every request
// of the message is answered when that message's publish is acked.
import { randomUUID } from 'node:crypto';
import { deflateRaw, inflateRawSync } from 'node:zlib';
import { promisify } from 'node:util';
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
  /** Settles when the message is acked (or refused): every op of the message shares it. */
  done: Promise<void>;
  resolve: () => void;
  reject: (e: unknown) => void;
  timer: NodeJS.Timeout | null;
}

function newPending(bytes: number): Pending {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const done = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { ops: [], bytes, done, resolve, reject, timer: null };
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
    // A large op (up to the 1 MiB body limit plus its envelope) travels alone, compressed.
    if (size > this.opts.maxBytes / 4) return this.publishLarge(subject, json);
    let p = this.pending.get(subject);
    if (p && p.bytes + size + 1 > this.opts.maxBytes) {
      this.flush(subject);
      p = undefined;
    }
    if (!p) {
      p = newPending(HEAD.length + TAIL.length);
      this.pending.set(subject, p);
    }
    const entry = p;
    entry.ops.push(json);
    entry.bytes += size + 1;
    const done = entry.done;
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
          p.resolve();
        },
        (err) => {
          this.opts.onFlush?.(p.ops.length, data.length, Number(process.hrtime.bigint() - started) / 1e9, false);
          p.reject(err);
        },
      )
      .finally(() => this.inFlight.delete(job));
    this.inFlight.add(job);
  }

  private async publishLarge(subject: string, json: string): Promise<void> {
    const packed = await deflate(Buffer.from(`${HEAD}${json}${TAIL}`));
    const data = Buffer.concat([COMPRESSED_MARK, packed]);
    if (data.length > this.opts.maxBytes) {
      throw new OpTooLargeError(`event of ${Buffer.byteLength(json)} bytes exceeds the queue's message limit even compressed`);
    }
    const job = this.opts.publish(subject, data, randomUUID()).then(() => undefined);
    const tracked = job.catch(() => {}).finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
    await job;
  }

  /** Flushes everything pending and waits for every publish to settle (drain). */
  async flushAll(): Promise<void> {
    for (const subject of [...this.pending.keys()]) this.flush(subject);
    await Promise.allSettled([...this.inFlight]);
  }
}

const deflate = promisify(deflateRaw);
/** First byte of a compressed message; a JSON message starts with '{'. */
const COMPRESSED_MARK = Buffer.from([0]);

export function decodeBatch(data: Uint8Array): QueuedBatch {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const text = buf[0] === 0 ? inflateRawSync(buf.subarray(1)).toString('utf8') : buf.toString('utf8');
  return JSON.parse(text) as QueuedBatch;
}
