// Sessions survive worker faults: a worker SIGKILLed mid-stream and replaced, and two
// workers sharing (and handing over) the shards, give exactly the sessions of the reference.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { REDIS_URL, TestEnv, post, sleep, spawnApp, startApp, track, waitFor } from './support/harness';
import {
  assertSameSessions, assertSessionEvents, expectedSessions, generateTraffic, realEventCount, sendTraffic,
  storedSessions, storedViews, type Traffic,
} from './support/sessions-traffic';

type Child = Awaited<ReturnType<typeof spawnApp>>;

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', () => r()));
}

async function stopAll(children: (Child | undefined)[]): Promise<void> {
  await Promise.all(children.map(async (c) => {
    if (!c || c.child.exitCode !== null || c.child.signalCode !== null) return;
    c.child.kill('SIGTERM');
    const done = exited(c.child);
    const t = setTimeout(() => c.child.kill('SIGKILL'), 10_000);
    await done;
    clearTimeout(t);
  }));
}

/** Splits traffic at `fraction` of its events (time order, so each device's order is kept). */
function split(traffic: Traffic, fraction: number): [Traffic, Traffic] {
  const cut = Math.floor(traffic.events.length * fraction);
  return [{ ...traffic, events: traffic.events.slice(0, cut) }, { ...traffic, events: traffic.events.slice(cut) }];
}

async function assertMatchesReference(env: TestEnv, traffic: Traffic, deviceIds: Map<number, string>, what: string): Promise<void> {
  const expected = expectedSessions(traffic, deviceIds);
  await waitFor(async () => (await realEventCount(env.db)) >= expected.realEvents, { timeoutMs: 60_000, what: `${what}: every event processed` });
  await sleep(500); // nothing more (no duplicate) arrives
  assert.equal(await realEventCount(env.db), expected.realEvents, `${what}: no event stored twice`);
  assertSameSessions(await storedSessions(env.db, deviceIds), expected.sessions, what);
  assert.deepEqual(await storedViews(env.db), expected.views, `${what}: time on page of every screen view`);
  await assertSessionEvents(env.db);
}

test('a worker SIGKILLed mid-stream and replaced gives exactly the expected sessions', { timeout: 120_000 }, async (t) => {
  const env = await new TestEnv('sfault').setup();
  const children: (Child | undefined)[] = [];
  try {
    const projectId = await env.project({ timezone: 'UTC' });
    const writer = await env.client(projectId, 'write');
    // Small commits so that the kill lands between (or inside) many of them.
    const workerEnv = { WORKER_BATCH_MAX: '1' };
    const api = await spawnApp(env, 'api');
    children.push(api);
    const w1 = await spawnApp(env, 'worker', workerEnv);
    children.push(w1);
    const traffic = generateTraffic(7);
    const [firstHalf, secondHalf] = split(traffic, 0.5);

    const ids1 = await sendTraffic(api.url, writer, firstHalf, { concurrency: 8 });
    let killedAt = -1;
    let sentSecond = 0;
    const killed = (async () => {
      await waitFor(() => sentSecond >= 10, { timeoutMs: 30_000, what: 'second half under way' });
      w1.child.kill('SIGKILL');
      await exited(w1.child);
      killedAt = await realEventCount(env.db);
    })();
    const ids2 = await sendTraffic(api.url, writer, secondHalf, { concurrency: 4, onSent: (n) => (sentSecond = n) });
    await killed;
    assert.equal(w1.child.signalCode, 'SIGKILL');
    t.diagnostic(`worker killed with ${killedAt} of ${traffic.events.length} events processed`);
    assert.ok(killedAt > 0 && killedAt < traffic.events.length, `killed mid-stream (${killedAt} of ${traffic.events.length} processed)`);
    for (const [i, id] of ids2) if (ids1.has(i)) assert.equal(ids1.get(i), id);
    const deviceIds = new Map([...ids1, ...ids2]);

    // The replacement takes the shards once the dead worker's leases expire.
    const w2 = await spawnApp(env, 'worker', workerEnv);
    children.push(w2);
    await assertMatchesReference(env, traffic, deviceIds, 'after kill and restart');
    assert.match(w2.logs(), /lease taken/);
  } finally {
    await stopAll(children);
    await env.teardown();
  }
});

test('two workers share the shards (one joins mid-stream) and give the one-worker result', { timeout: 120_000 }, async (t) => {
  const env = await new TestEnv('sshare').setup();
  const children: (Child | undefined)[] = [];
  const redis = new Redis(REDIS_URL);
  try {
    const projectId = await env.project({ timezone: 'UTC' });
    const writer = await env.client(projectId, 'write');
    const api = await spawnApp(env, 'api');
    children.push(api);
    const w1 = await spawnApp(env, 'worker');
    children.push(w1);
    const traffic = generateTraffic(7);
    const [first, rest] = split(traffic, 0.3);
    const deviceIds = await sendTraffic(api.url, writer, first, { concurrency: 8 });
    const w2 = await spawnApp(env, 'worker');
    children.push(w2);
    // The rest is sent in slices over ~3 s, while the first worker hands two shards over.
    const ownerKeys = [0, 1, 2, 3].map((s) => `${env.namespace}:shard-owner:${s}`);
    let handedOverAt = -1;
    const slices = 8;
    for (let i = 0; i < slices; i++) {
      const slice = { ...rest, events: rest.events.slice(Math.floor((i * rest.events.length) / slices), Math.floor(((i + 1) * rest.events.length) / slices)) };
      for (const [k, v] of await sendTraffic(api.url, writer, slice, { concurrency: 4 })) {
        if (deviceIds.has(k)) assert.equal(deviceIds.get(k), v, `device ${k} keeps its device id`);
        deviceIds.set(k, v);
      }
      if (handedOverAt < 0 && (await redis.mget(ownerKeys)).some((v) => v?.includes(`-${w2.child.pid}-`))) {
        handedOverAt = await realEventCount(env.db);
      }
      await sleep(400);
    }
    t.diagnostic(`second worker held a lease with ${handedOverAt} of ${traffic.events.length} events processed`);
    await assertMatchesReference(env, traffic, deviceIds, 'two workers');

    // Both hold leases, a fair share each: shard-owner values name both processes
    // (workerId = host-pid-random). Polled: a handed-over shard is briefly unowned.
    await waitFor(async () => {
      const values = await redis.mget(ownerKeys);
      const held = (pid: number | undefined) => values.filter((v) => v?.split('-').at(-2) === String(pid)).length;
      return held(w1.child.pid) === 2 && held(w2.child.pid) === 2;
    }, { timeoutMs: 15_000, what: 'each worker to hold two of the four shard leases' });
    assert.match(w2.logs(), /lease taken/);
    assert.match(w1.logs(), /lease released/);
  } finally {
    redis.disconnect();
    await stopAll(children);
    await env.teardown();
  }
});

test(
  'an event PostgreSQL cannot store (NUL in a property) does not block the other devices of its shard',
  { timeout: 60_000 },
  async () => {
    const env = await new TestEnv('snul').setup();
    const app = await startApp(env, { api: true, worker: true }, { TIDEMARK_SHARDS: '1' });
    try {
      const projectId = await env.project({ timezone: 'UTC' });
      const writer = await env.client(projectId, 'write');
      const bad = await post(`${app.url}/track`, track('click', { note: 'a\u0000b' }), writer, { ip: '8.8.8.8' });
      // Either refused at the door (400) or stored/skipped by the worker; never a stuck shard.
      assert.ok(bad.status === 400 || bad.status === 202, `status ${bad.status}`);
      const good = await post(`${app.url}/track`, track('screen_view', { __path: 'https://shop.example/' }), writer, { ip: '1.1.1.1' });
      assert.equal(good.status, 202);
      await waitFor(async () => (await realEventCount(env.db)) >= 1, { timeoutMs: 5000, what: 'the other device processed' });
    } finally {
      await app.drain();
      await env.teardown();
    }
  },
);
