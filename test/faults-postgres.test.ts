// Fault: PostgreSQL (a private cluster) stopped for 20 s under a steady ingest load, then
// started again. Ingest must keep answering 202 (durability is JetStream's), the API stays
// ready ("degraded"), the worker survives, retries and catches up, and the reconciliation
// is exact. API and worker run as child processes, as deployed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { get, sleep, spawnApp, waitFor } from './support/harness';
import {
  PrivateEnv, PrivatePostgres, SteadyLoad, alive, reconcile, seqCounts, stopAllPrivate, stopChild, spawnAppRetry, waitForSettled,
} from './support/private-services';

const OUTAGE_MS = 20_000;
const RATE = 150;

type Child = Awaited<ReturnType<typeof spawnApp>>;

test('PostgreSQL down 20 s under load: 202 throughout, /readyz degraded, the worker catches up, every 202 stored exactly once', { timeout: 150_000 }, async (t) => {
  const pgs = await PrivatePostgres.start();
  const env = new PrivateEnv('fpg', { pgBase: pgs.url });
  const children: Child[] = [];
  let load: SteadyLoad | null = null;
  try {
    await env.setup();
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write', 0);
    const [api, worker] = await Promise.all([spawnAppRetry(env, 'api'), spawnAppRetry(env, 'worker')]);
    children.push(api, worker);

    load = new SteadyLoad({ url: api.url, creds: writer, rate: RATE }).start();
    await waitFor(async () => (await seqCounts(env.db)).size >= 300, { timeoutMs: 20_000, what: 'the worker to store 300 events' });
    const ready = await get(`${api.url}/readyz`, null);
    assert.equal(ready.status, 200);
    assert.equal(ready.body.status, 'ready');

    const stopping = load.msSinceStart();
    await pgs.stop();
    const down = load.msSinceStart();
    const readiness: { api: number; apiStatus: string; pg: string; worker: number | 'down' }[] = [];
    while (load.msSinceStart() - down < OUTAGE_MS) {
      const [a, w] = await Promise.all([get(`${api.url}/readyz`, null), get(`${worker.url}/readyz`, null).catch(() => null)]);
      readiness.push({ api: a.status, apiStatus: a.body.status, pg: a.body.checks?.postgres, worker: w?.status ?? 'down' });
      await sleep(2000);
    }
    await pgs.start();
    const up = load.msSinceStart();

    // A worker that did not survive the restart is replaced (after its leases expire), so
    // that the reconciliation still runs; the crash fails the test at the end.
    const w = worker.child;
    const workerCrash = w.exitCode === null && w.signalCode === null ? null : `worker exited (${w.exitCode ?? w.signalCode}) during the outage:\n${worker.logs().slice(-3000)}`;
    if (workerCrash) {
      t.diagnostic(workerCrash);
      children.push(await spawnAppRetry(env, 'worker'));
    }
    const storedAtRestart = (await seqCounts(env.db)).size;
    await waitFor(async () => (await seqCounts(env.db)).size > storedAtRestart, { timeoutMs: 30_000, what: 'the worker to commit again' });
    await sleep(3000);
    await load.stop();

    const before = load.within(0, stopping);
    const during = load.within(down, up); // sent once PostgreSQL was gone, answered before it was back
    const after = load.sentBetween(up, Infinity);
    t.diagnostic(`answers before ${JSON.stringify(load.tally(before))}, during the ${up - down} ms outage ${JSON.stringify(load.tally(during))}, after ${JSON.stringify(load.tally(after))}`);
    t.diagnostic(`readiness during the outage: ${JSON.stringify(readiness)}`);

    // Durability first: whatever the answers were, every 202 is stored exactly once.
    await waitForSettled(env.db, load, 60_000);
    const rec = await reconcile(env.db, load);
    t.diagnostic(`reconciliation: ${JSON.stringify(rec)}`);
    assert.equal((await get(`${api.url}/readyz`, null)).body.status, 'ready');

    for (const r of readiness) {
      assert.equal(r.api, 200, `api /readyz while PostgreSQL is down: ${JSON.stringify(r)}`);
      assert.equal(r.apiStatus, 'degraded');
      assert.notEqual(r.pg, 'ok');
      if (r.worker !== 'down') assert.equal(r.worker, 503, 'a worker without PostgreSQL is not ready');
    }
    assert.equal(workerCrash, null, 'the worker survives a PostgreSQL restart');
    assert.ok(alive(api.child), 'the api survives a PostgreSQL restart');
    // Availability: ingest never touches PostgreSQL, so it does not notice the outage.
    assert.ok(during.length >= (RATE * OUTAGE_MS) / 1000 / 4, `the load kept running during the outage (${during.length} answers)`);
    assert.deepEqual(load.tally(during), { 202: during.length }, 'every ingest request answered 202 while PostgreSQL was down');
    assert.deepEqual(load.tally(after), { 202: after.length });
  } finally {
    await load?.stop();
    await Promise.all(children.map((c) => stopChild(c.child, 'SIGKILL')));
    await env.teardown();
    await stopAllPrivate();
  }
});
