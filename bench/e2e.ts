// End-to-end capacity and producer latency: Tidemark as a user runs it, `npm start`
// (API + workers in one process; the worker role in a thread of its own) on this machine with
// PostgreSQL, NATS and Redis, against a bare uWebSockets.js server in the same run.
//
//   1. The JetStream floor: sequential publish-and-await-ack of an op-sized message.
//   2. Bare uWS (bench/baseline-server.ts: parse nothing, answer 202) and Tidemark under wrk,
//      closed loop (100 connections): requests/s; for Tidemark also whether every 202 became
//      readable in PostgreSQL within 2 s of the load stopping.
//   3. Open-loop steps (bench/openloop.ts), offered rates stepping up: per step accepted/s,
//      non-2xx, latency p50/p99 (from the scheduled send time), whether every 202 became
//      readable within 2 s of the load stopping, and the pipeline lag p95 (from each 202 to
//      the event readable, events matched in order against a count sampled every 100 ms).
//      Capacity: the highest offered rate at which every 202 landed and lag p95 stayed
//      under 1 s (a failed step is tried once more before the steps stop).
//   4. Producer latency: sequential /track, and open loop at 50% of that capacity, against
//      the JetStream floor.
// The load is a realistic screen_view (URL with UTM, title, referrer, two properties) from
// 512 devices (user-agent x client IP). Every figure is from this one run: the machine is
// shared, so compare ratios.
//
//   npx tsx bench/e2e.ts [--quick] [--seconds 8] [--start-rate 500] [--factor 1.4] [--no-write]
import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { TestEnv, spawnApp, ROOT, NATS_URL, sleep, type Credentials } from '../test/support/harness';
import { DEFAULT_SHARDS } from '../internal/config/config';
import { openLoop, percentile, sequential, type LoadResult } from './openloop';
import { stopChild } from '../test/support/private-services';
import { machineInfo, writeSection, type Machine } from './run';

export interface E2eOptions {
  quick: boolean;
  /** Seconds per open-loop step and per wrk run. */
  seconds: number;
  startRate: number;
  factor: number;
  maxSteps: number;
  connections: number;
  wrkConnections: number;
  log: (line: string) => void;
}

export function e2eOptions(argv: string[]): E2eOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      seconds: { type: 'string' },
      'start-rate': { type: 'string' },
      factor: { type: 'string' },
      'max-steps': { type: 'string' },
      connections: { type: 'string', default: '128' },
      'wrk-connections': { type: 'string', default: '100' },
      'no-write': { type: 'boolean', default: false },
    },
  });
  const quick = values.quick === true;
  return {
    quick,
    seconds: Number(values.seconds ?? (quick ? 4 : 8)),
    startRate: Number(values['start-rate'] ?? 500),
    factor: Number(values.factor ?? (quick ? 1.6 : 1.4)),
    maxSteps: Number(values['max-steps'] ?? (quick ? 6 : 12)),
    connections: Number(values.connections),
    wrkConnections: Number(values['wrk-connections']),
    log: (l) => console.error(l),
  };
}

// ---- the load: a realistic screen_view from 512 devices ----

const DEVICES = 512;
const UAS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.43 Mobile Safari/537.36',
  'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.2210.61',
  'Mozilla/5.0 (iPad; CPU OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Linux; Android 13; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Mobile Safari/537.36',
];
const REFERRERS = ['https://www.google.com/', 'https://t.co/abc', 'https://news.ycombinator.com/', '', 'https://duckduckgo.com/'];

function device(i: number) {
  return { ua: UAS[i % UAS.length]!, ip: `81.${2 + (i >> 8)}.${(i >> 4) % 16 + 60}.${(i % 16) + 10}` };
}

function screenView(i: number): string {
  const page = i % 37;
  return JSON.stringify({
    type: 'track',
    payload: {
      name: 'screen_view',
      properties: {
        __path: `https://shop.example/products/item-${page}?utm_source=newsletter&utm_medium=email&utm_campaign=winter-sale`,
        __title: `Item ${page} – Example Shop`,
        __referrer: REFERRERS[i % REFERRERS.length],
        plan: i % 3 === 0 ? 'pro' : 'free',
        cart_items: i % 5,
      },
    },
  });
}

/** The raw HTTP requests (one per device) for the open-loop generator. */
export function rawRequests(creds: Credentials | null): Buffer[] {
  return Array.from({ length: DEVICES }, (_, i) => {
    const body = screenView(i);
    const d = device(i);
    const head = [
      'POST /track HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json', `User-Agent: ${d.ua}`, `X-Client-Ip: ${d.ip}`,
      ...(creds ? [`service-client-id: ${creds.clientId}`, `service-client-secret: ${creds.clientSecret}`] : []),
      `Content-Length: ${Buffer.byteLength(body)}`,
    ];
    return Buffer.from(`${head.join('\r\n')}\r\n\r\n${body}`);
  });
}

/** The same requests as a wrk Lua script (round robin). */
function wrkScript(creds: Credentials | null): string {
  const esc = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
  const lines = ['local reqs = {}', 'init = function(args)'];
  for (let i = 0; i < DEVICES; i++) {
    const d = device(i);
    const h: Record<string, string> = { 'Content-Type': 'application/json', 'User-Agent': d.ua, 'X-Client-Ip': d.ip };
    if (creds) {
      h['service-client-id'] = creds.clientId;
      h['service-client-secret'] = creds.clientSecret;
    }
    const hs = Object.entries(h).map(([k, v]) => `["${esc(k)}"] = "${esc(v)}"`).join(', ');
    lines.push(`  reqs[${i + 1}] = wrk.format("POST", "/track", { ${hs} }, "${esc(screenView(i))}")`);
  }
  lines.push('end', 'local n = 0', 'request = function()', '  n = n % #reqs + 1', '  return reqs[n]', 'end');
  return lines.join('\n');
}

// ---- CPU accounting from /proc ----

export const TICK_US = 1e6 / Number(execSync('getconf CLK_TCK').toString().trim() || '100');
export function ticks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]);
  } catch {
    return 0;
  }
}
export const pidsOf = (name: string): number[] => {
  try {
    return execSync(`pgrep -x ${name}`).toString().trim().split('\n').map(Number).filter(Boolean);
  } catch {
    return [];
  }
};
interface Cpu {
  tidemark: number;
  postgres: number;
  nats: number;
  redis: number;
  generator: number;
}
interface CpuSnapshot {
  tidemark: number;
  /** Ticks per PostgreSQL backend of the benchmark's database (the machine's PostgreSQL is shared). */
  postgres: Map<number, number>;
  nats: number;
  redis: number;
  generator: number;
}

export async function cpuNow(tidemarkPid: number, env: TestEnv): Promise<CpuSnapshot> {
  const backends = await env.db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
  const sum = (pids: number[]) => pids.reduce((n, p) => n + ticks(p), 0);
  return {
    tidemark: ticks(tidemarkPid), postgres: new Map(backends.rows.map((r) => [r.pid, ticks(r.pid)])),
    nats: sum(pidsOf('nats-server')), redis: sum(pidsOf('redis-server')), generator: ticks(process.pid),
  };
}

/**
 * CPU seconds between two snapshots. PostgreSQL: the backends alive at the second, a backend
 * born between the two counted whole (a pool may open a connection for the work measured:
 * leaving it out made the same run read 0.1 s one time and 1 s the next); a backend that
 * exited between them is not seen, so the figure is a floor.
 */
export function cpuDelta(a: CpuSnapshot, b: CpuSnapshot): Cpu {
  const s = (t: number) => (t * TICK_US) / 1e6;
  let pg = 0;
  for (const [pid, t] of b.postgres) pg += t - (a.postgres.get(pid) ?? 0);
  return { tidemark: s(b.tidemark - a.tidemark), postgres: s(pg), nats: s(b.nats - a.nats), redis: s(b.redis - a.redis), generator: s(b.generator - a.generator) };
}

// ---- wrk, closed loop ----

interface WrkResult {
  rps: number;
  ok: number;
  non2xx: number;
  errors: number;
  p50: number;
  p99: number;
}

async function runWrk(url: string, seconds: number, connections: number, creds: Credentials | null): Promise<WrkResult> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tm-e2e-wrk-'));
  const script = path.join(dir, 'track.lua');
  writeFileSync(script, wrkScript(creds));
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = spawn('wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--latency', '-s', script, url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`wrk exited ${code}: ${err}`))));
  });
  rmSync(dir, { recursive: true, force: true });
  const num = (re: RegExp) => Number(re.exec(stdout)?.[1] ?? 0);
  const ms = (re: RegExp) => {
    const m = re.exec(stdout);
    if (!m) return NaN;
    const v = Number(m[1]);
    return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
  };
  const total = num(/(\d+) requests in/);
  const non2xx = num(/Non-2xx or 3xx responses: (\d+)/);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
  return {
    rps: num(/Requests\/sec:\s+([\d.]+)/), ok: total - non2xx, non2xx,
    errors: sock ? Number(sock[1]) + Number(sock[2]) + Number(sock[3]) + Number(sock[4]) : 0,
    p50: ms(/^\s+50%\s+([\d.]+)(us|ms|s)/m), p99: ms(/^\s+99%\s+([\d.]+)(us|ms|s)/m),
  };
}

const freePort = () => 12000 + Math.floor(Math.random() * 18000);

async function bareServer(): Promise<{ url: string; port: number; pid: number; close: () => Promise<void> }> {
  const port = freePort();
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/baseline-server.ts'), 'bare', '--port', String(port)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('listening')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`baseline exited with ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`, port, pid: child.pid!,
    close: () => new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    }),
  };
}

// ---- the JetStream floor ----

async function jetstreamFloor(count: number): Promise<{ p50: number; p99: number }> {
  const nc = await connect({ servers: NATS_URL, noAsyncTraces: true });
  const jsm = await jetstreamManager(nc);
  const name = `e2efloor_${process.pid}`;
  await jsm.streams.add({ name, subjects: [`${name}.>`], storage: StorageType.File, retention: RetentionPolicy.Limits, num_replicas: 1 });
  try {
    const js = jetstream(nc);
    // An op-sized message: what a lone /track publishes.
    const data = Buffer.from(`{"v":1,"ops":[${JSON.stringify({ kind: 'track', body: screenView(1), pad: 'x'.repeat(120) })}]}`);
    const lat: number[] = [];
    for (let i = 0; i < count + 100; i++) {
      const t0 = performance.now();
      await js.publish(`${name}.s`, data, { msgID: `${process.pid}-${i}` });
      if (i >= 100) lat.push(performance.now() - t0);
    }
    return { p50: percentile(lat, 50), p99: percentile(lat, 99) };
  } finally {
    await jsm.streams.delete(name).catch(() => {});
    await nc.close();
  }
}

// ---- one open-loop step ----

interface Step {
  rate: number;
  seconds: number;
  accepted: number;
  acceptedPerS: number;
  non2xx: number;
  errors: number;
  p50: number;
  p99: number;
  /** Every 202 readable in PostgreSQL within 2 s of the load stopping. */
  landed: boolean;
  /** Seconds from the load stopping to the last 202 readable (NaN: not within 20 s). */
  drainS: number;
  lagP95: number;
  lagMax: number;
  pass: boolean;
  cpu: Cpu;
}

/**
 * A fresh TestEnv with `npm start` as a user runs it (cmd/all, TIDEMARK_SHARDS unset, plus `extra`), for
 * `fn`; the process is stopped (SIGTERM) and the database dropped afterwards.
 */
export async function withNpmStart<T>(prefix: string, extra: Record<string, string>, fn: (env: TestEnv, app: Awaited<ReturnType<typeof spawnApp>>) => Promise<T>): Promise<T> {
  const env = await new TestEnv(prefix).setup();
  try {
    const app = await spawnApp(env, 'all', { TIDEMARK_SHARDS: '', LOG_LEVEL: 'warn', ...extra });
    try {
      return await fn(env, app);
    } finally {
      await stopChild(app.child, 'SIGTERM');
    }
  } finally {
    await env.teardown();
  }
}

export async function countStored(env: TestEnv, projectId: string): Promise<number> {
  const r = await env.db.query<{ n: number }>("SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = 'screen_view'", [projectId]);
  return r.rows[0]!.n;
}

async function step(env: TestEnv, port: number, pid: number, rate: number, o: E2eOptions): Promise<Step> {
  const projectId = await env.project({ name: `e2e ${rate}/s` });
  const creds = await env.client(projectId, 'write', 0);
  // Warm the client (secret verified and cached) outside the measured load.
  await sequential({ port, requests: rawRequests(creds).slice(0, 1), count: 1 });
  const holder: { live: LoadResult | null } = { live: null };
  /** (time, events readable) every 100 ms; the warm-up event is not counted. */
  const samples: [number, number][] = [];
  const oldest: number[] = [];
  const sample = async () => {
    const t0 = performance.now();
    const stored = (await countStored(env, projectId)) - 1;
    const t = (t0 + performance.now()) / 2;
    samples.push([t, stored]);
    const acks = holder.live?.okTimes ?? [];
    oldest.push(stored < acks.length ? t - acks[Math.max(0, stored)]! : 0);
    return stored;
  };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      await sleep(100);
      if (sampling && holder.live) await sample();
    }
  })();
  const before = await cpuNow(pid, env);
  const r = await openLoop({ port, requests: rawRequests(creds), rate, seconds: o.seconds, connections: o.connections, onStart: (x) => (holder.live = x) });
  sampling = false;
  await sampler;
  const stoppedAt = r.stoppedAt;
  let drainS = NaN;
  let landed = false;
  for (;;) {
    const stored = await sample();
    const since = (performance.now() - stoppedAt) / 1000;
    if (stored >= r.ok) {
      drainS = Math.max(0, since);
      landed = since <= 2;
      break;
    }
    if (since > 20) break;
    await sleep(50);
  }
  const cpu = cpuDelta(before, await cpuNow(pid, env));
  // Per-event lag, events matched in order: the k-th acknowledged event counts as readable at
  // the first sample that shows k events readable (exact if the workers wrote in ack order;
  // its mean is exact in any order). Resolution: the 100 ms sampling.
  const lags: number[] = [];
  const acks = r.okTimes;
  let at = 0;
  for (let k = 0; k < acks.length; k++) {
    while (at < samples.length && samples[at]![1] < k + 1) at++;
    lags.push(at < samples.length ? Math.max(0, samples[at]![0] - acks[k]!) : Infinity);
  }
  const lagP95 = percentile(lags, 95);
  const s: Step = {
    rate, seconds: o.seconds, accepted: r.ok, acceptedPerS: r.ok / o.seconds, non2xx: r.non2xx, errors: r.errors + r.unanswered,
    p50: percentile(r.latencies, 50), p99: percentile(r.latencies, 99), landed, drainS, lagP95, lagMax: Math.max(0, ...oldest), cpu,
    pass: false,
  };
  s.pass = s.non2xx === 0 && s.errors === 0 && s.landed && s.lagP95 < 1000;
  o.log(`  ${rate}/s: accepted ${Math.round(s.acceptedPerS)}/s, non-2xx ${s.non2xx}, errors ${s.errors}, p50 ${s.p50.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms, landed ${s.landed} (drain ${s.drainS.toFixed(2)} s), lag p95 ${Math.round(s.lagP95)} ms -> ${s.pass ? 'pass' : 'FAIL'}`);
  return s;
}

// ---- the run ----

export interface E2eResult {
  machine: Machine;
  options: Omit<E2eOptions, 'log'>;
  floor: { p50: number; p99: number };
  bare: WrkResult & { cpuUsPerReq: number };
  closed: WrkResult & { landed: boolean; drainS: number; cpuUsPerReq: number };
  steps: Step[];
  capacity: Step | null;
  seq: { p50: number; p99: number; count: number };
  half: { rate: number; p50: number; p99: number; non2xx: number } | null;
}

export async function runE2e(o: E2eOptions): Promise<E2eResult> {
  const machine = machineInfo();
  o.log(`e2e: ${o.seconds} s per step, ${machine.nproc} CPUs (${machine.cpu}), node ${machine.node}, load ${machine.load}`);
  const floor = await jetstreamFloor(o.quick ? 500 : 2000);
  o.log(`  JetStream publish-and-ack floor: p50 ${floor.p50.toFixed(3)} ms, p99 ${floor.p99.toFixed(3)} ms`);

  const bare = await bareServer();
  let bareResult: E2eResult['bare'];
  try {
    await runWrk(bare.url, 1, o.wrkConnections, null);
    const t0 = ticks(bare.pid);
    const w = await runWrk(bare.url, o.seconds, o.wrkConnections, null);
    bareResult = { ...w, cpuUsPerReq: ((ticks(bare.pid) - t0) * TICK_US) / Math.max(1, w.ok + w.non2xx) };
  } finally {
    await bare.close();
  }
  o.log(`  bare uWS under wrk: ${Math.round(bareResult.rps)} req/s`);

  const env = await new TestEnv('e2e').setup();
  // npm start as a user runs it (cmd/all: API + the worker role in its own thread; a new
  // stream, TIDEMARK_SHARDS unset: the default count).
  const app = await spawnApp(env, 'all', { TIDEMARK_SHARDS: '', LOG_LEVEL: 'warn' });
  const pid = app.child.pid!;
  try {
    // Closed loop under wrk, as for bare.
    const closedProject = await env.project({ name: 'e2e wrk' });
    const closedCreds = await env.client(closedProject, 'write', 0);
    await sequential({ port: app.port, requests: rawRequests(closedCreds), count: 50 });
    const c0 = ticks(pid);
    const w = await runWrk(app.url, o.seconds, o.wrkConnections, closedCreds);
    const cpuUsPerReq = ((ticks(pid) - c0) * TICK_US) / Math.max(1, w.ok + w.non2xx);
    const stopped = performance.now();
    let drainS = NaN;
    for (;;) {
      const stored = await countStored(env, closedProject);
      const since = (performance.now() - stopped) / 1000;
      if (stored >= w.ok + 50) {
        drainS = since;
        break;
      }
      if (since > 60) break;
      await sleep(100);
    }
    const closed = { ...w, landed: drainS <= 2, drainS, cpuUsPerReq };
    o.log(`  Tidemark (npm start) under wrk: ${Math.round(w.rps)} req/s, non-2xx ${w.non2xx}, drain ${drainS.toFixed(2)} s`);
    await sleep(2000);

    // Producer latency, sequential.
    const seqProject = await env.project({ name: 'e2e sequential' });
    const seqCreds = await env.client(seqProject, 'write', 0);
    const seqReqs = rawRequests(seqCreds);
    await sequential({ port: app.port, requests: seqReqs, count: 200 });
    const seqCount = o.quick ? 1000 : 3000;
    const sr = await sequential({ port: app.port, requests: seqReqs, count: seqCount });
    const seq = { p50: percentile(sr.latencies, 50), p99: percentile(sr.latencies, 99), count: seqCount };
    o.log(`  sequential /track: p50 ${seq.p50.toFixed(3)} ms, p99 ${seq.p99.toFixed(3)} ms`);

    // Open-loop steps.
    const steps: Step[] = [];
    let rate = o.startRate;
    let lastPass: number | null = null;
    let firstFail: number | null = null;
    for (let i = 0; i < o.maxSteps; i++) {
      let s = await step(env, app.port, pid, Math.round(rate), o);
      if (!s.pass) {
        // A shared machine has hiccups: a failed step is tried once more before it counts.
        steps.push(s);
        await sleep(2000);
        s = await step(env, app.port, pid, Math.round(rate), o);
      }
      steps.push(s);
      if (s.pass) lastPass = s.rate;
      else {
        firstFail = s.rate;
        break;
      }
      rate *= o.factor;
      await sleep(1000);
    }
    // One step between the last pass and the first failure (not in --quick).
    if (!o.quick && lastPass !== null && firstFail !== null && firstFail / lastPass > 1.15) {
      await sleep(3000);
      steps.push(await step(env, app.port, pid, Math.round((lastPass + firstFail) / 2), o));
    }
    const passing = steps.filter((s) => s.pass).sort((a, b) => b.rate - a.rate);
    const capacity = passing[0] ?? null;

    // Producer latency at 50% of capacity.
    let half: E2eResult['half'] = null;
    if (capacity) {
      await sleep(2000);
      const halfProject = await env.project({ name: 'e2e half' });
      const halfCreds = await env.client(halfProject, 'write', 0);
      await sequential({ port: app.port, requests: rawRequests(halfCreds).slice(0, 1), count: 1 });
      const hr = await openLoop({ port: app.port, requests: rawRequests(halfCreds), rate: Math.round(capacity.rate / 2), seconds: o.seconds, connections: o.connections });
      half = { rate: Math.round(capacity.rate / 2), p50: percentile(hr.latencies, 50), p99: percentile(hr.latencies, 99), non2xx: hr.non2xx + hr.errors + hr.unanswered };
      o.log(`  at 50% of capacity (${half.rate}/s): p50 ${half.p50.toFixed(2)} ms, p99 ${half.p99.toFixed(2)} ms`);
    }
    machine.loadAfter = os.loadavg().map((l) => l.toFixed(1)).join(' ');
    return { machine, options: { ...o, log: undefined } as unknown as Omit<E2eOptions, 'log'>, floor, bare: bareResult, closed, steps, capacity, seq, half };
  } finally {
    await new Promise<void>((resolve) => {
      if (app.child.exitCode !== null) return resolve();
      app.child.once('exit', () => resolve());
      app.child.kill('SIGTERM');
    });
    await env.teardown();
  }
}

// ---- the RESULTS.md section ----

const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '–');
const pct = (a: number, b: number) => `${((a / b) * 100).toFixed(0)}%`;

export function e2eMarkdown(r: E2eResult, command: string): string {
  const L: string[] = ['## End to end', ''];
  L.push(`Command: \`${command}\``, '');
  L.push(`Machine: ${r.machine.nproc} CPUs (\`nproc\`), ${r.machine.cpu}, Node ${r.machine.node}. Load average (1/5/15 min) before: ${r.machine.load}; after: ${r.machine.loadAfter ?? '?'}. Date: ${r.machine.date}. Everything on this one machine: Tidemark as \`npm start\` (cmd/all: API on the main thread, the worker role in a worker thread, TIDEMARK_SHARDS unset: ${DEFAULT_SHARDS} shards for its new stream), PostgreSQL, NATS JetStream, Redis, and the load generators. Load: POST /track, a ~400-byte screen_view (URL with UTM, title, referrer, two properties) from ${DEVICES} devices (user-agent x client IP), a client without a rate limit.`, '');
  const cap = r.capacity;
  L.push('| | requests/s | ratio to bare uWS |', '|---|---:|---:|');
  L.push(`| bare uWS (bench/baseline-server.ts: 202 after reading the body), wrk ${r.options.wrkConnections} connections | ${f0(r.bare.rps)} | 100% |`);
  L.push(`| Tidemark \`npm start\`, wrk ${r.options.wrkConnections} connections (closed loop): every 202 readable ${r.closed.landed ? 'within 2 s' : `**after ${f2(r.closed.drainS)} s**`} of the load stopping; non-2xx ${f0(r.closed.non2xx)} | ${f0(r.closed.rps)} | **${pct(r.closed.rps, r.bare.rps)}** |`);
  L.push(`| Tidemark \`npm start\`, open loop: the highest offered rate at which every 202 was readable within 2 s and lag p95 < 1 s | ${cap ? f0(cap.acceptedPerS) : 'none passed'} | **${cap ? pct(cap.acceptedPerS, r.bare.rps) : '–'}** |`);
  L.push('');
  L.push(`Server CPU per request (whole process, all threads): bare uWS ${r.bare.cpuUsPerReq.toFixed(1)} µs; Tidemark \`npm start\` under wrk ${r.closed.cpuUsPerReq.toFixed(1)} µs (API and worker thread together).`, '');
  L.push(`**Open-loop steps** (${r.options.seconds} s each, ${r.options.connections} keep-alive connections, latency from each request's scheduled send time; lag: from each 202 until the event is readable in PostgreSQL, events matched in acknowledgement order against the count of readable events sampled every 100 ms (exact when written in that order; its mean is exact in any order); oldest: the largest age of the oldest acknowledged event not yet readable; a failed step is run once more before the steps stop):`, '');
  L.push('| offered/s | accepted/s | non-2xx | errors | p50 ms | p99 ms | every 202 readable within 2 s | drain s | lag p95 ms | oldest max ms | CPU µs/event: Tidemark | PostgreSQL | NATS | Redis | generator | pass |');
  L.push('|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const s of [...r.steps].sort((a, b) => a.rate - b.rate)) {
    const per = (x: number) => ((x * 1e6) / Math.max(1, s.accepted)).toFixed(0);
    L.push(`| ${f0(s.rate)} | ${f0(s.acceptedPerS)} | ${s.non2xx} | ${s.errors} | ${f2(s.p50)} | ${f2(s.p99)} | ${s.landed ? 'yes' : '**no**'} | ${f2(s.drainS)} | ${f0(s.lagP95)} | ${f0(s.lagMax)} | ${per(s.cpu.tidemark)} | ${per(s.cpu.postgres)} | ${per(s.cpu.nats)} | ${per(s.cpu.redis)} | ${per(s.cpu.generator)} | ${s.pass ? 'yes' : '**no**'} |`);
  }
  L.push('');
  L.push('**Producer latency** (POST /track until its 202; JetStream floor: sequential publish-and-await-ack of an op-sized message from Node, same server, same run):', '');
  L.push('| | p50 ms | p99 ms | aim |', '|---|---:|---:|---|');
  L.push(`| JetStream publish-and-ack floor | ${r.floor.p50.toFixed(3)} | ${r.floor.p99.toFixed(3)} | |`);
  const seqOk = r.seq.p50 <= r.floor.p50 + 0.6 && r.seq.p99 <= 5;
  L.push(`| /track sequential (one connection, ${r.seq.count} requests) | ${r.seq.p50.toFixed(3)} | ${r.seq.p99.toFixed(3)} | p50 ≤ floor + 0.6 ms (${(r.floor.p50 + 0.6).toFixed(2)}), p99 ≤ 5 ms: **${seqOk ? 'met' : 'not met'}** |`);
  if (r.half) L.push(`| /track open loop at 50% of capacity (${f0(r.half.rate)}/s; non-2xx ${r.half.non2xx}) | ${f2(r.half.p50)} | ${f2(r.half.p99)} | p99 ≤ 20 ms: **${r.half.p99 <= 20 ? 'met' : 'not met'}** |`);
  L.push('');
  if (cap) {
    const per = (x: number) => (x > 0 ? f0(cap.accepted / x) : '–');
    L.push(`Capacity model from the capacity step (${f0(cap.rate)}/s; events per CPU-second of each part, all sharing ${r.machine.nproc} cores): Tidemark process ${per(cap.cpu.tidemark)}, PostgreSQL ${per(cap.cpu.postgres)}, NATS ${per(cap.cpu.nats)}, Redis ${per(cap.cpu.redis)}. PostgreSQL: the backends connected to the benchmark's database at the step's start and end (WAL writer, checkpointer and other shared processes not counted); NATS and Redis: the whole servers, which other work on a shared machine may use too.`, '');
  }
  return L.join('\n');
}

if (process.argv[1] && /bench[\\/]e2e\.ts$/.test(process.argv[1])) {
  const argv = process.argv.slice(2);
  const o = e2eOptions(argv);
  runE2e(o).then(
    (r) => {
      const md = e2eMarkdown(r, `npx tsx bench/e2e.ts${argv.length ? ` ${argv.filter((a) => a !== '--no-write').join(' ')}` : ''}`);
      process.stdout.write(`${md}\n`);
      if (!argv.includes('--no-write')) writeSection('End to end', md);
      process.exit(0);
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
