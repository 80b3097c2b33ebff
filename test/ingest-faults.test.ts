// Faults: NATS going away (503, never 2xx, then recovery by itself), a worker killed
// before it acked (redelivery must not duplicate), and SIGTERM under load (nothing that
// got a 202 is lost).
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { TestEnv, startApp, spawnApp, post, track, waitFor, sleep, type Credentials } from './support/harness';

const NATS_BIN = '/usr/sbin/nats-server';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

function alive(child: ChildProcess | null): child is ChildProcess {
  return !!child && child.exitCode === null && child.signalCode === null;
}

async function kill(child: ChildProcess | null, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (!alive(child)) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await exited;
}

/** A private nats-server with JetStream on its own port and store dir. */
class PrivateNats {
  child: ChildProcess | null = null;
  constructor(readonly port: number, readonly storeDir: string) {}
  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }
  async start(): Promise<void> {
    this.child = spawn(NATS_BIN, ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.storeDir], { stdio: 'ignore' });
    await waitFor(async () => (!alive(this.child) ? Promise.reject(new Error('nats-server exited')) : portOpen(this.port)), { timeoutMs: 10_000, what: 'nats-server' });
  }
  async stop(): Promise<void> {
    await kill(this.child);
    this.child = null;
  }
}

/** Resolves after `ms` without keeping the process alive. */
const timer = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());
const withTimeout = <T>(p: Promise<T>, ms: number) => Promise.race([p, timer(ms)]);

test('NATS unreachable: 503 (never 2xx) within the publish timeout; ingest recovers by itself', async (t) => {
  const env = await new TestEnv('ingnats').setup();
  const storeDir = mkdtempSync(path.join(os.tmpdir(), 'tm-nats-'));
  const nats = new PrivateNats(await freePort(), storeDir);
  let app: Awaited<ReturnType<typeof startApp>> | null = null;
  try {
    await nats.start();
    const running = await startApp(env, { api: true, worker: false }, { NATS_URL: nats.url });
    app = running;
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write', 0);
    const ok = await post(`${running.url}/track`, track('before_outage'), writer);
    assert.equal(ok.status, 202);

    await nats.stop();
    const killedAt = Date.now();
    const during = await Promise.all([
      post(`${running.url}/track`, track('during_outage', { i: 1 }), writer),
      post(`${running.url}/event`, { name: 'during_outage', properties: { i: 2 } }, writer),
      post(`${running.url}/track`, { type: 'identify', payload: { profileId: 'p1' } }, writer),
      sleep(1000).then(() => post(`${running.url}/track`, track('during_outage', { i: 3 }), writer)),
    ]);
    const tookMs = Date.now() - killedAt;
    for (const r of during) {
      assert.equal(r.status, 503, `got ${r.status} ${JSON.stringify(r.body)}`);
      assert.match(r.headers.get('content-type') ?? '', /application\/json/);
      assert.equal(r.body.error, 'Service Unavailable');
      assert.equal(r.body.status, 503);
    }
    assert.ok(tookMs < 10_000, `503 after ${tookMs} ms`);
    t.diagnostic(`503 answered ${tookMs} ms after NATS died`);

    await nats.start();
    const restartedAt = Date.now();
    const recovered = await waitFor(async () => {
      const r = await post(`${running.url}/track`, track('after_outage'), writer);
      assert.ok(r.status === 202 || r.status === 503, `only 202 or 503, got ${r.status}`);
      return r.status === 202 ? r : undefined;
    }, { timeoutMs: 25_000, intervalMs: 200, what: 'ingest to recover after NATS restart' });
    assert.match(recovered!.body.deviceId, /^[0-9a-f]{32}$/);
    t.diagnostic(`202 again ${Date.now() - restartedAt} ms after NATS restarted`);
    await sleep(1000);
    const nc = await connect({ servers: nats.url });
    try {
      const info = await (await jetstreamManager(nc)).streams.info(`${env.namespace}_events`);
      t.diagnostic(`stream holds ${info.state.messages} messages for 2 accepted (202) and 4 refused (503) requests`);
    } finally {
      await nc.close();
    }
  } finally {
    if (app) {
      if (!alive(nats.child)) await nats.start().catch(() => {});
      await withTimeout(app.drain().catch(() => {}), 10_000);
    }
    await nats.stop();
    rmSync(storeDir, { recursive: true, force: true });
    await env.teardown();
  }
});

// ---- durability under crashes ----

const UAS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15',
  'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1',
];

/** Event `seq` from one of 40 devices; a page view now and then so sessions have views. */
function loadEvent(seq: number) {
  const name = seq % 5 === 0 ? 'screen_view' : 'load';
  return {
    body: track(name, { seq, __path: `https://load.example/p/${seq % 7}` }),
    opts: { userAgent: UAS[seq % UAS.length]!, ip: `203.0.${Math.floor(seq / 4) % 10}.${(seq % 40) + 1}` },
  };
}

type Outcome = number | 'error';

/** `workers` loops each sending one event at a time until `stop()` or (optionally) their first connection error. */
function runLoad(url: string, creds: Credentials, o: { workers: number; max: number; stopOnError: boolean; paceMs?: number }) {
  const outcomes = new Map<number, Outcome>();
  let next = 0;
  let stopped = false;
  const loops = Array.from({ length: o.workers }, async () => {
    while (!stopped && next < o.max) {
      const seq = next++;
      const { body, opts } = loadEvent(seq);
      try {
        const r = await post(`${url}/track`, body, creds, opts);
        outcomes.set(seq, r.status);
      } catch {
        outcomes.set(seq, 'error');
        if (o.stopOnError) return;
      }
      if (o.paceMs) await sleep(o.paceMs);
    }
  });
  return {
    outcomes,
    sent: () => next,
    stop: () => {
      stopped = true;
    },
    done: Promise.all(loops),
  };
}

async function seqCounts(env: TestEnv): Promise<Map<number, number>> {
  const r = await env.db.query("SELECT (properties->>'seq')::int AS seq, count(*)::int AS n FROM events WHERE properties ? 'seq' GROUP BY 1");
  return new Map(r.rows.map((row) => [row.seq as number, row.n as number]));
}

async function assertExactlyOnce(env: TestEnv, accepted: number[]): Promise<Map<number, number>> {
  const counts = await seqCounts(env);
  const missing = accepted.filter((s) => !counts.has(s));
  const duplicated = [...counts].filter(([, n]) => n !== 1);
  assert.deepEqual(missing, [], `202'd but not stored: ${missing.length}`);
  assert.deepEqual(duplicated, [], 'stored more than once');
  return counts;
}

/** sum(event_count) over sessions = real (non session_start/end) events; one session_start per session. */
async function assertSessionsConsistent(env: TestEnv): Promise<void> {
  const r = await env.db.query(`
    SELECT (SELECT coalesce(sum(event_count), 0)::int FROM sessions) AS counted,
           (SELECT count(*)::int FROM events WHERE name NOT IN ('session_start', 'session_end')) AS events,
           (SELECT count(*)::int FROM sessions) AS sessions,
           (SELECT count(*)::int FROM events WHERE name = 'session_start') AS starts,
           (SELECT coalesce(sum(screen_view_count), 0)::int FROM sessions) AS views_counted,
           (SELECT count(*)::int FROM events WHERE name = 'screen_view') AS views,
           (SELECT count(*)::int FROM events WHERE name NOT IN ('session_start', 'session_end') AND session_id IS NULL) AS unsessioned`);
  const row = r.rows[0];
  assert.equal(row.counted, row.events, `sessions count ${row.counted} events, events has ${row.events}`);
  assert.equal(row.starts, row.sessions, `${row.starts} session_start rows for ${row.sessions} sessions`);
  assert.equal(row.views_counted, row.views, 'screen views');
  assert.equal(row.unsessioned, 0);
}

test('a worker SIGKILLed before it acked: redelivery does not duplicate', async (t) => {
  const env = await new TestEnv('ingcrash').setup();
  const children: ChildProcess[] = [];
  try {
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write', 0);
    const api = await spawnApp(env, 'api');
    children.push(api.child);
    const worker = await spawnApp(env, 'worker');
    children.push(worker.child);

    const load = runLoad(api.url, writer, { workers: 16, max: 600, stopOnError: false, paceMs: 5 });
    // Kill the worker once it has committed part of the stream, while events keep coming.
    await waitFor(async () => (await env.db.query("SELECT count(*)::int AS n FROM events WHERE properties ? 'seq'")).rows[0].n >= 50, { timeoutMs: 20_000, intervalMs: 20, what: 'the worker to commit some events' });
    await kill(worker.child, 'SIGKILL');
    const atKill = (await env.db.query("SELECT count(*)::int AS n FROM events WHERE properties ? 'seq'")).rows[0].n;
    await load.done;
    const accepted = [...load.outcomes].filter(([, s]) => s === 202).map(([seq]) => seq);
    assert.equal(accepted.length, 600, `every request accepted by the API: ${JSON.stringify([...new Set(load.outcomes.values())])}`);
    assert.ok(atKill < accepted.length, `the worker was killed mid-stream (${atKill} of ${accepted.length} stored)`);
    t.diagnostic(`worker killed with ${atKill} of ${accepted.length} accepted events stored`);

    const replacement = await spawnApp(env, 'worker');
    children.push(replacement.child);
    // The dead worker's shard leases expire (15 s) before the replacement takes over.
    await waitFor(async () => (await seqCounts(env)).size >= accepted.length, { timeoutMs: 45_000, intervalMs: 250, what: 'every accepted event stored' });
    await sleep(500); // a duplicate committed late would show up now
    await assertExactlyOnce(env, accepted);
    await assertSessionsConsistent(env);
  } finally {
    for (const c of children) await kill(c);
    await env.teardown();
  }
});

/** The `tidemark_api_thread_requests_total` samples of a /metrics text, by thread. */
function threadRequests(metrics: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of metrics.matchAll(/^tidemark_api_thread_requests_total\{thread="(\d+)"\} (\d+)$/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

async function sigtermUnderLoad(t: TestContext, threads: number): Promise<void> {
  const env = await new TestEnv('ingterm').setup();
  const children: ChildProcess[] = [];
  try {
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write', 0);
    const all = await spawnApp(env, 'all', { API_THREADS: String(threads) });
    children.push(all.child);
    if (threads > 1) {
      // The main thread listens last, after every API thread: all are up once /healthz answered.
      const counts = threadRequests(await (await fetch(`${all.url}/metrics`)).text());
      assert.deepEqual([...counts.keys()].sort(), Array.from({ length: threads }, (_, i) => String(i)), 'every API thread reports');
    }

    const load = runLoad(all.url, writer, { workers: 24, max: 100_000, stopOnError: true });
    await waitFor(() => [...load.outcomes.values()].filter((s) => s === 202).length >= 300, { timeoutMs: 20_000, intervalMs: 10, what: '300 accepted events' });
    if (threads > 1) {
      // Every thread answers (the kernel spreads the load's connections over them), and
      // /metrics, answered by any one thread, sums them all.
      const counts = threadRequests(await (await fetch(`${all.url}/metrics`)).text());
      t.diagnostic(`requests per API thread: ${JSON.stringify(Object.fromEntries(counts))}`);
      assert.equal(counts.size, threads, `one series per thread: ${JSON.stringify([...counts])}`);
      assert.ok([...counts.values()].every((n) => n > 0), `every thread answered: ${JSON.stringify([...counts])}`);
    }
    const exited = new Promise<number | null>((r) => all.child.once('exit', (code) => r(code)));
    all.child.kill('SIGTERM');
    const code = await Promise.race([exited, timer(30_000).then(() => 'timeout' as const)]);
    assert.equal(code, 0, `the process drains and exits 0:\n${all.logs().slice(-2000)}`);
    await withTimeout(load.done, 10_000);
    load.stop();

    const tally: Record<string, number> = {};
    for (const s of load.outcomes.values()) tally[s] = (tally[s] ?? 0) + 1;
    t.diagnostic(`outcomes ${JSON.stringify(tally)}; stored before a fresh worker: ${(await seqCounts(env)).size}`);
    const statuses = [...new Set(load.outcomes.values())];
    for (const s of statuses) assert.ok(s === 202 || s === 503 || s === 'error', `unexpected outcome ${s}`);
    const accepted = [...load.outcomes].filter(([, s]) => s === 202).map(([seq]) => seq);
    assert.ok(accepted.length >= 300);
    assert.ok([...load.outcomes.values()].some((s) => s === 503 || s === 'error'), 'the load saw the shutdown');

    // Whatever the drained worker did not get to, a fresh worker processes.
    const worker = await spawnApp(env, 'worker');
    children.push(worker.child);
    await waitFor(async () => {
      const counts = await seqCounts(env);
      return accepted.every((s) => counts.has(s));
    }, { timeoutMs: 30_000, intervalMs: 250, what: 'every accepted event stored' });
    await sleep(500);
    await assertExactlyOnce(env, accepted);
    await assertSessionsConsistent(env);
  } finally {
    for (const c of children) await kill(c);
    await env.teardown();
  }
}

test('SIGTERM under load: in-flight requests finish, every 202 is stored exactly once, later requests get 503 or a connection error', (t) => sigtermUnderLoad(t, 1));

test('SIGTERM under load with API_THREADS=3: every thread answers and drains; every 202 is stored exactly once', (t) => sigtermUnderLoad(t, 3));
