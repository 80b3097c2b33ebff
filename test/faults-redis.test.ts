// Fault: Redis (a private, non-persistent instance) stopped for 8 s under a steady ingest
// load and started again, empty. Ingest degrades visibly (still 202, no rate-limit headers,
// tidemark_degraded_total{dependency="redis"} grows) and recovers by itself; live visitors
// work again; the worker regains its shard leases (kept in Redis) and keeps processing;
// the reconciliation is exact.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { get, post, sleep, spawnApp, waitFor } from './support/harness';
import {
  PrivateEnv, PrivateRedis, SteadyLoad, alive, metricValue, reconcile, seqCounts, stopAllPrivate, stopChild, spawnAppRetry, waitForSettled,
} from './support/private-services';

const OUTAGE_MS = 8000;
const RATE = 150;
const SHARDS = 4;
const DEGRADED = 'tidemark_degraded_total{dependency="redis"}';

type Child = Awaited<ReturnType<typeof spawnApp>>;

const hasRateHeaders = (h: Headers | null) => !!h && h.has('x-ratelimit-limit') && h.has('x-ratelimit-remaining') && h.has('x-ratelimit-reset');

test('Redis restarted under load: ingest degrades (202, no rate-limit headers, metric) and recovers; live and shard leases come back; every 202 stored exactly once', { timeout: 150_000 }, async (t) => {
  const redis = await PrivateRedis.start();
  const env = new PrivateEnv('fredis', { redisUrl: redis.url });
  const children: Child[] = [];
  const probe = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => 200 });
  probe.on('error', () => {});
  let load: SteadyLoad | null = null;
  try {
    await env.setup();
    const projectId = await env.project();
    // A limit far above the load: every answer carries the rate-limit headers, none is a 429.
    const writer = await env.client(projectId, 'write', 100_000);
    const reader = await env.client(projectId, 'read');
    const [api, worker] = await Promise.all([spawnAppRetry(env, 'api'), spawnAppRetry(env, 'worker')]);
    children.push(api, worker);
    const degraded = async () => metricValue((await get(`${api.url}/metrics`, null)).body, DEGRADED);
    const live = async () => {
      const r = await get(`${api.url}/insights/${projectId}/live`, reader);
      return r.status === 200 ? (r.body.visitors as number) : -1;
    };
    /** A live event (no __timestamp) of its own profile, outside the load's devices. */
    const liveEvent = (profileId: string) =>
      post(`${api.url}/track`, { type: 'track', payload: { name: 'live_probe', profileId, properties: { __deviceId: `live-${profileId}` } } }, writer);
    const ownerKeys = Array.from({ length: SHARDS }, (_, s) => `${env.namespace}:shard-owner:${s}`);
    const ownedByWorker = async () => {
      await probe.connect().catch(() => {});
      const v = await probe.mget(ownerKeys);
      return v.filter((x) => x?.includes(`-${worker.child.pid}-`)).length;
    };

    load = new SteadyLoad({ url: api.url, creds: writer, rate: RATE }).start();
    await waitFor(async () => (await seqCounts(env.db)).size >= 200, { timeoutMs: 20_000, what: 'the worker to store 200 events' });
    assert.equal(await ownedByWorker(), SHARDS, 'the worker holds every shard lease');
    assert.equal((await liveEvent('before')).status, 202);
    assert.equal(await live(), 1, 'live visitors before the outage');
    const degradedBefore = await degraded();

    const stopping = load.msSinceStart();
    await redis.stop();
    const down = load.msSinceStart();
    const readiness: { status: number; body: string; redis: string }[] = [];
    while (load.msSinceStart() - down < OUTAGE_MS) {
      const r = await get(`${api.url}/readyz`, null);
      readiness.push({ status: r.status, body: r.body.status, redis: r.body.checks?.redis });
      await sleep(1000);
    }
    const degradedDuring = await degraded();
    const storedBeforeRestart = (await seqCounts(env.db)).size;
    // Redis may serve before start() returns (it waits for a reply to PING): the outage's
    // answers are those answered before the start began.
    const restarting = load.msSinceStart();
    await redis.start();
    const up = load.msSinceStart();

    // Recovers by itself: rate limiting is back on the load's own answers.
    const recovered = await waitFor(() => load!.responses.find((r) => r.atMs > up && hasRateHeaders(r.headers)), {
      timeoutMs: 15_000, intervalMs: 100, what: 'rate-limit headers again after the restart',
    });
    t.diagnostic(`rate limiting back ${recovered!.atMs - up} ms after Redis started`);
    // Live visitors: the restarted Redis is empty; a new live event shows within a second.
    assert.equal((await liveEvent('after')).status, 202);
    const liveAt = Date.now();
    await waitFor(async () => (await live()) === 1, { timeoutMs: 5000, intervalMs: 100, what: 'the live event after the restart' });
    t.diagnostic(`live visitors reflected the new event ${Date.now() - liveAt} ms after its 202`);
    // The worker takes its leases again (the empty Redis lost them) and keeps processing.
    await waitFor(async () => (await ownedByWorker()) === SHARDS, { timeoutMs: 20_000, what: 'the worker to hold every shard lease again' });
    await waitFor(async () => (await seqCounts(env.db)).size > storedBeforeRestart + 100, { timeoutMs: 20_000, what: 'processing after the restart' });
    await sleep(2000);
    await load.stop();

    const before = load.within(0, stopping);
    const during = load.within(down, restarting); // sent once Redis was gone, answered before it was started again
    const after = load.sentBetween(up, Infinity);
    t.diagnostic(`answers before ${JSON.stringify(load.tally(before))}, during the ${up - down} ms outage ${JSON.stringify(load.tally(during))}, after ${JSON.stringify(load.tally(after))}`);
    t.diagnostic(`degraded_total ${degradedBefore} -> ${degradedDuring} during the outage; readiness ${JSON.stringify(readiness)}`);
    const bullKeys = await probe.keys(`${env.namespace}:bull:maintenance:*`);
    t.diagnostic(`BullMQ maintenance keys after the restart: ${bullKeys.length ? bullKeys.join(', ') : 'none'}`);

    await waitForSettled(env.db, load, 45_000);
    const rec = await reconcile(env.db, load);
    t.diagnostic(`reconciliation: ${JSON.stringify(rec)}`);

    assert.ok(alive(api.child) && alive(worker.child), 'api and worker survive the Redis restart');
    assert.ok(before.every((r) => r.status === 202 && hasRateHeaders(r.headers)), 'before: 202 with rate-limit headers');
    assert.ok(during.length >= (RATE * OUTAGE_MS) / 1000 / 4, `the load kept running during the outage (${during.length} answers)`);
    assert.deepEqual(load.tally(during), { 202: during.length }, 'ingest answers 202 without Redis');
    // A token lease taken from Redis just before it went away may still be spent (it lasts at
    // most 100 ms; on a loaded machine the API notices the closed connection a little later):
    // from a second after the stop, no answer claims a rate limit.
    const settled = during.filter((r) => r.sentMs >= down + 1000);
    assert.ok(settled.length >= during.length / 2, `answers a second into the outage: ${settled.length} of ${during.length}`);
    assert.deepEqual(settled.filter((r) => r.headers?.has('x-ratelimit-limit')).map((r) => r.seq), [], 'no rate-limit headers while Redis is down');
    assert.ok(degradedDuring > degradedBefore, 'degraded_total grows while Redis is down');
    const degradedAfter = await degraded();
    assert.ok(degradedAfter - degradedBefore >= during.length, `degraded_total grew by ${degradedAfter - degradedBefore} for ${during.length} answers without Redis`);
    assert.deepEqual(load.tally(after), { 202: after.length });
    for (const r of readiness) {
      assert.equal(r.status, 200, 'the api stays ready without Redis');
      assert.equal(r.body, 'degraded');
      assert.notEqual(r.redis, 'ok');
    }
  } finally {
    await load?.stop();
    probe.disconnect();
    await Promise.all(children.map((c) => stopChild(c.child, 'SIGKILL')));
    await env.teardown();
    await stopAllPrivate();
  }
});
