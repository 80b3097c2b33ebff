// Device identity (semantics.md "Identity"): a keyed hash of user-agent + client IP +
// project id under a daily salt rotated at 00:00 UTC; the previous day's salt is tried too.
import { createHmac, randomBytes } from 'node:crypto';
import type { Redis, RedisKeys } from '../redis/redis';

function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export function deviceIdFor(salt: string, userAgent: string, ip: string, projectId: string): string {
  return createHmac('sha256', salt).update(`${userAgent}\n${ip}\n${projectId}`).digest('hex').slice(0, 32);
}

/** salt → user-agent → `ip\nprojectId` → device id. */
type Generation = Map<string, Map<string, Map<string, string>>>;

/**
 * Remembers recent device ids: a returning device costs map lookups, not an HMAC. Nested
 * maps rather than one key built per request: the salt and the user-agent are the same
 * string objects request after request (their hashes are computed once), and the
 * user-agent's is shared with the bot verdict. Two generations bound it to `max` ids: when
 * the current one holds max/2 it becomes the previous one (entries used again move forward).
 */
export class DeviceIdCache {
  private cur: Generation = new Map();
  private old: Generation = new Map();
  private curSize = 0;
  private readonly half: number;

  constructor(max: number) {
    this.half = Math.max(1, Math.floor(max / 2));
  }

  get(salt: string, userAgent: string, ip: string, projectId: string): string {
    const key = `${ip}\n${projectId}`;
    let id = this.cur.get(salt)?.get(userAgent)?.get(key);
    if (id === undefined) {
      id = this.old.get(salt)?.get(userAgent)?.get(key) ?? deviceIdFor(salt, userAgent, ip, projectId);
      this.insert(salt, userAgent, key, id);
    }
    return id;
  }

  /** Ids held (both generations; an id in both counts twice). */
  get size(): number {
    let n = 0;
    for (const gen of [this.cur, this.old]) for (const byUa of gen.values()) for (const ids of byUa.values()) n += ids.size;
    return n;
  }

  private insert(salt: string, userAgent: string, key: string, id: string): void {
    if (this.curSize >= this.half) {
      this.old = this.cur;
      this.cur = new Map();
      this.curSize = 0;
    }
    let byUa = this.cur.get(salt);
    if (!byUa) this.cur.set(salt, (byUa = new Map()));
    let ids = byUa.get(userAgent);
    if (!ids) byUa.set(userAgent, (ids = new Map()));
    ids.set(key, id);
    this.curSize++;
  }
}

/** Where salts are kept durably (PostgreSQL); internal/store implements it. */
interface SaltStore {
  /** The day's salt, created with `candidate` when missing (first writer wins). */
  saltFor(day: string, candidate: string): Promise<string>;
  prune(keepDays: string[]): Promise<number>;
}

/**
 * Today's and yesterday's salts, shared by every API process. PostgreSQL holds them
 * durably; Redis is the fallback while PostgreSQL is away (read once per day per process).
 */
export class SaltKeeper {
  private cache = new Map<string, string>();
  constructor(private readonly redis: Redis, private readonly keys: RedisKeys, private readonly store: SaltStore | null = null) {}

  /** Salt of a UTC day; created (first writer wins) when missing. */
  async saltFor(day: string): Promise<string> {
    const hit = this.cache.get(day);
    if (hit) return hit;
    const candidate = randomBytes(32).toString('hex');
    let salt: string | null = null;
    if (this.store) {
      try {
        salt = await this.store.saltFor(day, candidate);
        await this.redis.hset(this.keys.salts, day, salt).catch(() => {});
      } catch {
        salt = null; // PostgreSQL away: Redis decides for now
      }
    }
    if (!salt) {
      await this.redis.hsetnx(this.keys.salts, day, candidate);
      salt = await this.redis.hget(this.keys.salts, day);
    }
    if (!salt) throw new Error(`salt for ${day} missing`);
    if (this.cache.size > 8) this.cache.clear();
    this.cache.set(day, salt);
    return salt;
  }

  /** `salts(nowMs)` when they are already held for that UTC day (no promise), else null. */
  heldSalts(nowMs: number): { current: string; previous: string } | null {
    const held = this.held;
    return held !== null && held.day === Math.floor(nowMs / 86_400_000) ? held.salts : null;
  }

  /** Today's and yesterday's salts; held per UTC day, so the hot path is one comparison. */
  async salts(nowMs: number): Promise<{ current: string; previous: string }> {
    const day = Math.floor(nowMs / 86_400_000);
    if (this.held?.day === day) return this.held.salts;
    const [current, previous] = await Promise.all([this.saltFor(utcDay(nowMs)), this.saltFor(utcDay(nowMs - 86_400_000))]);
    const salts = { current, previous };
    this.held = { day, salts };
    return salts;
  }

  private held: { day: number; salts: { current: string; previous: string } } | null = null;

  /** Drops salts older than `keepDays` (the rotation job). */
  async prune(nowMs: number, keepDays = 2): Promise<number> {
    const keep = Array.from({ length: keepDays + 1 }, (_, i) => utcDay(nowMs - (i - 1) * 86_400_000));
    const days = await this.redis.hkeys(this.keys.salts);
    const old = days.filter((d) => !keep.includes(d));
    if (old.length) await this.redis.hdel(this.keys.salts, ...old);
    if (this.store) await this.store.prune(keep);
    return old.length;
  }
}
