// A per-client token bucket local to one API thread, kept in step with the shared sliding
// log in Redis by leases: the thread reserves a small grant of slots in the client's log
// (one Redis call, shared by every lease of the event-loop turn) and admits requests from it
// without asking Redis again; it asks for the next grant in the background while the current
// one still has tokens. So an admitted request does not wait for Redis, except when its
// thread holds no token for the client (its first request, a client whose grant ran out or
// expired): that one waits for the lease.
//
// Tolerance (docs/operating.md, "Rate limits"): a slot is logged in Redis when it is
// reserved, so the log still holds at most `limit` slots reserved within any window; a
// request is admitted either from a slot reserved in its window or from one reserved
// before the window began and unspent then. A thread holds at most two grants of a client
// (the one it spends and the one it prefetched), each of at most grantSize(limit) slots
// (limit / 20, at most 100), so across N API threads a client gets at most
// limit + 2 * N * grantSize(limit) requests in any window-long span (at most about
// limit x (1 + N / 10)); the excess does not accumulate over longer spans. A grant expires one window after it was asked for: its slots have left the log by
// then, and a thread never spends a slot that Redis no longer counts.

/** The sliding window of ingest rate limits (per second). */
export const RATE_WINDOW_MS = 1000;
/** A refusal is remembered this long at most before Redis is asked again. */
const REFUSAL_MEMORY_MS = 100;

/**
 * Most slots one lease asks for: a grant is logged slot by slot (each a member of the
 * client's sorted set), so a large limit leases more often rather than in huge grants.
 */
const GRANT_MAX = 100;

/** Slots one lease asks for: a twentieth of the limit, at least one, at most GRANT_MAX. */
export function grantSize(limit: number): number {
  return Math.min(GRANT_MAX, Math.max(1, Math.ceil(limit / 20)));
}

/** Redis' answer to one lease. */
export interface LeaseAnswer {
  revoked: boolean;
  /** Slots reserved for this thread (0..want). */
  granted: number;
  /** Slots in the client's log after the reservation (every thread's). */
  count: number;
  /** ms until the oldest slot in the log leaves the window. */
  ttlMs: number;
}

type LeaseFn = (clientId: string, limit: number, want: number) => Promise<LeaseAnswer>;

export interface RateState {
  limit: number;
  remaining: number;
  /** Seconds until the oldest admitted request leaves the window (a refused client may retry then). */
  resetSeconds: number;
}

export type TakeResult = { outcome: 'ok'; rate: RateState } | { outcome: 'limited'; rate: RateState } | { outcome: 'revoked' };

interface Grant {
  left: number;
  expiresAt: number;
}

interface Waiter {
  resolve: (r: TakeResult) => void;
  reject: (err: unknown) => void;
}

class Bucket {
  grants: Grant[] = [];
  waiters: Waiter[] = [];
  leasing = false;
  /** The last lease got all it asked for (else the client is near its limit: no prefetch). */
  lastFull = true;
  /** limit - slots in the log, at the last answer. */
  free = 0;
  /** When the oldest slot of the log leaves the window (local clock). */
  resetAt = 0;
  refusedUntil = 0;
}

const REVOKED: TakeResult = Object.freeze({ outcome: 'revoked' }) as TakeResult;

export class LocalBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly lease: LeaseFn,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Admits or refuses one request of the client: at once from a held grant, else after a lease. */
  take(clientId: string, limit: number): TakeResult | Promise<TakeResult> {
    let b = this.buckets.get(clientId);
    if (!b) this.buckets.set(clientId, (b = new Bucket()));
    const now = this.clock();
    if (!b.waiters.length) {
      const r = this.spend(b, limit, now);
      if (r) {
        this.prefetch(b, clientId, limit, now);
        return r;
      }
      if (now < b.refusedUntil) return this.limited(b, limit, now);
    }
    const bucket = b;
    return new Promise<TakeResult>((resolve, reject) => {
      bucket.waiters.push({ resolve, reject });
      this.refill(bucket, clientId, limit);
    });
  }

  /** Forgets what is held for a client (revoked: nothing more is admitted from its grants). */
  drop(clientId: string): void {
    const b = this.buckets.get(clientId);
    if (b) b.grants = [];
  }

  /** Tokens this thread holds for the client now (tests, metrics). */
  held(clientId: string): number {
    const b = this.buckets.get(clientId);
    if (!b) return 0;
    const now = this.clock();
    return b.grants.reduce((n, g) => n + (g.expiresAt > now ? g.left : 0), 0);
  }

  private spend(b: Bucket, limit: number, now: number): TakeResult | null {
    while (b.grants.length && (b.grants[0]!.left <= 0 || b.grants[0]!.expiresAt <= now)) b.grants.shift();
    const g = b.grants[0];
    if (!g) return null;
    g.left--;
    let unspent = 0;
    for (const x of b.grants) unspent += x.left;
    return { outcome: 'ok', rate: { limit, remaining: Math.max(0, b.free + unspent), resetSeconds: resetSeconds(b.resetAt - now) } };
  }

  private limited(b: Bucket, limit: number, now: number): TakeResult {
    return { outcome: 'limited', rate: { limit, remaining: 0, resetSeconds: resetSeconds(b.resetAt - now) } };
  }

  /** Asks for the next grant in the background when the held tokens run low. */
  private prefetch(b: Bucket, clientId: string, limit: number, now: number): void {
    if (b.leasing || !b.lastFull || now < b.refusedUntil) return;
    let unspent = 0;
    for (const g of b.grants) unspent += g.expiresAt > now ? g.left : 0;
    if (unspent * 2 <= grantSize(limit)) this.refill(b, clientId, limit);
  }

  private refill(b: Bucket, clientId: string, limit: number): void {
    if (b.leasing) return;
    b.leasing = true;
    const want = grantSize(limit);
    const askedAt = this.clock();
    this.lease(clientId, limit, want).then(
      (a) => {
        b.leasing = false;
        if (a.revoked) {
          b.grants = [];
          const ws = b.waiters;
          b.waiters = [];
          for (const w of ws) w.resolve(REVOKED);
          return;
        }
        const now = this.clock();
        b.free = limit - a.count;
        b.resetAt = now + a.ttlMs;
        b.lastFull = a.granted >= want;
        // The slots were logged no earlier than askedAt: they leave the window no earlier
        // than one window after it, so the grant is never spent past that.
        if (a.granted > 0) b.grants.push({ left: a.granted, expiresAt: askedAt + RATE_WINDOW_MS });
        else b.refusedUntil = now + Math.min(Math.max(a.ttlMs, 1), REFUSAL_MEMORY_MS);
        while (b.waiters.length) {
          const r = this.spend(b, limit, now);
          if (!r) break;
          b.waiters.shift()!.resolve(r);
        }
        if (!b.waiters.length) return this.prefetch(b, clientId, limit, now);
        if (a.granted >= want) return this.refill(b, clientId, limit); // more waiting than one grant holds
        // Redis had fewer slots than were wanted: the rest of the waiters are over the limit.
        b.refusedUntil = now + Math.min(Math.max(a.ttlMs, 1), REFUSAL_MEMORY_MS);
        const ws = b.waiters;
        b.waiters = [];
        for (const w of ws) w.resolve(this.limited(b, limit, now));
      },
      (err: unknown) => {
        b.leasing = false;
        const ws = b.waiters;
        b.waiters = [];
        for (const w of ws) w.reject(err);
      },
    );
  }
}

function resetSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
