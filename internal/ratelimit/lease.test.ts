// The local token buckets against a simulated Redis sliding log (the same rule as the Lua
// script: reserve up to `want` slots while fewer than `limit` are younger than the window),
// on a simulated clock with a lease round trip of a few ms: the stated tolerance holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { grantSize, LocalBuckets, RATE_WINDOW_MS, type LeaseAnswer, type TakeResult } from './lease';

/** A sliding log per client, answering leases `latencyMs` after they are asked (simulated time). */
class FakeRedis {
  now = 0;
  readonly log = new Map<string, number[]>();
  readonly revoked = new Set<string>();
  private deliveries: { due: number; deliver: () => void }[] = [];
  leases = 0;
  constructor(private readonly latencyMs: number) {}

  lease = (clientId: string, limit: number, want: number): Promise<LeaseAnswer> => {
    this.leases++;
    // The reservation happens when Redis runs the script: half a round trip after the ask.
    const at = this.now + this.latencyMs / 2;
    return new Promise((resolve) => {
      const run = () => {
        if (this.revoked.has(clientId)) return resolve({ revoked: true, granted: 0, count: 0, ttlMs: 0 });
        const entries = (this.log.get(clientId) ?? []).filter((t) => t > at - RATE_WINDOW_MS);
        const granted = Math.max(0, Math.min(want, limit - entries.length));
        for (let k = 0; k < granted; k++) entries.push(at);
        this.log.set(clientId, entries);
        const ttlMs = entries.length ? entries[0]! + RATE_WINDOW_MS - at : RATE_WINDOW_MS;
        resolve({ revoked: false, granted, count: entries.length, ttlMs });
      };
      this.deliveries.push({ due: this.now + this.latencyMs, deliver: run });
    });
  };

  /** Advances the clock to `t`, delivering every answer due by then. */
  async advance(t: number): Promise<void> {
    this.now = t;
    const due = this.deliveries.filter((d) => d.due <= t);
    this.deliveries = this.deliveries.filter((d) => d.due > t);
    for (const d of due) d.deliver();
    await new Promise((r) => setImmediate(r)); // let the answers' continuations run
  }
}

/** Largest number of admissions within any window-long span [t, t + window). */
function maxInWindow(times: number[]): number {
  const s = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; j < s.length; j++) {
    while (s[j]! - s[i]! >= RATE_WINDOW_MS) i++;
    best = Math.max(best, j - i + 1);
  }
  return best;
}

async function simulate(o: { threads: number; limit: number; perMsPerThread: number; ms: number; latencyMs: number; seed: number }) {
  const redis = new FakeRedis(o.latencyMs);
  const buckets = Array.from({ length: o.threads }, () => new LocalBuckets(redis.lease, () => redis.now));
  const admitted: number[] = [];
  let refused = 0;
  let sync = 0;
  let rnd = o.seed;
  const random = () => ((rnd = (rnd * 1103515245 + 12345) % 2147483648) / 2147483648);
  const record = (r: TakeResult) => {
    if (r.outcome === 'ok') admitted.push(redis.now);
    else if (r.outcome === 'limited') refused++;
  };
  const waits: Promise<void>[] = [];
  for (let t = 0; t < o.ms; t++) {
    await redis.advance(t);
    for (const b of buckets) {
      // A bursty arrival: sometimes many at once.
      const n = random() < 0.05 ? Math.round(o.perMsPerThread * 10) : random() < o.perMsPerThread % 1 ? Math.ceil(o.perMsPerThread) : Math.floor(o.perMsPerThread);
      for (let k = 0; k < n; k++) {
        const r = b.take('client', o.limit);
        if (r instanceof Promise) waits.push(r.then(record));
        else {
          sync++;
          record(r);
        }
      }
    }
  }
  for (let t = o.ms; t < o.ms + 50; t++) await redis.advance(t);
  await Promise.all(waits);
  return { admitted, refused, sync, leases: redis.leases };
}

test('grant size: a twentieth of the limit, at least one, at most 100', () => {
  assert.equal(grantSize(1), 1);
  assert.equal(grantSize(20), 1);
  assert.equal(grantSize(21), 2);
  assert.equal(grantSize(1000), 50);
  assert.equal(grantSize(2000), 100);
  assert.equal(grantSize(1_000_000), 100);
});

for (const threads of [1, 2, 4]) {
  test(`${threads} thread(s) at 3x the limit: no window-long span admits more than limit + 2 x threads x grant`, async () => {
    const limit = 200;
    const r = await simulate({ threads, limit, perMsPerThread: (3 * limit) / 1000 / threads, ms: 4000, latencyMs: 2, seed: 7 + threads });
    const bound = limit + 2 * threads * grantSize(limit);
    const worst = maxInWindow(r.admitted);
    assert.ok(worst <= bound, `worst window ${worst} > bound ${bound}`);
    // And the limit is used: over 4 s at 3x the limit, at least 3.5 windows' worth admitted.
    assert.ok(r.admitted.length >= 3.5 * limit, `admitted ${r.admitted.length} of ${4 * limit} possible`);
    assert.ok(r.refused > 0);
  });
}

test('under the limit nothing is refused and almost every request is answered without waiting for a lease', async () => {
  const limit = 1000;
  const r = await simulate({ threads: 2, limit, perMsPerThread: 0.2, ms: 3000, latencyMs: 1, seed: 3 });
  assert.equal(r.refused, 0);
  const total = r.admitted.length;
  assert.ok(r.sync / total > 0.95, `${r.sync} of ${total} answered at once`);
  assert.ok(r.leases < total / 10, `${r.leases} leases for ${total} requests`);
});

test('a revoked client is refused by the lease answer, and waiters share one lease', async () => {
  const redis = new FakeRedis(2);
  const b = new LocalBuckets(redis.lease, () => redis.now);
  const first = [b.take('c', 200), b.take('c', 200), b.take('c', 200)];
  assert.ok(first.every((x) => x instanceof Promise), 'no grant held yet: every request waits');
  await redis.advance(2);
  const got = await Promise.all(first);
  assert.deepEqual(got.map((x) => x.outcome), ['ok', 'ok', 'ok']);
  assert.equal(redis.leases, 1, 'one lease for the three waiters (7 of 10 left: no prefetch yet)');
  // remaining: limit - slots logged + slots still held = 200 - 10 + 9, then 1 less per request
  assert.deepEqual(got.map((x) => (x.outcome === 'ok' ? x.rate.remaining : -1)), [199, 198, 197]);
  redis.revoked.add('c');
  b.drop('c');
  const after = b.take('c', 200);
  assert.ok(after instanceof Promise);
  await redis.advance(10);
  assert.deepEqual(await after, { outcome: 'revoked' });
});

test('a refusal is remembered briefly (no Redis call per refused request), then Redis is asked again', async () => {
  const redis = new FakeRedis(2);
  const b = new LocalBuckets(redis.lease, () => redis.now);
  const ok = b.take('c', 1);
  await redis.advance(2);
  assert.equal((await ok).outcome, 'ok');
  const refused = b.take('c', 1);
  await redis.advance(4);
  const r = await refused;
  assert.equal(r.outcome, 'limited');
  assert.ok(r.outcome === 'limited' && r.rate.resetSeconds === 1 && r.rate.remaining === 0);
  const leases = redis.leases;
  const again = b.take('c', 1);
  assert.ok(!(again instanceof Promise) && again.outcome === 'limited', 'answered from memory');
  assert.equal(redis.leases, leases);
  // One window after the first slot, Redis has room again.
  await redis.advance(1100);
  const later = b.take('c', 1);
  assert.ok(later instanceof Promise);
  await redis.advance(1102);
  assert.equal((await later).outcome, 'ok');
});

test('a grant is never spent past one window after it was asked for', async () => {
  const redis = new FakeRedis(2);
  const b = new LocalBuckets(redis.lease, () => redis.now);
  const first = b.take('c', 100);
  await redis.advance(2);
  await first;
  assert.equal(b.held('c'), grantSize(100) - 1);
  await redis.advance(999);
  assert.equal(b.held('c'), grantSize(100) - 1);
  await redis.advance(1000);
  assert.equal(b.held('c'), 0);
  assert.ok(b.take('c', 100) instanceof Promise, 'an expired grant admits nothing: a new lease is asked');
});

test('a failed lease rejects its waiters (the caller admits them without a limit, as when Redis is away)', async () => {
  const b = new LocalBuckets(() => Promise.reject(new Error('redis down')));
  await assert.rejects(Promise.resolve(b.take('c', 10)), /redis down/);
});
