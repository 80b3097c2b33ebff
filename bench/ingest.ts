// Ingest benchmark: Tidemark's POST /track against two baselines on the same machine, in one
// run, with the same load (autocannon in this process, in a worker thread; every server in a
// process of its own, so its CPU is read from /proc/<pid>, all its threads):
//   1. bare uWebSockets.js answering 202 after reading the body (the ceiling), on one thread
//      and on --threads threads (bench/baseline-server.ts),
//   2. uWS + one awaited JetStream publish per request (the naive durable design),
//   3. Tidemark's API (npm run api, worker role off) with API_THREADS=1 and =--threads, then
//      with the worker in the same process, then (diagnostic) with the client's secret hashed
//      cheaply, to isolate auth's share.
// Afterwards every 202 is checked for durability: messages in the JetStream stream and the
// ops inside them vs the number of 2xx answers.
//
//   npx tsx bench/ingest.ts [--seconds 10] [--connections 50] [--threads 2] [--no-worker-run] [--no-diagnostic] [--no-write]
import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, scryptSync } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, StorageType, RetentionPolicy } from '@nats-io/jetstream';
import { decodeBatch } from '../internal/bus/message';
import { TestEnv, spawnApp, ROOT, NATS_URL } from '../test/support/harness';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    threads: { type: 'string', default: '2' },
    load: { type: 'string' },
    'no-worker-run': { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    'no-diagnostic': { type: 'boolean', default: false },
  },
});
const SECONDS = Number(args.seconds);
const CONNECTIONS = Number(args.connections);
const THREADS = Number(args.threads);
/** The load generator: wrk (C, one thread) when installed, else autocannon (Node, one worker thread). */
const LOAD: 'wrk' | 'autocannon' = (args.load as 'wrk' | 'autocannon' | undefined) ?? (existsSync('/usr/bin/wrk') ? 'wrk' : 'autocannon');
if (LOAD !== 'wrk' && LOAD !== 'autocannon') throw new Error('--load wrk|autocannon');

const UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
const DEVICES = 64;

/** The same 64 requests (64 devices: 64 client IPs) for every target. */
function requestsFor(headers: Record<string, string>) {
  return Array.from({ length: DEVICES }, (_, i) => ({
    method: 'POST' as const,
    path: '/track',
    headers: { 'content-type': 'application/json', 'user-agent': UA, 'x-client-ip': `81.2.${i >> 4}.${(i % 16) + 10}`, ...headers },
    body: JSON.stringify({
      type: 'track',
      payload: { name: 'screen_view', properties: { __path: `https://bench.example/page/${i % 8}?utm_source=bench`, __title: 'Bench page', plan: 'pro', i } },
    }),
  }));
}


// ---- CPU accounting from /proc (Linux): utime + stime in clock ticks ----
const TICK_US = 1e6 / Number(execSync('getconf CLK_TCK').toString().trim() || '100');
function ticks(statPath: string): number {
  try {
    const stat = readFileSync(statPath, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]); // fields 14 and 15 of stat(5), counted after the comm field
  } catch {
    return 0;
  }
}
const pidOf = (name: string): number | null => {
  try {
    return Number(execSync(`pgrep -x ${name}`).toString().trim().split('\n')[0]) || null;
  } catch {
    return null;
  }
};
const NATS_PID = pidOf('nats-server');
const REDIS_PID = pidOf('redis-server');
function cpuSnapshot(serverPid: number) {
  return {
    server: ticks(`/proc/${serverPid}/stat`),
    nats: NATS_PID ? ticks(`/proc/${NATS_PID}/stat`) : 0,
    redis: REDIS_PID ? ticks(`/proc/${REDIS_PID}/stat`) : 0,
    load: ticks('/proc/self/stat'),
  };
}

interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** CPU ticks of the load generator during the run (wrk is a child process; autocannon runs in this one). */
  loadTicks: number | null;
}

interface Measured extends Omit<LoadResult, 'loadTicks'> {
  target: string;
  /** 2xx answers of the 1 s warm-up (their ops are in the stream too). */
  warmupOk: number;
  /** CPU microseconds per answered request: the server's process (all its threads), nats-server, redis-server, the load generator. */
  cpuUs: { server: number; nats: number; redis: number; load: number };
}

const esc = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"');

/** A wrk Lua script sending the same 64 requests as autocannon (round robin). */
function wrkScript(headers: Record<string, string>): string {
  const reqs = requestsFor(headers);
  // wrk.format needs wrk's host (for the Host header), set by the time init() runs.
  const lines = ['local reqs = {}', 'init = function(args)'];
  reqs.forEach((r, i) => {
    const hs = Object.entries(r.headers).map(([k, v]) => `["${esc(k)}"] = "${esc(v)}"`).join(', ');
    lines.push(`  reqs[${i + 1}] = wrk.format("POST", "${r.path}", { ${hs} }, "${esc(r.body)}")`);
  });
  lines.push('end', 'local n = 0', 'request = function()', '  n = n % #reqs + 1', '  return reqs[n]', 'end');
  return lines.join('\n');
}

/** Runs wrk (one thread) under /usr/bin/time for its CPU; parses its summary. */
async function runWrk(url: string, seconds: number, headers: Record<string, string>): Promise<LoadResult> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tm-wrk-'));
  const script = path.join(dir, 'track.lua');
  writeFileSync(script, wrkScript(headers));
  const out = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn('/usr/bin/time', ['-f', 'CPU %U %S', 'wrk', '-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', script, url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve({ stdout, stderr }) : reject(new Error(`wrk exited ${code}: ${stderr}`))));
  });
  rmSync(dir, { recursive: true, force: true });
  const num = (re: RegExp, text = out.stdout) => Number(re.exec(text)?.[1] ?? 0);
  const ms = (re: RegExp) => {
    const m = re.exec(out.stdout);
    if (!m) return NaN;
    const v = Number(m[1]);
    return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
  };
  const total = num(/(\d+) requests in/);
  const non2xx = num(/Non-2xx or 3xx responses: (\d+)/);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out.stdout);
  const cpu = /CPU ([\d.]+) ([\d.]+)/.exec(out.stderr);
  return {
    rps: num(/Requests\/sec:\s+([\d.]+)/),
    p50: ms(/^\s+50%\s+([\d.]+)(us|ms|s)/m),
    p99: ms(/^\s+99%\s+([\d.]+)(us|ms|s)/m),
    ok: total - non2xx,
    non2xx,
    errors: sock ? Number(sock[1]) + Number(sock[2]) + Number(sock[3]) : 0,
    timeouts: sock ? Number(sock[4]) : 0,
    loadTicks: cpu ? ((Number(cpu[1]) + Number(cpu[2])) * 1e6) / TICK_US : null,
  };
}

async function runAutocannon(url: string, seconds: number, headers: Record<string, string>): Promise<LoadResult> {
  const r = await autocannon({ url, connections: CONNECTIONS, duration: seconds, requests: requestsFor(headers), workers: 1 });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, ok: r['2xx'], non2xx: r.non2xx, errors: r.errors, timeouts: r.timeouts, loadTicks: null };
}

const runLoad = (url: string, seconds: number, headers: Record<string, string>) => (LOAD === 'wrk' ? runWrk(url, seconds, headers) : runAutocannon(url, seconds, headers));

async function measure(target: string, url: string, serverPid: number, headers: Record<string, string> = {}): Promise<Measured> {
  // A short warm-up (JIT, caches, connections), not counted.
  const warm = await runLoad(url, 1, headers);
  const before = cpuSnapshot(serverPid);
  const r = await runLoad(url, SECONDS, headers);
  const after = cpuSnapshot(serverPid);
  const answered = Math.max(1, r.ok + r.non2xx);
  const perReq = (k: keyof typeof before) => ((after[k] - before[k]) * TICK_US) / answered;
  const m: Measured = {
    target,
    rps: r.rps,
    p50: r.p50,
    p99: r.p99,
    ok: r.ok,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    warmupOk: warm.ok,
    cpuUs: { server: perReq('server'), nats: perReq('nats'), redis: perReq('redis'), load: r.loadTicks !== null ? (r.loadTicks * TICK_US) / answered : perReq('load') },
  };
  console.error(`  ${target}: ${Math.round(m.rps)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms, 2xx ${m.ok}, non-2xx ${m.non2xx}, errors ${m.errors}`);
  return m;
}

// ---- baseline servers (bench/baseline-server.ts, the same uWS binary Tidemark loads) ----

/** A free port below the kernel's ephemeral range (as spawnApp picks one). */
const freePort = () => 12000 + Math.floor(Math.random() * 18000);

async function baselineServer(kind: 'bare' | 'publish', threads: number, subject = ''): Promise<{ url: string; pid: number; close: () => Promise<void> }> {
  const port = freePort();
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(ROOT, 'bench/baseline-server.ts'), kind, '--port', String(port), '--threads', String(threads), '--subject', subject || 'bench.events', '--nats', NATS_URL],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('listening')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`baseline ${kind} exited with ${code}`)));
  });
  const close = () => new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, close };
}

// ---- durability check ----

interface Durability {
  messages: number;
  ops: number;
  /** 2xx answers, warm-up included. */
  ok: number;
}

/** Messages in the stream and ops inside them (every message read back and decoded). */
async function countStream(nc: NatsConnection, stream: string): Promise<{ messages: number; ops: number }> {
  // Requests still in flight when autocannon stopped may still publish: wait until the
  // stream has not grown for 2 s.
  const jsm = await jetstreamManager(nc);
  let messages = -1;
  for (let stable = 0, deadline = Date.now() + 60_000; stable < 4 && Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 500));
    const now = (await jsm.streams.info(stream)).state.messages;
    stable = now === messages ? stable + 1 : 0;
    messages = now;
  }
  let ops = 0;
  let read = 0;
  if (messages > 0) {
    const consumer = await jetstream(nc).consumers.get(stream); // ordered, ephemeral
    const iter = await consumer.consume({ max_messages: 1000 });
    for await (const m of iter) {
      ops += decodeBatch(m.data).ops.length;
      read++;
      if (m.info.pending === 0) break;
    }
    await iter.close();
  }
  if (read !== messages) throw new Error(`stream changed while counting: read ${read} of ${messages} messages`);
  return { messages, ops };
}

// ---- Tidemark ----

/**
 * Diagnostic only: stores the client's secret under scrypt N=2 (verifySecret reads the
 * parameters from the stored hash), so the run shows what ingest costs without the
 * secret verifications the auth cache repeats.
 */
async function cheapenSecret(env: TestEnv, clientId: string): Promise<string> {
  const secret = `sec_bench_${randomBytes(12).toString('hex')}`;
  const salt = randomBytes(16);
  const hash = scryptSync(secret, salt, 32, { N: 2, r: 1, p: 1 });
  await env.db.query('UPDATE clients SET secret_hash = $1 WHERE id = $2', [`scrypt$2$1$1$${salt.toString('base64')}$${hash.toString('base64')}`, clientId]);
  return secret;
}

async function runTidemark(label: string, o: { worker: boolean; threads: number; cheapHash?: boolean }, nc: NatsConnection): Promise<{ m: Measured; d: Durability }> {
  const env = await new TestEnv('bench').setup();
  // npm run api / npm start in a process of its own (migrations applied by setup()).
  const app = await spawnApp(env, o.worker ? 'all' : 'api', { API_THREADS: String(o.threads), LOG_LEVEL: 'warn' });
  try {
    const projectId = await env.project({ name: 'Bench' });
    const writer = await env.client(projectId, 'write', 0);
    if (o.cheapHash) writer.clientSecret = await cheapenSecret(env, writer.clientId);
    const m = await measure(label, app.url, app.child.pid!, { 'service-client-id': writer.clientId, 'service-client-secret': writer.clientSecret });
    const counted = await countStream(nc, `${env.namespace}_events`);
    return { m, d: { ...counted, ok: m.ok + m.warmupOk } };
  } finally {
    await new Promise<void>((resolve) => {
      if (app.child.exitCode !== null) return resolve();
      app.child.once('exit', () => resolve());
      app.child.kill('SIGTERM'); // drains: finishes in-flight requests, flushes, exits
    });
    await env.teardown();
  }
}

function machine() {
  const cpu = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1]?.trim() ?? os.cpus()[0]?.model ?? 'unknown';
  const nproc = execSync('nproc').toString().trim();
  return { nproc, cpu, node: process.version, date: new Date().toISOString(), load: os.loadavg().map((l) => l.toFixed(1)).join(' ') };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const pct = (a: number, b: number) => {
  const v = (a / b) * 100;
  return `${v.toFixed(v < 10 ? 1 : 0)}%`;
};

async function main() {
  const mach = machine();
  console.error(`ingest bench: ${SECONDS}s per target, ${CONNECTIONS} connections, ${mach.nproc} CPUs (${mach.cpu}), node ${mach.node}`);
  const nc = await connect({ servers: NATS_URL });
  const results: Measured[] = [];
  const durability: { label: string; d: Durability }[] = [];

  // 1. bare uWS, one thread and THREADS threads
  for (const threads of THREADS > 1 ? [1, THREADS] : [1]) {
    const bare = await baselineServer('bare', threads);
    results.push(await measure(`bare uWS (202 after reading the body), ${threads} thread${threads > 1 ? 's' : ''}`, bare.url, bare.pid));
    await bare.close();
  }

  // 2. uWS + one awaited JetStream publish per request
  const ns = `benchpub-${process.pid}`;
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: `${ns}_events`, subjects: [`${ns}.>`], storage: StorageType.File, retention: RetentionPolicy.Limits, num_replicas: 1 });
  try {
    const pub = await baselineServer('publish', 1, `${ns}.events`);
    results.push(await measure('uWS + 1 awaited JetStream publish per request, 1 thread', pub.url, pub.pid));
    await pub.close();
  } finally {
    await jsm.streams.delete(`${ns}_events`).catch(() => {});
  }

  // 3. Tidemark, ingest only (API_THREADS=1, then THREADS); then with the worker in the same process
  for (const threads of THREADS > 1 ? [1, THREADS] : [1]) {
    const api = await runTidemark(`Tidemark API (worker off), API_THREADS=${threads}`, { worker: false, threads }, nc);
    results.push(api.m);
    durability.push({ label: api.m.target, d: api.d });
  }
  if (!args['no-worker-run']) {
    const all = await runTidemark(`Tidemark API + worker in one process (npm start), API_THREADS=${THREADS}`, { worker: true, threads: THREADS }, nc);
    results.push(all.m);
    durability.push({ label: all.m.target, d: all.d });
  }
  if (!args['no-diagnostic']) {
    const cheap = await runTidemark('diagnostic: Tidemark API (worker off), API_THREADS=1, secret hashed with scrypt N=2', { worker: false, threads: 1, cheapHash: true }, nc);
    results.push(cheap.m);
    durability.push({ label: cheap.m.target, d: cheap.d });
  }
  const loadAfter = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  await nc.close();

  const find = (prefix: string) => results.find((r) => r.target.startsWith(prefix));
  const bare1 = find('bare uWS')!;
  const bareN = THREADS > 1 ? find(`bare uWS (202 after reading the body), ${THREADS} threads`) : undefined;
  const pub = find('uWS + 1 awaited')!;
  const tm1 = find('Tidemark API (worker off), API_THREADS=1')!;
  const tmN = THREADS > 1 ? find(`Tidemark API (worker off), API_THREADS=${THREADS}`) : undefined;
  const lines: string[] = [];
  lines.push('## Ingest', '');
  lines.push(`Command: \`npx tsx bench/ingest.ts --seconds ${SECONDS} --connections ${CONNECTIONS} --threads ${THREADS} --load ${LOAD}\``, '');
  lines.push(`Machine: ${mach.nproc} CPUs (\`nproc\`), ${mach.cpu}, Node ${mach.node}; PostgreSQL, Redis and NATS on the same machine. Load average (1/5/15 min) before: ${mach.load}; after: ${loadAfter}. Date: ${mach.date}.`, '');
  lines.push(`Load: ${LOAD === 'wrk' ? 'wrk (one thread, a process of its own; Debian package wrk)' : 'autocannon (programmatic, one worker thread of the bench process)'}, ${CONNECTIONS} connections, ${SECONDS} s per target after a 1 s warm-up, POST /track with a ~250-byte screen_view from ${DEVICES} devices. Every server runs in a process of its own: the baselines from bench/baseline-server.ts, Tidemark as \`npm run api\` / \`npm start\` (cmd/api, cmd/all) with API_THREADS as given.`, '');
  lines.push('| Target | req/s | p50 ms | p99 ms | 2xx | non-2xx | errors | CPU µs/req: server process | nats-server | redis-server | load generator |', '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  const us = (v: number) => v.toFixed(1);
  for (const r of results) lines.push(`| ${r.target} | ${fmt(r.rps)} | ${r.p50} | ${r.p99} | ${fmt(r.ok)} | ${fmt(r.non2xx)} | ${fmt(r.errors + r.timeouts)} | ${us(r.cpuUs.server)} | ${us(r.cpuUs.nats)} | ${us(r.cpuUs.redis)} | ${us(r.cpuUs.load)} |`);
  lines.push('', 'CPU µs/req: CPU time over the measured run divided by the requests answered, from /proc: the server process (all its threads: uWS and handlers, GC, libuv), the nats-server and redis-server processes (shared with anything else using them at the time), and the load generator (the wrk process, or the bench process running autocannon). On 2 cores the load generator, NATS and Redis compete with the server for the same CPUs, so req/s is bounded by the sum of these costs, not by any one of them.');
  lines.push('');
  lines.push(`Ratios, same thread count: Tidemark API_THREADS=1 / bare uWS 1 thread = **${pct(tm1.rps, bare1.rps)}**${tmN && bareN ? `; Tidemark API_THREADS=${THREADS} / bare uWS ${THREADS} threads = **${pct(tmN.rps, bareN.rps)}**` : ''}.`);
  if (tmN) lines.push(`Tidemark API_THREADS=${THREADS} / bare uWS 1 thread (the aim's baseline, >= 60%): **${pct(tmN.rps, bare1.rps)}**.`);
  lines.push(`Tidemark API_THREADS=1 / publish-per-request (1 thread) = **${pct(tm1.rps, pub.rps)}**.`);
  for (const r of results.filter((x) => x.target.startsWith('Tidemark API +') || x.target.startsWith('diagnostic'))) lines.push(`${r.target}: ${pct(r.rps, bare1.rps)} of bare (1 thread).`);
  lines.push('');
  lines.push(`Durability (every 202 is in JetStream): after each Tidemark run, the stream's message count (stream info), the ops decoded from every message, and the 2xx answers (warm-up + measured run). Every 202 is durable when ops >= 2xx; ops may exceed 2xx by at most the requests in flight when the load stopped (<= ${CONNECTIONS} per phase).`, '');
  lines.push('| Run | stream messages | ops in them | 2xx answers | ops per message | every 202 stored |', '|---|---:|---:|---:|---:|---|');
  for (const { label, d } of durability) {
    const verdict = d.ops < d.ok ? '**NO**' : d.ops > d.ok + 2 * CONNECTIONS ? `yes (**${d.ops - d.ok} unexplained extra ops**)` : `yes (+${d.ops - d.ok} in flight at stop)`;
    lines.push(`| ${label} | ${fmt(d.messages)} | ${fmt(d.ops)} | ${fmt(d.ok)} | ${(d.ops / Math.max(1, d.messages)).toFixed(1)} | ${verdict} |`);
  }
  lines.push('');
  const section = lines.join('\n');
  process.stdout.write(`${section}\n`);

  if (!args['no-write']) {
    const file = path.join(ROOT, 'bench/RESULTS.md');
    const old = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n\nOne section per benchmark; each is rewritten by its own script.\n';
    const start = old.search(/^## Ingest\s*$/m);
    let next: string;
    if (start === -1) next = `${old.trimEnd()}\n\n${section}`;
    else {
      const rest = old.slice(start + 1);
      const end = rest.search(/^## /m);
      next = `${old.slice(0, start)}${section}${end === -1 ? '' : `\n${rest.slice(end)}`}`;
    }
    writeFileSync(file, `${next.trimEnd()}\n`);
    console.error(`written to ${path.relative(process.cwd(), file)}`);
  }
  for (const { label, d } of durability) {
    if (d.ops < d.ok) {
      console.error(`DURABILITY FAILURE in ${label}: ${d.ops} ops stored for ${d.ok} 2xx answers`);
      process.exitCode = 1;
    }
  }
}

await main();
