// JetStream publish-and-await-ack on one reply subscription, without the client library's
// per-request machinery.
//
// Why not `jetstream(nc).publish()`: each call goes through `nc.request()`, which makes a
// request object, a timer and a deferred per publish, and on every success its cleanup
// (`RequestOne.cancel()`) builds an Error (a stack capture) that nothing reads. Measured on
// this machine kind (.scratch-style loop, 16 publishes in flight, 600-byte messages, one
// process): 29 us of CPU per publish through the library against 12 us here, and twice the
// publishes per second; one at a time 110 us against 75 us. The API thread publishes once per
// /track request at moderate load, so this is its largest single cost after the socket writes.
//
// What it does is what the library does on the wire: PUB <subject> <reply> with the
// `Nats-Msg-Id` header (JetStream's duplicate window), and the stream's answer on the reply
// subject: a PubAck `{"stream","seq","duplicate"}`, an API error `{"error":{...}}`, or a
// no-responders status (503, empty body) when no stream leader listens. One wildcard
// subscription receives every answer; one sweep timer, armed only while publishes wait,
// times them out.
import { createInbox, headers, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';

interface PubAck {
  stream: string;
  seq: number;
  duplicate: boolean;
}

/** No stream answered (no leader right now, or no stream for the subject). */
export class NoRespondersError extends Error {
  override name = 'NoRespondersError';
}

/** No answer within the publish's timeout: the message may or may not be stored. */
export class PublishTimeoutError extends Error {
  override name = 'PublishTimeoutError';
}

/** The stream refused the message (its API error, e.g. a limit). */
export class PublishRefusedError extends Error {
  override name = 'PublishRefusedError';
  constructor(readonly code: number, readonly errCode: number, description: string) {
    super(`JetStream refused the message: ${description} (${code}/${errCode})`);
  }
}

interface Waiting {
  resolve: (ack: PubAck) => void;
  reject: (err: Error) => void;
  deadline: number;
}

const SWEEP_MS = 20;
const decoder = new TextDecoder();

export class AckedPublisher {
  private readonly prefix: string;
  private readonly sub: Subscription;
  private readonly waiting = new Map<number, Waiting>();
  private next = 0;
  private sweeper: NodeJS.Timeout | null = null;

  constructor(private readonly nc: NatsConnection) {
    this.prefix = `${createInbox()}.`;
    this.sub = nc.subscribe(`${this.prefix}*`, { callback: (err, msg) => (err ? this.failAll(err) : this.answer(msg)) });
    void nc.closed().then(() => this.failAll(new Error('NATS connection closed')));
  }

  /** Resolves with the stream's ack once the message is stored; rejects otherwise. */
  publish(subject: string, data: Uint8Array, msgId: string, timeoutMs: number): Promise<PubAck> {
    const id = ++this.next;
    const h = headers();
    h.set('Nats-Msg-Id', msgId);
    return new Promise<PubAck>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject, deadline: Date.now() + timeoutMs });
      this.sweeper ??= setInterval(() => this.sweep(), SWEEP_MS).unref();
      try {
        this.nc.publish(subject, data, { reply: `${this.prefix}${id}`, headers: h });
      } catch (err) {
        this.waiting.delete(id);
        reject(err as Error);
      }
    });
  }

  private answer(msg: Msg): void {
    const id = Number(msg.subject.slice(this.prefix.length));
    const w = this.waiting.get(id);
    if (!w) return; // timed out already
    this.waiting.delete(id);
    if (msg.data.length === 0 && msg.headers?.code === 503) return w.reject(new NoRespondersError(`no stream answered ${msg.subject}`));
    let v: { stream?: string; seq?: number; duplicate?: boolean; error?: { code?: number; err_code?: number; description?: string } };
    try {
      v = JSON.parse(decoder.decode(msg.data));
    } catch {
      return w.reject(new Error(`JetStream answered with something that is not an ack (${msg.data.length} bytes)`));
    }
    if (v.error) return w.reject(new PublishRefusedError(v.error.code ?? 0, v.error.err_code ?? 0, v.error.description ?? 'unknown error'));
    if (!v.stream || typeof v.seq !== 'number') return w.reject(new Error('JetStream answered with an invalid ack'));
    w.resolve({ stream: v.stream, seq: v.seq, duplicate: v.duplicate === true });
  }

  private sweep(): void {
    const now = Date.now();
    for (const [id, w] of this.waiting) {
      if (w.deadline > now) continue;
      this.waiting.delete(id);
      w.reject(new PublishTimeoutError('no JetStream ack within the publish timeout'));
    }
    if (this.waiting.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  private failAll(err: Error): void {
    for (const w of this.waiting.values()) w.reject(err);
    this.waiting.clear();
  }

  close(): void {
    this.sub.unsubscribe();
    this.failAll(new Error('publisher closed'));
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
  }
}
