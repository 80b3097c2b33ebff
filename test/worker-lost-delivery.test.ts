// A delivery lost in transit (its connection or its stream leader gone: the CI run of the R3
// fault test that stalled). The shard consumer counts the message as delivered; it would come
// again only after ack_wait (60 s), behind later messages the runner had already committed,
// and be skipped as committed: an acknowledged event lost. The runner must see the gap (in
// the delivery sequence, or in the next idle heartbeat when nothing follows it) and reopen
// its consumer at the committed position.
//
// Real API, NATS, PostgreSQL and Redis; the worker is built here so that its bus drops chosen
// deliveries on the client side, which is what a lost delivery looks like to the runner.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Bus, BusMessage } from '../internal/bus/bus';
import { decodeBatch } from '../internal/bus/message';
import { TestEnv, closeWorker, post, sleep, startApp, startTestWorker, track, waitFor, type Credentials } from './support/harness';

const UA = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36';

let env: TestEnv;
let api: Awaited<ReturnType<typeof startApp>>;
let writer: Credentials;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
/** Paths whose message's first delivery is dropped before the runner sees it. */
const lose = new Set<string>();
/** Paths whose delivery was dropped. */
const lost: string[] = [];

function pathsOf(m: BusMessage): string[] {
  try {
    return decodeBatch(m.data).ops.flatMap((op) => (op.kind === 'track' && op.url ? [new URL(op.url).pathname] : []));
  } catch {
    return [];
  }
}

before(async () => {
  env = await new TestEnv('lostdel').setup();
  api = await startApp(env, { api: true, worker: false });
  const projectId = await env.project({ timezone: 'UTC' });
  writer = await env.client(projectId, 'write');

  worker = await startTestWorker(env, {
    tickMs: 500,
    // The real bus, but the shard consumers it opens drop the first delivery of a chosen message.
    bus: (bus) => {
      const lossy = Object.create(bus) as Bus;
      lossy.openShard = async (shard, from) => {
        const consumer = await bus.openShard(shard, from);
        const consume = consumer.consume.bind(consumer);
        consumer.consume = ((opts: Parameters<typeof consume>[0]) =>
          consume({
            ...opts,
            callback: (m: BusMessage) => {
              const hit = pathsOf(m).find((p) => lose.has(p));
              if (hit) {
                lose.delete(hit);
                lost.push(hit);
                return;
              }
              (opts as { callback: (m: BusMessage) => void }).callback(m);
            },
          })) as typeof consumer.consume;
        return consumer;
      };
      return lossy;
    },
    runner: () => ({ timeoutMs: 30 * 60_000, batchMax: 100, cacheMax: 100, onOpened: async () => {} }),
  });
});

after(async () => {
  await closeWorker(worker);
  await api?.drain();
  await env?.teardown();
});

/** Page views of one device (one shard), one request at a time so each is its own message. */
async function views(ip: string, paths: string[]): Promise<void> {
  const t0 = Date.now() - 60_000;
  for (const [i, p] of paths.entries()) {
    const res = await post(`${api.url}/track`, track('screen_view', { __timestamp: new Date(t0 + i * 1000).toISOString(), __path: `https://shop.example${p}` }), writer, { ip, userAgent: UA });
    assert.equal(res.status, 202);
    await sleep(150);
  }
}

async function stored(prefix: string): Promise<{ path: string; n: number }[]> {
  const { rows } = await env.db.query<{ path: string; n: number }>(
    `SELECT path, count(*)::int AS n FROM events WHERE name = 'screen_view' AND path LIKE $1 GROUP BY path ORDER BY path`, [`${prefix}/%`]);
  return rows;
}

async function rewinds(): Promise<number> {
  const m = await worker.metrics.workerErrors.get();
  return m.values.filter((v) => v.labels.kind === 'rewind').reduce((n, v) => n + v.value, 0);
}

test('a delivery lost between others: the runner sees the gap, reopens at its committed position, stores every event once and in order', { timeout: 60_000 }, async () => {
  const before = await rewinds();
  lose.add('/mid/3');
  const paths = ['/mid/1', '/mid/2', '/mid/3', '/mid/4', '/mid/5', '/mid/6'];
  const sentAt = Date.now();
  await views('81.2.69.160', paths);
  await waitFor(async () => (await stored('/mid')).length === 6, { timeoutMs: 20_000, intervalMs: 100, what: 'all six page views stored' });
  assert.ok(Date.now() - sentAt < 30_000, 'well before the 60 s ack_wait would have redelivered it');
  assert.deepEqual(lost, ['/mid/3'], 'the delivery was dropped');
  await sleep(1000);
  assert.deepEqual(await stored('/mid'), paths.map((path) => ({ path, n: 1 })), 'each stored once');
  // In order: one session, entered at the first view and left at the last.
  const { rows } = await env.db.query(`SELECT entry_path, exit_path, event_count, screen_view_count FROM sessions s
    WHERE EXISTS (SELECT 1 FROM events e WHERE e.session_id = s.id AND e.path = '/mid/1')`);
  assert.equal(rows.length, 1);
  assert.deepEqual(rows[0], { entry_path: '/mid/1', exit_path: '/mid/6', event_count: 6, screen_view_count: 6 });
  assert.ok((await rewinds()) > before, 'counted as a rewind (tidemark_worker_batch_errors_total{kind="rewind"})');
});

test('a lost last delivery (nothing after it shows a gap) is found by the next idle heartbeat, not after ack_wait', { timeout: 60_000 }, async () => {
  lost.length = 0;
  lose.add('/tail/3');
  const sentAt = Date.now();
  await views('8.8.4.4', ['/tail/1', '/tail/2', '/tail/3']);
  await waitFor(async () => (await stored('/tail')).length === 3, { timeoutMs: 30_000, intervalMs: 100, what: 'the last page view stored' });
  const took = Date.now() - sentAt;
  assert.deepEqual(lost, ['/tail/3'], 'the delivery was dropped');
  assert.ok(took < 30_000, `stored ${took} ms after it was sent (ack_wait is 60 s)`);
  await sleep(1000);
  assert.deepEqual((await stored('/tail')).map((r) => r.n), [1, 1, 1], 'each stored once');
});
