// Pipeline lag benchmark (the aim: the worker is not the bottleneck of the pipeline; lag p95
// under one second at a steady load). Two phases, Tidemark in child processes
// (the production entry points, cmd/api and cmd/worker), the load and the measuring here:
//
//   1. Worker throughput: a backlog of N queued events (the batcher's message format,
//      256 ops per message, realistic URLs, referrers, user agents and IPs) is put in the
//      JetStream stream with no worker running; then one worker starts and the time until
//      every event row is in PostgreSQL gives events/s through enrich + sessionize + write.
//   2. Lag at a steady load: an api and a worker process; POST /track at a fixed rate
//      (open loop) from a pool of devices; for every 202 the time until the device's
//      session row counts that event (sessions.event_count, written in the same
//      transaction as the event) — polled every 20 ms — is its lag.
//
//   npx tsx bench/lag.ts [--events 50000] [--rate 300] [--seconds 30] [--shards 16] [--quick] [--no-write]
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { ChildProcess } from 'node:child_process';
import { Bus, shardOf } from '../internal/bus/bus';
import type { QueuedTrack } from '../internal/model/event';
import { TestEnv, spawnApp, NATS_URL, type Credentials } from '../test/support/harness';
import { barChartSvg, machineInfo, writeSection, writeChart, type Machine } from './run';

export interface LagOptions {
  /** Backlog size of phase 1. */
  events: number;
  /** Offered load of phase 2, requests (events) per second. */
  rate: number;
  /** Duration of phase 2's measured load. */
  seconds: number;
  shards: number;
  /** Devices of phase 2's load. */
  devices: number;
  log?: (line: string) => void;
}

export interface Percentiles {
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

export interface LagResult {
  machine: Machine;
  options: Omit<LagOptions, 'log'>;
  throughput: {
    events: number;
    /** From the worker's start ('tidemark started') to the last event row. */
    seconds: number;
    eventsPerSecond: number;
    /** From the first committed event to the last: the drain rate once running. */
    drainSeconds: number;
    drainEventsPerSecond: number;
    batches: number;
    avgBatchOps: number;
    avgCommitMs: number;
    workerCpu: number;
  };
  steady: {
    offeredRate: number;
    seconds: number;
    sent: number;
    accepted: number;
    refused: number;
    achievedRate: number;
    lagMs: Percentiles;
    measured: number;
    unresolved: number;
    maxConsumerLag: number;
    avgBatchOps: number;
    avgCommitMs: number;
    /** CPU-seconds per second of each process during the load (1.0 = one core). */
    cpu: { api: number; worker: number };
  };
}

const UAS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36',
  'Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0',
  'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
];
const REFERRERS = ['', '', '', 'https://www.google.com/', 'https://news.ycombinator.com/', 'https://t.co/abc', 'https://duckduckgo.com/'];
const PATHS = ['/', '/pricing', '/docs', '/docs/getting-started', '/blog/launch', '/signup', '/about', '/changelog'];

/** A public-looking IPv4 address per device (geo lookups hit the real database). */
const ipOf = (i: number) => `${[81, 62, 151, 185, 93, 24, 73, 203][i % 8]}.${(i * 7) % 250}.${(i * 13) % 250}.${1 + ((i * 29) % 250)}`;

function pct(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** utime + stime of a process, seconds. */
function cpuSeconds(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // CLK_TCK is 100 on Linux
  } catch {
    return 0;
  }
}

/** Sums of a few series from a /metrics page (names without labels are summed over labels). */
async function promSums(url: string, names: string[]): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const name = line.split(/[{ ]/, 1)[0]!;
    if (name in out) out[name]! += Number(line.slice(line.lastIndexOf(' ') + 1)) || 0;
  }
  return out;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000).unref())]);
  if (child.exitCode === null) child.kill('SIGKILL');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function countEvents(env: TestEnv, projectId: string): Promise<number> {
  const r = await env.db.query(`SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name NOT IN ('session_start', 'session_end')`, [projectId]);
  return r.rows[0].n;
}

// ---- phase 1: worker throughput on a backlog ----

async function throughputPhase(env: TestEnv, o: LagOptions): Promise<LagResult['throughput']> {
  const log = o.log ?? (() => {});
  const projectId = await env.project({ name: 'Lag backlog', timezone: 'UTC' });
  const bus = await Bus.connect({ url: NATS_URL, namespace: env.namespace, shards: o.shards, maxAgeHours: 24 });
  await bus.ensureStream();
  const devices = Math.max(1, Math.round(o.events / 8)); // ~8 events per device
  const deviceIds = Array.from({ length: devices }, () => randomBytes(16).toString('hex'));
  const start = Date.now() - o.events; // one event per ms, in time order, ending now
  const bySubject = new Map<string, string[]>();
  for (let i = 0; i < o.events; i++) {
    const d = (i * 7919) % devices;
    const deviceId = deviceIds[d]!;
    const at = new Date(start + i).toISOString();
    const view = i % 10 < 7;
    const op: QueuedTrack = {
      kind: 'track', id: randomUUID(), projectId, deviceId, receivedAt: at, name: view ? 'screen_view' : ['click', 'signup', 'purchase'][i % 3]!,
      profileId: deviceId, createdAt: at, properties: view ? {} : { plan: ['free', 'pro'][i % 2], value: i % 100 }, groups: [],
      url: `https://bench.example${PATHS[i % PATHS.length]}${i % 9 === 0 ? '?utm_source=newsletter&utm_medium=email' : ''}`,
      title: 'Bench', referrer: REFERRERS[d % REFERRERS.length] || null, ip: ipOf(d), userAgent: UAS[d % UAS.length]!,
    };
    const subject = bus.subjectFor(projectId, shardOf(deviceId, o.shards));
    let list = bySubject.get(subject);
    if (!list) bySubject.set(subject, (list = []));
    list.push(JSON.stringify(op));
  }
  const t0 = performance.now();
  const publishes: Promise<unknown>[] = [];
  for (const [subject, ops] of bySubject) {
    for (let i = 0; i < ops.length; i += 256) {
      publishes.push(bus.publish(subject, Buffer.from(`{"v":1,"ops":[${ops.slice(i, i + 256).join(',')}]}`), randomUUID()));
    }
  }
  await Promise.all(publishes);
  await bus.drainAndClose();
  log(`  backlog: ${o.events} events of ${devices} devices in ${publishes.length} messages (${((performance.now() - t0) / 1000).toFixed(1)} s to publish)`);

  const worker = await spawnApp(env, 'worker', { TIDEMARK_SHARDS: String(o.shards), LOG_LEVEL: 'info' });
  const started = performance.now();
  const cpu0 = cpuSeconds(worker.child.pid);
  const m0 = await promSums(worker.url, ['tidemark_worker_batch_ops_count', 'tidemark_worker_batch_ops_sum', 'tidemark_worker_commit_duration_seconds_sum']);
  let first = 0;
  let n = 0;
  const deadline = Date.now() + 15 * 60_000;
  while (n < o.events && Date.now() < deadline) {
    n = await countEvents(env, projectId);
    if (n > 0 && !first) first = performance.now();
    if (n < o.events) await sleep(100);
  }
  const end = performance.now();
  const cpu = cpuSeconds(worker.child.pid) - cpu0;
  const m1 = await promSums(worker.url, ['tidemark_worker_batch_ops_count', 'tidemark_worker_batch_ops_sum', 'tidemark_worker_commit_duration_seconds_sum']);
  await stop(worker.child);
  if (n < o.events) throw new Error(`worker wrote ${n} of ${o.events} events in 15 minutes`);
  const batches = m1.tidemark_worker_batch_ops_count! - m0.tidemark_worker_batch_ops_count!;
  const seconds = (end - started) / 1000;
  const drainSeconds = (end - first) / 1000;
  const r = {
    events: o.events, seconds, eventsPerSecond: o.events / seconds, drainSeconds, drainEventsPerSecond: o.events / Math.max(drainSeconds, 0.001),
    batches, avgBatchOps: (m1.tidemark_worker_batch_ops_sum! - m0.tidemark_worker_batch_ops_sum!) / Math.max(1, batches),
    avgCommitMs: ((m1.tidemark_worker_commit_duration_seconds_sum! - m0.tidemark_worker_commit_duration_seconds_sum!) / Math.max(1, batches)) * 1000,
    workerCpu: cpu / seconds,
  };
  log(`  worker: ${Math.round(r.eventsPerSecond)} events/s from start (${r.seconds.toFixed(1)} s), ${Math.round(r.drainEventsPerSecond)} events/s draining; ${batches} batches of ${r.avgBatchOps.toFixed(0)} ops, commit ${r.avgCommitMs.toFixed(1)} ms avg; CPU ${r.workerCpu.toFixed(2)}`);
  return r;
}

// ---- phase 2: lag at a steady load ----

async function steadyPhase(env: TestEnv, o: LagOptions): Promise<LagResult['steady']> {
  const log = o.log ?? (() => {});
  const projectId = await env.project({ name: 'Lag steady', timezone: 'UTC' });
  const writer: Credentials = await env.client(projectId, 'write');
  const extra = { TIDEMARK_SHARDS: String(o.shards), LOG_LEVEL: 'info' };
  const api = await spawnApp(env, 'api', extra);
  const worker = await spawnApp(env, 'worker', extra);
  try {
    const deadline = Date.now() + 30_000;
    while ((await promSums(worker.url, ['tidemark_worker_shards_owned'])).tidemark_worker_shards_owned! < o.shards) {
      if (Date.now() > deadline) throw new Error('worker did not take every shard');
      await sleep(200);
    }
    const bodies = PATHS.map((p, i) => JSON.stringify({ type: 'track', payload: { name: 'screen_view', properties: { __path: `https://lag.example${p}`, __title: `Page ${i}` } } }));
    const headers = (d: number) => ({
      'content-type': 'application/json', 'service-client-id': writer.clientId, 'service-client-secret': writer.clientSecret,
      'user-agent': UAS[d % 5]!, 'x-client-ip': ipOf(d + 100_000),
    });

    // Per device: events sent (in send order) and events seen in its sessions.
    const sentPerDevice = new Map<string, number>();
    const pending = new Map<string, { n: number; at: number }[]>();
    const lags: number[] = [];
    let sent = 0;
    let accepted = 0;
    let refused = 0;
    let measuring = false;
    const inflight = new Set<Promise<void>>();

    const send = (d: number) => {
      sent++;
      const p = fetch(`${api.url}/track`, { method: 'POST', headers: headers(d), body: bodies[(d + sent) % bodies.length] })
        .then(async (res) => {
          const at = performance.now();
          const body = (await res.json().catch(() => ({}))) as { deviceId?: string };
          if (res.status !== 202 || !body.deviceId) return void refused++;
          accepted++;
          const n = (sentPerDevice.get(body.deviceId) ?? 0) + 1;
          sentPerDevice.set(body.deviceId, n);
          if (!measuring) return;
          let list = pending.get(body.deviceId);
          if (!list) pending.set(body.deviceId, (list = []));
          list.push({ n, at });
        }, () => void refused++)
        .finally(() => inflight.delete(p));
      inflight.add(p);
    };

    // The poller: sessions of the devices with events waiting to be seen.
    let polling = true;
    let stopPollingAt = Infinity;
    const poller = (async () => {
      while (polling || pending.size) {
        const devices = [...pending.keys()];
        if (devices.length) {
          const r = await env.db.query<{ device_id: string; n: number }>(
            'SELECT device_id, sum(event_count)::int AS n FROM sessions WHERE project_id = $1 AND device_id = ANY($2::text[]) GROUP BY device_id',
            [projectId, devices],
          );
          const now = performance.now();
          for (const row of r.rows) {
            const list = pending.get(row.device_id);
            if (!list) continue;
            while (list.length && list[0]!.n <= row.n) lags.push(now - list.shift()!.at);
            if (!list.length) pending.delete(row.device_id);
          }
        }
        await sleep(20);
        if (!polling && Date.now() > stopPollingAt) break;
      }
    })();

    // Consumer lag, sampled once a second from the worker.
    let maxConsumerLag = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const s = await promSums(worker.url, ['tidemark_jetstream_consumer_lag']).catch(() => null);
        if (s && measuring) maxConsumerLag = Math.max(maxConsumerLag, s.tidemark_jetstream_consumer_lag!);
        await sleep(1000);
      }
    })();

    // Open-loop load: every 10 ms, send what the schedule says is due.
    const run = async (seconds: number) => {
      const t0 = performance.now();
      let due = 0;
      while (performance.now() - t0 < seconds * 1000) {
        const target = Math.floor(((performance.now() - t0) / 1000) * o.rate);
        for (; due < target; due++) send(Math.floor(Math.random() * o.devices));
        await sleep(10);
      }
    };
    await run(Math.min(3, o.seconds)); // warm-up: connections, caches, sessions loaded
    await Promise.all([...inflight]);
    const m0 = await promSums(worker.url, ['tidemark_worker_batch_ops_count', 'tidemark_worker_batch_ops_sum', 'tidemark_worker_commit_duration_seconds_sum']);
    const cpu0 = { api: cpuSeconds(api.child.pid), worker: cpuSeconds(worker.child.pid) };
    const sent0 = sent;
    const accepted0 = accepted;
    const refused0 = refused;
    measuring = true;
    const t0 = performance.now();
    await run(o.seconds);
    const elapsed = (performance.now() - t0) / 1000;
    const cpu1 = { api: cpuSeconds(api.child.pid), worker: cpuSeconds(worker.child.pid) };
    await Promise.all([...inflight]);
    measuring = false;
    const measured = accepted - accepted0;
    stopPollingAt = Date.now() + 30_000;
    polling = false;
    await poller;
    sampling = false;
    await sampler;
    const m1 = await promSums(worker.url, ['tidemark_worker_batch_ops_count', 'tidemark_worker_batch_ops_sum', 'tidemark_worker_commit_duration_seconds_sum']);
    const unresolved = [...pending.values()].reduce((a, l) => a + l.length, 0);
    lags.sort((a, b) => a - b);
    const batches = m1.tidemark_worker_batch_ops_count! - m0.tidemark_worker_batch_ops_count!;
    const r: LagResult['steady'] = {
      offeredRate: o.rate, seconds: elapsed, sent: sent - sent0, accepted: measured, refused: refused - refused0,
      achievedRate: measured / elapsed,
      lagMs: { p50: pct(lags, 50), p95: pct(lags, 95), p99: pct(lags, 99), max: lags[lags.length - 1] ?? NaN },
      measured: lags.length, unresolved, maxConsumerLag,
      avgBatchOps: (m1.tidemark_worker_batch_ops_sum! - m0.tidemark_worker_batch_ops_sum!) / Math.max(1, batches),
      avgCommitMs: ((m1.tidemark_worker_commit_duration_seconds_sum! - m0.tidemark_worker_commit_duration_seconds_sum!) / Math.max(1, batches)) * 1000,
      cpu: { api: (cpu1.api - cpu0.api) / elapsed, worker: (cpu1.worker - cpu0.worker) / elapsed },
    };
    log(`  steady: ${Math.round(r.achievedRate)}/${o.rate} events/s for ${elapsed.toFixed(1)} s; lag p50 ${r.lagMs.p50.toFixed(0)} ms, p95 ${r.lagMs.p95.toFixed(0)} ms, p99 ${r.lagMs.p99.toFixed(0)} ms, max ${r.lagMs.max.toFixed(0)} ms; ${r.unresolved} unresolved, ${r.refused} refused; CPU api ${r.cpu.api.toFixed(2)}, worker ${r.cpu.worker.toFixed(2)}`);
    return r;
  } finally {
    await stop(worker.child);
    await stop(api.child);
  }
}

export async function runLag(o: LagOptions): Promise<LagResult> {
  const machine = machineInfo();
  const env = await new TestEnv('benchlag').setup();
  try {
    o.log?.(`pipeline lag: backlog ${o.events} events, then ${o.rate} events/s for ${o.seconds} s; ${o.shards} shards`);
    const throughput = await throughputPhase(env, o);
    const steady = await steadyPhase(env, o);
    const { log: _log, ...options } = o;
    return { machine: { ...machine, loadAfter: machineInfo().load }, options, throughput, steady };
  } finally {
    await env.teardown();
  }
}

const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');

/** The "## Pipeline lag" section of bench/RESULTS.md. */
export function lagMarkdown(r: LagResult, command: string, chart?: string): string {
  const t = r.throughput;
  const s = r.steady;
  const L: string[] = ['## Pipeline lag', ''];
  L.push(`Command: \`${command}\``, '');
  L.push(`Machine: ${r.machine.nproc} CPUs, ${r.machine.cpu}, Node ${r.machine.node}; PostgreSQL, Redis and NATS on the same machine. Load average before: ${r.machine.load}; after: ${r.machine.loadAfter ?? '?'}. Date: ${r.machine.date}. ${r.options.shards} shards; Tidemark as \`cmd/api\` and \`cmd/worker\` child processes (LOG_LEVEL=info).`, '');
  L.push('**Worker throughput** (enrich + sessionize + write): a backlog of queued events in JetStream, no worker running; one worker starts and writes them all.', '');
  L.push('| events | from worker start | events/s | draining events/s | batches | ops per batch | commit ms (avg) | worker CPU |', '|---:|---:|---:|---:|---:|---:|---:|---:|');
  L.push(`| ${f0(t.events)} | ${t.seconds.toFixed(1)} s | **${f0(t.eventsPerSecond)}** | ${f0(t.drainEventsPerSecond)} | ${f0(t.batches)} | ${t.avgBatchOps.toFixed(0)} | ${t.avgCommitMs.toFixed(1)} | ${t.workerCpu.toFixed(2)} |`, '');
  L.push(`**Lag at a steady load**: POST /track (screen views from ${f0(r.options.devices)} devices) at ${f0(s.offeredRate)} events/s, open loop, for ${s.seconds.toFixed(0)} s after a warm-up; lag = from the 202 to the device's session row counting the event (polled every 20 ms, so values are up to ~20 ms high).`, '');
  L.push('| offered/s | accepted/s | refused | lag p50 ms | lag p95 ms | lag p99 ms | lag max ms | measured | unresolved | max consumer lag | ops per batch | commit ms | CPU api | CPU worker |', '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  L.push(`| ${f0(s.offeredRate)} | ${f0(s.achievedRate)} | ${f0(s.refused)} | ${f0(s.lagMs.p50)} | **${f0(s.lagMs.p95)}** | ${f0(s.lagMs.p99)} | ${f0(s.lagMs.max)} | ${f0(s.measured)} | ${f0(s.unresolved)} | ${f0(s.maxConsumerLag)} | ${s.avgBatchOps.toFixed(0)} | ${s.avgCommitMs.toFixed(1)} | ${s.cpu.api.toFixed(2)} | ${s.cpu.worker.toFixed(2)} |`, '');
  const verdict = s.lagMs.p95 < 1000 && s.unresolved === 0 ? 'met' : '**not met**';
  L.push(`Aim: lag p95 under 1 s at a steady load — ${verdict} (p95 ${f0(s.lagMs.p95)} ms at ${f0(s.achievedRate)} events/s). One worker process writes ${f0(t.eventsPerSecond)} events/s; compare with the API's ingest rate in the Ingest section to see which side is the bottleneck.`);
  if (chart) L.push('', `![pipeline lag](${chart})`);
  L.push('');
  return L.join('\n');
}

/** Two charts' worth of bars: lag percentiles (ms). */
export function lagChart(r: LagResult): string {
  const s = r.steady;
  return barChartSvg({
    title: `Pipeline lag at ${f0(s.achievedRate)} events/s (202 → session row); worker ${f0(r.throughput.eventsPerSecond)} events/s`,
    unit: 'ms',
    bars: [
      { label: 'p50', value: s.lagMs.p50 },
      { label: 'p95', value: s.lagMs.p95 },
      { label: 'p99', value: s.lagMs.p99 },
      { label: 'max', value: s.lagMs.max },
    ],
    threshold: { value: 1000, label: 'aim: p95 < 1 s' },
  });
}

export function lagOptions(argv: string[]): LagOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      events: { type: 'string' }, rate: { type: 'string' }, seconds: { type: 'string' }, shards: { type: 'string', default: '16' },
      devices: { type: 'string', default: '2000' }, quick: { type: 'boolean', default: false }, 'no-write': { type: 'boolean', default: false },
    },
    allowPositionals: false,
    strict: false,
  });
  const q = values.quick === true;
  return {
    events: Number(values.events ?? (q ? 5000 : 50_000)),
    rate: Number(values.rate ?? (q ? 100 : 300)),
    seconds: Number(values.seconds ?? (q ? 5 : 30)),
    shards: Number(values.shards ?? 16),
    devices: Number(values.devices ?? 2000),
  };
}

if (process.argv[1] && /bench[\\/]lag\.ts$/.test(process.argv[1])) {
  const argv = process.argv.slice(2);
  const o = lagOptions(argv);
  const r = await runLag({ ...o, log: (l) => console.error(l) });
  const write = !argv.includes('--no-write');
  const chart = write ? writeChart('lag.svg', lagChart(r)) : undefined;
  const md = lagMarkdown(r, `npx tsx bench/lag.ts${argv.length ? ` ${argv.join(' ')}` : ''}`, chart);
  process.stdout.write(`${md}\n`);
  console.log(`BENCH_RESULT ${JSON.stringify({ bench: 'lag', ...r })}`);
  if (write) writeSection('Pipeline lag', md);
  process.exit(0);
}
