// The exact ingest path: revocation, rate limit, device choice and live update decided by
// Redis, the requests of one event-loop turn in one call. Why: a request whose device id
// depends on Redis (the 30 minutes after midnight UTC), or any request while the revocation
// mirror is not in step with Redis, cannot be answered locally.
import type { RedisKeys } from '../redis/redis';
import { LIVE_WINDOW_MS, SEEN_TTL_SECONDS, toResult, type GateResult, type IngestGateInput } from './common';
import { RATE_WINDOW_MS } from './lease';
import type { GateCommands } from './scripts';

/** Requests decided by one Redis call at most. */
const MAX_BATCH = 256;

interface PendingIngest {
  input: IngestGateInput;
  resolve: (r: GateResult) => void;
  reject: (err: unknown) => void;
}

export class ExactPath {
  private pending: PendingIngest[] = [];
  private flushScheduled = false;

  constructor(private readonly cmd: GateCommands, private readonly keys: RedisKeys) {}

  /**
   * Decides one request with those of its turn (flushed on setImmediate or at MAX_BATCH), so
   * the per-request cost is a few array pushes, not a command round trip.
   */
  decide(i: IngestGateInput): Promise<GateResult> {
    return new Promise<GateResult>((resolve, reject) => {
      this.pending.push({ input: i, resolve, reject });
      if (this.pending.length >= MAX_BATCH) this.flush();
      else if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flushSoon);
      }
    });
  }

  private readonly flushSoon = (): void => {
    this.flushScheduled = false;
    this.flush();
  };

  private flush(): void {
    const batch = this.pending;
    if (!batch.length) return;
    this.pending = [];
    const reqs: string[][] = new Array(batch.length);
    for (let n = 0; n < batch.length; n++) {
      const i = batch[n]!.input;
      const seen = i.previousDeviceId !== '' || i.markSeen;
      reqs[n] = [
        this.keys.rate('ingest', i.clientId),
        this.keys.live(i.projectId),
        seen ? this.keys.seen(i.deviceId) : '',
        seen ? this.keys.seen(i.previousDeviceId || i.deviceId) : '',
        String(i.ratePerSecond), i.clientId, i.profileId,
        i.liveAtMs === null ? '' : String(i.liveAtMs), i.deviceId, i.previousDeviceId,
        i.markSeen ? '1' : '0',
      ];
    }
    const liveCutoff = String(batch[0]!.input.nowMs - LIVE_WINDOW_MS);
    this.cmd.tmIngestGate(JSON.stringify(reqs), this.keys.revoked, String(RATE_WINDOW_MS), String(SEEN_TTL_SECONDS), this.keys.rateSeq, liveCutoff).then(
      (reply) => {
        let r: (number | string)[];
        try {
          r = JSON.parse(String(reply)) as (number | string)[];
        } catch (err) {
          for (const b of batch) b.reject(err);
          return;
        }
        for (let n = 0; n < batch.length; n++) {
          const b = batch[n]!;
          const at = n * 4;
          const row = [Number(r[at]), Number(r[at + 1]), Number(r[at + 2])] as [number, number, number];
          b.resolve(toResult(row, b.input.ratePerSecond, RATE_WINDOW_MS, String(r[at + 3] ?? '')));
        }
      },
      (err: unknown) => {
        for (const b of batch) b.reject(err);
      },
    );
  }
}
