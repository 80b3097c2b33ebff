// Live push's Redis side: the count (with its next ageing time), the per-project change
// channel the ingest gate's scripts publish on (internal/ratelimit/scripts.ts), and
// revocation (the gate's mirror, then Redis' set).
// One subscriber connection per API thread; a project's channel is subscribed while the
// thread has a socket watching it.
import type { Redis, RedisKeys } from '../redis/redis';
import { LIVE_WINDOW_MS } from '../ratelimit/gate';
import type { LiveCount, LiveSource } from './hub';

// Trims what left the window (score <= cutoff), then counts the rest and gives the oldest
// score: the count next changes by itself when that visitor leaves the window.
// KEYS: 1 live set. ARGV: 1 cutoff ms.
const COUNT_SCRIPT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {n, first[2] or ''}
`;

const REVOKED_CHUNK = 1000;

export class RedisLiveSource implements LiveSource {
  private readonly projectOf = new Map<string, string>();

  /**
   * `redis` answers commands; `subscriber` is a connection of its own in subscriber mode
   * (ioredis resubscribes after a reconnect; a change missed meanwhile is caught by the hub's resync).
   */
  constructor(
    private readonly redis: Redis,
    private readonly subscriber: Redis,
    private readonly keys: RedisKeys,
    onChanged: (projectId: string) => void,
    /** The thread's own record of revoked clients (the gate's mirror), asked before Redis. */
    private readonly knownRevoked: (clientId: string) => boolean = () => false,
  ) {
    redis.defineCommand('tmLiveCount', { numberOfKeys: 1, lua: COUNT_SCRIPT });
    subscriber.on('message', (channel: string) => {
      const projectId = this.projectOf.get(channel);
      if (projectId !== undefined) onChanged(projectId);
    });
  }

  async count(projectId: string, nowMs: number): Promise<LiveCount> {
    const call = (this.redis as unknown as Record<string, (...a: unknown[]) => Promise<[number, string]>>).tmLiveCount!;
    const [visitors, oldest] = await call.call(this.redis, this.keys.live(projectId), String(nowMs - LIVE_WINDOW_MS));
    return { visitors: Number(visitors), oldestMs: oldest === '' ? null : Number(oldest) };
  }

  async subscribe(projectId: string): Promise<void> {
    const channel = this.keys.liveChanged(projectId);
    this.projectOf.set(channel, projectId);
    await this.subscriber.subscribe(channel);
  }

  async unsubscribe(projectId: string): Promise<void> {
    const channel = this.keys.liveChanged(projectId);
    this.projectOf.delete(channel);
    await this.subscriber.unsubscribe(channel);
  }

  /** The mirror's revoked clients, and those of Redis' set (the mirror's alone when Redis cannot answer). */
  async revoked(clientIds: string[]): Promise<Set<string>> {
    const out = new Set(clientIds.filter(this.knownRevoked));
    const ask = clientIds.filter((id) => !out.has(id));
    try {
      for (let i = 0; i < ask.length; i += REVOKED_CHUNK) {
        const ids = ask.slice(i, i + REVOKED_CHUNK);
        const flags = await this.redis.smismember(this.keys.revoked, ...ids);
        flags.forEach((f, n) => f === 1 && out.add(ids[n]!));
      }
    } catch (err) {
      if (!out.size) throw err;
    }
    return out;
  }
}
