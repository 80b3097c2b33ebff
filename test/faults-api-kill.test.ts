// Fault: the API process (a child) SIGKILLed under a steady ingest load, then a new one
// started. Requests in flight at the kill get a connection error (their events may or may
// not be stored); every seq that got a 2xx is stored exactly once once the worker (a
// child) has processed everything.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnApp, sleep, TestEnv, waitFor } from './support/harness';
import { SteadyLoad, alive, reconcile, seqCounts, stopChild, waitForSettled, spawnAppRetry } from './support/private-services';

const RATE = 150;

type Child = Awaited<ReturnType<typeof spawnApp>>;

test('API SIGKILLed under load: no acknowledged event lost or doubled', { timeout: 120_000 }, async (t) => {
  // No shared service is stopped here: the shared ones, isolated by database and namespace.
  const env = await new TestEnv('fapikill').setup();
  const children: Child[] = [];
  let load: SteadyLoad | null = null;
  try {
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write', 0);
    // Requests wait a few ms in the micro-batcher, so some are in flight at the kill.
    const apiEnv = { INGEST_BATCH_MS: '10' };
    const [api, worker] = await Promise.all([spawnAppRetry(env, 'api', apiEnv), spawnAppRetry(env, 'worker')]);
    children.push(api, worker);

    load = new SteadyLoad({ url: api.url, creds: writer, rate: RATE }).start();
    await waitFor(async () => (await seqCounts(env.db)).size >= 300, { timeoutMs: 20_000, what: 'the worker to store 300 events' });
    const killedAt = load.msSinceStart();
    await stopChild(api.child, 'SIGKILL');

    const api2 = await spawnAppRetry(env, 'api', apiEnv);
    children.push(api2);
    load.url = api2.url;
    const restartedAt = load.msSinceStart();
    await waitFor(() => load!.responses.some((r) => r.sentMs > restartedAt && r.status === 202), { timeoutMs: 10_000, what: '202 from the new api' });
    await sleep(3000);
    await load.stop();

    // Split by the API each request went to, not by time alone: a request sent in the same
    // millisecond as the switch, just before it, went to the killed API.
    const toOld = load.responses.filter((r) => r.url === api.url);
    const before = toOld.filter((r) => r.sentMs < killedAt);
    const down = toOld.filter((r) => r.sentMs >= killedAt);
    const after = load.responses.filter((r) => r.url === api2.url);
    assert.equal(toOld.length + after.length, load.responses.length);
    const inFlight = before.filter((r) => r.status === 'error').length;
    t.diagnostic(`sent before the kill ${JSON.stringify(load.tally(before))} (${inFlight} in flight at the kill), while no api ${JSON.stringify(load.tally(down))}, to the new api ${JSON.stringify(load.tally(after))}`);

    await waitForSettled(env.db, load, 45_000);
    const rec = await reconcile(env.db, load);
    t.diagnostic(`reconciliation: ${JSON.stringify(rec)}`);

    assert.equal(api.child.signalCode, 'SIGKILL');
    assert.ok(alive(worker.child), 'the worker is unaffected');
    for (const r of [...before, ...down]) assert.ok(r.status === 202 || r.status === 'error', `only 202 or a connection error around the kill, got ${r.status}`);
    assert.deepEqual(load.tally(after), { 202: after.length });
  } finally {
    await load?.stop();
    await Promise.all(children.map((c) => stopChild(c.child, 'SIGKILL')));
    await env.teardown();
  }
});
