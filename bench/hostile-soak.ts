// Hostile soak: normal traffic (steady ingest from many devices, dashboard reads) with the
// hostile actions listed below mixed in at random, against API + worker child processes.
// The first fifth of the run is normal traffic only: the baseline of the same run, against
// which the hostile part's latencies are compared (the machine is shared: ratios, not
// absolutes). At the end:
// - every 202 (normal and hostile alike) is stored exactly once (by marker);
// - no leaked PostgreSQL connection: no backend of the database holds a transaction or runs
//   a statement once the traffic stops (pg_stat_activity), and the connection count is back
//   to what it was before the hostile part;
// - memory bounded: RSS of both processes, first / max / last and the second-half slope;
// - the service still answers within its aims.
// Hostile actions: NDJSON exports read 100 bytes then dropped, or stalled; charts with 8
// slow regex series (503 at the budget) or dropped mid-query; a minute chart broken down by
// 100 values; 26 series broken down by long values (400); ingest of a 3,000-CJK __path,
// %00 in utm_source, a 140,000-digit property, deep nesting, a lone surrogate, NUL (400s);
// events at the storable limits (202, must be stored); HTTP/1.0 requests.
//
// Writes the "## Hostile soak" section of bench/RESULTS.md (only that section).
//
//   npx tsx bench/hostile-soak.ts [--minutes 10] [--rate 100] [--hostile-every-ms 1000] [--no-write]
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT, sleep, spawnApp, TestEnv, type Credentials } from '../test/support/harness';
import { eventRow, insertEvents } from '../test/support/export-server';
import { spawnAppRetry } from '../test/support/private-services';

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    rate: { type: 'string', default: '100' },
    'hostile-every-ms': { type: 'string', default: '1000' },
    /** Comma list of hostile action names to draw from (default: all); a diagnostic. */
    only: { type: 'string', default: '' },
    'no-write': { type: 'boolean', default: false },
  },
});
const ONLY = new Set(String(args.only).split(',').filter(Boolean));
const MINUTES = Number(args.minutes);
const RATE = Number(args.rate);
const HOSTILE_EVERY_MS = Number(args['hostile-every-ms']);
const DEVICES = 200;
const log = (msg: string) => console.error(`[hostile-soak ${new Date().toISOString().slice(11, 19)}] ${msg}`);

type Child = Awaited<ReturnType<typeof spawnApp>>;

// ---------------------------------------------------------------- measuring

function rssMb(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

function slopeMbPerMin(points: { t: number; v: number }[]): number {
  if (points.length < 2) return 0;
  const n = points.length;
  const mt = points.reduce((a, p) => a + p.t, 0) / n;
  const mv = points.reduce((a, p) => a + p.v, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.t - mt) * (p.v - mv);
    den += (p.t - mt) ** 2;
  }
  return den ? (num / den) * 60 : 0;
}

function quantile(xs: number[], q: number): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

interface Timed {
  atMs: number;
  ms: number;
  status: number | 'error';
}

// ---------------------------------------------------------------- traffic

const UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/124.0.0.0 Safari/537.36';
const hdr = (c: Credentials) => ({ 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret });

async function timedFetch(url: string, init: RequestInit, t0: number, out: Timed[], timeoutMs = 20_000): Promise<{ status: number | 'error'; text: string }> {
  const started = Date.now();
  let status: number | 'error' = 'error';
  let text = '';
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    text = await res.text();
    status = res.status;
  } catch {
    status = 'error';
  }
  out.push({ atMs: started - t0, ms: Date.now() - started, status });
  return { status, text };
}

/** Sends raw bytes; resolves after reading `bytes` bytes (or the close), then `then` decides. */
function raw(port: number, request: string, o: { readBytes: number; then: 'drop' | 'stall'; stallMs?: number }): Promise<string> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let got = 0;
    let done = false;
    const finish = (how: string) => {
      if (done) return;
      done = true;
      sock.destroy();
      resolve(how);
    };
    sock.on('error', () => finish('error'));
    sock.on('close', () => finish(got ? 'closed-by-server' : 'closed-without-answer'));
    sock.on('data', (d) => {
      got += d.length;
      if (got >= o.readBytes) {
        sock.removeAllListeners('data');
        sock.pause();
        if (o.then === 'drop') finish('dropped');
        else setTimeout(() => finish('stalled'), o.stallMs ?? 15_000);
      }
    });
    setTimeout(() => finish('timeout'), 60_000);
    // readBytes 0: leave stallMs after sending, whatever came (a client that gives up mid-query).
    if (o.readBytes === 0) setTimeout(() => finish('dropped'), o.stallMs ?? 300);
    sock.write(request);
  });
}

/** Incompressible CJK text. */
function cjk(n: number, seed: number): string {
  let x = seed || 1;
  let s = '';
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    s += String.fromCharCode(0x4e00 + (x % 20_000));
  }
  return s;
}

// ---------------------------------------------------------------- the run

interface Result {
  baseline: { ingest: Timed[]; reads: Timed[] };
  hostile: { ingest: Timed[]; reads: Timed[] };
  actions: Record<string, Record<string, number>>;
  accepted: number;
  storedOnce: number;
  missing: number;
  doubled: number;
  catchUpSeconds: number | null;
  connections: { beforeHostile: number; end: number; busyEnd: number; busyEndDetail: string };
  rss: Record<string, { t: number; v: number }[]>;
  afterIdle: { ingestMs: number; readMs: number; ingestStatus: number | 'error'; readStatus: number | 'error' };
}

async function run(): Promise<Result> {
  const env = await new TestEnv('hsoak').setup();
  let api: Child | undefined;
  let worker: Child | undefined;
  try {
    const projectId = await env.project({ name: 'Hostile soak', timezone: 'UTC' });
    const writer = await env.client(projectId, 'write', 0);
    const readers = await Promise.all(Array.from({ length: 8 }, () => env.client(projectId, 'read', 0)));
    let readerTurn = 0;
    const reader = () => readers[readerTurn++ % readers.length]!;

    // Seed: ~20 MB of events with properties for the exports, 100 plan values for the minute
    // chart, 200 long values for the byte budget, one prime-length run of a's for the regex.
    const day = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000;
    const rows = [];
    const filler = 'x'.repeat(4000);
    for (let i = 0; i < 5000; i++) rows.push(eventRow(projectId, { name: 'seed', created_at: new Date(day + i * 1000).toISOString(), properties: { i, filler, plan: `plan-${i % 100}` } }));
    for (let i = 0; i < 200; i++) rows.push(eventRow(projectId, { name: 'upload', created_at: new Date(day + 20_000_000 + i * 1000).toISOString(), properties: { blob: `${i}-${'b'.repeat(40_000)}` } }));
    rows.push(eventRow(projectId, { name: 'slow', created_at: new Date(day + 30_000_000).toISOString(), properties: { long: 'a'.repeat(20_011) } }));
    await insertEvents(env.db, rows);

    [api, worker] = await Promise.all([spawnAppRetry(env, 'api'), spawnAppRetry(env, 'worker')]);
    const port = api.port;
    const base = api.url;
    const pids = { api: api.child.pid, worker: worker.child.pid };
    const rss: Result['rss'] = { api: [], worker: [] };
    const t0 = Date.now();
    const sampleTimer = setInterval(() => {
      for (const [k, pid] of Object.entries(pids)) {
        const v = rssMb(pid);
        if (v !== null) rss[k]!.push({ t: (Date.now() - t0) / 1000, v });
      }
    }, 5000);

    const totalMs = MINUTES * 60_000;
    // Warm-up (JIT, caches, the first pool connections) is not measured: then the baseline.
    const warmupMs = Math.min(15_000, totalMs / 10);
    const hostileFrom = t0 + warmupMs + totalMs / 5;
    const endAt = t0 + totalMs;
    const ingest: Timed[] = [];
    const reads: Timed[] = [];
    const markers: string[] = [];
    const actions: Result['actions'] = {};
    const count = (name: string, outcome: string | number) => {
      const a = (actions[name] ??= {});
      a[String(outcome)] = (a[String(outcome)] ?? 0) + 1;
    };
    let seq = 0;
    const send = async (body: unknown, device: number, track = true) => {
      const m = `hs-${seq++}`;
      const b = body as { payload: { properties: Record<string, unknown> } };
      if (track) b.payload.properties.marker = m;
      const r = await timedFetch(`${base}/track`, {
        method: 'POST', headers: { ...hdr(writer), 'content-type': 'application/json', 'x-client-ip': `10.60.${device >> 8}.${device & 255}`, 'user-agent': UA }, body: JSON.stringify(body),
      }, t0, ingest);
      if (track && r.status === 202) markers.push(m);
      return r.status;
    };

    // Normal ingest: RATE req/s from DEVICES devices.
    const normalIngest = (async () => {
      const interval = 1000 / RATE;
      let next = Date.now();
      const inflight = new Set<Promise<unknown>>();
      for (let n = 0; Date.now() < endAt; n++) {
        const wait = next - Date.now();
        if (wait > 0) await sleep(wait);
        next += interval;
        const device = n % DEVICES;
        const p = send({ type: 'track', payload: { name: n % 3 ? 'click' : 'screen_view', properties: { __path: `https://shop.example/p/${n % 20}?utm_source=news`, __title: 'Shop' } } }, device).then((s) => count('normal-ingest', s));
        inflight.add(p);
        void p.finally(() => inflight.delete(p));
      }
      await Promise.all(inflight);
    })();

    // Normal reads: a dashboard's requests, one after another.
    const normalReads = (async () => {
      const paths = [
        `/insights/${projectId}/metrics?range=7d`, `/insights/${projectId}/pages?range=7d`, `/insights/${projectId}/utm_source?range=7d`,
        `/export/events?projectId=${projectId}&limit=20`,
        `/export/charts?projectId=${projectId}&range=7d&series=${encodeURIComponent('[{"name":"*"}]')}`,
      ];
      for (let i = 0; Date.now() < endAt; i++) {
        const r = await timedFetch(`${base}${paths[i % paths.length]}`, { headers: hdr(reader()) }, t0, reads);
        count('normal-read', r.status);
        await sleep(200);
      }
    })();

    // Hostile actions, at random, from a fifth of the run on.
    const slowSeries = encodeURIComponent(JSON.stringify(Array.from({ length: 8 }, () => ({ name: 'slow', filters: [{ name: 'properties.long', operator: 'regex', value: ['^(aa+)\\1+$'] }] }))));
    const get = (p: string, c = reader()) => `GET ${p} HTTP/1.1\r\nHost: t\r\nservice-client-id: ${c.clientId}\r\nservice-client-secret: ${c.clientSecret}\r\n\r\n`;
    const hostileActions: [string, () => Promise<string | number>][] = [
      ['ndjson-drop', () => raw(port, get(`/export/events?projectId=${projectId}&format=ndjson&includes=properties`), { readBytes: 100, then: 'drop' })],
      ['ndjson-stall', () => raw(port, get(`/export/events?projectId=${projectId}&format=ndjson&includes=properties`), { readBytes: 100, then: 'stall', stallMs: 15_000 })],
      ['regex-8-series', async () => (await timedFetch(`${base}/export/charts?projectId=${projectId}&range=7d&series=${slowSeries}`, { headers: hdr(reader()) }, t0, [])).status],
      ['regex-drop', () => raw(port, get(`/export/charts?projectId=${projectId}&range=7d&series=${slowSeries}`), { readBytes: 0, then: 'drop', stallMs: 500 })],
      ['minute-chart-100-values', async () => (await timedFetch(`${base}/export/charts?projectId=${projectId}&startDate=${new Date(day).toISOString().slice(0, 10)}&endDate=${new Date(day).toISOString().slice(0, 10)}&interval=minute&series=${encodeURIComponent('[{"name":"seed"}]')}&breakdowns=${encodeURIComponent('[{"name":"properties.plan"}]')}`, { headers: hdr(reader()) }, t0, [])).status],
      ['26-series-long-values', async () => (await timedFetch(`${base}/export/charts?projectId=${projectId}&range=7d&series=${encodeURIComponent(JSON.stringify(Array.from({ length: 26 }, () => ({ name: 'upload' }))))}&breakdowns=${encodeURIComponent('[{"name":"properties.blob"}]')}&limit=1000`, { headers: hdr(reader()) }, t0, [])).status],
      ['ingest-cjk-path', () => send({ type: 'track', payload: { name: 'screen_view', properties: { __path: `https://shop.example/${cjk(3000, seq)}`, __title: 't' } } }, 1)],
      ['ingest-utm-nul', () => send({ type: 'track', payload: { name: 'screen_view', properties: { __path: 'https://shop.example/?utm_source=a%00b' } } }, 2)],
      ['ingest-huge-number', () => send({ type: 'identify', payload: { profileId: 'hs-p', properties: { score: '9'.repeat(140_000) } } }, 3, false)],
      ['ingest-increment', () => send({ type: 'increment', payload: { profileId: 'hs-p', property: 'score', value: 1 } }, 3, false)],
      ['ingest-deep', () => {
        let v: unknown = 1;
        for (let i = 0; i < 100; i++) v = { v };
        return send({ type: 'track', payload: { name: 'deep', properties: { v } } }, 4);
      }],
      ['ingest-at-limits', () => send({ type: 'track', payload: { name: '名'.repeat(170), properties: { __path: `https://shop.example/${'p'.repeat(1023)}`, __title: 'é'.repeat(512), ['k'.repeat(1024)]: '9'.repeat(1000) } } }, 5)],
      ['ingest-lone-surrogate-nul', async () => {
        const body = `{"type":"track","payload":{"name":"x","properties":{"a":"\\ud800","b":"\\u0000"}}}`;
        return (await timedFetch(`${base}/track`, { method: 'POST', headers: { ...hdr(writer), 'content-type': 'application/json' }, body }, t0, [])).status;
      }],
      ['http-1.0', () => raw(port, 'GET /healthz HTTP/1.0\r\nHost: t\r\n\r\n', { readBytes: 1, then: 'drop' })],
    ];
    const drawn = ONLY.size ? hostileActions.filter(([n]) => ONLY.has(n)) : hostileActions;
    if (!drawn.length) throw new Error(`--only names no action of: ${hostileActions.map(([n]) => n).join(', ')}`);
    const hostile = (async () => {
      while (Date.now() < hostileFrom) await sleep(200);
      const inflight = new Set<Promise<unknown>>();
      while (Date.now() < endAt) {
        const [name, act] = drawn[Math.floor(Math.random() * drawn.length)]!;
        const p = act().then((o) => count(name, o), (err) => count(name, `threw ${(err as Error).message}`));
        inflight.add(p);
        void p.finally(() => inflight.delete(p));
        await sleep(HOSTILE_EVERY_MS);
      }
      await Promise.all(inflight);
    })();

    // Connections just before the hostile part.
    while (Date.now() < hostileFrom - 1000) await sleep(200);
    const connCount = async () => Number((await env.db.query<{ n: string }>('SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [env.dbName])).rows[0]!.n);
    const beforeHostile = await connCount();

    await Promise.all([normalIngest, normalReads, hostile]);
    log(`traffic done; ${markers.length} events accepted; waiting for the worker`);

    // Every accepted event stored exactly once.
    const stored = async () => {
      const { rows: r } = await env.db.query<{ m: string; n: string }>("SELECT properties->>'marker' AS m, count(*) AS n FROM events WHERE properties ? 'marker' GROUP BY 1");
      return new Map(r.map((x) => [x.m, Number(x.n)]));
    };
    const waitStart = Date.now();
    let counts = await stored();
    while (markers.some((m) => !counts.has(m)) && Date.now() - waitStart < 180_000) {
      await sleep(1000);
      counts = await stored();
    }
    const catchUpSeconds = markers.every((m) => counts.has(m)) ? (Date.now() - waitStart) / 1000 : null;
    const storedOnce = markers.filter((m) => counts.get(m) === 1).length;

    // Connections once the traffic has stopped (stalled exports are cut within 10 s).
    await sleep(12_000);
    const busy = await env.db.query<{ state: string; query: string }>(
      "SELECT state, left(query, 80) AS query FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND state IS NOT NULL AND state <> 'idle'", [env.dbName]);
    // Idle pool connections close after 30 s unused (pg-pool idleTimeoutMillis).
    await sleep(25_000);
    const end = await connCount();

    // Still answering after it all.
    const after: Timed[] = [];
    const ir = await timedFetch(`${base}/track`, { method: 'POST', headers: { ...hdr(writer), 'content-type': 'application/json' }, body: JSON.stringify({ type: 'track', payload: { name: 'after', properties: {} } }) }, t0, after);
    const rr = await timedFetch(`${base}/insights/${projectId}/metrics?range=7d`, { headers: hdr(reader()) }, t0, after);
    clearInterval(sampleTimer);

    const split = (xs: Timed[]) => ({ base: xs.filter((x) => x.atMs >= warmupMs && x.atMs < hostileFrom - t0), hostile: xs.filter((x) => x.atMs >= hostileFrom - t0) });
    const si = split(ingest);
    const sr = split(reads);
    return {
      baseline: { ingest: si.base, reads: sr.base },
      hostile: { ingest: si.hostile, reads: sr.hostile },
      actions, accepted: markers.length, storedOnce,
      missing: markers.filter((m) => !counts.has(m)).length,
      doubled: markers.filter((m) => (counts.get(m) ?? 0) > 1).length,
      catchUpSeconds,
      connections: { beforeHostile, end, busyEnd: busy.rows.length, busyEndDetail: JSON.stringify(busy.rows) },
      rss,
      afterIdle: { ingestMs: after[0]!.ms, readMs: after[1]!.ms, ingestStatus: ir.status, readStatus: rr.status },
    };
  } finally {
    for (const c of [api, worker]) {
      if (c && c.child.exitCode === null) {
        c.child.kill('SIGKILL');
        await new Promise((r) => c.child.once('exit', r));
      }
    }
    await env.teardown().catch(() => {});
  }
}

// ---------------------------------------------------------------- report

function latencyRow(label: string, xs: Timed[]): string {
  const ok = xs.filter((x) => x.status !== 'error');
  const ms = ok.map((x) => x.ms);
  const statuses: Record<string, number> = {};
  for (const x of xs) statuses[String(x.status)] = (statuses[String(x.status)] ?? 0) + 1;
  return `| ${label} | ${xs.length} | ${quantile(ms, 0.5).toFixed(0)} | ${quantile(ms, 0.95).toFixed(0)} | ${quantile(ms, 0.99).toFixed(0)} | ${Object.entries(statuses).map(([k, v]) => `${k}: ${v}`).join(', ')} |`;
}

function render(r: Result, before: string, after: string): string {
  const p99 = (xs: Timed[]) => quantile(xs.filter((x) => x.status !== 'error').map((x) => x.ms), 0.99);
  const ratioIngest = p99(r.hostile.ingest) / p99(r.baseline.ingest);
  const ratioReads = p99(r.hostile.reads) / p99(r.baseline.reads);
  const lines: string[] = ['## Hostile soak', ''];
  lines.push(`Command: \`npx tsx bench/hostile-soak.ts --minutes ${MINUTES} --rate ${RATE} --hostile-every-ms ${HOSTILE_EVERY_MS}${ONLY.size ? ` --only ${[...ONLY].join(',')}` : ''}\``, '');
  lines.push(`Machine: ${os.availableParallelism()} CPUs, ${os.cpus()[0]?.model ?? ''}, Node ${process.version}; PostgreSQL, Redis and NATS on the same machine, shared with other sessions' test runs (figures are noisy: compare the two phases of the same run). Load average before: ${before}; after: ${after}. Date: ${new Date().toISOString()}.`, '');
  lines.push(`API + worker child processes. The first ${Math.round(Math.min(15, MINUTES * 6))} s are a warm-up, not measured; the next fifth of the run is the baseline (normal traffic only). Normal traffic the whole run: ${RATE} ingest req/s from ${DEVICES} devices, and a dashboard's reads one after another (metrics, pages, utm_source, an export page, a chart; 200 ms apart). After the baseline, one hostile action every ${HOSTILE_EVERY_MS} ms at random (NDJSON export dropped after 100 bytes or stalled 15 s; 8 slow regex series, answered or dropped mid-query; a minute chart by 100 values; 26 series by 40 KB values; ingest of a 3,000-CJK path, %00 in utm_source, a 140,000-digit number, 100-deep nesting, a lone surrogate and NUL, an event at every storable limit; HTTP/1.0).`, '');
  lines.push('| traffic | requests | p50 ms | p95 ms | p99 ms | statuses |', '|---|---:|---:|---:|---:|---|');
  lines.push(latencyRow('ingest, baseline (normal only)', r.baseline.ingest), latencyRow('ingest, with hostile traffic', r.hostile.ingest));
  lines.push(latencyRow('reads, baseline (normal only)', r.baseline.reads), latencyRow('reads, with hostile traffic', r.hostile.reads), '');
  lines.push('Hostile actions and their outcomes:', '', '| action | outcomes |', '|---|---|');
  for (const [name, o] of Object.entries(r.actions).sort()) lines.push(`| ${name} | ${Object.entries(o).map(([k, v]) => `${k}: ${v}`).join(', ')} |`);
  lines.push('');
  const rssLine = (name: string) => {
    const s = r.rss[name]!;
    const half = s.filter((p) => p.t >= s[s.length - 1]!.t / 2);
    return `| ${name} | ${s[0]?.v.toFixed(0)} | ${Math.max(...s.map((p) => p.v)).toFixed(0)} | ${s[s.length - 1]?.v.toFixed(0)} | ${slopeMbPerMin(half).toFixed(2)} |`;
  };
  lines.push('| process | RSS first MiB | RSS max MiB | RSS last MiB | slope MiB/min (second half) |', '|---|---:|---:|---:|---:|', rssLine('api'), rssLine('worker'), '');
  lines.push(`Accepted (202) events with a marker: ${r.accepted}; stored exactly once: ${r.storedOnce}; missing: ${r.missing}; stored twice or more: ${r.doubled}${r.catchUpSeconds !== null ? ` (caught up ${r.catchUpSeconds.toFixed(0)} s after the traffic stopped)` : ''}.`, '');
  lines.push(`PostgreSQL connections of the database (pg_stat_activity): ${r.connections.beforeHostile} just before the hostile part; 12 s after the traffic stopped, backends holding a transaction or running a statement: ${r.connections.busyEnd}${r.connections.busyEnd ? ` ${r.connections.busyEndDetail}` : ''}; 37 s after (idle pool connections close after 30 s): ${r.connections.end} connections.`, '');
  lines.push(`After it all: an ingest answered ${r.afterIdle.ingestStatus} in ${r.afterIdle.ingestMs} ms, a metrics read ${r.afterIdle.readStatus} in ${r.afterIdle.readMs} ms.`, '');
  const verdicts = [
    `every 202 stored exactly once: ${r.missing === 0 && r.doubled === 0 && r.storedOnce === r.accepted ? 'yes' : '**no**'}`,
    `no leaked connection: ${r.connections.busyEnd === 0 && r.connections.end <= r.connections.beforeHostile ? 'yes (none busy, count back to the baseline)' : r.connections.busyEnd === 0 ? `none busy, but ${r.connections.end} connections for ${r.connections.beforeHostile} before` : '**no**'}`,
    `memory bounded: ${['api', 'worker'].every((n) => { const s = r.rss[n]!; const half = s.filter((p) => p.t >= s[s.length - 1]!.t / 2); return slopeMbPerMin(half) < 5; }) ? 'yes (no second-half slope above 5 MiB/min)' : '**growing**'}`,
    `latency with hostile traffic vs baseline (p99 ratio): ingest ${ratioIngest.toFixed(2)}x, reads ${ratioReads.toFixed(2)}x; aims (a shared machine: relative to the same run): ingest p99 within 3x of its baseline, normal reads p99 within the 5 s query budget: ${ratioIngest <= 3 && p99(r.hostile.reads) < 5000 ? 'met' : '**missed**'}`,
  ];
  lines.push(`Verdict: ${verdicts.join('; ')}.`, '');
  return lines.join('\n');
}

function writeSection(section: string): void {
  const file = path.join(ROOT, 'bench/RESULTS.md');
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmark results\n';
  const start = text.indexOf('\n## Hostile soak');
  let out: string;
  if (start < 0) out = `${text.trimEnd()}\n\n${section.trimEnd()}\n`;
  else {
    const next = text.indexOf('\n## ', start + 1);
    out = `${text.slice(0, start)}\n${section.trimEnd()}\n${next < 0 ? '' : text.slice(next)}`;
  }
  writeFileSync(file, out);
}

const loadBefore = os.loadavg().map((x) => x.toFixed(1)).join(' ');
log(`${MINUTES} min, ${RATE} ingest req/s, a hostile action every ${HOSTILE_EVERY_MS} ms after the first fifth`);
const result = await run();
const section = render(result, loadBefore, os.loadavg().map((x) => x.toFixed(1)).join(' '));
console.log(section);
if (!args['no-write']) writeSection(section);
process.exit(0);
