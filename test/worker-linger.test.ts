// WORKER_LINGER_MS (docs/operating.md "Writes"): a trickle of events into one shard shares
// one write transaction instead of paying one each, and nothing waits longer than the linger
// or is lost: every 202 is stored once, within the linger of its batch's first event.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, startApp, post, track, waitFor, sleep, type Credentials } from './support/harness';

let env: TestEnv;

before(async () => {
  env = await new TestEnv('linger').setup();
});

after(async () => {
  await env?.teardown();
});

/** Committed worker batches so far (the tidemark_worker_batch_ops histogram's count). */
async function batches(app: Awaited<ReturnType<typeof startApp>>): Promise<number> {
  const h = await app.metrics.workerBatchOps.get();
  return h.values.filter((v) => v.metricName === 'tidemark_worker_batch_ops_count').reduce((n, v) => n + v.value, 0);
}

/** 10 page views of one device (one shard), 30 ms apart; resolves with when the last 202 came. */
async function trickle(url: string, writer: Credentials, tag: string): Promise<number> {
  for (let i = 0; i < 10; i++) {
    const r = await post(`${url}/track`, track('screen_view', { __path: `https://l.example/${tag}/${i}` }), writer, { ip: '5.6.7.8', userAgent: 'Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0 Safari/537.36' });
    assert.equal(r.status, 202);
    await sleep(30);
  }
  return performance.now();
}

async function stored(projectId: string, tag: string): Promise<number> {
  const { rows } = await env.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = 'screen_view' AND path LIKE $2`, [projectId, `/${tag}/%`]);
  return rows[0]!.n;
}

test('with a linger, a trickle into one shard is committed in fewer transactions, each event stored once, within the linger', async () => {
  for (const [linger, tag] of [[0, 'off'], [1500, 'on']] as const) {
    const app = await startApp(env, { api: true, worker: true }, { WORKER_LINGER_MS: String(linger) });
    try {
      const projectId = await env.project({ name: `linger ${linger}` });
      const writer = await env.client(projectId, 'write', 0);
      const before = await batches(app);
      const started = performance.now();
      const last = await trickle(app.url, writer, tag);
      await waitFor(async () => (await stored(projectId, tag)) === 10, { what: `10 events with linger ${linger}`, timeoutMs: 20_000, intervalMs: 20 });
      const readable = performance.now();
      const n = (await batches(app)) - before;
      if (linger === 0) {
        // Each 202 finds an idle worker: (nearly) one transaction per event.
        assert.ok(n >= 5, `without a linger: ${n} batches for 10 events sent 30 ms apart`);
      } else {
        // The ~400 ms trickle falls within one 1.5 s linger: one batch (two if a commit slot or the
        // consumer split it), and the events are readable once the linger is over, not much later.
        assert.ok(n <= 2, `with a ${linger} ms linger: ${n} batches for 10 events`);
        assert.ok(readable - started >= linger * 0.9, `the batch waited for its linger (${Math.round(readable - started)} ms)`);
        assert.ok(readable - last < linger + 3000, `readable ${Math.round(readable - last)} ms after the last 202`);
      }
      assert.equal(await stored(projectId, tag), 10, 'every 202 stored once');
    } finally {
      await app.drain();
    }
  }
});

test('a drain during the linger commits what it holds at once: nothing acknowledged is left behind', async () => {
  const app = await startApp(env, { api: true, worker: true }, { WORKER_LINGER_MS: '8000' });
  const projectId = await env.project({ name: 'linger drain' });
  const writer = await env.client(projectId, 'write', 0);
  let drained = false;
  try {
    await trickle(app.url, writer, 'drain');
    await sleep(200);
    assert.equal(await stored(projectId, 'drain'), 0, 'still lingering');
    const t0 = performance.now();
    await app.drain();
    drained = true;
    assert.ok(performance.now() - t0 < 6000, `drain did not wait out the 8 s linger (${Math.round(performance.now() - t0)} ms)`);
    assert.equal(await stored(projectId, 'drain'), 10);
  } finally {
    if (!drained) await app.drain();
  }
});
