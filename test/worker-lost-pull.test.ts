// A shard whose JetStream pull request is gone (the server holds none while the client library
// believes one is waiting: no 408, no heartbeat, nothing delivered) resumes within about a
// second, not after the ten seconds of the pull's own heartbeat monitor. Seen on this machine
// kind's nats-server 2.9 under load: one shard of 16 stopped for 7-12 s while the others went
// on (bench/RESULTS.md, "End to end: notes"). The proxy makes the state on purpose by losing the
// worker's pull requests while the shard's outstanding one runs out.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { TestEnv, NATS_URL, startApp, post, track, waitFor } from './support/harness';
import { NatsPullLossProxy } from './support/nats-proxy';

let env: TestEnv;
let proxy: NatsPullLossProxy;

before(async () => {
  env = await new TestEnv('lostpull').setup();
  const u = new URL(NATS_URL);
  proxy = new NatsPullLossProxy({ host: u.hostname, port: Number(u.port || 4222) });
});

after(async () => {
  await proxy?.close();
  await env?.teardown();
});

test('a shard whose pull request was lost resumes within about a second once pulls get through again', async () => {
  const port = await proxy.listen();
  const app = await startApp(env, { api: true, worker: true }, { NATS_URL: `nats://127.0.0.1:${port}`, TIDEMARK_SHARDS: '1' });
  const nc = await connect({ servers: NATS_URL });
  try {
    const jsm = await jetstreamManager(nc);
    const stream = `${env.namespace}_events`;
    const consumer = `${env.namespace}-shard-0`;
    const projectId = await env.project({ name: 'lost pull' });
    const writer = await env.client(projectId, 'write', 0);
    const stored = async (path: string) =>
      (await env.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = 'screen_view' AND path = $2`, [projectId, path])).rows[0]!.n;

    // The shard consumes (its first pull request is on the server).
    assert.equal((await post(`${app.url}/track`, track('screen_view', { __path: 'https://p.example/first' }), writer)).status, 202);
    await waitFor(async () => (await stored('/first')) === 1, { what: 'the first event stored', timeoutMs: 20_000 });

    // Lose every pull request from now on, and give the shard more messages than its
    // outstanding pull asks for: that pull runs out, its refills never arrive.
    proxy.losing = true;
    const subject = `${env.namespace}.events.${projectId}.0`;
    const empty = new TextEncoder().encode('{"v":1,"ops":[]}');
    for (let i = 0; i < 2500; i++) nc.publish(subject, empty);
    await nc.flush();
    await waitFor(async () => {
      const ci = await jsm.consumers.info(stream, consumer);
      return ci.num_waiting === 0 && ci.num_pending > 0 && proxy.dropped > 0;
    }, { what: 'the shard stalled: no pull request on the server, messages pending', timeoutMs: 20_000, intervalMs: 50 });

    // Pulls get through again: the shard asks again by itself, within about a second.
    proxy.losing = false;
    const resumed = performance.now();
    assert.equal((await post(`${app.url}/track`, track('screen_view', { __path: 'https://p.example/after' }), writer)).status, 202);
    await waitFor(async () => (await stored('/after')) === 1, { what: 'the event after the stall stored', timeoutMs: 20_000, intervalMs: 20 });
    const waited = performance.now() - resumed;
    assert.ok(waited < 3000, `the shard resumed ${Math.round(waited)} ms after pulls got through again (its pull heartbeat monitor alone would take ~10 s)`);
    const ci = await jsm.consumers.info(stream, consumer);
    assert.equal(ci.num_pending, 0, 'every message of the shard was delivered');
  } finally {
    await nc.close();
    await app.drain();
  }
});
