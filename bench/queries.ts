// Insights query benchmark: Tidemark's API in-process (API role only) against bench databases
// made by bench/generate.ts, a read client, and sequential requests per endpoint after a
// warm-up (latency, not throughput): p50/p95 (p99 for /live) per endpoint and database, the
// 10M/1M ratio, and the aims. Writes the "## Insights queries" section of bench/RESULTS.md.
//
//   npx tsx bench/queries.ts --db postgres://postgres@127.0.0.1:5432/bench_1m \
//                            --db postgres://postgres@127.0.0.1:5432/bench_10m [--n 200] [--budget-s 40]
//
// - Each endpoint gets `--n` timed requests, fewer when they would take more than
//   `--budget-s` seconds (at least --min-n); the sample count is reported.
// - The read rate limit (100 requests / 10 s per client) is respected by rotating over
//   READ_CLIENTS read clients, all warmed up first: every request pays the same auth and
//   rate-limit work as a dashboard's.
// - QUERY_TIMEOUT_MS is raised to --timeout-ms (60 s) so that slow answers are measured
//   instead of cut at the default 5 s (503).
// - The last two hours of the data are logged in rollup_invalidations for the main project
//   (as the worker keeps the live hours), so rolled-up queries also read a raw tail.
// - /live: profiles are made live through the real ingest path (POST /track, write client).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { start, type Running } from '../internal/app/runtime';
import { generateSecret, hashSecret } from '../internal/auth/secrets';
import { loadConfig } from '../internal/config/config';
import { createClient } from '../internal/store/accounts';
import { MAIN_PROJECT } from './generate';
import { cleanupNamespace, fmt, logLiveTail, machine, NATS_URL, timeRoute, queryBenchArgs, request, REDIS_URL, type Creds } from './query-support';
import { writeSection as writeResultsSection } from './run';

const BROWSER_UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS = path.join(ROOT, 'bench/RESULTS.md');
/** The section: one with hll, one without (a database from `bench/generate.ts --no-hll`). */
const SECTION = '## Insights queries';
const SECTION_WITHOUT_HLL = '## Insights queries, without hll';
// Each read client may make 100 requests per 10 s: /live's two runs (a 3-s warm-up each,
// then 2,000 and 4,000 requests) stay under 150 clients' allowance.
const READ_CLIENTS = 150;
/** /live is warmed up for this long before it is timed (see bench/live-probe.ts). */
const LIVE_WARMUP_MS = 3000;
const LIVE_PROFILES = 300;

const args = queryBenchArgs({ n: 200, warmup: 20, budgetS: 40 });
const { dbs: DBS, n: N, minN: MIN_N, warmup: WARMUP, budgetMs: BUDGET_MS } = args;

interface Endpoint {
  name: string;
  path: string;
  /** Aim for the p95 (p99 for live), ms. */
  aim: number;
  pct: 95 | 99;
  /** Requests to time (default --n); a p99 wants more. */
  n?: number;
  /** Timed by bench/live-probe.ts in a process of its own instead of this process' fetch. */
  probe?: boolean;
}

const filters = (f: unknown) => `&filters=${encodeURIComponent(JSON.stringify(f))}`;
const DE = filters([{ name: 'country', operator: 'is', value: ['DE'] }]);
const MOBILE = filters([{ name: 'device', operator: 'is', value: ['mobile'] }]);
const DE_NOT_DESKTOP = filters([{ name: 'country', operator: 'is', value: ['DE'] }, { name: 'device', operator: 'isNot', value: ['desktop'] }]);
const BREAKDOWNS = ['referrer_name', 'country', 'city', 'browser', 'os_version', 'utm_source'] as const;

const ENDPOINTS: Endpoint[] = [
  { name: 'metrics yesterday', path: 'metrics?range=yesterday', aim: 50, pct: 95 },
  { name: 'metrics 7d', path: 'metrics?range=7d', aim: 50, pct: 95 },
  { name: 'metrics 30d', path: 'metrics?range=30d', aim: 50, pct: 95 },
  { name: 'metrics 30d, country filter', path: `metrics?range=30d${DE}`, aim: 50, pct: 95 },
  { name: 'pages 7d', path: 'pages?range=7d', aim: 100, pct: 95 },
  { name: 'pages 30d', path: 'pages?range=30d', aim: 100, pct: 95 },
  ...BREAKDOWNS.flatMap((d) => [
    { name: `${d} 7d`, path: `${d}?range=7d`, aim: 100, pct: 95 as const },
    { name: `${d} 30d`, path: `${d}?range=30d`, aim: 100, pct: 95 as const },
  ]),
  { name: 'referrer_name 30d, device filter', path: `referrer_name?range=30d${MOBILE}`, aim: 100, pct: 95 },
  { name: 'referrer_name 7d, device filter', path: `referrer_name?range=7d${MOBILE}`, aim: 100, pct: 95 },
  { name: 'browser 30d, country + device filter', path: `browser?range=30d${DE_NOT_DESKTOP}`, aim: 100, pct: 95 },
  { name: 'city 30d, device filter', path: `city?range=30d${MOBILE}`, aim: 100, pct: 95 },
  { name: 'metrics 30d, country + device filter', path: `metrics?range=30d${DE_NOT_DESKTOP}`, aim: 50, pct: 95 },
  { name: 'live', path: 'live', aim: 2, pct: 99, n: 2000 },
  { name: 'live (client in its own process)', path: 'live', aim: 2, pct: 99, n: 4000, probe: true },
];

/** Runs bench/live-probe.ts against `url` (asynchronously: the app answers in this process). */
function probe(url: string, clients: Creds[], n: number): Promise<Sample> {
  const args = ['tsx', path.join(ROOT, 'bench/live-probe.ts'), '--url', url, '--n', String(n),
    ...clients.flatMap((c) => ['--client', `${c.clientId}:${c.clientSecret}`])];
  return new Promise((resolve, reject) => {
    execFile('npx', args, { cwd: ROOT, encoding: 'utf8' }, (err, out) => {
      if (err) return reject(err);
      const r = JSON.parse(out.trim().split('\n').pop()!) as { n: number; errors: number; p50: number; p95: number; p99: number };
      resolve({ p50: r.p50, p95: r.p95, p99: r.p99, n: r.n, errors: r.errors });
    });
  });
}

interface Sample {
  p50: number;
  p95: number;
  p99: number;
  n: number;
  errors: number;
}




interface DbRun {
  label: string;
  url: string;
  events: number;
  sessions: number;
  /** bench_meta written by generate.ts (empty for a database made otherwise). */
  meta: Record<string, string>;
  results: Map<string, Sample>;
}

async function runOne(url: string): Promise<DbRun> {
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const { rows: [size] } = await db.query<{ events: number; sessions: number }>(
    `SELECT (SELECT count(*) FROM events)::int AS events, (SELECT count(*) FROM sessions)::int AS sessions`,
  );
  const meta: Record<string, string> = {};
  const m = await db.query<{ key: string; value: string }>('SELECT key, value FROM bench_meta').catch(() => ({ rows: [] as { key: string; value: string }[] }));
  for (const r of m.rows) meta[r.key] = r.value;
  const label = size!.events >= 1_000_000 ? `${Math.round(size!.events / 1_000_000)}M` : `${Math.round(size!.events / 1000)}k`;
  // The live tail: the last two hours of data are "still changing" (logged, not rolled up).
  await logLiveTail(db, MAIN_PROJECT, 'sessions');
  const namespace = `bq-${randomBytes(4).toString('hex')}`;
  const cfg = loadConfig({
    PORT: '0', METRICS_PORT: '0', DATABASE_URL: url, NATS_URL, REDIS_URL, TIDEMARK_NAMESPACE: namespace,
    LOG_LEVEL: 'silent', TIDEMARK_SHARDS: '4', QUERY_TIMEOUT_MS: args.timeoutMs,
  });
  const clients: Creds[] = [];
  let app: Running | null = null;
  const results = new Map<string, Sample>();
  try {
    app = await start(cfg, { api: true, worker: false });
    const base = `http://127.0.0.1:${app.port}`;
    for (let i = 0; i < READ_CLIENTS; i++) {
      const secret = generateSecret();
      const c = await createClient(db, { projectId: MAIN_PROJECT, mode: 'read', secretHash: await hashSecret(secret), ingestRate: 0 });
      clients.push({ clientId: c.id, clientSecret: secret });
    }
    const writeSecret = generateSecret();
    const writer = await createClient(db, { projectId: MAIN_PROJECT, mode: 'write', secretHash: await hashSecret(writeSecret), ingestRate: 0 });
    clients.push({ clientId: writer.id, clientSecret: writeSecret });
    for (let i = 0; i < LIVE_PROFILES; i++) {
      const res = await fetch(`${base}/track`, {
        method: 'POST',
        // a browser's user-agent: a server-side event (none, or fetch's own) is no live visitor
        headers: { 'content-type': 'application/json', 'service-client-id': writer.id, 'service-client-secret': writeSecret, 'x-client-ip': `10.1.${i >> 8}.${i & 255}`, 'user-agent': BROWSER_UA },
        body: JSON.stringify({ type: 'track', payload: { name: 'screen_view', profileId: `live-${i}`, properties: { __path: '/' } } }),
      });
      await res.arrayBuffer();
      if (res.status !== 202) throw new Error(`track answered ${res.status}`);
    }
    let turn = 0;
    const next = () => clients[turn++ % READ_CLIENTS]!;
    for (let i = 0; i < READ_CLIENTS; i++) await request(`${base}/insights/${MAIN_PROJECT}/live`, clients[i]!);
    const live = await (await fetch(`${base}/insights/${MAIN_PROJECT}/live`, { headers: { 'service-client-id': clients[0]!.clientId, 'service-client-secret': clients[0]!.clientSecret } })).json();
    console.log(`[${label}] app on ${base}, ${READ_CLIENTS} read clients, live = ${JSON.stringify(live)}`);

    for (const ep of ENDPOINTS) {
      const url = `${base}/insights/${MAIN_PROJECT}/${ep.path}`;
      if (ep.probe) {
        // The read clients' 10-second rate-limit windows empty first (the in-process /live run
        // just used them), so that no probe request is refused.
        await new Promise((r) => setTimeout(r, 10_500));
        const s = await probe(url, clients.slice(0, READ_CLIENTS), ep.n ?? N);
        results.set(ep.name, s);
        console.log(`[${label}] ${ep.name.padEnd(34)} p50 ${fmt(s.p50).padStart(8)}  p95 ${fmt(s.p95).padStart(8)}  p99 ${fmt(s.p99).padStart(8)}  n=${s.n}${s.errors ? ` errors=${s.errors}` : ''}`);
        continue;
      }
      const warmMs = ep.path === 'live' ? LIVE_WARMUP_MS : 0;
      const s: Sample = await timeRoute(url, next, { n: ep.n ?? N, minN: MIN_N, budgetMs: BUDGET_MS, warmup: WARMUP, warmMs });
      results.set(ep.name, s);
      console.log(`[${label}] ${ep.name.padEnd(34)} p50 ${fmt(s.p50).padStart(8)}  p95 ${fmt(s.p95).padStart(8)}  p99 ${fmt(s.p99).padStart(8)}  n=${s.n}${s.errors ? ` errors=${s.errors}` : ''}`);
    }
  } finally {
    await app?.drain().catch(() => {});
    await db.query('DELETE FROM clients WHERE id = ANY($1)', [clients.map((c) => c.clientId)]).catch(() => {});
    await db.end();
    await cleanupNamespace(namespace);
  }
  return { label, url, events: size!.events, sessions: size!.sessions, meta, results };
}




function table(runs: DbRun[]): string {
  const [small, big] = [runs[0]!, runs[runs.length - 1]!];
  const head = ['endpoint', ...runs.flatMap((r) => [`${r.label} p50`, `${r.label} p95/p99`]), runs.length > 1 ? `${big.label}/${small.label} (p50)` : '', 'aim (p95; live p99)', 'met']
    .filter(Boolean);
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const ep of ENDPOINTS) {
    const cells = [ep.name];
    for (const r of runs) {
      const s = r.results.get(ep.name);
      const wanted = ep.n ?? N;
      cells.push(s ? fmt(s.p50) : 'n/a', s ? `${fmt(ep.pct === 99 ? s.p99 : s.p95)}${s.n !== wanted ? ` (n=${s.n})` : ''}${s.errors ? ` ${s.errors} err` : ''}` : 'n/a');
    }
    if (runs.length > 1) {
      const a = small.results.get(ep.name)?.p50 ?? NaN;
      const b = big.results.get(ep.name)?.p50 ?? NaN;
      cells.push(`${(b / a).toFixed(1)}x`);
    }
    const met = runs.map((r) => {
      const s = r.results.get(ep.name);
      const v = s ? (ep.pct === 99 ? s.p99 : s.p95) : NaN;
      return `${r.label} ${v <= ep.aim ? 'yes' : `no (${(v / ep.aim).toFixed(v / ep.aim >= 10 ? 0 : 1)}x)`}`;
    });
    cells.push(`< ${ep.aim} ms`, met.join(', '));
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

/** One line per aim: which endpoints meet it. */
function aims(runs: DbRun[]): string {
  const [small, big] = [runs[0]!, runs[runs.length - 1]!];
  const value = (r: DbRun, ep: Endpoint) => {
    const s = r.results.get(ep.name);
    return s ? (ep.pct === 99 ? s.p99 : s.p95) : NaN;
  };
  const lines = runs.map((r) => {
    const met = ENDPOINTS.filter((ep) => value(r, ep) <= ep.aim);
    return `- Latency aims at ${r.label}: ${met.length} of ${ENDPOINTS.length} endpoints met; missed: ${ENDPOINTS.filter((ep) => !(value(r, ep) <= ep.aim)).map((ep) => ep.name).join('; ') || 'none'}.`;
  });
  if (runs.length > 1) {
    const ratio = (ep: Endpoint) => (big.results.get(ep.name)?.p50 ?? NaN) / (small.results.get(ep.name)?.p50 ?? NaN);
    const over = ENDPOINTS.filter((ep) => !(ratio(ep) <= 2));
    lines.push(`- ${big.label} at most twice ${small.label} (p50): ${ENDPOINTS.length - over.length} of ${ENDPOINTS.length} endpoints; not: ${over.map((ep) => `${ep.name} (${ratio(ep).toFixed(1)}x)`).join('; ') || 'none'}.`);
  }
  return lines.join('\n');
}

function writeSection(section: string, body: string): void {
  writeResultsSection(section.replace(/^## /, ''), body, RESULTS);
}

async function main(): Promise<void> {
  const loadBefore = os.loadavg();
  const started = new Date();
  const runs: DbRun[] = [];
  for (const url of DBS) runs.push(await runOne(url));
  runs.sort((a, b) => a.events - b.events);
  const loadAfter = os.loadavg();
  const m = await machine(DBS[0]!);
  const withoutHll = m.visitors!.startsWith('no hll');
  const section = withoutHll ? SECTION_WITHOUT_HLL : SECTION;
  const t = table(runs);
  console.log(`\n${t}\n`);
  if (args.noWrite) return;
  const dataset = runs.map((r) => `${r.label}: ${r.events.toLocaleString('en')} events, ${r.sessions.toLocaleString('en')} sessions (\`${new URL(r.url).pathname.slice(1)}\`)`).join('; ');
  const commands = [
    ...runs.map((r) => r.meta.command ?? `npx tsx bench/generate.ts --events ${r.events} --db ${r.url}`),
    `npx tsx bench/queries.ts ${DBS.map((u) => `--db ${u}`).join(' ')} --n ${N}`,
  ];
  const generation = runs
    .filter((r) => r.meta.total_s)
    .map((r) => `${r.label}: ${r.meta.total_s} s in all (rows ${r.meta.rows_s} s; then index builds, rollup refresh of every hour, VACUUM ANALYZE), generated ${r.meta.generated_at}, load average then ${r.meta.load_avg}`)
    .join('; ');
  const body = `${section}

Sequential requests against Tidemark's API in-process (API role; read client; auth and rate
limit on every request), after a warm-up; the main project (80% of the rows, Europe/Berlin, so
unfiltered metrics, pages and breakdowns take the rollup path with the last two hours as raw
tail).
${N} requests per endpoint after ${WARMUP} warm-up requests (\`/live\`: 2000, after ${LIVE_WARMUP_MS / 1000} s of warm-up); p95 for the insights endpoints, p99 for
\`/live\`; \`(n=..)\`: fewer samples because of the ${BUDGET_MS / 1000} s time budget per endpoint. Statement timeout raised to ${Number(args.timeoutMs) / 1000} s for the run
(with the default 5 s, answers slower than that are 503s).

- Date: ${started.toISOString()}; machine: ${m.nproc} vCPU (${m.cpu}), ${m.memory}, Node ${m.node}, ${m.postgres}
- PostgreSQL settings (server defaults, untuned): ${m.settings}
- Unique visitors: ${m.visitors}
- Load average (1/5/15 min) before: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}, after: ${loadAfter.map((x) => x.toFixed(2)).join(' / ')} (the machine is shared: other work ran meanwhile)
- Data: ${dataset}
- Generation (bench/generate.ts, bulk INSERT ... SELECT on 2 connections): ${generation || 'n/a'}
- Commands:
${commands.map((c) => `  - \`${c}\``).join('\n')}

${t}

${aims(runs)}

${withoutHll ? NOTES_WITHOUT_HLL : NOTES}
`;
  writeSection(section, body);
  console.log(`wrote the "${section}" section of ${path.relative(ROOT, RESULTS)}`);
}

const NOTES_WITHOUT_HLL = `Reading the table: the same reads as with hll (the section "Insights queries"), except
unique visitors. Unfiltered over whole local days (metrics 7d and 30d) they come from the visit
days (docs/rollups.md, "Unique visitors by days"), as they do with hll: a sum over a few hundred
rows whatever the traffic. An hourly series of a whole day (metrics yesterday) takes its total
from them too and counts each hour exactly from its sessions (one index-only range an hour).
Filtered, they are counted exactly over the period's sessions (the distinct profile ids of the
sessions that pass the filters), however many: linear in the sessions of the period, which is
what the filtered 30-day metrics rows pay (~160k sessions of the main project at 1M, ~1.6M at
10M); with hll those read sketches. Every breakdown and pages row reads the same rollups as with
hll. The aims are the same.`;

const NOTES = `Reading the table:
- Unfiltered metrics, pages and breakdowns read the rollups plus the raw sessions (and, for
  pages, their screen views) of the hours still in rollup_invalidations (here the last two):
  their cost follows the hours and values in the period, not the events. What still grows with
  the data is the raw tail (10x the sessions per hour at 10M) and the number of distinct values
  per hour (cities, versions, pages).
- \`pages\` reads rollup_pages_daily for the whole UTC days of the period with no logged hour
  and rollup_pages_hourly for the rest (the cut days at the period's edges in the project's
  timezone, days with a logged hour), merging the latest title by (time, event id); the title
  of each returned row is one backward index probe per source.
- \`metrics\`: everything but \`unique_visitors\` is sums of the hourly rollups. Unique visitors
  are counted exactly (distinct profile ids over every session of the period, linear in
  sessions: about 0.7-1 us per session here) when the period has at most
  TIDEMARK_EXACT_VISITORS_MAX sessions; above it they are HyperLogLog unions of the hourly
  sketches of rollup_visitors_hourly, read as per-UTC-day prefix/suffix unions
  (rollup_visitors_dayparts: a Berlin day is two sketches) where the day has no logged hour,
  with the raw tail hashed on the fly; one union per series bucket and one over those for the
  total (relative standard error at most 1%, bias-corrected). "metrics yesterday" is exact at
  1M and an estimate at 10M.
- Filters that all name one session dimension (and maybe its parent) read that dimension's
  rollup (\`metrics 30d, country filter\`: rollup_country_hourly, unique visitors above the
  threshold from the per-(hour, dimension, value) sketches of rollup_visitor_values_hourly);
  a breakdown filtered on its own dimension or its parent too. A breakdown of a
  low-cardinality dimension filtered on others of them (\`referrer_name, device filter\`,
  \`browser, country + device filter\`) reads the session cube (sql/012: sums per combination
  of nine such dimensions, per complete local day and per hour). Metrics filtered on two of
  them (\`metrics 30d, country + device filter\`) read the daily pair metrics of sql/018 (sums,
  screen views and a visitor sketch per complete local day, pair of dimensions and pair of
  values) and the raw sessions of the period's other hours (today so far, the logged tail).
  A breakdown naming one dimension outside the cube and one inside (\`city 30d, device
  filter\`) reads the daily (wide, cube) dimension pairs of sql/019 and the raw sessions of
  the period's other hours. Other filters (event-level
  names, properties, a breakdown filtered on two dimensions outside the cube) read raw rows, linear in the
  sessions of the period (and their events, for event-level filters): a parallel scan of the
  period's sessions, mostly reading pages from outside PostgreSQL's 128 MB shared_buffers.
- Insights transactions run with JIT off: with jit=on (the server default) the planner
  compiled several of these short queries for 10-200 ms (e.g. a 10M breakdown: 39 ms -> 9 ms).
- \`/live\` is auth plus one Redis script (rate limit, trim and ZCOUNT of the live set in one
  round trip), independent of the data; p50 is under 1 ms. It is timed after ${LIVE_WARMUP_MS / 1000} s of
  requests: in the first seconds of a fresh process (the server's, the probe's) V8 is still
  compiling the path on the same two cores, and p99 was 1.5-3 ms there against ~0.5 ms
  after (bench/RESULTS.md "/live tail after a warm-up").`;

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
