// Ingest benchmark: Tidemark's POST /track against two baselines on the same machine, in one
// run, with the same load (autocannon, in a worker thread so it never shares the servers'
// event loop):
//   1. bare uWebSockets.js answering 202 after reading the body (the ceiling),
//   2. uWS + one awaited JetStream publish per request (the naive durable design),
//   3. Tidemark's API in-process (startApp, worker role off), then again with the worker on,
//      then (diagnostic) with the client's secret hashed cheaply, to isolate auth's share.
// Afterwards every 202 is checked for durability: messages in the JetStream stream and the
// ops inside them vs the number of 2xx answers.
//
//   npx tsx bench/ingest.ts [--seconds 10] [--connections 50] [--no-worker-run] [--no-diagnostic] [--no-write]
import { execSync } from 'node:child_process';
import { randomBytes, scryptSync } from 'node:crypto';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, StorageType, RetentionPolicy } from '@nats-io/jetstream';
import { loadNativeUws, type UWS } from '../internal/http/uws';
import { decodeBatch } from '../internal/ingest/batcher';
import { TestEnv, startApp, ROOT, NATS_URL } from '../test/support/harness';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    'no-worker-run': { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    'no-diagnostic': { type: 'boolean', default: false },
  },
});
const SECONDS = Number(args.seconds);
const CONNECTIONS = Number(args.connections);

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

interface Measured {
  target: string;
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** 2xx answers of the 1 s warm-up (their ops are in the stream too). */
  warmupOk: number;
  /** CPU microseconds per answered request: this process's main thread (where uWS and every handler run; autocannon is in a worker thread), nats-server, redis-server. */
  cpuUs: { main: number; nats: number; redis: number };
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
function cpuSnapshot() {
  return {
    main: ticks(`/proc/self/task/${process.pid}/stat`),
    nats: NATS_PID ? ticks(`/proc/${NATS_PID}/stat`) : 0,
    redis: REDIS_PID ? ticks(`/proc/${REDIS_PID}/stat`) : 0,
  };
}

async function measure(target: string, url: string, headers: Record<string, string> = {}): Promise<Measured> {
  // A short warm-up (JIT, caches, connections), not counted.
  const warm = await autocannon({ url, connections: CONNECTIONS, duration: 1, requests: requestsFor(headers), workers: 1 });
  const before = cpuSnapshot();
  const r = await autocannon({ url, connections: CONNECTIONS, duration: SECONDS, requests: requestsFor(headers), workers: 1 });
  const after = cpuSnapshot();
  const answered = Math.max(1, r['2xx'] + r.non2xx);
  const perReq = (k: 'main' | 'nats' | 'redis') => ((after[k] - before[k]) * TICK_US) / answered;
  const m: Measured = {
    target,
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    ok: r['2xx'],
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    warmupOk: warm['2xx'],
    cpuUs: { main: perReq('main'), nats: perReq('nats'), redis: perReq('redis') },
  };
  console.error(`  ${target}: ${Math.round(m.rps)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms, 2xx ${m.ok}, non-2xx ${m.non2xx}, errors ${m.errors}`);
  return m;
}

// ---- baseline servers (the same uWS binary Tidemark loads) ----

function listen(app: UWS.TemplatedApp, uws: typeof UWS): Promise<{ port: number; close: () => void }> {
  return new Promise((resolve, reject) => {
    app.listen('127.0.0.1', 0, (sock) => {
      if (!sock) return reject(new Error('cannot listen'));
      resolve({ port: uws.us_socket_local_port(sock), close: () => uws.us_listen_socket_close(sock) });
    });
  });
}

const ACCEPTED = '{"deviceId":"00000000000000000000000000000000"}';

/** Reads the body, answers 202: what uWS alone can do. */
async function bareServer() {
  const uws = loadNativeUws();
  const app = uws.App();
  app.post('/*', (res) => {
    let aborted = false;
    res.onAborted(() => (aborted = true));
    res.onData((_chunk, isLast) => {
      if (!isLast || aborted) return;
      res.cork(() => res.writeStatus('202 Accepted').writeHeader('Content-Type', 'application/json').end(ACCEPTED));
    });
  });
  return listen(app, uws);
}

/** Reads the body, awaits one JetStream publish of it, answers 202. */
async function publishPerRequestServer(nc: NatsConnection, subject: string) {
  const js = jetstream(nc, { timeout: 5000 });
  const uws = loadNativeUws();
  const app = uws.App();
  app.post('/*', (res) => {
    let aborted = false;
    res.onAborted(() => (aborted = true));
    const chunks: Buffer[] = [];
    res.onData((chunk, isLast) => {
      chunks.push(Buffer.from(chunk.slice(0)));
      if (!isLast) return;
      js.publish(subject, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).then(
        () => {
          if (!aborted) res.cork(() => res.writeStatus('202 Accepted').writeHeader('Content-Type', 'application/json').end(ACCEPTED));
        },
        () => {
          if (!aborted) res.cork(() => res.writeStatus('503 Service Unavailable').end());
        },
      );
    });
  });
  return listen(app, uws);
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

async function runTidemark(label: string, worker: boolean, nc: NatsConnection, cheapHash = false): Promise<{ m: Measured; d: Durability }> {
  const env = await new TestEnv('bench').setup();
  const app = await startApp(env, { api: true, worker });
  try {
    const projectId = await env.project({ name: 'Bench' });
    const writer = await env.client(projectId, 'write', 0);
    if (cheapHash) writer.clientSecret = await cheapenSecret(env, writer.clientId);
    const m = await measure(label, app.url, { 'service-client-id': writer.clientId, 'service-client-secret': writer.clientSecret });
    const counted = await countStream(nc, app.bus.streamName);
    return { m, d: { ...counted, ok: m.ok + m.warmupOk } };
  } finally {
    await app.drain();
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

  // 1. bare uWS
  const bare = await bareServer();
  results.push(await measure('bare uWS (202 after reading the body)', `http://127.0.0.1:${bare.port}`));
  bare.close();

  // 2. uWS + one awaited JetStream publish per request
  const ns = `benchpub-${process.pid}`;
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: `${ns}_events`, subjects: [`${ns}.>`], storage: StorageType.File, retention: RetentionPolicy.Limits, num_replicas: 1 });
  try {
    const pub = await publishPerRequestServer(nc, `${ns}.events`);
    results.push(await measure('uWS + 1 awaited JetStream publish per request', `http://127.0.0.1:${pub.port}`));
    pub.close();
  } finally {
    await jsm.streams.delete(`${ns}_events`).catch(() => {});
  }

  // 3. Tidemark, ingest only; then with the worker in the same process
  const api = await runTidemark('Tidemark API (worker off)', false, nc);
  results.push(api.m);
  durability.push({ label: api.m.target, d: api.d });
  if (!args['no-worker-run']) {
    const all = await runTidemark('Tidemark API + worker in one process', true, nc);
    results.push(all.m);
    durability.push({ label: all.m.target, d: all.d });
  }
  if (!args['no-diagnostic']) {
    const cheap = await runTidemark('diagnostic: Tidemark API (worker off), secret hashed with scrypt N=2', false, nc, true);
    results.push(cheap.m);
    durability.push({ label: cheap.m.target, d: cheap.d });
  }
  const loadAfter = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  await nc.close();

  const [b, p, t] = results as [Measured, Measured, Measured];
  const lines: string[] = [];
  lines.push('## Ingest', '');
  lines.push(`Command: \`npx tsx bench/ingest.ts --seconds ${SECONDS} --connections ${CONNECTIONS}\``, '');
  lines.push(`Machine: ${mach.nproc} CPUs (\`nproc\`), ${mach.cpu}, Node ${mach.node}; PostgreSQL, Redis and NATS on the same machine. Load average (1/5/15 min) before: ${mach.load}; after: ${loadAfter}. Date: ${mach.date}.`, '');
  lines.push(`Load: autocannon (programmatic, one worker thread), ${CONNECTIONS} connections, ${SECONDS} s per target after a 1 s warm-up, POST /track with a ~250-byte screen_view from ${DEVICES} devices.`, '');
  lines.push('| Target | req/s | p50 ms | p99 ms | 2xx | non-2xx | errors | CPU µs/req: main thread | nats-server | redis-server |', '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  const us = (v: number) => v.toFixed(1);
  for (const r of results) lines.push(`| ${r.target} | ${fmt(r.rps)} | ${r.p50} | ${r.p99} | ${fmt(r.ok)} | ${fmt(r.non2xx)} | ${fmt(r.errors + r.timeouts)} | ${us(r.cpuUs.main)} | ${us(r.cpuUs.nats)} | ${us(r.cpuUs.redis)} |`);
  lines.push('', 'CPU µs/req: CPU time over the measured run divided by the requests answered, from /proc: the main thread of the bench process (uWS and every handler run there; autocannon runs in its own worker thread), and the nats-server and redis-server processes (shared with anything else using them at the time). On 2 cores the load generator, NATS and Redis compete with the server for the same CPUs, so req/s is bounded by the sum of these costs, not by any one of them.');
  lines.push('');
  lines.push(`Ratios: Tidemark / bare uWS = **${pct(t.rps, b.rps)}** (aim: >= 60%); Tidemark / publish-per-request = **${pct(t.rps, p.rps)}**.`);
  for (const r of results.slice(3)) lines.push(`${r.target}: ${pct(r.rps, b.rps)} of bare.`);
  lines.push('');
  lines.push(`Durability (every 202 is in JetStream): after each Tidemark run, the stream's message count (stream info), the ops decoded from every message, and the 2xx answers (warm-up + measured run). Every 202 is durable when ops >= 2xx; ops may exceed 2xx by at most the requests in flight when autocannon stopped (<= ${CONNECTIONS} per phase).`, '');
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
