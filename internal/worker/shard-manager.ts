// Which worker runs which shard: Redis leases (SET NX PX, renewed), a fair share of
// ceil(shards / live workers) each. The shard's committed position in PostgreSQL is the
// fence, so a worker that lost its lease while paused cannot commit over the new owner.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis, RedisKeys } from '../redis/redis';
import type { Logger } from '../obs/log';
import type { Metrics } from '../obs/metrics';

interface ShardHandle {
  stop(): Promise<void>;
  /** True once the runner stopped by itself (fenced or failed). */
  readonly done: boolean;
  /** Why the shard cannot be written now (null: it can). */
  problem?(): string | null;
}

interface ShardManagerOptions {
  redis: Redis;
  keys: RedisKeys;
  shards: number;
  log: Logger;
  metrics: Metrics;
  start: (shard: number) => ShardHandle;
  leaseMs?: number;
  tickMs?: number;
}

const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

export class ShardManager {
  readonly workerId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly owned = new Map<number, ShardHandle>();
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly leaseMs: number;

  constructor(private readonly o: ShardManagerOptions) {
    this.leaseMs = o.leaseMs ?? 15_000;
  }

  get ownedShards(): number[] {
    return [...this.owned.keys()].sort((a, b) => a - b);
  }

  /** Why some owned shard cannot be written now (null: every one can); /readyz reports it. */
  problem(): string | null {
    const problems: string[] = [];
    for (const h of this.owned.values()) {
      const p = h.problem?.();
      if (p) problems.push(p);
    }
    return problems.length ? problems.join('; ') : null;
  }

  start(): void {
    const tick = () => {
      this.ticking = this.tick().catch((err) => this.o.log.warn({ err }, 'shard lease tick failed'));
      this.ticking.finally(() => {
        if (!this.closed) this.timer = setTimeout(tick, this.o.tickMs ?? 2000);
      });
    };
    tick();
  }

  private async tick(): Promise<void> {
    const { redis, keys, shards } = this.o;
    const now = Date.now();
    await redis.zadd(keys.workers, now, this.workerId);
    await redis.zremrangebyscore(keys.workers, '-inf', now - 3 * this.leaseMs);
    const live = Math.max(1, await redis.zcount(keys.workers, now - this.leaseMs, '+inf'));
    const fair = Math.ceil(shards / live);

    for (const [shard, h] of this.owned) {
      const renewed = h.done ? 0 : Number(await redis.eval(RENEW, 1, keys.shardOwner(shard), this.workerId, this.leaseMs));
      if (!renewed) await this.release(shard);
    }
    // Give back shards above the fair share so that a new worker gets some.
    for (const shard of this.ownedShards.slice(fair)) await this.release(shard);
    for (let shard = 0; shard < shards && this.owned.size < fair && !this.closed; shard++) {
      if (this.owned.has(shard)) continue;
      const ok = await redis.set(keys.shardOwner(shard), this.workerId, 'PX', this.leaseMs, 'NX');
      if (ok === 'OK') {
        this.owned.set(shard, this.o.start(shard));
        this.o.log.info({ shard, workerId: this.workerId }, 'lease taken');
      }
    }
    this.o.metrics.shardsOwned.set(this.owned.size);
  }

  private async release(shard: number): Promise<void> {
    const h = this.owned.get(shard);
    this.owned.delete(shard);
    await h?.stop();
    await this.o.redis.eval(RELEASE, 1, this.o.keys.shardOwner(shard), this.workerId).catch(() => {});
    this.o.log.info({ shard }, 'lease released');
  }

  /** Drain: finish and commit the batches in hand, give the leases back. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.ticking;
    await Promise.all(this.ownedShards.map((s) => this.release(s)));
    await this.o.redis.zrem(this.o.keys.workers, this.workerId).catch(() => {});
    this.o.metrics.shardsOwned.set(0);
  }
}
