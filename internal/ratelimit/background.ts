// The fast path's Redis call, sent after the answers: the live-set and seen-device updates of
// admitted requests and the token buckets' leases, one call at a time, each carrying all that
// gathered since the last (so under load a few hundred calls a second, not one per request).
// Why apart from the answer: an admitted request on the fast path does not wait for Redis.
import type { RedisKeys } from '../redis/redis';
import { LIVE_WINDOW_MS, SEEN_TTL_SECONDS, type GateOptions, type IngestGateInput } from './common';
import { RATE_WINDOW_MS, type LeaseAnswer } from './lease';
import type { GateCommands } from './scripts';

/** A background call in flight this long (ms) no longer holds the next one back. */
const ASYNC_STALL_MS = 250;

interface PendingLease {
  clientId: string;
  limit: number;
  want: number;
  resolve: (a: LeaseAnswer) => void;
  reject: (err: unknown) => void;
}

export class BackgroundCalls {
  private leases: PendingLease[] = [];
  private effects: string[][] = [];
  private scheduled = false;
  /** When the call in flight was sent (ms), 0 when none is. */
  private sentAt = 0;

  /** `learn`: a client the call found revoked. */
  constructor(private readonly cmd: GateCommands, private readonly keys: RedisKeys, private readonly opts: GateOptions, private readonly learn: (clientId: string) => void) {}

  /** An admitted request's live and seen updates (when it has any), for the next call. */
  effect(i: IngestGateInput): void {
    if (i.liveAtMs === null && !i.markSeen) return;
    this.effects.push([
      this.keys.live(i.projectId), i.markSeen ? this.keys.seen(i.deviceId) : '',
      i.profileId, i.liveAtMs === null ? '' : String(i.liveAtMs), i.clientId, i.deviceId,
    ]);
    this.schedule();
  }

  /** Reserves up to `want` slots in the client's ingest log (the token buckets' LeaseFn). */
  lease(clientId: string, limit: number, want: number): Promise<LeaseAnswer> {
    return new Promise<LeaseAnswer>((resolve, reject) => {
      this.leases.push({ clientId, limit, want, resolve, reject });
      this.schedule();
    });
  }

  /**
   * The call goes at the end of this event-loop turn, or, while one is in flight, when it
   * settles (what gathers meanwhile shares the next call). A call in flight longer than
   * ASYNC_STALL_MS does not hold the next back.
   */
  private schedule(): void {
    if (this.scheduled) return;
    if (this.sentAt && Date.now() - this.sentAt < ASYNC_STALL_MS) return;
    this.scheduled = true;
    setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const leases = this.leases;
    const effects = this.effects;
    if (!leases.length && !effects.length) return;
    this.leases = [];
    this.effects = [];
    const sentAt = (this.sentAt = Date.now());
    const settled = () => {
      if (this.sentAt === sentAt) this.sentAt = 0;
      if (this.leases.length || this.effects.length) this.schedule();
    };
    const l = leases.map((x) => [this.keys.rate('ingest', x.clientId), x.clientId, String(x.limit), String(x.want)]);
    const liveCutoff = String(Date.now() - LIVE_WINDOW_MS);
    this.cmd.tmIngestAsync(JSON.stringify({ l, e: effects }), this.keys.revoked, String(RATE_WINDOW_MS), String(SEEN_TTL_SECONDS), this.keys.rateSeq, liveCutoff).then(
      (reply) => {
        let r: { l?: unknown; rev?: unknown };
        try {
          r = JSON.parse(String(reply)) as { l?: unknown; rev?: unknown };
        } catch (err) {
          for (const x of leases) x.reject(err);
          return settled();
        }
        // cjson encodes an empty array as {}.
        if (Array.isArray(r.rev)) {
          for (const id of r.rev as string[]) this.learn(id);
        }
        const answers = Array.isArray(r.l) ? (r.l as number[][]) : [];
        for (let n = 0; n < leases.length; n++) {
          const a = answers[n];
          if (!a) leases[n]!.reject(new Error('lease missing from the Redis answer'));
          else leases[n]!.resolve({ revoked: a[0] === -1, granted: Number(a[1]), count: Number(a[2]), ttlMs: Number(a[3]) });
        }
        settled();
      },
      (err: unknown) => {
        this.opts.onAsyncError?.(err);
        for (const x of leases) x.reject(err);
        settled();
      },
    );
  };
}
