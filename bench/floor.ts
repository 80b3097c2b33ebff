// Tidemark against the floor of its architecture (bench/floor-server.ts: uWS parses the JSON
// body; one JetStream publish in flight carries every queued body, its ack answers them 202;
// a pull consumer inserts up to 500 messages' events in one statement, then acks), both on
// this machine's NATS and PostgreSQL, each in a process of its own, in the same run:
//
//   1. closed loop under wrk (100 connections, the 512 screen_view requests of bench/e2e.ts,
//      byte for byte the same to both), floor and Tidemark alternated (F T F T ...); per run:
//      events readable in PostgreSQL per second from the load's start until the last
//      acknowledged event is readable, whether every 202 was readable within 2 s of the load
//      stopping, and the whole machine's CPU per event (/proc/stat from the load's start until
//      every 202 is readable: both pipelines, PostgreSQL, NATS, Redis and wrk itself);
//   2. sequential POST /track over one keep-alive socket: p50 / p99, floor and Tidemark.
// Aims: Tidemark's events/s >= 0.6x the floor's, CPU per event <= 2x the floor's,
// sequential p50 <= floor p50 + 0.3 ms, p99 <= max(5 ms, floor p99 + 2 ms).
//
// Tidemark runs as `npm start` does (cmd/all, TIDEMARK_SHARDS and ROLLUP_REFRESH_QUIET_MS
// unset: the defaults), on its own database, stream and namespace; the floor on its own
// database (floor_bench_*) and stream (floor_bench_*). Both are dropped afterwards.
//
//   npx tsx bench/floor.ts [--seconds 10] [--alternations 2] [--connections 100] [--seq 3000] [--record]
//   npx tsx bench/floor.ts --quick        # smoke: 3 s runs, one alternation, 500 sequential
// Prints the markdown section and a JSON line (BENCH_RESULT ...); writes the "Floor" section
// of bench/RESULTS.md only with --record.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { TestEnv, spawnApp, ROOT, NATS_URL, PG_BASE, sleep, uniqueName } from '../test/support/harness';
import { stopChild } from '../test/support/private-services';
import { rawRequests, ticks, TICK_US } from './e2e';
import { commCpuS, findPostmaster, serverCpuS, threadTicks } from './proc-cpu';
import { percentile, sequential } from './openloop';
import { machineInfo, writeSection, type Machine } from './run';

const { values: a } = parseArgs({
  options: {
    seconds: { type: 'string' }, alternations: { type: 'string' }, connections: { type: 'string', default: '100' },
    seq: { type: 'string' }, quick: { type: 'boolean', default: false }, record: { type: 'boolean', default: false },
  },
});
const quick = a.quick === true;
const O = {
  seconds: Number(a.seconds ?? (quick ? 3 : 10)),
  alternations: Number(a.alternations ?? (quick ? 1 : 2)),
  connections: Number(a.connections),
  seq: Number(a.seq ?? (quick ? 500 : 3000)),
};
const log = (m: string) => console.error(`[floor ${new Date().toISOString().slice(11, 19)}] ${m}`);

// ---- measuring ----

/** Busy jiffies of the whole machine (every CPU; all but idle and iowait). */
function machineBusy(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return f.reduce((s, x) => s + x, 0) - f[3]! - f[4]!;
}

/** CPU seconds so far of the services both pipelines use (PostgreSQL's whole server, NATS, Redis). */
function othersCpuS(): { postgres: number; nats: number; redis: number } {
  const pm = postmaster ??= findPostmaster();
  return { postgres: pm ? serverCpuS(pm) : NaN, nats: commCpuS('nats-server'), redis: commCpuS('redis-server') };
}
let postmaster: number | null = null;

interface Wrk { seconds: number; requests: number; non2xx: number; errors: number; rps: number }

/** wrk (1 thread, closed loop) sending the given raw HTTP requests round robin. */
async function wrk(port: number, reqs: Buffer[], seconds: number): Promise<Wrk> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tm-floor-wrk-'));
  const script = path.join(dir, 'track.lua');
  // Raw requests, escaped as Lua strings (long brackets would turn \r\n into \n).
  const lua = (b: Buffer) => `"${b.toString('latin1').replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\r/g, '\\r').replace(/\n/g, '\\n')}"`;
  writeFileSync(script, `local reqs = {\n${reqs.map(lua).join(',\n')}\n}\nlocal n = 0\nrequest = function()\n  n = n % #reqs + 1\n  return reqs[n]\nend\n`, 'latin1');
  const out = await new Promise<string>((resolve, reject) => {
    const c = spawn('wrk', ['-t1', `-c${O.connections}`, `-d${seconds}s`, '-s', script, `http://127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let s = '';
    let e = '';
    c.stdout.on('data', (d) => (s += d));
    c.stderr.on('data', (d) => (e += d));
    c.on('error', reject);
    c.on('exit', (code) => (code === 0 ? resolve(s) : reject(new Error(`wrk exited ${code}: ${e}`))));
  });
  rmSync(dir, { recursive: true, force: true });
  const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    seconds: num(/requests in ([\d.]+)s/), requests: num(/(\d+) requests in/), non2xx: num(/Non-2xx or 3xx responses: (\d+)/),
    errors: sock ? sock.slice(1).reduce((s, x) => s + Number(x), 0) : 0, rps: num(/Requests\/sec:\s+([\d.]+)/),
  };
}

interface Target {
  name: 'floor' | 'Tidemark';
  port: number;
  pid: number;
  /** Events readable in PostgreSQL so far. */
  readable: () => Promise<number>;
}

interface Run {
  target: Target['name'];
  accepted: number;
  non2xx: number;
  errors: number;
  acceptedPerS: number;
  readable: number;
  /** Events readable per second, from the load's start until the last 202'd event is readable. */
  eventsPerS: number;
  drainS: number;
  landed: boolean;
  machineUsPerEvent: number;
  serverUsPerEvent: number;
  /** Where the rest went: PostgreSQL's whole server, nats-server, redis-server (µs per event readable). */
  postgresUsPerEvent: number;
  natsUsPerEvent: number;
  redisUsPerEvent: number;
  /** The server process's threads, µs per event, busiest first (those at 0.5 or more). */
  threadsUsPerEvent: number[];
}

async function waitReadable(t: Target, target: number, timeoutMs: number): Promise<{ n: number; at: number }> {
  const t0 = performance.now();
  for (;;) {
    const n = await t.readable();
    if (n >= target || performance.now() - t0 > timeoutMs) return { n, at: performance.now() };
    await sleep(50);
  }
}

async function closedRun(t: Target, reqs: Buffer[]): Promise<Run> {
  // Requests still in flight when the previous run's wrk stopped land first: a stable count.
  let base = await t.readable();
  for (let prev = -1; base !== prev; ) {
    await sleep(300);
    prev = base;
    base = await t.readable();
  }
  const m0 = machineBusy();
  const s0 = ticks(t.pid);
  const others0 = othersCpuS();
  const threads0 = threadTicks(t.pid);
  const start = performance.now();
  const w = await wrk(t.port, reqs, O.seconds);
  const stopped = performance.now();
  const accepted = w.requests - w.non2xx;
  const r = await waitReadable(t, base + accepted, 30_000);
  const machineUs = (machineBusy() - m0) * TICK_US;
  const serverUs = (ticks(t.pid) - s0) * TICK_US;
  const others = othersCpuS();
  const threads = threadTicks(t.pid);
  const readable = r.n - base;
  const per = (sec: number) => (sec * 1e6) / Math.max(1, readable);
  // The server process by thread, busiest first (Node names no thread: the event-loop threads
  // of the roles are the busiest, then V8's and libuv's helpers).
  const byThread = [...threads].map(([tid, n]) => ({ tid, us: ((n - (threads0.get(tid) ?? 0)) * TICK_US) / Math.max(1, readable) }))
    .filter((x) => x.us >= 0.5).sort((x, y) => y.us - x.us);
  const drainS = Math.max(0, (r.at - stopped) / 1000);
  const run: Run = {
    target: t.name, accepted, non2xx: w.non2xx, errors: w.errors, acceptedPerS: accepted / w.seconds, readable,
    eventsPerS: readable / ((r.at - start) / 1000), drainS, landed: readable >= accepted && drainS <= 2,
    machineUsPerEvent: machineUs / Math.max(1, readable), serverUsPerEvent: serverUs / Math.max(1, readable),
    postgresUsPerEvent: per(others.postgres - others0.postgres), natsUsPerEvent: per(others.nats - others0.nats), redisUsPerEvent: per(others.redis - others0.redis),
    threadsUsPerEvent: byThread.map((x) => x.us),
  };
  log(`  ${t.name} threads µs/event: ${byThread.map((x) => x.us.toFixed(1)).join(' ')}`);
  log(`  ${t.name}: ${Math.round(run.acceptedPerS)} 202/s, non-2xx ${w.non2xx}, errors ${w.errors}; ${readable}/${accepted} readable after ${drainS.toFixed(2)} s -> ${Math.round(run.eventsPerS)} events/s end to end; machine CPU ${run.machineUsPerEvent.toFixed(1)} µs/event (server process ${run.serverUsPerEvent.toFixed(1)}, PostgreSQL ${run.postgresUsPerEvent.toFixed(1)}, NATS ${run.natsUsPerEvent.toFixed(1)}, Redis ${run.redisUsPerEvent.toFixed(1)})`);
  return run;
}

// ---- the floor, as a child process ----

async function startFloor(): Promise<Target & { close: () => Promise<void> }> {
  const name = uniqueName('floor_bench').toLowerCase();
  const dbUrl = `${PG_BASE}/${name}`;
  const admin = new pg.Client({ connectionString: `${PG_BASE}/postgres` });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  const port = 12000 + Math.floor(Math.random() * 18000);
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/floor-server.ts'), '--port', String(port), '--db', dbUrl, '--stream', name, '--nats', NATS_URL], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const db = new pg.Client({ connectionString: dbUrl });
  const close = async () => {
    await stopChild(child, 'SIGKILL');
    await db.end().catch(() => {});
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`).catch(() => {});
    await admin.end();
    const nc = await connect({ servers: NATS_URL });
    await (await jetstreamManager(nc)).streams.delete(name).catch(() => {});
    await nc.close();
  };
  try {
    await new Promise<void>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d) => {
        out += d;
        if (out.includes('listening')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`floor-server exited with ${code}`)));
    });
    await db.connect();
  } catch (err) {
    await close();
    throw err;
  }
  return { name: 'floor', port, pid: child.pid!, readable: async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM floor_events')).rows[0]!.n, close };
}

// ---- the run ----

interface Result {
  machine: Machine;
  options: typeof O;
  runs: Run[];
  seq: Record<Target['name'], { p50: number; p99: number; non2xx: number }>;
}

async function main(): Promise<Result> {
  const machine = machineInfo();
  log(`${O.seconds} s wrk runs x ${O.alternations} alternations, ${O.connections} connections; ${machine.nproc} CPUs, load ${machine.load}`);
  const floor = await startFloor();
  const env = await new TestEnv('floorcmp').setup();
  try {
    const app = await spawnApp(env, 'all', { TIDEMARK_SHARDS: '', ROLLUP_REFRESH_QUIET_MS: '', LOG_LEVEL: 'warn' });
    try {
      const projectId = await env.project({ name: 'floor comparison' });
      const creds = await env.client(projectId, 'write', 0);
      const reqs = rawRequests(creds); // the same bytes to both (the floor ignores the headers)
      const tidemark: Target = {
        name: 'Tidemark', port: app.port, pid: app.child.pid!,
        readable: async () => (await env.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = $2', [projectId, 'screen_view'])).rows[0]!.n,
      };
      for (const t of [floor, tidemark]) {
        const w = await sequential({ port: t.port, requests: reqs, count: 200 });
        if (w.ok !== 200) throw new Error(`${t.name}: warm-up answered ${JSON.stringify(w.statuses)}`);
      }
      const runs: Run[] = [];
      for (let i = 0; i < O.alternations; i++) {
        for (const t of [floor, tidemark]) {
          await sleep(1000);
          runs.push(await closedRun(t, reqs));
        }
      }
      const seq = {} as Result['seq'];
      for (const t of [floor, tidemark]) {
        await sleep(1000);
        await sequential({ port: t.port, requests: reqs, count: 100 });
        const s = await sequential({ port: t.port, requests: reqs, count: O.seq });
        seq[t.name] = { p50: percentile(s.latencies, 50), p99: percentile(s.latencies, 99), non2xx: s.non2xx + s.errors };
        log(`  sequential ${t.name}: p50 ${seq[t.name].p50.toFixed(3)} ms, p99 ${seq[t.name].p99.toFixed(3)} ms`);
      }
      machine.loadAfter = os.loadavg().map((l) => l.toFixed(1)).join(' ');
      return { machine, options: O, runs, seq };
    } finally {
      await stopChild(app.child, 'SIGTERM');
    }
  } finally {
    await env.teardown();
    await floor.close();
  }
}

// ---- report ----

const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const median = (xs: number[]) => percentile(xs, 50);

function summary(r: Result) {
  const of = (n: Target['name']) => r.runs.filter((x) => x.target === n);
  const agg = (n: Target['name']) => ({
    eventsPerS: median(of(n).map((x) => x.eventsPerS)), machineUsPerEvent: median(of(n).map((x) => x.machineUsPerEvent)),
    serverUsPerEvent: median(of(n).map((x) => x.serverUsPerEvent)), allLanded: of(n).every((x) => x.landed),
    postgresUsPerEvent: median(of(n).map((x) => x.postgresUsPerEvent)), natsUsPerEvent: median(of(n).map((x) => x.natsUsPerEvent)),
    redisUsPerEvent: median(of(n).map((x) => x.redisUsPerEvent)),
  });
  const F = agg('floor');
  const T = agg('Tidemark');
  const capacity = T.eventsPerS / F.eventsPerS;
  const cpu = T.machineUsPerEvent / F.machineUsPerEvent;
  const p50Aim = r.seq.floor.p50 + 0.3;
  const p99Aim = Math.max(5, r.seq.floor.p99 + 2);
  return {
    floor: F, tidemark: T, capacityRatio: capacity, cpuRatio: cpu, p50Aim, p99Aim,
    met: { capacity: capacity >= 0.6 && T.allLanded, cpu: cpu <= 2, p50: r.seq.Tidemark.p50 <= p50Aim, p99: r.seq.Tidemark.p99 <= p99Aim },
  };
}

function markdown(r: Result, command: string): string {
  const s = summary(r);
  const yes = (b: boolean) => (b ? 'met' : '**not met**');
  const L = ['## Floor', ''];
  L.push(`Command: \`${command}\``, '');
  L.push(`Machine: ${r.machine.nproc} CPUs, ${r.machine.cpu}, Node ${r.machine.node}; load average before ${r.machine.load}, after ${r.machine.loadAfter ?? '?'}. Date: ${r.machine.date}. Floor: bench/floor-server.ts (uWS parses the JSON body; one JetStream publish in flight carries every queued body, its PubAck answers them 202; a durable pull consumer inserts up to 500 messages' events in one INSERT, commits, then acks). Tidemark: \`npm start\` (cmd/all, defaults). Both on this machine's NATS and PostgreSQL; wrk -t1 -c${r.options.connections}, ${r.options.seconds} s a run, the same 512 screen_view requests, floor and Tidemark alternated ${r.options.alternations}x. Events/s: events readable in PostgreSQL from the load's start until the last acknowledged one is; machine CPU: /proc/stat busy time of every CPU over that span (load generator included) per event readable; of it, the server process (all its threads), PostgreSQL (the postmaster, its reaped and live children), nats-server and redis-server, from /proc (the rest is wrk and the kernel).`, '');
  L.push('| run | target | 202/s | non-2xx | errors | events readable | events/s end to end | every 202 readable within 2 s (drain s) | machine CPU µs/event | server process µs/event | its threads µs/event, busiest first | PostgreSQL µs/event | NATS µs/event | Redis µs/event |');
  L.push('|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|');
  r.runs.forEach((x, i) => L.push(`| ${i + 1} | ${x.target} | ${f0(x.acceptedPerS)} | ${x.non2xx} | ${x.errors} | ${f0(x.readable)} | ${f0(x.eventsPerS)} | ${x.landed ? 'yes' : '**no**'} (${x.drainS.toFixed(2)}) | ${x.machineUsPerEvent.toFixed(1)} | ${x.serverUsPerEvent.toFixed(1)} | ${x.threadsUsPerEvent.map((u) => u.toFixed(1)).join(' ')} | ${x.postgresUsPerEvent.toFixed(1)} | ${x.natsUsPerEvent.toFixed(1)} | ${x.redisUsPerEvent.toFixed(1)} |`));
  L.push('');
  L.push('| (medians of the runs) | floor | Tidemark | Tidemark / floor | aim |', '|---|---:|---:|---:|---|');
  L.push(`| events/s end to end | ${f0(s.floor.eventsPerS)} | ${f0(s.tidemark.eventsPerS)} | **${s.capacityRatio.toFixed(2)}x** | ≥ 0.6x, every 202 readable within 2 s: ${yes(s.met.capacity)} |`);
  L.push(`| machine CPU µs/event | ${s.floor.machineUsPerEvent.toFixed(1)} | ${s.tidemark.machineUsPerEvent.toFixed(1)} | **${s.cpuRatio.toFixed(2)}x** | ≤ 2x: ${yes(s.met.cpu)} |`);
  L.push(`| server process CPU µs/event | ${s.floor.serverUsPerEvent.toFixed(1)} | ${s.tidemark.serverUsPerEvent.toFixed(1)} | ${(s.tidemark.serverUsPerEvent / s.floor.serverUsPerEvent).toFixed(2)}x | |`);
  for (const [label, k] of [['PostgreSQL', 'postgresUsPerEvent'], ['NATS', 'natsUsPerEvent'], ['Redis', 'redisUsPerEvent']] as const) {
    L.push(`| ${label} CPU µs/event | ${s.floor[k].toFixed(1)} | ${s.tidemark[k].toFixed(1)} | ${(s.tidemark[k] / s.floor[k]).toFixed(2)}x | |`);
  }
  L.push(`| sequential p50 ms (${r.options.seq} requests, one socket) | ${r.seq.floor.p50.toFixed(3)} | ${r.seq.Tidemark.p50.toFixed(3)} | +${(r.seq.Tidemark.p50 - r.seq.floor.p50).toFixed(3)} ms | ≤ floor + 0.3 ms (${s.p50Aim.toFixed(3)}): ${yes(s.met.p50)} |`);
  L.push(`| sequential p99 ms | ${r.seq.floor.p99.toFixed(3)} | ${r.seq.Tidemark.p99.toFixed(3)} | +${(r.seq.Tidemark.p99 - r.seq.floor.p99).toFixed(3)} ms | ≤ max(5, floor + 2) (${s.p99Aim.toFixed(2)}): ${yes(s.met.p99)} |`);
  L.push('');
  return L.join('\n');
}

if (process.argv[1] && /bench[\\/]floor\.ts$/.test(process.argv[1])) {
  const argv = process.argv.slice(2);
  main().then(
    (r) => {
      const md = markdown(r, `npx tsx bench/floor.ts${argv.length ? ` ${argv.join(' ')}` : ''}`);
      process.stdout.write(`${md}\n`);
      process.stdout.write(`BENCH_RESULT ${JSON.stringify({ ...r, summary: summary(r) })}\n`);
      if (a.record) writeSection('Floor', md);
      process.exit(0);
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
