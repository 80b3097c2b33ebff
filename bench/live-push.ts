// Live push: memory of idle sockets and push latency, on one API process (`npm run api`,
// cmd/api/main.ts, a process of its own, worker off) against the local Redis, NATS and
// PostgreSQL. Writes the "## Live push" section of bench/RESULTS.md.
//
//   npx tsx bench/live-push.ts [--sockets 10000] [--projects 100] [--pushes 200] [--no-write]
//
// 1. Baseline: the API's RSS and V8 heap with no socket (after a warm-up of the same kind).
// 2. --sockets idle sockets over --projects projects (authenticated by headers), from this
//    process: RSS and heap again, and the difference per socket.
// 3. Push latency: for one watched project, --pushes times a new visitor (POST /track with a
//    new profileId), 300 ms apart (more than the 260 ms spacing of messages to one socket);
//    time from the 202 to the {"visitors": N} message on a probe socket, with the idle sockets
//    open, and in a baseline run with only the probe socket (same process, same run).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { ROOT, TestEnv, post, sleep, track, waitFor, type Credentials } from '../test/support/harness';
import { machineInfo, writeSection } from './run';
import { percentile } from './query-support';

/** A browser's: a server-side event (no user-agent, or fetch's own) is no live visitor. */
const BROWSER_UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';

const { values } = parseArgs({
  options: {
    sockets: { type: 'string', default: '10000' },
    projects: { type: 'string', default: '100' },
    pushes: { type: 'string', default: '200' },
    'no-write': { type: 'boolean', default: false },
  },
});
const SOCKETS = Number(values.sockets);
const PROJECTS = Number(values.projects);
const PUSHES = Number(values.pushes);

const machine = machineInfo();
const env = await new TestEnv('benchlive').setup();
const port = 12000 + Math.floor(Math.random() * 18000);
const url = `http://127.0.0.1:${port}`;
let api: ChildProcess | null = null;
const sockets: WebSocket[] = [];

function rssBytes(pid: number): number {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return m ? Number(m[1]) * 1024 : NaN;
}

async function heapBytes(): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = text.match(/^tidemark_process_nodejs_heap_size_used_bytes (\S+)$/m);
  return m ? Number(m[1]) : NaN;
}

async function watching(): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(text.match(/^tidemark_live_sockets\{state="watching"\} (\S+)$/m)?.[1] ?? NaN);
}

function open(projectId: string, c: Credentials, onMessage?: (visitors: number) => void): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/insights/${projectId}/live`, {
      headers: { 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret },
      perMessageDeflate: false,
    });
    let first = true;
    ws.on('message', (d) => {
      const v = (JSON.parse(String(d)) as { visitors: number }).visitors;
      if (first) {
        first = false;
        resolve(ws);
      }
      onMessage?.(v);
    });
    ws.once('error', reject);
    ws.once('close', (code, reason) => first && reject(new Error(`closed ${code} ${String(reason)}`)));
  });
}

const mb = (b: number) => (b / 1024 / 1024).toFixed(1);

try {
  // Projects and their read clients; one write client per project for the pushes.
  const projects: { id: string; reader: Credentials; writer: Credentials }[] = [];
  for (let i = 0; i < PROJECTS; i++) {
    const id = await env.project({ name: `Live ${i}` });
    projects.push({ id, reader: await env.client(id, 'read'), writer: await env.client(id, 'write') });
  }
  api = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'cmd/api/main.ts')], {
    cwd: ROOT, env: { ...process.env, ...env.env({ PORT: String(port), LOG_LEVEL: 'warn', LIVE_MAX_SOCKETS: String(SOCKETS + 100), LIVE_MAX_SOCKETS_PER_PROJECT: String(SOCKETS + 100) }) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  await waitFor(async () => (await fetch(`${url}/readyz`).catch(() => null))?.ok, { timeoutMs: 60_000, what: 'the API' });

  let visitor = 0;
  const pushLatencies = async (target: (typeof projects)[number], n: number): Promise<number[]> => {
    let waiting: { expect: number; resolve: (at: bigint) => void } | null = null;
    let current = -1;
    const probe = await open(target.id, target.reader, (v) => {
      current = v;
      if (waiting && v >= waiting.expect) waiting.resolve(process.hrtime.bigint());
    });
    await waitFor(() => current >= 0, { what: 'probe count' });
    const out: number[] = [];
    for (let i = 0; i < n; i++) {
      const expect = current + 1;
      const arrived = new Promise<bigint>((resolve) => (waiting = { expect, resolve }));
      const res = await post(`${url}/track`, track('screen_view', { __path: `https://bench.example/${i}` }, { profileId: `v${visitor++}` }), target.writer, { userAgent: BROWSER_UA });
      const acceptedAt = process.hrtime.bigint();
      if (res.status !== 202) throw new Error(`track answered ${res.status}`);
      const at = await Promise.race([arrived, sleep(10_000).then(() => null)]);
      waiting = null;
      if (at === null) throw new Error('no push within 10 s');
      out.push(Math.max(0, Number(at - acceptedAt) / 1e6));
      await sleep(300);
    }
    probe.close();
    return out;
  };

  // Warm-up (JIT, caches, the first socket), then the baselines with no idle socket.
  await pushLatencies(projects[0]!, 10);
  await sleep(2000);
  const baseLatency = await pushLatencies(projects[0]!, PUSHES);
  await sleep(1000);
  const rss0 = rssBytes(api.pid!);
  const heap0 = await heapBytes();

  // The idle sockets, 500 connecting at a time.
  const started = Date.now();
  for (let i = 0; i < SOCKETS; i += 500) {
    const batch = Array.from({ length: Math.min(500, SOCKETS - i) }, (_, k) => {
      const p = projects[(i + k) % PROJECTS]!;
      return open(p.id, p.reader);
    });
    sockets.push(...(await Promise.all(batch)));
  }
  const connectSeconds = (Date.now() - started) / 1000;
  await waitFor(async () => (await watching()) === SOCKETS, { what: `${SOCKETS} sockets watching` });
  await sleep(5000); // a few resyncs and revocation checks with every socket open
  const rss1 = rssBytes(api.pid!);
  const heap1 = await heapBytes();

  const loadedLatency = await pushLatencies(projects[0]!, PUSHES);
  const rss2 = rssBytes(api.pid!);
  const heap2 = await heapBytes();
  const stillOpen = sockets.filter((s) => s.readyState === WebSocket.OPEN).length;

  const stat = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return { p50: percentile(s, 50), p99: percentile(s, 99), max: s[s.length - 1]! };
  };
  const b = stat(baseLatency);
  const l = stat(loadedLatency);
  const after = os.loadavg().map((x) => x.toFixed(1)).join(' ');
  const md = `## Live push

Command: \`npx tsx bench/live-push.ts --sockets ${SOCKETS} --projects ${PROJECTS} --pushes ${PUSHES}\`

Machine: ${machine.nproc} CPUs (\`nproc\`), ${machine.cpu}, Node ${machine.node}; PostgreSQL, Redis and NATS on the same machine, shared with other work at the time. Load average (1/5/15 min) before: ${machine.load}; after: ${after}. Date: ${machine.date}.

Setup: one API process (\`cmd/api/main.ts\`, API_THREADS=1, worker off); the sockets and the load come from the bench process (the \`ws\` client), all over loopback. ${SOCKETS.toLocaleString('en-US')} sockets over ${PROJECTS} projects (${Math.round(SOCKETS / PROJECTS)} each), authenticated by headers; connected in ${connectSeconds.toFixed(1)} s (500 at a time).

| API process | RSS MB | V8 heap used MB |
|---|---:|---:|
| no socket (after the baseline pushes) | ${mb(rss0)} | ${mb(heap0)} |
| ${SOCKETS.toLocaleString('en-US')} idle sockets, 5 s after the last connected | ${mb(rss1)} | ${mb(heap1)} |
| the same after ${PUSHES} pushes | ${mb(rss2)} | ${mb(heap2)} |
| **per idle socket** | **${((rss1 - rss0) / SOCKETS / 1024).toFixed(1)} KB** | **${((heap1 - heap0) / SOCKETS / 1024).toFixed(2)} KB** |

Push latency: from the 202 of a POST /track with a new visitor to the \`{"visitors": N}\` message on a probe socket of that project, ${PUSHES} pushes 300 ms apart (one at a time; the spacing keeps the 260 ms message spacing out of the figure).

| Sockets open | p50 ms | p99 ms | max ms |
|---|---:|---:|---:|
| only the probe (baseline, same run) | ${b.p50.toFixed(2)} | ${b.p99.toFixed(2)} | ${b.max.toFixed(2)} |
| probe + ${SOCKETS.toLocaleString('en-US')} idle (${Math.round(SOCKETS / PROJECTS)} on the probe's project) | ${l.p50.toFixed(2)} | ${l.p99.toFixed(2)} | ${l.max.toFixed(2)} |

Ratio (with the idle sockets / baseline): p50 ${(l.p50 / b.p50).toFixed(2)}x, p99 ${(l.p99 / b.p99).toFixed(2)}x. Sockets still open at the end: ${stillOpen.toLocaleString('en-US')} of ${SOCKETS.toLocaleString('en-US')}. The message is sent before the 202 in most cases (the gate script publishes before the JetStream publish the 202 waits for); such a message counts as 0 ms. With idle sockets the probe is the last of its project's 100 sockets to be sent the count, and the bench process (the same one that holds the 10,000 sockets) reads the 99 others' messages first: the p50 difference is that fan-out, end to end on one machine.
`;
  console.log(md);
  if (!values['no-write']) writeSection('Live push', md);
} finally {
  for (const s of sockets) s.terminate();
  if (api && api.exitCode === null) {
    const exited = new Promise((r) => api!.once('exit', r));
    api.kill('SIGTERM');
    await Promise.race([exited, sleep(15_000)]);
    if (api.exitCode === null) api.kill('SIGKILL');
  }
  await env.teardown();
}
