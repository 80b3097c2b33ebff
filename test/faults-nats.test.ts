// Fault: NATS (a private nats-server with JetStream) killed with SIGKILL under a steady
// ingest load and started again on the same store dir. While it is down ingest answers 503
// (never 2xx for an event it could not store); API and worker reconnect by themselves; every
// seq that got a 2xx is stored exactly once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { get, sleep, spawnApp, waitFor } from './support/harness';
import {
  PrivateEnv, PrivateNats, SteadyLoad, alive, reconcile, seqCounts, stopAllPrivate, stopChild, spawnAppRetry, waitForSettled,
} from './support/private-services';

const OUTAGE_MS = 6000;
const RATE = 150;

type Child = Awaited<ReturnType<typeof spawnApp>>;

test('NATS killed (-9) and restarted under load: 503 while down, recovers by itself, every 2xx stored exactly once', { timeout: 150_000 }, async (t) => {
  const nats = await PrivateNats.start();
  const env = new PrivateEnv('fnats', { natsUrl: nats.url });
  const children: Child[] = [];
  let load: SteadyLoad | null = null;
  try {
    await env.setup();
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write', 0);
    // A short publish timeout so a request waiting on a dead NATS is answered 503 quickly.
    const appEnv = { INGEST_PUBLISH_TIMEOUT_MS: '2000' };
    const [api, worker] = await Promise.all([spawnAppRetry(env, 'api', appEnv), spawnAppRetry(env, 'worker', appEnv)]);
    children.push(api, worker);

    load = new SteadyLoad({ url: api.url, creds: writer, rate: RATE }).start();
    await waitFor(async () => (await seqCounts(env.db)).size >= 200, { timeoutMs: 20_000, what: 'the worker to store 200 events' });

    const stopping = load.msSinceStart();
    await nats.kill();
    const down = load.msSinceStart();
    const readiness: number[] = [];
    while (load.msSinceStart() - down < OUTAGE_MS) {
      readiness.push((await get(`${api.url}/readyz`, null)).status);
      await sleep(1000);
    }
    const storedBeforeRestart = (await seqCounts(env.db)).size;
    // NATS is down until this moment: a request still waiting for its ack (up to the publish
    // timeout) may be acked by the new server before start() sees its port and returns, so
    // "while NATS is down" ends here, not when start() returns.
    const restarting = load.msSinceStart();
    await nats.start();
    const up = load.msSinceStart();

    const back = await waitFor(() => load!.responses.find((r) => r.atMs > up && r.status === 202), {
      timeoutMs: 20_000, intervalMs: 100, what: '202 again after NATS restarted',
    });
    t.diagnostic(`202 again ${back!.atMs - up} ms after NATS started`);
    await waitFor(async () => (await seqCounts(env.db)).size > storedBeforeRestart + 100, { timeoutMs: 30_000, what: 'the worker to process after the restart' });
    await sleep(3000);
    await load.stop();

    const before = load.within(0, stopping);
    const during = load.within(down, restarting); // sent once NATS was gone, answered before it was started again
    const after = load.sentBetween(back!.atMs, Infinity);
    t.diagnostic(`answers before ${JSON.stringify(load.tally(before))}, during the ${restarting - down} ms outage ${JSON.stringify(load.tally(during))}, sent after recovery ${JSON.stringify(load.tally(after))}; api /readyz while down: ${JSON.stringify(readiness)}`);

    await waitForSettled(env.db, load, 45_000);
    const rec = await reconcile(env.db, load);
    t.diagnostic(`reconciliation: ${JSON.stringify(rec)}`);

    assert.ok(alive(api.child) && alive(worker.child), 'api and worker survive the NATS restart');
    assert.deepEqual(load.tally(before), { 202: before.length });
    assert.ok(during.length > 0, 'requests were answered while NATS was down');
    assert.deepEqual(load.tally(during), { 503: during.length }, 'only 503 while NATS is down');
    assert.ok(readiness.every((s) => s === 503), `the api is not ready without NATS: ${JSON.stringify(readiness)}`);
    assert.deepEqual(load.tally(after), { 202: after.length }, 'only 202 once recovered');
  } finally {
    await load?.stop();
    await Promise.all(children.map((c) => stopChild(c.child, 'SIGKILL')));
    await env.teardown();
    await stopAllPrivate();
  }
});
