// Read admission (docs/operating.md, "Read admission"): a client over its limit of
// concurrent reads gets a 429 naming it while other clients are served; heavy read
// statements beyond READ_CONCURRENCY queue (pg_stat_activity never shows more running), a
// queued request whose client leaves never runs; /track stays fast while slow reads
// saturate. The API runs as child processes (its event loop is not the test's); the slow
// statement is a back-reference regex on a 20,011-char value (~2 s per row, see
// test/security-regex.test.ts). Latency is compared with the same run's baseline only.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { TestEnv, sleep, spawnApp, type Credentials } from './support/harness';
import { stopChild } from './support/private-services';
import { eventRow, insertEvents } from './support/export-server';

const TIMEOUT_MS = 2000;
const SLOW = '^(aa+)\\1+$';

let env: TestEnv;
let projectId: string;
let writer: Credentials;
let readers: Credentials[] = [];
/** READ_CONCURRENCY=1 with the default heavy threshold (1 s); per client 1 running, 1 waiting. */
let lim: Awaited<ReturnType<typeof spawnApp>>;
/** READ_CONCURRENCY=2, every statement waits for a slot (READ_HEAVY_AFTER_MS=0). */
let cap: Awaited<ReturnType<typeof spawnApp>>;

before(async () => {
  env = await new TestEnv('readadm').setup();
  projectId = await env.project({ name: 'Admission', timezone: 'UTC' });
  writer = await env.client(projectId, 'write', 0);
  readers = await Promise.all(Array.from({ length: 10 }, () => env.client(projectId, 'read', 0)));
  const day = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000;
  await insertEvents(env.db, [
    eventRow(projectId, { name: 'slow', created_at: new Date(day).toISOString(), properties: { long: 'a'.repeat(20_011) } }),
    ...Array.from({ length: 50 }, (_, i) => eventRow(projectId, { created_at: new Date(day + i * 1000).toISOString(), path: `/p/${i % 5}` })),
  ]);
  const common = { QUERY_TIMEOUT_MS: String(TIMEOUT_MS), LOG_LEVEL: 'warn' };
  [lim, cap] = await Promise.all([
    spawnApp(env, 'api', { ...common, READ_CONCURRENCY: '1', READ_CONCURRENCY_PER_CLIENT: '1', READ_QUEUE_PER_CLIENT: '1' }),
    spawnApp(env, 'api', { ...common, READ_CONCURRENCY: '2', READ_HEAVY_AFTER_MS: '0', READ_CONCURRENCY_PER_CLIENT: '8' }),
  ]);
});

after(async () => {
  await Promise.all([lim && stopChild(lim.child), cap && stopChild(cap.child)]);
  await env?.teardown();
});

const hdr = (c: Credentials) => ({ 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret });
const slowSeries = (n: number) => encodeURIComponent(JSON.stringify(Array.from({ length: n }, () => ({ name: 'slow', filters: [{ name: 'properties.long', operator: 'regex', value: [SLOW] }] }))));
const slowChart = (n = 4) => `/export/charts?projectId=${projectId}&range=7d&series=${slowSeries(n)}`;

async function timed(url: string, init: RequestInit = {}): Promise<{ status: number; ms: number; body: string; headers: Headers }> {
  const t0 = performance.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(20_000) });
  const body = await res.text();
  return { status: res.status, ms: performance.now() - t0, body, headers: res.headers };
}

/** Chart statements (the slow regex) of the test database running now; not this probe itself. */
async function runningRegex(): Promise<number> {
  const { rows } = await env.db.query<{ n: string }>(
    `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND state = 'active'
        AND query LIKE '%FROM events' || ' s%' AND query NOT LIKE '%pg_stat_activity%'`,
    [env.dbName],
  );
  return Number(rows[0]!.n);
}

test('a client over its concurrent-read limit gets 429 with Retry-After and a JSON body naming it; another client is served', async () => {
  const a = readers[0]!;
  const first = timed(`${lim.url}${slowChart()}`, { headers: hdr(a) });
  await sleep(150);
  const queued = timed(`${lim.url}${slowChart()}`, { headers: hdr(a) });
  await sleep(150);
  const over = await timed(`${lim.url}/insights/${projectId}/metrics?range=7d`, { headers: hdr(a) });
  assert.equal(over.status, 429, over.body);
  assert.equal(over.headers.get('retry-after'), '1');
  const body = JSON.parse(over.body) as { error: string; message: string };
  assert.equal(body.error, 'Too Many Requests');
  assert.match(body.message, /concurrent read limit/);
  assert.match(body.message, /READ_CONCURRENCY_PER_CLIENT=1/);
  // Another client, meanwhile: its cheap reads are answered (they do not wait behind the slow one).
  const other = await timed(`${lim.url}/insights/${projectId}/metrics?range=7d`, { headers: hdr(readers[1]!) });
  assert.equal(other.status, 200, other.body);
  const [f, q] = await Promise.all([first, queued]);
  for (const r of [f, q]) assert.ok([200, 503].includes(r.status), `${r.status} ${r.body.slice(0, 200)}`);
  // Both done: the client may read again.
  assert.equal((await timed(`${lim.url}/insights/${projectId}/metrics?range=7d`, { headers: hdr(a) })).status, 200);
});

test('heavy read statements beyond READ_CONCURRENCY queue: PostgreSQL never runs more than 2 at once; a queued request whose client leaves never runs', async () => {
  // Counted only when three polls ~20 ms apart agree: each statement here runs for up to its
  // 2 s budget, but at a hand-over the backend whose statement just hit its timeout can still
  // show as active for a moment after its client got the error and passed the slot on (its
  // state turns idle only when it next waits for a command; one CI run saw 3 in one poll).
  // Each client's first request verifies its secret, a slow hash: five at once took over 1.5 s
  // on a busy CI machine. Verify them first with a cheap read each, so the slow charts below
  // reach PostgreSQL at once (a verified secret is cached).
  for (const c of readers.slice(2, 9)) assert.equal((await timed(`${cap.url}/insights/${projectId}/live`, { headers: hdr(c) })).status, 200);
  let most = 0;
  let polling = true;
  const poller = (async () => {
    const last: number[] = [];
    while (polling) {
      last.push(await runningRegex());
      if (last.length > 3) last.shift();
      if (last.length === 3) most = Math.max(most, Math.min(...last));
      await sleep(20);
    }
  })();
  try {
    // Five slow charts from five clients: two run, three wait (503 at their budget, or run later).
    const answers = Promise.all(readers.slice(2, 7).map((c) => timed(`${cap.url}${slowChart(1)}`, { headers: hdr(c) })));
    const t0 = Date.now();
    while ((await runningRegex()) < 2) {
      assert.ok(Date.now() - t0 < 1500, 'two slots, both taken');
      await sleep(20);
    }
    // A sixth, queued, whose client leaves after 300 ms.
    const sock = net.connect(cap.port, '127.0.0.1');
    const c = readers[7]!;
    sock.write(`GET ${slowChart(1)} HTTP/1.1\r\nHost: t\r\nservice-client-id: ${c.clientId}\r\nservice-client-secret: ${c.clientSecret}\r\n\r\n`);
    sock.on('error', () => {});
    await sleep(300);
    sock.destroy();
    const done = await answers;
    for (const r of done) assert.ok([200, 503].includes(r.status), `${r.status} ${r.body.slice(0, 200)}`);
    assert.ok(done.some((r) => r.status === 503 && /longer than 2000 ms/.test(r.body)), 'a queued request past its budget gets the budget 503');
    // The cancelled statements end (a CancelRequest is asynchronous); after that nothing else
    // runs: the dropped request's statement never starts, though slots are free now.
    const answeredAt = Date.now();
    while ((await runningRegex()) > 0) {
      assert.ok(Date.now() - answeredAt < 3000, 'the statements of answered requests end');
      await sleep(20);
    }
    const quietFrom = Date.now();
    while (Date.now() - quietFrom < 1500) {
      assert.equal(await runningRegex(), 0, 'no statement of the dropped request');
      await sleep(20);
    }
  } finally {
    polling = false;
    await poller;
  }
  assert.ok(most <= 2, `at most 2 heavy statements at once, saw ${most}`);
  // And the next request is served at once (nothing left in the queue).
  const next = await timed(`${cap.url}/insights/${projectId}/metrics?range=7d`, { headers: hdr(readers[8]!) });
  assert.equal(next.status, 200, next.body);
});

test('/track stays fast while slow reads saturate (relative to the same run\'s baseline)', async () => {
  const track = async (i: number) => (await timed(`${lim.url}/track`, {
    method: 'POST',
    headers: { ...hdr(writer), 'content-type': 'application/json', 'x-client-ip': `10.9.0.${i % 200}`, 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Chrome/124.0' },
    body: JSON.stringify({ type: 'track', payload: { name: 'click', properties: { i } } }),
  }));
  const phase = async (ms: number): Promise<number[]> => {
    const out: number[] = [];
    const end = Date.now() + ms;
    const inflight: Promise<unknown>[] = [];
    for (let i = 0; Date.now() < end; i++) {
      inflight.push(track(i).then((r) => {
        assert.equal(r.status, 202, r.body);
        out.push(r.ms);
      }));
      await sleep(20); // 50 req/s
    }
    await Promise.all(inflight);
    return out;
  };
  const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)]!;
  const minute = `/export/charts?projectId=${projectId}&range=yesterday&interval=minute&series=${encodeURIComponent('[{"name":"*"},{"name":"screen_view"},{"name":"slow"}]')}`;
  /** One try: a quiet baseline, then the same /track traffic under slow reads; the p90 ratio. */
  const attempt = async (): Promise<{ ratio: number; text: string }> => {
    const baseline = await phase(3000);
    // Slow reads from 8 clients in loops, a minute chart's big answer among them.
    let loading = true;
    const load = readers.slice(2, 10).map(async (c, k) => {
      while (loading) await timed(`${lim.url}${k % 4 === 3 ? minute : slowChart(4)}`, { headers: hdr(c) }).catch(() => null);
    });
    // Each client's first slow read runs at once (nothing recent of its own); from then on it
    // is heavy and its statements take turns for the one slot.
    await sleep(2500);
    const loaded = await phase(5000);
    loading = false;
    await Promise.all(load);
    const ratio = p90(loaded) / Math.max(1, p90(baseline));
    return { ratio, text: `/track p90 ${p90(baseline).toFixed(1)} ms baseline, ${p90(loaded).toFixed(1)} ms under slow reads (${ratio.toFixed(1)}x)` };
  };
  // Generous: the machine is shared (in CI another test file runs beside this one, and its
  // load comes and goes: runs saw 6.9x and once 8.8x); without admission it was 10x and more
  // in every run. So a second try is allowed when a neighbour's burst lands in the first one.
  const tries = [await attempt()];
  if (tries[0]!.ratio >= 8) tries.push(await attempt());
  assert.ok(tries.some((t) => t.ratio < 8), tries.map((t) => t.text).join('; '));
});
