// WORKER_LINGER_MS A/B: `npm start` (API + worker thread, the default shard count) started with
// each linger in turn, alternating, in one run on this machine. Per round:
//   - sequential /track from one connection (producer latency p50/p99);
//   - an open loop at a fixed rate (p50/p99 from the scheduled send time), then how long
//     until every 202 of it is readable in PostgreSQL;
//   - CPU per accepted event over the open loop: the Tidemark process and the PostgreSQL
//     backends of the benchmark's database (from /proc).
// The machine is shared: compare the lingers within this run, round by round.
//
//   npx tsx bench/linger-ab.ts [--lingers 0,50] [--rounds 2] [--rate 800] [--seconds 6] [--sequential 2000] [--no-write]
import os from 'node:os';
import { parseArgs } from 'node:util';
import { sleep } from '../test/support/harness';
import { countStored, cpuDelta, cpuNow, rawRequests, withNpmStart } from './e2e';
import { openLoop, percentile, sequential } from './openloop';
import { machineInfo, writeSection } from './run';

const { values: args } = parseArgs({
  options: {
    lingers: { type: 'string', default: '0,50' },
    rounds: { type: 'string', default: '2' },
    rate: { type: 'string', default: '800' },
    seconds: { type: 'string', default: '6' },
    sequential: { type: 'string', default: '2000' },
    'no-write': { type: 'boolean', default: false },
  },
});
const LINGERS = String(args.lingers).split(',').map(Number);
const ROUNDS = Number(args.rounds);
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const SEQ = Number(args.sequential);
const log = (m: string) => console.error(`[linger-ab ${new Date().toISOString().slice(11, 19)}] ${m}`);

interface Row {
  round: number;
  linger: number;
  seqP50: number;
  seqP99: number;
  loopP50: number;
  loopP99: number;
  accepted: number;
  non2xx: number;
  readableS: number;
  tidemarkUs: number;
  postgresUs: number;
}

async function one(round: number, linger: number): Promise<Row> {
  return withNpmStart('linger', { WORKER_LINGER_MS: String(linger) }, async (env, app) => {
    const pid = app.child.pid!;
    const project = await env.project({ name: `linger ${linger}` });
    const creds = await env.client(project, 'write', 0);
    const reqs = rawRequests(creds);
    await sequential({ port: app.port, requests: reqs, count: 300 });
    const sr = await sequential({ port: app.port, requests: reqs, count: SEQ });
    await sleep(1000);
    const before = await countStored(env, project);
    const c0 = await cpuNow(pid, env);
    const lr = await openLoop({ port: app.port, requests: reqs, rate: RATE, seconds: SECONDS, connections: 32 });
    const stopped = performance.now();
    let readableS = NaN;
    for (;;) {
      const stored = await countStored(env, project);
      const since = (performance.now() - stopped) / 1000;
      if (stored >= before + lr.ok) {
        readableS = since;
        break;
      }
      if (since > 60) break;
      await sleep(50);
    }
    const c1 = await cpuNow(pid, env);
    const cpu = cpuDelta(c0, c1);
    const row: Row = {
      round, linger,
      seqP50: percentile(sr.latencies, 50), seqP99: percentile(sr.latencies, 99),
      loopP50: percentile(lr.latencies, 50), loopP99: percentile(lr.latencies, 99),
      accepted: lr.ok, non2xx: lr.non2xx, readableS,
      tidemarkUs: (cpu.tidemark * 1e6) / Math.max(1, lr.ok), postgresUs: (cpu.postgres * 1e6) / Math.max(1, lr.ok),
    };
    log(JSON.stringify(row));
    return row;
  });
}

const machine = machineInfo();
log(`${machine.nproc} CPUs (${machine.cpu}), node ${machine.node}, load ${machine.load}`);
const rows: Row[] = [];
for (let r = 1; r <= ROUNDS; r++) {
  for (const linger of r % 2 ? LINGERS : [...LINGERS].reverse()) rows.push(await one(r, linger));
}
const f = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : '–');
const command = `npx tsx bench/linger-ab.ts --lingers ${LINGERS.join(',')} --rounds ${ROUNDS} --rate ${RATE} --seconds ${SECONDS} --sequential ${SEQ}`;
const md = [
  '## Worker linger A/B',
  '',
  `Command: \`${command}\``,
  '',
  `Machine: ${machine.nproc} CPUs, ${machine.cpu}, Node ${machine.node}; PostgreSQL, Redis and NATS on the same machine. Load average before: ${machine.load}; after: ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}. Date: ${machine.date}.`,
  '',
  `\`npm start\` (the default shard count) per linger, alternating; ${SEQ} sequential /track, then an open loop of ${RATE}/s for ${SECONDS} s (32 connections). CPU: µs per accepted event over the open loop and its drain.`,
  '',
  '| round | WORKER_LINGER_MS | sequential p50 ms | sequential p99 ms | open loop p50 ms | open loop p99 ms | accepted | non-2xx | readable after s | Tidemark µs/event | PostgreSQL µs/event |',
  '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ...rows.map((r) => `| ${r.round} | ${r.linger} | ${f(r.seqP50, 3)} | ${f(r.seqP99)} | ${f(r.loopP50)} | ${f(r.loopP99)} | ${r.accepted} | ${r.non2xx} | ${f(r.readableS)} | ${f(r.tidemarkUs, 0)} | ${f(r.postgresUs, 0)} |`),
].join('\n');
console.log(md);
if (!args['no-write']) writeSection('Worker linger A/B', md);
process.exit(0);
