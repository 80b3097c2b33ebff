// Fault: a replicated stream (TIDEMARK_STREAM_REPLICAS=3) on a private three-node NATS
// cluster (test/support/nats-cluster.ts). Two API processes and a worker, NATS_URL listing
// the three nodes, /track to both APIs under a steady load. The stream's leader is killed
// (SIGKILL) and its store dir removed (its volume is lost); a fresh node with the same name
// and ports and an empty store takes its place 10 s later. Every seq that got a 202 is
// stored exactly once; an API restarted without TIDEMARK_STREAM_REPLICAS leaves the stream
// at R3 (it is never lowered).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sleep, spawnApp, waitFor } from './support/harness';
import { NatsCluster } from './support/nats-cluster';
import {
  PrivateEnv, SteadyLoad, alive, reconcile, seqCounts, stopAllPrivate, stopChild, spawnAppRetry, timer, waitForSettled,
} from './support/private-services';

const RATE = 150;
/** The leader is killed this long after the load started, and replaced this long after. */
const KILL_AFTER_MS = 5000;
const REPLACE_AFTER_MS = 10_000;

type Child = Awaited<ReturnType<typeof spawnApp>>;

test('R3 stream: leader SIGKILLed and its store lost under load, replaced 10 s later: every 202 stored exactly once; still R3 after an API restart', { timeout: 180_000 }, async (t) => {
  const started = Date.now();
  const cluster = await NatsCluster.start(3);
  const env = new PrivateEnv('fncluster', { natsUrl: cluster.url });
  const stream = `${env.namespace}_events`;
  const children: Child[] = [];
  let load: SteadyLoad | null = null;
  try {
    await env.setup();
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write', 0);
    const appEnv = { TIDEMARK_STREAM_REPLICAS: '3' };
    // The worker first: it creates the stream, so the two APIs start together on an existing one.
    const worker = await spawnAppRetry(env, 'worker', appEnv);
    children.push(worker);
    const apis = await Promise.all([spawnAppRetry(env, 'api', appEnv), spawnAppRetry(env, 'api', appEnv)]);
    children.push(...apis);
    t.diagnostic(`cluster and processes up in ${Date.now() - started} ms`);

    const before = await cluster.waitStreamHealthy(stream, 3);
    assert.equal(before.config.num_replicas, 3, 'the stream is created with TIDEMARK_STREAM_REPLICAS');

    load = new SteadyLoad({ url: apis[0]!.url, urls: apis.map((a) => a.url), creds: writer, rate: RATE }).start();
    // Liveness before the kill: the pipeline flows (200 events stored). On a loaded CI machine the
    // worker's first pulls from a new R3 stream took over 30 s once; what is asserted below
    // (every 202 stored exactly once, still R3) does not depend on how long this takes.
    const flowing = Date.now();
    await waitFor(async () => (await seqCounts(env.db)).size >= 200, { timeoutMs: 90_000, what: 'the worker to store 200 events' });
    t.diagnostic(`200 events stored ${Date.now() - flowing} ms after the load started; answers so far ${JSON.stringify(load.tally())}`);
    await timer(Math.max(0, KILL_AFTER_MS - load.msSinceStart()));

    // The shard consumers follow the stream's replicas, so the worker's position survives too.
    const { nc, jsm } = await cluster.manager();
    const consumers: { name: string; replicas: number }[] = [];
    for await (const ci of jsm.consumers.list(stream)) consumers.push({ name: ci.name, replicas: 1 + (ci.cluster?.replicas?.length ?? 0) });
    await nc.close();
    assert.ok(consumers.length > 0, 'the worker has shard consumers');
    assert.deepEqual(consumers.filter((c) => c.replicas !== 3), [], 'every shard consumer has 3 replicas');

    const leaderName = (await cluster.streamInfo(stream)).cluster?.leader;
    assert.ok(leaderName, 'the stream has a leader');
    const leader = cluster.node(leaderName);
    const killedAt = load.msSinceStart();
    await leader.kill();
    leader.wipeStore();
    t.diagnostic(`killed the stream leader ${leaderName} at ${killedAt} ms and removed its store`);

    await timer(REPLACE_AFTER_MS);
    const during = await cluster.streamInfo(stream);
    t.diagnostic(`without ${leaderName}: leader ${during.cluster?.leader}, ${during.state.messages} messages`);
    await leader.start();
    const replacedAt = load.msSinceStart();
    // How fast the replacement catches up is NATS's business (usually < 0.5 s here); in one CI
    // run in five or so it was not current within 60 s. What the service promises is checked
    // either way below: no acknowledged event lost or stored twice, the stream still R3.
    let healedAt = Infinity;
    try {
      const healed = await cluster.waitStreamHealthy(stream, 3, 60_000);
      healedAt = load.msSinceStart();
      t.diagnostic(`replacement ${leaderName} (empty store) started at ${replacedAt} ms; 3 current replicas again at ${healedAt} ms (leader ${healed.cluster?.leader})`);
    } catch (err) {
      const info = await cluster.streamInfo(stream).catch((e) => ({ error: String(e) }));
      t.diagnostic(`replacement ${leaderName} not current 60 s after it started (${(err as Error).message}); stream cluster: ${JSON.stringify((info as { cluster?: unknown }).cluster ?? info)}; its log: ${leader.recentLogs().slice(-2000)}`);
    }
    await sleep(2000);
    await load.stop();

    const tallyBefore = load.tally(load.sentBetween(0, killedAt));
    const tallyOutage = load.tally(load.sentBetween(killedAt, replacedAt));
    const tallyAfter = load.tally(load.sentBetween(replacedAt, Infinity));
    t.diagnostic(`answers sent before the kill ${JSON.stringify(tallyBefore)}, while a node was missing ${JSON.stringify(tallyOutage)}, after the replacement ${JSON.stringify(tallyAfter)}`);

    // A delivery lost with the old leader used to be skipped (one CI run never settled): the
    // worker now reopens the shard at its committed position (test/worker-lost-delivery.test.ts).
    const settleStart = Date.now();
    await waitForSettled(env.db, load, 60_000);
    const rewinds = worker.logs().split('\n').filter((l) => l.includes('shard consumer reopened')).length;
    t.diagnostic(`every accepted event stored ${Date.now() - settleStart} ms after the load stopped; shard consumers reopened at their committed position: ${rewinds}`);
    const rec = await reconcile(env.db, load);
    t.diagnostic(`reconciliation: ${JSON.stringify(rec)}`);

    const waited = load.responses.filter((r) => r.status === 202).reduce((m, r) => Math.max(m, r.tookMs), 0);
    t.diagnostic(`the longest a 202 took: ${waited} ms (requests wait for the new stream leader, up to the publish timeout)`);
    // A 503 says "not stored, retry"; a connection error would mean an API died.
    const statuses = new Set(load.responses.map((r) => r.status));
    assert.deepEqual([...statuses].filter((s) => s !== 202 && s !== 503), [], 'every answer is 202 or 503');
    assert.ok(load.sentBetween(killedAt, replacedAt).some((r) => r.status === 202), 'ingest fails over to the surviving nodes (202s while a node is missing)');
    if (healedAt !== Infinity) assert.deepEqual(load.tally(load.sentBetween(healedAt, Infinity)), { 202: load.sentBetween(healedAt, Infinity).length }, 'only 202 once the cluster is whole');
    assert.ok(apis.every((a) => alive(a.child)) && alive(worker.child), 'the APIs and the worker survive the failover');

    // An API restarted without TIDEMARK_STREAM_REPLICAS (default 1) must not shrink the stream.
    await stopChild(apis[0]!.child, 'SIGTERM');
    const restarted = await spawnAppRetry(env, 'api', {});
    children.push(restarted);
    const after = await cluster.streamInfo(stream);
    assert.equal(after.config.num_replicas, 3, 'the stream is still R3 after an API restart with the default setting');
    assert.match(restarted.logs(), /never lowered/, 'the restarted API logs that it kept the higher replicas');
  } finally {
    await load?.stop();
    await Promise.all(children.map((c) => stopChild(c.child, 'SIGKILL')));
    await env.teardown().catch(() => {});
    await stopAllPrivate();
  }
});
