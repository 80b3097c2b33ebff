// Watches that the JetStream stream is there. A stream can go while the service runs (an
// operator deletes it; a single NATS node comes back with an empty store): every publish is
// then refused (503) and /readyz must say so. Once it has been missing for a grace period the
// watch creates it again, so that ingest recovers without a restart; the workers find the new
// instance (its creation time) before they consume and start it from its first message
// (internal/worker/stream-position.ts), so no 202 given on the new stream is skipped. What the
// lost stream held and the workers had not yet written to PostgreSQL is gone with it.
import type { Logger } from '../obs/log';
import type { Bus } from './bus';

interface StreamWatchOptions {
  bus: Pick<Bus, 'streamInstance' | 'ensureStream' | 'streamName'>;
  log: Logger;
  /** Counts the stream created again (tidemark_stream_recreated_total). */
  onRecreated?: () => void;
  /** How often the stream is looked at (ms). */
  intervalMs?: number;
  /** How long the stream stays missing before it is created again (ms); a server restoring its streams at start is given this long. */
  recreateAfterMs?: number;
  /** How long JetStream may fail to describe the stream before that counts as unready (ms). */
  unansweredAfterMs?: number;
  now?: () => number;
}

export class StreamWatch {
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> = Promise.resolve();
  private closed = false;
  private missingSince: number | null = null;
  private failingSince: number | null = null;
  private lastError = '';

  constructor(private readonly o: StreamWatchOptions) {}

  start(): void {
    const tick = () => {
      this.ticking = this.check();
      void this.ticking.finally(() => {
        if (!this.closed) this.timer = setTimeout(tick, this.o.intervalMs ?? 1000).unref();
      });
    };
    this.timer = setTimeout(tick, this.o.intervalMs ?? 1000).unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.ticking;
  }

  /** Why ingest cannot store events in the stream now (null: it can, as far as the watch knows). */
  problem(): string | null {
    const now = (this.o.now ?? Date.now)();
    if (this.missingSince !== null) {
      return `stream ${this.o.bus.streamName} is missing (for ${Math.round((now - this.missingSince) / 1000)} s); it is created again after ${Math.round((this.o.recreateAfterMs ?? 5000) / 1000)} s`;
    }
    if (this.failingSince !== null && now - this.failingSince >= (this.o.unansweredAfterMs ?? 3000)) {
      return `stream ${this.o.bus.streamName} cannot be described by JetStream: ${this.lastError}`;
    }
    return null;
  }

  /** One look at the stream (exported for tests: start() runs it every intervalMs). */
  async check(): Promise<void> {
    const { bus, log } = this.o;
    const now = (this.o.now ?? Date.now)();
    let instance;
    try {
      instance = await bus.streamInstance();
    } catch (err) {
      // NATS away, or no stream leader right now: the nats probe says the first; the second
      // shows as unready when it lasts.
      this.failingSince ??= now;
      this.lastError = (err as Error).message;
      return;
    }
    this.failingSince = null;
    if (instance) {
      if (this.missingSince !== null) log.info({ stream: bus.streamName }, 'stream is back');
      this.missingSince = null;
      return;
    }
    if (this.missingSince === null) {
      this.missingSince = now;
      log.error({ stream: bus.streamName }, 'stream is missing: ingest answers 503 until it is back or created again');
    }
    if (now - this.missingSince < (this.o.recreateAfterMs ?? 5000) || this.closed) return;
    try {
      await bus.ensureStream();
      this.missingSince = null;
      this.o.onRecreated?.();
      log.error(
        { stream: bus.streamName },
        'stream was missing and is created again: messages it held that were not yet written to PostgreSQL are lost; workers start the new stream from its first message',
      );
    } catch (err) {
      log.error({ err, stream: bus.streamName }, 'could not create the missing stream; trying again');
    }
  }
}
