// What a replicated stream costs: producer latency and end-to-end capacity with the stream
// at R3 against R1, in the same run, on the same private three-node NATS cluster
// (test/support/nats-cluster.ts: Debian's nats-server on loopback ports). Two Tidemark
// installations side by side, one per replica count (their own namespace, stream and
// database; each an api and a worker child process, `cmd/api` and `cmd/worker`), measured
// in alternating rounds (R1, R3, R1, R3, ...) so that a change of the shared machine's
// load hits both alike:
//
//   - producer latency: sequential POST /track (one request in flight), p50/p99 per round;
//   - end-to-end capacity: N events sent by C concurrent loops as fast as they are
//     answered; events/s = events that got a 202 / the time from the first request until
//     every one of them is in PostgreSQL (polled every 25 ms). Each 202 is reconciled by
//     the sequence number carried in the event: stored, and stored once. A round whose
//     last events took more than STALL_S to reach PostgreSQL after the last 202 is
//     reported as stalled and left out of the end-to-end median (a worker whose pull
//     request went missing waits ~30 s for nats.js to notice: see RESULTS.md).
//
//   npx tsx bench/nats-replicas.ts [--rounds 3] [--sequential 300] [--events 8000] [--concurrency 64] [--quick] [--no-write]
import { readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { ChildProcess } from 'node:child_process';
import { spawnApp, waitFor, type Credentials } from '../test/support/harness';
import { NatsCluster } from '../test/support/nats-cluster';
import { PrivateEnv, loadBody, loadEvent, stopAllPrivate, stopChild, spawnAppRetry } from '../test/support/private-services';
import { machineInfo, writeSection, type Machine } from './run';

export interface ReplicasOptions {
  rounds: number;
  /** Sequential requests per round (latency). */
  sequential: number;
  /** Events per round (capacity). */
  events: number;
  concurrency: number;
  devices: number;
}

interface Setup {
  replicas: number;
  env: PrivateEnv;
  api: Awaited<ReturnType<typeof spawnApp>>;
  worker: Awaited<ReturnType<typeof spawnApp>>;
  creds: Credentials;
  /** Next unused seq of this installation. */
  nextSeq: number;
}

interface Round {
  replicas: number;
  latency: { p50: number; p99: number; max: number; non202: number };
  capacity: {
    accepted: number;
    non202: number;
    /** Time until the last 202. */
    ingestSeconds: number;
    /** Time until every 202 was in PostgreSQL. */
    e2eSeconds: number;
    missing: number;
    duplicates: number;
    /** CPU time of the three nats-servers per accepted event. */
    natsCpuUsPerEvent: number;
  };
}

export interface ReplicasResult {
  machine: Machine;
  options: ReplicasOptions;
  rounds: Round[];
}

const CLK_TCK = 100;
/** Seconds from the last 202 to the last event stored beyond which a round counts as stalled. */
const STALL_S = 5;

/** utime + stime of a process, in seconds (Linux /proc). */
function cpuSeconds(child: ChildProcess | null): number {
  if (!child?.pid) return 0;
  try {
    const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return 0;
  }
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

// node:http with a keep-alive pool: cheaper per request than fetch, so the client is not
// what limits the capacity rounds.
const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });

function track(s: Setup, seq: number, devices: number): Promise<number> {
  const body = JSON.stringify(loadBody(loadEvent(seq, devices)));
  return new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1', port: s.api.port, path: '/track', method: 'POST', agent, timeout: 20_000,
      headers: {
        'content-type': 'application/json', 'content-length': Buffer.byteLength(body),
        'service-client-id': s.creds.clientId, 'service-client-secret': s.creds.clientSecret,
        // a browser's: without one the event is server-side and opens no session
        'user-agent': 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
      },
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

/** Stored rows per seq in [lo, hi): (distinct seqs, rows). */
async function stored(s: Setup, lo: number, hi: number): Promise<{ seqs: number; rows: number }> {
  const r = await s.env.db.query(
    "SELECT count(DISTINCT (properties->>'seq')::int)::int AS seqs, count(*)::int AS rows FROM events WHERE properties ? 'seq' AND (properties->>'seq')::int >= $1 AND (properties->>'seq')::int < $2",
    [lo, hi],
  );
  return r.rows[0] as { seqs: number; rows: number };
}

async function latencyRound(s: Setup, o: ReplicasOptions): Promise<Round['latency']> {
  const took: number[] = [];
  let non202 = 0;
  const lo = s.nextSeq;
  for (let i = 0; i < o.sequential; i++) {
    const t0 = performance.now();
    const status = await track(s, s.nextSeq++, o.devices);
    took.push(performance.now() - t0);
    if (status !== 202) non202++;
  }
  // Let the worker store them before the next measurement starts.
  await waitFor(async () => (await stored(s, lo, s.nextSeq)).seqs >= o.sequential - non202, { timeoutMs: 60_000, intervalMs: 50, what: 'latency round stored' });
  took.sort((a, b) => a - b);
  return { p50: percentile(took, 50), p99: percentile(took, 99), max: took[took.length - 1]!, non202 };
}

async function capacityRound(s: Setup, o: ReplicasOptions, nats: NatsCluster): Promise<Round['capacity']> {
  const lo = s.nextSeq;
  const hi = lo + o.events;
  s.nextSeq = hi;
  const accepted = new Set<number>();
  let non202 = 0;
  let next = lo;
  const natsCpu = () => nats.nodes.reduce((sum, n) => sum + cpuSeconds(n.child), 0);
  const cpu0 = natsCpu();
  const t0 = performance.now();
  let lastAck = t0;
  await Promise.all(Array.from({ length: o.concurrency }, async () => {
    while (next < hi) {
      const seq = next++;
      const status = await track(s, seq, o.devices);
      if (status === 202) {
        accepted.add(seq);
        lastAck = performance.now();
      } else non202++;
    }
  }));
  let e2e = NaN;
  await waitFor(async () => {
    const st = await stored(s, lo, hi);
    if (st.seqs < accepted.size) return false;
    e2e = performance.now();
    return true;
  }, { timeoutMs: 180_000, intervalMs: 25, what: `${accepted.size} accepted events stored (R${s.replicas})` });
  const cpu = natsCpu() - cpu0;
  // Settled: nothing missing, nothing twice (the rows of refused seqs may exist once too).
  await new Promise((r) => setTimeout(r, 500));
  const st = await stored(s, lo, hi);
  const r = await s.env.db.query(
    "SELECT (properties->>'seq')::int AS seq FROM events WHERE properties ? 'seq' AND (properties->>'seq')::int >= $1 AND (properties->>'seq')::int < $2",
    [lo, hi],
  );
  const have = new Set(r.rows.map((x) => x.seq as number));
  const missing = [...accepted].filter((q) => !have.has(q)).length;
  return {
    accepted: accepted.size, non202,
    ingestSeconds: (lastAck - t0) / 1000, e2eSeconds: (e2e - t0) / 1000,
    missing, duplicates: st.rows - st.seqs,
    natsCpuUsPerEvent: accepted.size ? (cpu * 1e6) / accepted.size : NaN,
  };
}

export async function runReplicas(o: ReplicasOptions, log: (l: string) => void = () => {}): Promise<ReplicasResult> {
  const machine = machineInfo();
  const setups: Setup[] = [];
  const rounds: Round[] = [];
  let cluster: NatsCluster | null = null;
  try {
    cluster = await NatsCluster.start(3);
    log(`cluster up: ${cluster.url}`);
    for (const replicas of [1, 3]) {
      const env = new PrivateEnv(`benchr${replicas}`, { natsUrl: cluster.url });
      await env.setup();
      const projectId = await env.project();
      const creds = await env.client(projectId, 'write', 0);
      const extra = { TIDEMARK_STREAM_REPLICAS: String(replicas), LOG_LEVEL: 'warn', TIDEMARK_SHARDS: '16' };
      const worker = await spawnAppRetry(env, 'worker', extra);
      const api = await spawnAppRetry(env, 'api', extra);
      const setup: Setup = { replicas, env, api, worker, creds, nextSeq: 0 };
      setups.push(setup);
      const si = await cluster.waitStreamHealthy(`${env.namespace}_events`, replicas);
      log(`R${replicas}: stream leader ${si.cluster?.leader}, replicas ${si.config.num_replicas}`);
      // Warm-up: connections, caches, JIT.
      await latencyRound(setup, { ...o, sequential: 50 });
    }
    for (let i = 0; i < o.rounds; i++) {
      for (const s of setups) {
        const latency = await latencyRound(s, o);
        const capacity = await capacityRound(s, o, cluster);
        rounds.push({ replicas: s.replicas, latency, capacity });
        log(`round ${i + 1} R${s.replicas}: p50 ${latency.p50.toFixed(2)} ms p99 ${latency.p99.toFixed(2)} ms; ${capacity.accepted} accepted, ingest ${(capacity.accepted / capacity.ingestSeconds).toFixed(0)}/s, end to end ${(capacity.accepted / capacity.e2eSeconds).toFixed(0)}/s; missing ${capacity.missing}, twice ${capacity.duplicates}`);
      }
    }
  } finally {
    for (const s of setups) {
      await Promise.all([stopChild(s.api.child, 'SIGKILL'), stopChild(s.worker.child, 'SIGKILL')]);
      await s.env.teardown().catch(() => {});
    }
    await stopAllPrivate();
  }
  machine.loadAfter = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  return { machine, options: o, rounds };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const f0 = (n: number) => Math.round(n).toLocaleString('en-US');
const f2 = (n: number) => n.toFixed(2);
const pct = (n: number) => `${Math.round(n * 100)}%`;

export function replicasMarkdown(r: ReplicasResult, command: string): string {
  const m = r.machine;
  const by = (replicas: number) => r.rounds.filter((x) => x.replicas === replicas);
  const tail = (x: Round) => x.capacity.e2eSeconds - x.capacity.ingestSeconds;
  const summary = (replicas: number) => {
    const rs = by(replicas);
    const flowing = rs.filter((x) => tail(x) <= STALL_S);
    return {
      stalled: rs.length - flowing.length,
      e2eFlowing: flowing.length ? median(flowing.map((x) => x.capacity.accepted / x.capacity.e2eSeconds)) : NaN,
      p50: median(rs.map((x) => x.latency.p50)),
      p99: median(rs.map((x) => x.latency.p99)),
      ingest: median(rs.map((x) => x.capacity.accepted / x.capacity.ingestSeconds)),
      e2e: median(rs.map((x) => x.capacity.accepted / x.capacity.e2eSeconds)),
      natsCpu: median(rs.map((x) => x.capacity.natsCpuUsPerEvent)),
      non202: rs.reduce((a, x) => a + x.latency.non202 + x.capacity.non202, 0),
      missing: rs.reduce((a, x) => a + x.capacity.missing, 0),
      twice: rs.reduce((a, x) => a + x.capacity.duplicates, 0),
      accepted: rs.reduce((a, x) => a + x.capacity.accepted, 0),
    };
  };
  const r1 = summary(1);
  const r3 = summary(3);
  const lines = [
    '## NATS replicas',
    '',
    `Command: \`${command}\``,
    '',
    `Machine: ${m.nproc} CPUs (\`nproc\`), ${m.cpu}, Node ${m.node}; a private three-node NATS cluster (Debian's nats-server, loopback), PostgreSQL and Redis on the same machine, shared with other work. Load average (1/5/15 min) before: ${m.load}; after: ${m.loadAfter ?? '?'}. Date: ${m.date}.`,
    '',
    `Two installations on the same cluster, one stream at R1 and one at R3 (\`TIDEMARK_STREAM_REPLICAS\`), each an api and a worker child process (16 shards), measured in ${r.options.rounds} alternating rounds. Producer latency: ${r.options.sequential} sequential POST /track (one in flight). Capacity: ${f0(r.options.events)} events from ${r.options.concurrency} concurrent loops; ingest = 202s per second until the last 202; end to end = 202s per second until every one of them is in PostgreSQL (each event carries a sequence number: every 202 reconciled, stored once). nats-server CPU: the three nodes' CPU time during the capacity round per accepted event.`,
    '',
    '| round | stream | latency p50 ms | p99 ms | max ms | ingest 202/s | end to end events/s | last 202 → all stored, s | nats-server CPU µs/event | non-202 | 202 not stored | stored twice |',
    '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  r.rounds.forEach((x, i) => {
    lines.push(`| ${Math.floor(i / 2) + 1} | R${x.replicas} | ${f2(x.latency.p50)} | ${f2(x.latency.p99)} | ${f2(x.latency.max)} | ${f0(x.capacity.accepted / x.capacity.ingestSeconds)} | ${f0(x.capacity.accepted / x.capacity.e2eSeconds)} | ${tail(x).toFixed(1)}${tail(x) > STALL_S ? ' (stalled)' : ''} | ${f0(x.capacity.natsCpuUsPerEvent)} | ${x.latency.non202 + x.capacity.non202} | ${x.capacity.missing} | ${x.capacity.duplicates} |`);
  });
  lines.push(
    '',
    `Medians over the rounds, R3 against R1 of the same run: latency p50 ${f2(r3.p50)} vs ${f2(r1.p50)} ms (**${pct(r3.p50 / r1.p50)}**), p99 ${f2(r3.p99)} vs ${f2(r1.p99)} ms (**${pct(r3.p99 / r1.p99)}**); ingest ${f0(r3.ingest)} vs ${f0(r1.ingest)} 202/s (**${pct(r3.ingest / r1.ingest)}**); end to end ${f0(r3.e2e)} vs ${f0(r1.e2e)} events/s (${pct(r3.e2e / r1.e2e)}), over the rounds without a stall (R1 ${by(1).length - r1.stalled} of ${by(1).length}, R3 ${by(3).length - r3.stalled} of ${by(3).length}) ${f0(r3.e2eFlowing)} vs ${f0(r1.e2eFlowing)} events/s (**${pct(r3.e2eFlowing / r1.e2eFlowing)}**); nats-server CPU per event ${f0(r3.natsCpu)} vs ${f0(r1.natsCpu)} µs (${pct(r3.natsCpu / r1.natsCpu)}).`,
    '',
    `Every 202 stored exactly once: ${r1.missing + r3.missing === 0 && r1.twice + r3.twice === 0 ? 'yes' : 'NO'} (${f0(r1.accepted + r3.accepted)} accepted in the capacity rounds; non-202 answers: R1 ${r1.non202}, R3 ${r3.non202}).`,
  );
  if (r1.stalled + r3.stalled > 0) {
    lines.push(
      '',
      `Stalled rounds (last events in PostgreSQL more than ${STALL_S} s after the last 202) are not about replicas: they happen at R1 and R3 alike, and on a single nats-server too. In one, caught by inspecting the consumers during the tail, one shard's consumer had messages pending, none delivered unacknowledged and no pull request waiting (\`num_pending\` 202, \`num_ack_pending\` 0, \`num_waiting\` 0): the worker's pull for that shard had gone missing, and nats.js's \`consume()\` notices that only after missed heartbeats (its default \`expires\` is 30 s), so the shard sits idle for up to ~30-45 s. Seen here only when the machine was heavily loaded.`,
    );
  }
  return lines.join('\n');
}

export function replicasOptions(argv: string[]): ReplicasOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: 'string' }, sequential: { type: 'string' }, events: { type: 'string' }, concurrency: { type: 'string' },
      devices: { type: 'string' }, quick: { type: 'boolean', default: false }, 'no-write': { type: 'boolean', default: false },
    },
    allowPositionals: false,
  });
  const q = values.quick === true;
  const o: ReplicasOptions = {
    rounds: Number(values.rounds ?? (q ? 1 : 3)),
    sequential: Number(values.sequential ?? (q ? 100 : 300)),
    events: Number(values.events ?? (q ? 2000 : 8000)),
    concurrency: Number(values.concurrency ?? 64),
    devices: Number(values.devices ?? 500),
  };
  for (const [k, v] of Object.entries(o)) {
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${k} must be a positive integer`);
  }
  if (o.events > 100_000 || o.sequential > 10_000 || o.rounds > 10 || o.concurrency > 512) throw new Error('keep the load bounded: --events <= 100000, --sequential <= 10000, --rounds <= 10, --concurrency <= 512');
  return o;
}

if (process.argv[1] && /bench[\\/]nats-replicas\.ts$/.test(process.argv[1])) {
  const argv = process.argv.slice(2);
  const o = replicasOptions(argv);
  const r = await runReplicas(o, (l) => console.error(l));
  const md = replicasMarkdown(r, `npx tsx bench/nats-replicas.ts${argv.length ? ` ${argv.join(' ')}` : ''}`);
  process.stdout.write(`${md}\n`);
  if (!argv.includes('--no-write') && !argv.includes('--quick')) writeSection('NATS replicas', md);
  process.exit(0);
}
