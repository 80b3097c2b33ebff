// The API thread's mirror of the revoked clients: loaded at start from Redis' revoked set and
// from PostgreSQL (which holds the revoked state authoritatively), kept current by the Redis
// channel `client revoke` announces on, and seeded into Redis again when Redis' set has lost
// its data (its marker member gone: FLUSHALL, a restart without persistence). Why a mirror:
// ingest answers without waiting for Redis, and a revocation must hold on every path even
// when Redis forgets it.
import type { Redis, RedisKeys } from '../redis/redis';
import { acknowledge } from '../redis/announce';
import type { GateOptions } from './common';

/**
 * A member of the revoked-clients set that is never a client id (ids are UUIDs; `client revoke`
 * only takes ids PostgreSQL has): written with the ids loaded from PostgreSQL, so a set without
 * it has lost its data (FLUSHALL, a restart without persistence, eviction) or was never seeded.
 */
export const REVOKED_SEEDED = '#seeded-from-postgres';
/** How often each API thread checks that Redis' revoked set still holds its marker (ms). */
export const REVOKED_CHECK_MS = 1_000;

export class RevocationMirror {
  /**
   * The revoked clients (grows only: a revocation is final, and what Redis loses is not
   * forgotten here). Every path consults it before Redis: a client it holds is refused
   * without a Redis call.
   */
  private readonly revoked = new Set<string>();
  /** The mirror is in step with Redis (subscribed and loaded): the fast path may be taken. */
  private inStep = false;
  private subscriber: Redis | null = null;
  private subscribedOnce = false;
  private checkTimer: NodeJS.Timeout | null = null;
  private checking = false;
  private seeding: Promise<void> | null = null;
  private seedFailing = false;

  /** `onLearn`: a client newly known as revoked (its rate-limit grants are to be dropped). */
  constructor(private readonly redis: Redis, private readonly keys: RedisKeys, private readonly opts: GateOptions, private readonly onLearn: (clientId: string) => void) {}

  /** Whether this thread knows the client is revoked (no Redis call). */
  has(clientId: string): boolean {
    return this.revoked.has(clientId);
  }

  /** Subscribed and loaded: what the mirror lacks, Redis lacks too. */
  get ready(): boolean {
    return this.inStep;
  }

  /**
   * Subscribes to revocations and loads the revoked set (and PostgreSQL's revoked clients).
   * After a lost connection the mirror is in step again once the set is reloaded.
   */
  async start(): Promise<void> {
    if (this.subscriber) return;
    const sub = this.redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null, lazyConnect: true });
    this.subscriber = sub;
    sub.on('error', () => {});
    sub.on('message', (_channel: string, clientId: string) => {
      this.learn(clientId);
      // `client revoke` returns once every subscriber has said so (internal/redis/announce.ts).
      acknowledge(this.redis, this.keys.revocations, clientId);
    });
    sub.on('close', () => (this.inStep = false));
    // ioredis subscribes again on reconnect; the set is then reloaded before the fast path resumes.
    sub.on('ready', () => {
      if (this.subscriber === sub && sub.status === 'ready' && this.subscribedOnce) void this.reload();
    });
    await sub.connect();
    await sub.subscribe(this.keys.revocations);
    this.subscribedOnce = true;
    await this.reload(true);
    if (this.opts.revokedInStore) {
      this.checkTimer = setInterval(this.checkSeeded, REVOKED_CHECK_MS);
      this.checkTimer.unref();
    }
  }

  /** Stops the subscription and the checks; the mirror keeps what it has learnt. */
  close(): void {
    this.inStep = false;
    if (this.checkTimer) clearInterval(this.checkTimer);
    this.checkTimer = null;
    this.subscriber?.disconnect();
    this.subscriber = null;
  }

  /** A revoked client: into the mirror, and nothing more from its rate-limit grants. */
  learn(clientId: string): void {
    if (clientId === REVOKED_SEEDED) return;
    this.revoked.add(clientId);
    this.onLearn(clientId);
  }

  /**
   * Loads Redis' revoked set into the mirror (at start and after a reconnect); when the set
   * has lost its data, or `fromStore`, also PostgreSQL's revoked clients (seeding Redis again).
   */
  private async reload(fromStore = false): Promise<void> {
    try {
      let seeded = false;
      for (const id of await this.redis.smembers(this.keys.revoked)) {
        if (id === REVOKED_SEEDED) seeded = true;
        else this.learn(id);
      }
      this.inStep = this.subscriber?.status === 'ready';
      if (fromStore || !seeded) await this.seedFromStore();
    } catch (err) {
      this.opts.onAsyncError?.(err);
    }
  }

  /** Every REVOKED_CHECK_MS: a revoked set without its marker has lost its data (FLUSHALL): seed it again. */
  private readonly checkSeeded = (): void => {
    if (this.checking || !this.subscriber) return;
    this.checking = true;
    this.redis
      .sismember(this.keys.revoked, REVOKED_SEEDED)
      .then((found) => (found === 1 ? undefined : this.seedFromStore()), () => undefined)
      .finally(() => (this.checking = false));
  };

  /**
   * PostgreSQL's revoked clients into the mirror and into Redis' set (with the marker, in one
   * MULTI: the marker is never there without the ids). Concurrent callers share one load; a
   * failure is reported (onSeedError, once per run of failures) and retried at the next check.
   */
  private seedFromStore(): Promise<void> {
    const load = this.opts.revokedInStore;
    if (!load) return Promise.resolve();
    return (this.seeding ??= (async () => {
      try {
        const ids = await load();
        for (const id of ids) this.learn(id);
        const tx = this.redis.multi();
        for (let i = 0; i < ids.length; i += 1000) tx.sadd(this.keys.revoked, ...ids.slice(i, i + 1000));
        tx.sadd(this.keys.revoked, REVOKED_SEEDED);
        const replies = await tx.exec();
        const failed = replies?.find(([e]) => e)?.[0];
        if (failed) throw failed;
        this.seedFailing = false;
      } catch (err) {
        if (!this.seedFailing) this.opts.onSeedError?.(err);
        this.seedFailing = true;
      } finally {
        this.seeding = null;
      }
    })());
  }
}
