// Where `npm start`'s CPU goes at a fixed open-loop rate (a diagnostic; bench/RESULTS.md
// "End to end: notes", 2026-11-28): CPU and context switches per event of the Tidemark process,
// the benchmark database's PostgreSQL backends, NATS and Redis (from /proc), the machine's busy
// cores, the time until every 202 is readable, and a bare uWS server's CPU and switches per
// request at the same rate, in the same run. Prints; writes nothing.
//
//   npx tsx bench/wakeups.ts [--rates 300,1600] [--seconds 10] [KEY=VALUE ...]   (env for npm start)
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { TestEnv, ROOT, sleep, waitFor } from '../test/support/harness';
import { stopChild } from '../test/support/private-services';
import { countStored, cpuDelta, cpuNow, pidsOf, rawRequests, ticks, TICK_US } from './e2e';
import { openLoop, percentile, sequential } from './openloop';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rates: { type: 'string', default: '300,1600' }, seconds: { type: 'string', default: '10' } },
});
const rates = values.rates!.split(',').map(Number);
const seconds = Number(values.seconds);
const extra = Object.fromEntries(positionals.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));

/** Voluntary and involuntary context switches of every thread of `pid`. */
function switches(pid: number): number {
  let n = 0;
  try {
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      const st = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8');
      n += Number(/\nvoluntary_ctxt_switches:\s+(\d+)/.exec(st)?.[1] ?? 0) + Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(st)?.[1] ?? 0);
    }
  } catch {
    // the process or thread is gone
  }
  return n;
}
/** Busy and total jiffies of the whole machine (/proc/stat; idle and iowait are not busy). */
function machine(): [number, number] {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return [total - f[3]! - f[4]!, total];
}
async function bare(rate: number): Promise<string> {
  const port = 12000 + Math.floor(Math.random() * 18000);
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/baseline-server.ts'), 'bare', '--port', String(port)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((r) => child.stdout!.on('data', (d) => String(d).includes('listening') && r()));
    await openLoop({ port, requests: rawRequests(null), rate: 1000, seconds: 2, connections: 128 });
    const [t0, s0] = [ticks(child.pid!), switches(child.pid!)];
    const r = await openLoop({ port, requests: rawRequests(null), rate, seconds, connections: 128 });
    return `bare uWS at ${rate}/s: ${((switches(child.pid!) - s0) / r.ok).toFixed(2)} switches and ${Math.round(((ticks(child.pid!) - t0) * TICK_US) / r.ok)} us of CPU per request`;
  } finally {
    child.kill('SIGKILL');
  }
}

async function tidemark(rate: number): Promise<string[]> {
  const env = await new TestEnv('wakeups').setup();
  const port = 12000 + Math.floor(Math.random() * 18000);
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'cmd/all/main.ts')], {
    cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, ...env.env({ PORT: String(port), METRICS_PORT: String(port), LOG_LEVEL: 'warn', TIDEMARK_SHARDS: '16', ...extra }) },
  });
  try {
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.ok === true, { timeoutMs: 60_000, what: 'npm start' });
    const projectId = await env.project({ name: 'wakeups' });
    const creds = await env.client(projectId, 'write', 0);
    await sequential({ port, requests: rawRequests(creds).slice(0, 1), count: 1 });
    await openLoop({ port, requests: rawRequests(creds), rate: 1000, seconds: 2, connections: 128 });
    await sleep(1000);
    const stored0 = await countStored(env, projectId);
    const sw = async () => {
      const b = await env.db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
      return {
        tidemark: switches(child.pid!), postgres: b.rows.reduce((n, r) => n + switches(r.pid), 0),
        nats: pidsOf('nats-server').reduce((n, p) => n + switches(p), 0), redis: pidsOf('redis-server').reduce((n, p) => n + switches(p), 0),
      };
    };
    const [m0, sw0, cpu0] = [machine(), await sw(), await cpuNow(child.pid!, env)];
    const r = await openLoop({ port, requests: rawRequests(creds), rate, seconds, connections: 128 });
    const t0 = performance.now();
    while ((await countStored(env, projectId)) - stored0 < r.ok && performance.now() - t0 < 30_000) await sleep(50);
    const drainS = (performance.now() - t0) / 1000;
    const [m1, sw1, cpu] = [machine(), await sw(), cpuDelta(cpu0, await cpuNow(child.pid!, env))];
    const per = (o: Record<string, number>) => Object.entries(o).map(([k, v]) => `${k} ${v}`).join(', ');
    return [
      `npm start at ${rate}/s: ${r.ok} accepted, non-2xx ${r.non2xx}, p50 ${percentile(r.latencies, 50).toFixed(1)} ms, p99 ${percentile(r.latencies, 99).toFixed(1)} ms, every 202 readable ${drainS.toFixed(2)} s after the load`,
      `  CPU us per event: ${per({ tidemark: Math.round((cpu.tidemark * 1e6) / r.ok), postgres: Math.round((cpu.postgres * 1e6) / r.ok), nats: Math.round((cpu.nats * 1e6) / r.ok), redis: Math.round((cpu.redis * 1e6) / r.ok) })}`,
      `  context switches per event: ${Object.entries(sw1).map(([k, v]) => `${k} ${((v - sw0[k as keyof typeof sw0]) / r.ok).toFixed(2)}`).join(', ')}`,
      `  machine busy: ${((os.cpus().length * (m1[0] - m0[0])) / (m1[1] - m0[1])).toFixed(2)} of ${os.cpus().length} cores`,
    ];
  } finally {
    await stopChild(child, 'SIGTERM');
    await env.teardown();
  }
}

for (const rate of rates) {
  console.log(await bare(rate));
  for (const line of await tidemark(rate)) console.log(line);
}
