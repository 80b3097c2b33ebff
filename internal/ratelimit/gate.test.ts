// The one-round-trip gate against the real Redis: device continuity across the salt
// change, rate limit windows, revocation.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Gate, REVOKED_CHECK_MS, REVOKED_SEEDED, type GateResult } from './gate';
import { connectRedis, redisKeys } from '../redis/redis';
import { ensureServices, REDIS_URL } from '../../test/support/harness';

ensureServices();
const ns = `gate-${randomBytes(4).toString('hex')}`;
const keys = redisKeys(ns);
const redis = await connectRedis(REDIS_URL, { failFast: true });
const gate = new Gate(redis, keys);
after(async () => {
  const found = await redis.keys(`${ns}:*`);
  if (found.length) await redis.del(...found);
  redis.disconnect();
});

const MIDNIGHT = Date.parse('2026-11-22T00:00:00Z');
const base = { clientId: 'c1', ratePerSecond: 0, projectId: 'p', profileId: '', liveAtMs: null };

test('a visit that crosses midnight keeps the device id made with the previous salt', async () => {
  const before = await gate.ingest({ ...base, deviceId: 'old-salt-id', previousDeviceId: '', markSeen: true, nowMs: MIDNIGHT - 5 * 60_000 });
  assert.equal(before.outcome === 'ok' && before.deviceId, 'old-salt-id');
  const after = await gate.ingest({ ...base, deviceId: 'new-salt-id', previousDeviceId: 'old-salt-id', markSeen: false, nowMs: MIDNIGHT + 5 * 60_000 });
  assert.equal(after.outcome === 'ok' && after.deviceId, 'old-salt-id');
  // A device not seen before midnight gets today's id.
  const fresh = await gate.ingest({ ...base, deviceId: 'other-new', previousDeviceId: 'other-old', markSeen: false, nowMs: MIDNIGHT + 5 * 60_000 });
  assert.equal(fresh.outcome === 'ok' && fresh.deviceId, 'other-new');
});

test('sliding window: never more than the limit in any window-long span, wherever it starts', async () => {
  const client = `c-${randomBytes(3).toString('hex')}`;
  const ask = () => gate.ingest({ ...base, clientId: client, ratePerSecond: 3, deviceId: 'd', previousDeviceId: '', markSeen: false, nowMs: Date.now() });
  const first = [await ask(), await ask(), await ask()];
  // (after the third answer: on a loaded machine the three asks may be spread over 100s of ms)
  const t0 = Date.now();
  assert.deepEqual(first.map((r) => r.outcome), ['ok', 'ok', 'ok']);
  assert.deepEqual(first.map((r) => r.outcome === 'ok' && r.rate?.remaining), [2, 1, 0]);
  // 600 ms later a fixed one-second window aligned to the clock may have rolled over; this one has not.
  await new Promise((r) => setTimeout(r, 600));
  const refused = await ask();
  assert.equal(refused.outcome, 'limited');
  assert.ok(refused.outcome === 'limited' && refused.rate.remaining === 0 && refused.rate.resetSeconds === 1, JSON.stringify(refused));
  // Once the first three are a window old, the client is admitted again (refusals were not logged).
  await new Promise((r) => setTimeout(r, Math.max(0, t0 + 1050 - Date.now())));
  const again = await ask();
  assert.equal(again.outcome, 'ok');
  assert.ok(again.outcome === 'ok' && again.rate?.remaining === 2, JSON.stringify(again));
});

test('read limit: Reset is the seconds until the oldest admitted request leaves the window', async () => {
  const client = `c-${randomBytes(3).toString('hex')}`;
  const now = Date.now();
  const a = await gate.read(client, 2, 10_000, now);
  assert.ok(a.outcome === 'ok' && a.rate?.remaining === 1 && a.rate.resetSeconds === 10, JSON.stringify(a));
  await new Promise((r) => setTimeout(r, 1100));
  const b = await gate.read(client, 2, 10_000, now);
  assert.ok(b.outcome === 'ok' && b.rate?.remaining === 0 && b.rate.resetSeconds === 9, JSON.stringify(b));
  const c = await gate.read(client, 2, 10_000, now);
  assert.ok(c.outcome === 'limited' && c.rate.remaining === 0 && c.rate.resetSeconds === 9, JSON.stringify(c));
  assert.equal(await redis.zcard(keys.rate('read', client)), 2, 'a refused request is not logged');
});

test('rate limit with remaining and reset, and revocation wins over everything', async () => {
  const now = Date.now();
  const client = `c-${randomBytes(3).toString('hex')}`;
  const results = [];
  for (let i = 0; i < 4; i++) {
    results.push(await gate.ingest({ ...base, clientId: client, ratePerSecond: 3, deviceId: 'd', previousDeviceId: '', markSeen: false, nowMs: now }));
  }
  assert.deepEqual(results.map((r) => r.outcome), ['ok', 'ok', 'ok', 'limited']);
  const last = results[3]!;
  assert.ok(last.outcome === 'limited' && last.rate.remaining === 0 && last.rate.resetSeconds >= 1);
  await redis.sadd(keys.revoked, client);
  const revoked = await gate.read(client, 100, 10_000, now);
  assert.equal(revoked.outcome, 'revoked');
});

test('requests of one event-loop turn share one Redis call and are decided in arrival order, each as if alone', async () => {
  const now = Date.now();
  const limited = `c-${randomBytes(3).toString('hex')}`;
  const revoked = `c-${randomBytes(3).toString('hex')}`;
  await redis.sadd(keys.revoked, revoked);
  const calls = (await redis.info('commandstats')).match(/cmdstat_evalsha:calls=(\d+)/)?.[1];
  // Started together, without awaiting in between: one batch.
  const pending = [
    ...Array.from({ length: 5 }, (_, i) => gate.ingest({ ...base, clientId: limited, ratePerSecond: 3, deviceId: `d${i}`, previousDeviceId: '', markSeen: false, nowMs: now })),
    gate.ingest({ ...base, clientId: revoked, deviceId: 'r', previousDeviceId: '', markSeen: false, nowMs: now }),
    gate.ingest({ ...base, projectId: `live-${limited}`, clientId: 'free', profileId: 'prof-"1"\n\\ ü 😀 ,]', liveAtMs: now, deviceId: 'x', previousDeviceId: '', markSeen: false, nowMs: now }),
  ];
  const results = await Promise.all(pending);
  const after = (await redis.info('commandstats')).match(/cmdstat_evalsha:calls=(\d+)/)?.[1];
  assert.equal(Number(after) - Number(calls ?? 0), 1, 'one EVALSHA for the whole turn');
  assert.deepEqual(results.map((r) => r.outcome), ['ok', 'ok', 'ok', 'limited', 'limited', 'revoked', 'ok']);
  assert.deepEqual(results.slice(0, 3).map((r) => r.outcome === 'ok' && r.rate?.remaining), [2, 1, 0]);
  assert.equal(results[1]!.outcome === 'ok' && results[1]!.deviceId, 'd1');
  assert.deepEqual(await redis.zrange(keys.live(`live-${limited}`), '0', '-1'), ['prof-"1"\n\\ ü 😀 ,]']);
});

test('a /live read counts the live set in the rate-limit call: entries older than 5 minutes are trimmed and not counted', async () => {
  const now = Date.now();
  const project = `live2-${randomBytes(3).toString('hex')}`;
  const client = `c-${randomBytes(3).toString('hex')}`;
  await redis.zadd(keys.live(project), now - 6 * 60_000, 'gone', now - 4 * 60_000, 'recent', now, 'now');
  const { result, live } = await gate.readLive(client, 100, 10_000, now, project);
  assert.equal(result.outcome, 'ok');
  assert.equal(live, 2);
  assert.deepEqual(await redis.zrange(keys.live(project), '0', '-1'), ['recent', 'now']);
  assert.equal(result.outcome === 'ok' && result.rate?.remaining, 99);
  await redis.sadd(keys.revoked, client);
  assert.deepEqual(await gate.readLive(client, 100, 10_000, now, project), { result: { outcome: 'revoked' }, live: null });
});

// ---- The fast path (after start()): answers without waiting for Redis ----

import { grantSize } from './lease';

async function startedGate(): Promise<{ gate: Gate; close: () => void }> {
  const conn = await connectRedis(REDIS_URL, { failFast: true });
  const g = new Gate(conn, keys);
  await g.start();
  return { gate: g, close: () => { g.close(); conn.disconnect(); } };
}

test('started: a request is answered at once (no promise); its live update reaches Redis right after', async () => {
  const { gate: g, close } = await startedGate();
  try {
    assert.equal(g.fast, true);
    const project = `fast-${randomBytes(3).toString('hex')}`;
    const now = Date.now();
    const r = g.ingest({ ...base, clientId: 'free', projectId: project, profileId: 'p1', liveAtMs: now, deviceId: 'd1', previousDeviceId: '', markSeen: true, nowMs: now });
    assert.ok(!(r instanceof Promise), 'decided without Redis');
    assert.deepEqual(r, { outcome: 'ok', rate: null, deviceId: 'd1' });
    await new Promise((res) => setTimeout(res, 50));
    assert.deepEqual(await redis.zrange(keys.live(project), '0', '-1'), ['p1']);
    assert.equal(await redis.get(keys.seen('d1')), '1');
    // In the 30 minutes after midnight the device id depends on Redis: that request waits for it.
    const choice = g.ingest({ ...base, deviceId: 'new-id', previousDeviceId: 'old-id', markSeen: false, nowMs: MIDNIGHT + 60_000 });
    assert.ok(choice instanceof Promise);
    assert.equal((await choice).outcome, 'ok');
  } finally {
    close();
  }
});

test('started: a revocation announced on the channel holds for the very next request; one the channel missed holds after one background call', async () => {
  const { gate: g, close } = await startedGate();
  try {
    const announced = `c-${randomBytes(3).toString('hex')}`;
    const missed = `c-${randomBytes(3).toString('hex')}`;
    const ask = (clientId: string) => g.ingest({ ...base, clientId, ratePerSecond: 100, deviceId: 'd', previousDeviceId: '', markSeen: false, liveAtMs: Date.now(), nowMs: Date.now() });
    assert.equal((await ask(announced)).outcome, 'ok');
    assert.equal((await ask(missed)).outcome, 'ok');
    // What the CLI does: add to the set, then announce.
    await redis.sadd(keys.revoked, announced);
    await redis.publish(keys.revocations, announced);
    await new Promise((res) => setTimeout(res, 20));
    const next = ask(announced);
    assert.ok(!(next instanceof Promise));
    assert.deepEqual(next, { outcome: 'revoked' });
    // Added to the set without an announcement: the next background call (this request's live update) learns it.
    await redis.sadd(keys.revoked, missed);
    assert.equal((await ask(missed)).outcome, 'ok', 'admitted from the grant it held');
    await new Promise((res) => setTimeout(res, 50));
    assert.deepEqual(await ask(missed), { outcome: 'revoked' });
  } finally {
    close();
  }
});

test('started, 3 gates (3 API threads) at 3x a client\'s limit for 2.5 s: no 1 s span admits more than limit + 2 x 3 x grant', async () => {
  const gates = await Promise.all([startedGate(), startedGate(), startedGate()]);
  const client = `c-${randomBytes(3).toString('hex')}`;
  const limit = 100;
  const admitted: number[] = [];
  let limited = 0;
  let sync = 0;
  try {
    const started = Date.now();
    const waits: Promise<void>[] = [];
    // Each gate gets limit requests per second in 5 ms ticks: 3x the limit in all. A tick that
    // comes late (a busy machine stretches timers) sends the requests of the ticks it missed, so
    // the offered rate does not fall below the limit and the lower bound below still holds.
    let ticks = 0;
    while (Date.now() - started < 2500) {
      const due = Math.floor((Date.now() - started) / 5) + 1;
      for (; ticks < due; ticks++) for (const { gate: g } of gates) {
        const r = g.ingest({ ...base, clientId: client, ratePerSecond: limit, deviceId: 'd', previousDeviceId: '', markSeen: false, nowMs: Date.now() });
        const record = (x: GateResult): void => {
          if (x.outcome === 'ok') admitted.push(Date.now());
          else if (x.outcome === 'limited') limited++;
        };
        if (r instanceof Promise) waits.push(r.then(record));
        else {
          sync++;
          record(r);
        }
      }
      await new Promise((res) => setTimeout(res, 10 / 2));
    }
    await Promise.all(waits);
  } finally {
    for (const g of gates) g.close();
  }
  const sorted = admitted.sort((a, b) => a - b);
  let worst = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while (sorted[j]! - sorted[i]! >= 1000) i++;
    worst = Math.max(worst, j - i + 1);
  }
  const bound = limit + 2 * gates.length * grantSize(limit);
  assert.ok(worst <= bound, `worst 1 s span admitted ${worst} > ${bound}`);
  assert.ok(admitted.length >= 2 * limit, `admitted ${admitted.length} in 2.5 s`);
  assert.ok(limited > 0, 'over the limit some are refused');
  assert.ok(sync > admitted.length / 2, `${sync} of ${admitted.length} admitted without waiting`);
});

test('ingest trims the live set itself: with steady traffic and no /live reader it holds only the last 5 minutes', async () => {
  const now = Date.now();
  const project = `trim-${randomBytes(3).toString('hex')}`;
  const key = keys.live(project);
  // Visitors seen 10, 6 and exactly 5 minutes ago (out of the window), and one 4 minutes ago (in it).
  await redis.zadd(key, now - 10 * 60_000, 'gone-10', now - 6 * 60_000, 'gone-6', now - 5 * 60_000, 'edge-5', now - 4 * 60_000, 'recent');
  await gate.ingest({ ...base, projectId: project, profileId: 'new-visitor', liveAtMs: now, deviceId: 'd', previousDeviceId: '', markSeen: false, nowMs: now });
  assert.deepEqual(await redis.zrange(key, '0', '-1'), ['recent', 'new-visitor']);
});

test('ingest announces a new live visitor on the project channel, once per call, and nothing for a returning one', async () => {
  const now = Date.now();
  const project = `pub-${randomBytes(3).toString('hex')}`;
  const sub = await connectRedis(REDIS_URL);
  const heard: string[] = [];
  sub.on('message', (channel: string) => heard.push(channel));
  await sub.subscribe(keys.liveChanged(project));
  try {
    const ev = (profileId: string) => gate.ingest({ ...base, projectId: project, profileId, liveAtMs: now, deviceId: 'd', previousDeviceId: '', markSeen: false, nowMs: now });
    await Promise.all([ev('a'), ev('b')]); // one call, two new visitors: one message
    await ev('a'); // returning visitor: the count does not change, no message
    await redis.zadd(keys.live(project), now - 6 * 60_000, 'old'); // aged out
    await ev('old'); // back after ageing out: the count changes
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(heard, [keys.liveChanged(project), keys.liveChanged(project)]);
  } finally {
    sub.disconnect();
  }
});

test('started (answers without Redis): the background call trims the live set and announces a new visitor the same way', async () => {
  const { gate: g, close } = await startedGate();
  const now = Date.now();
  const project = `fastpub-${randomBytes(3).toString('hex')}`;
  const key = keys.live(project);
  const sub = await connectRedis(REDIS_URL);
  const heard: string[] = [];
  sub.on('message', (channel: string) => heard.push(channel));
  await sub.subscribe(keys.liveChanged(project));
  try {
    await redis.zadd(key, now - 10 * 60_000, 'gone-10', now - 5 * 60_000, 'edge-5', now - 4 * 60_000, 'recent');
    const ev = (profileId: string) => g.ingest({ ...base, projectId: project, profileId, liveAtMs: now, deviceId: 'd', previousDeviceId: '', markSeen: false, nowMs: now });
    ev('a');
    ev('b'); // same turn: one background call, one message
    await new Promise((r) => setTimeout(r, 100));
    ev('a'); // returning: no message
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(await redis.zrange(key, '0', '-1'), ['recent', 'a', 'b']);
    assert.deepEqual(heard, [keys.liveChanged(project)]);
  } finally {
    sub.disconnect();
    close();
  }
});

test('an anonymous event of a device identified in the last 30 minutes is its profile in the live set, on both paths', async () => {
  const { gate: g, close } = await startedGate();
  try {
    for (const [path, ingest] of [['exact', (i: Parameters<Gate['ingest']>[0]) => gate.decide(i)], ['started', (i: Parameters<Gate['ingest']>[0]) => g.ingest(i)]] as const) {
      const project = `ident-${path}-${randomBytes(3).toString('hex')}`;
      const key = keys.live(project);
      const now = Date.now();
      const ev = async (deviceId: string, profileId: string, at = now) => {
        await ingest({ ...base, projectId: project, profileId, liveAtMs: at, deviceId, previousDeviceId: '', markSeen: false, nowMs: now });
        await new Promise((r) => setTimeout(r, 50)); // the started path writes in the background
      };
      await ev('dev-a', '');
      await ev('dev-b', '');
      assert.deepEqual((await redis.zrange(key, '0', '-1')).sort(), ['dev-a', 'dev-b'], `${path}: two anonymous devices`);
      await ev('dev-a', 'alice', now + 1);
      assert.deepEqual((await redis.zrange(key, '0', '-1')).sort(), ['alice', 'dev-b'], `${path}: device A signed in`);
      // The page reloads: its first event is anonymous again. Still alice, not a second visitor.
      await ev('dev-a', '', now + 2);
      assert.deepEqual((await redis.zrange(key, '0', '-1')).sort(), ['alice', 'dev-b'], `${path}: A's anonymous event is alice`);
      assert.equal(await redis.zscore(key, 'alice'), String(now + 2), `${path}: and keeps alice live`);
      assert.ok(Number(await redis.ttl(`${key}:id:dev-a`)) > 1790, `${path}: for 30 minutes from the device's last live event`);
      // Another profile on the same device takes it over; B is untouched.
      await ev('dev-a', 'bob', now + 3);
      await ev('dev-a', '', now + 4);
      assert.deepEqual((await redis.zrange(key, '0', '-1')).sort(), ['alice', 'bob', 'dev-b'], `${path}: A is bob now`);
      assert.equal(await redis.zscore(key, 'bob'), String(now + 4));
    }
  } finally {
    close();
  }
});

test('started with PostgreSQL\'s revoked clients: a revocation outlives the loss of Redis\' set on every path, and the set is seeded again', async () => {
  // A namespace of its own: its revoked set is deleted below, as FLUSHALL or a restart of a Redis without persistence would.
  const k = redisKeys(`${ns}:seed`);
  const fromPg = `c-${randomBytes(3).toString('hex')}`;
  const announced = `c-${randomBytes(3).toString('hex')}`;
  const store = [fromPg];
  const conn = await connectRedis(REDIS_URL, { failFast: true });
  const g = new Gate(conn, k, { revokedInStore: async () => [...store] });
  try {
    await g.start();
    assert.equal(g.fast, true);
    // At start: PostgreSQL's revoked clients are in the mirror and in Redis, with the marker.
    assert.equal(g.revokedLocally(fromPg), true);
    assert.deepEqual((await redis.smembers(k.revoked)).sort(), [fromPg, REVOKED_SEEDED].sort());
    // `client revoke`: PostgreSQL, then the set, then the announcement.
    store.push(announced);
    await redis.sadd(k.revoked, announced);
    await redis.publish(k.revocations, announced);
    await new Promise((res) => setTimeout(res, 20));
    assert.equal(await redis.del(k.revoked), 1);
    const input = { ...base, ratePerSecond: 100, deviceId: 'd', previousDeviceId: '', markSeen: false, liveAtMs: Date.now(), nowMs: Date.now() };
    for (const id of [fromPg, announced]) {
      const fast = g.ingest({ ...input, clientId: id });
      assert.deepEqual(fast, { outcome: 'revoked' }, `${id}: the fast path, at once`);
      // The 30 minutes after midnight (the exact path, decided by Redis): the mirror answers first.
      assert.deepEqual(await g.ingest({ ...input, clientId: id, previousDeviceId: 'old' }), { outcome: 'revoked' });
      assert.deepEqual(await g.read(id, 10, 10_000, Date.now()), { outcome: 'revoked' });
      assert.deepEqual(await g.readLive(id, 10, 10_000, Date.now(), 'p'), { result: { outcome: 'revoked' }, live: null });
      assert.equal(await g.isRevoked(id), true);
    }
    assert.equal((await g.ingest({ ...input, clientId: 'not-revoked' })).outcome, 'ok');
    // Within a check, the set is seeded again from PostgreSQL: every reader of it agrees again.
    const deadline = Date.now() + 3 * REVOKED_CHECK_MS + 1_000;
    while ((await redis.sismember(k.revoked, REVOKED_SEEDED)) === 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    assert.deepEqual((await redis.smembers(k.revoked)).sort(), [fromPg, announced, REVOKED_SEEDED].sort());
    // A gate that was never started (no mirror) reads it from Redis.
    assert.deepEqual(await new Gate(redis, k).read(announced, 10, 10_000, Date.now()), { outcome: 'revoked' });
  } finally {
    g.close();
    conn.disconnect();
  }
});

test('started while PostgreSQL cannot be read: the mirror comes from Redis, the failure is reported once and the load retried', async () => {
  const k = redisKeys(`${ns}:seedfail`);
  const errors: unknown[] = [];
  let calls = 0;
  let fail = true;
  const conn = await connectRedis(REDIS_URL, { failFast: true });
  await redis.sadd(k.revoked, 'in-redis');
  const g = new Gate(conn, k, {
    revokedInStore: async () => {
      calls++;
      if (fail) throw new Error('postgres down');
      return ['in-postgres'];
    },
    onSeedError: (err) => errors.push(err),
  });
  try {
    await g.start();
    assert.equal(g.fast, true, 'ingest answers from the mirror all the same');
    assert.equal(g.revokedLocally('in-redis'), true);
    await new Promise((res) => setTimeout(res, 2 * REVOKED_CHECK_MS + 200));
    assert.ok(calls >= 2, `retried (${calls} loads)`);
    assert.equal(errors.length, 1, 'reported once per run of failures');
    fail = false;
    const deadline = Date.now() + 2 * REVOKED_CHECK_MS + 1_000;
    while (!g.revokedLocally('in-postgres') && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    assert.equal(g.revokedLocally('in-postgres'), true);
    assert.deepEqual((await redis.smembers(k.revoked)).sort(), ['in-postgres', 'in-redis', REVOKED_SEEDED].sort());
  } finally {
    g.close();
    conn.disconnect();
  }
});
