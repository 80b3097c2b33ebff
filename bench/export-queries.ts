// Export query benchmark: Tidemark's API in-process (API role only) against bench databases
// made by bench/generate.ts, read clients, sequential requests per endpoint after a warm-up:
// p50/p95 of /export/events pages (page 1, which counts meta.totalCount, and deep pages by
// cursor) and of 30-day /export/charts, per database, the 10M/1M ratio and the aims
// (page p95 < 50 ms at any depth; 30-day chart with one breakdown p95 < 200 ms). Writes the
// "## Export queries" section of bench/RESULTS.md.
//
//   npx tsx bench/export-queries.ts --db postgres://postgres@127.0.0.1:5432/bench_1m \
//                                   --db postgres://postgres@127.0.0.1:5432/bench_10m [--n 100]
//
// Before timing, on each database:
// - Hours that hold events but no logged rollup row are logged and refreshed (databases made
//   by an older generate.ts logged only the hours in which sessions START; the worker and
//   generate.ts now log the hour of every event). The number of such hours is reported.
// - The last two hours of the main project's events are logged in rollup_invalidations (as
//   the worker keeps the live hours), so rolled-up answers also read a raw tail.
// - A few answers of the raw path (ExportOptions path 'raw', in-process, no HTTP) are timed
//   for comparison, and every rolled-up answer is checked against it once.
import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { start, type Running } from '../internal/app/runtime';
import { generateSecret, hashSecret } from '../internal/auth/secrets';
import { loadConfig } from '../internal/config/config';
import { getChart } from '../internal/export/charts';
import { HLL_ERROR_BOUND } from '../internal/insights/rollups';
import { getEventsPage } from '../internal/export/events';
import { parseChartParams, parseEventsParams } from '../internal/export/params';
import { createClient } from '../internal/store/accounts';
import { createPool } from '../internal/store/db';
import { refreshRollups } from '../internal/store/rollups';
import { MAIN_PROJECT } from './generate';
import { cleanupNamespace, fmt, logLiveTail, machine, NATS_URL, percentile, timeRoute, queryBenchArgs, request, REDIS_URL, type Creds } from './query-support';
import { writeSection as writeResultsSection } from './run';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS = path.join(ROOT, 'bench/RESULTS.md');
const SECTION = '## Export queries';
const READ_CLIENTS = 40;

const args = queryBenchArgs({ n: 100, warmup: 5, budgetS: 30 });
const { dbs: DBS, n: N, minN: MIN_N, warmup: WARMUP, budgetMs: BUDGET_MS } = args;

const enc = (x: unknown) => encodeURIComponent(JSON.stringify(x));
const chart = (series: unknown, breakdowns?: unknown, extra = '') =>
  `charts?range=30d&series=${enc(series)}${breakdowns ? `&breakdowns=${enc(breakdowns)}` : ''}${extra}`;
const COUNTRY = [{ name: 'country' }];

interface Endpoint {
  name: string;
  /** Path and query under /export/, or a function of the prepared cursors. */
  path: string | ((c: Cursors) => string);
  /** Aim for the p95, ms (null: reported only). */
  aim: number | null;
  /** Which path answers it: rollup (+ raw tail) or raw. */
  reads: string;
}

interface Cursors {
  /** page number -> cursor of the page before it (limit 50). */
  byPage: Map<number, string>;
  deepPages: number[];
  weekAgo: string;
}

const PAGE_AIM = 50;
const CHART_AIM = 200;
const ENDPOINTS: Endpoint[] = [
  { name: 'events page 1, limit 50', path: 'events?limit=50', aim: PAGE_AIM, reads: 'rollup count' },
  { name: 'events page 1, limit 1000', path: 'events?limit=1000', aim: PAGE_AIM, reads: 'rollup count' },
  { name: 'events page 1, limit 50, includes all', path: 'events?limit=50&includes=profile,meta,properties,geo,device,referrer', aim: PAGE_AIM, reads: 'rollup count' },
  { name: 'events page 1, event=screen_view', path: 'events?limit=50&event=screen_view', aim: PAGE_AIM, reads: 'rollup count' },
  { name: 'events page 1, start = 7 days ago', path: (c) => `events?limit=50&start=${c.weekAgo}`, aim: PAGE_AIM, reads: 'rollup count' },
  { name: 'events page 2 (cursor)', path: (c) => `events?limit=50&cursor=${c.byPage.get(2)}`, aim: PAGE_AIM, reads: 'keyset' },
  { name: 'events page 1000 (cursor)', path: (c) => `events?limit=50&cursor=${c.byPage.get(1000)}`, aim: PAGE_AIM, reads: 'keyset' },
  { name: 'events page 10000 (cursor)', path: (c) => `events?limit=50&cursor=${c.byPage.get(10000)}`, aim: PAGE_AIM, reads: 'keyset' },
  { name: 'events last pages (cursor, 95% deep)', path: (c) => `events?limit=50&cursor=${c.byPage.get(c.deepPages[c.deepPages.length - 1]!)}`, aim: PAGE_AIM, reads: 'keyset' },
  { name: 'events page 100 without cursor (OFFSET)', path: 'events?limit=50&page=100', aim: null, reads: 'rollup count + OFFSET' },
  { name: 'events page 1, country=DE filter', path: `events?limit=50&filters=${enc([{ name: 'country', operator: 'is', value: ['DE'] }])}`, aim: PAGE_AIM, reads: 'column count (country rollups + uncharted rows)' },
  { name: 'events page 1, city=Paris filter', path: `events?limit=50&filters=${enc([{ name: 'city', operator: 'is', value: ['Paris'] }])}`, aim: PAGE_AIM, reads: 'column count (city rollups + uncharted rows)' },
  { name: 'charts 30d event (no breakdown)', path: chart([{ name: '*' }]), aim: CHART_AIM, reads: 'rollup' },
  { name: 'charts 30d event, country', path: chart([{ name: '*' }], COUNTRY), aim: CHART_AIM, reads: 'rollup' },
  { name: 'charts 30d event, country, previous', path: chart([{ name: '*' }], COUNTRY, '&previous=true'), aim: CHART_AIM, reads: 'rollup' },
  { name: 'charts 30d screen_view, path', path: chart([{ name: 'screen_view' }], [{ name: 'path' }]), aim: CHART_AIM, reads: 'rollup' },
  { name: 'charts 30d screen_view, city, previous', path: chart([{ name: 'screen_view' }], [{ name: 'city' }], '&previous=true'), aim: CHART_AIM, reads: 'rollup' },
  { name: 'charts 30d user, country', path: chart([{ name: 'screen_view', segment: 'user' }], COUNTRY), aim: CHART_AIM, reads: 'sketches (distinct)' },
  { name: 'charts 30d session, country', path: chart([{ name: '*', segment: 'session' }], COUNTRY), aim: CHART_AIM, reads: 'sketches (distinct)' },
  { name: 'charts 30d property_sum (purchase amount)', path: chart([{ name: 'purchase', segment: 'property_sum', property: 'properties.amount' }]), aim: null, reads: 'property rollup' },
  { name: 'charts 30d property_sum, country', path: chart([{ name: 'purchase', segment: 'property_sum', property: 'properties.amount' }], COUNTRY), aim: CHART_AIM, reads: 'property rollup' },
  { name: 'charts 30d event, country, device filter', path: chart([{ name: '*' }], COUNTRY, `&filters=${enc([{ name: 'device', operator: 'is', value: ['mobile'] }])}`), aim: CHART_AIM, reads: 'cube (pair days)' },
  { name: 'charts 30d screen_view, country filter', path: chart([{ name: 'screen_view' }], undefined, `&filters=${enc([{ name: 'country', operator: 'is', value: ['DE'] }])}`), aim: CHART_AIM, reads: 'column rollup (days)' },
  { name: 'charts 30d event, os, country+device filter', path: chart([{ name: '*' }], [{ name: 'os' }], `&filters=${enc([{ name: 'country', operator: 'is', value: ['DE'] }, { name: 'device', operator: 'is', value: ['mobile'] }])}`), aim: CHART_AIM, reads: 'cube (full-combination days: 3 columns)' },
  // by country where city = Paris: two columns, not both in the cube: raw
  { name: 'charts 30d event, city filter', path: chart([{ name: '*' }], COUNTRY, `&filters=${enc([{ name: 'city', operator: 'is', value: ['Paris'] }])}`), aim: null, reads: 'raw (country breakdown: not the city rollup)' },
  { name: 'charts 30d event, city filter, no breakdown', path: chart([{ name: '*' }], undefined, `&filters=${enc([{ name: 'city', operator: 'is', value: ['Paris'] }])}`), aim: CHART_AIM, reads: 'column rollup (days)' },
  { name: 'charts 30d event, city, city filter', path: chart([{ name: '*' }], [{ name: 'city' }], `&filters=${enc([{ name: 'city', operator: 'isNot', value: ['Paris'] }])}`), aim: CHART_AIM, reads: 'column rollup (days)' },
];

interface Sample {
  p50: number;
  p95: number;
  n: number;
  errors: number;
}




interface DbRun {
  label: string;
  url: string;
  events: number;
  mainEvents: number;
  meta: Record<string, string>;
  /** Hours with events but no session start: generate.ts does not log them (logged and refreshed here). */
  unloggedHours: number;
  results: Map<string, Sample>;
  raw: string[];
}


/** Median of `runs` calls of fn (ms) and its last result. */
async function median<T>(runs: number, fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const ms: number[] = [];
  let value: T | undefined;
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    value = await fn();
    ms.push(performance.now() - t);
  }
  return { ms: percentile(ms.sort((a, b) => a - b), 50), value: value! };
}

async function prepare(url: string): Promise<{ unlogged: number }> {
  const db = createPool(url, 2);
  try {
    const timescale = (await db.query<{ ts: boolean }>('SELECT tm_timescale() AS ts')).rows[0]!.ts;
    // What generate.ts leaves out: (project, hour) with events but no session start (it logs
    // the hours of sessions only). Counted on the events, so a second run reports the same.
    const gap = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (SELECT project_id, date_trunc('hour', created_at, 'UTC') AS bucket FROM events GROUP BY 1, 2) h
       WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.project_id = h.project_id
                           AND s.started_at >= h.bucket AND s.started_at < h.bucket + interval '1 hour')`,
    );
    const fix = await db.query(
      `INSERT INTO rollup_invalidations (project_id, bucket)
       SELECT h.project_id, h.bucket FROM (
         SELECT project_id, date_trunc('hour', created_at, 'UTC') AS bucket FROM events GROUP BY 1, 2) h
       WHERE NOT EXISTS (SELECT 1 FROM events_hourly r WHERE r.project_id = h.project_id AND r.bucket = h.bucket)
       ON CONFLICT DO NOTHING`,
    );
    while ((await refreshRollups(db, timescale, { before: new Date('9999-01-01T00:00:00Z'), limit: 500 })).buckets > 0);
    await db.query('VACUUM ANALYZE events_hourly');
    // The live tail: the last two hours of the main project's events.
    await logLiveTail(db, MAIN_PROJECT, 'events');
    if ((fix.rowCount ?? 0) > (gap.rows[0]?.n ?? 0)) throw new Error(`${fix.rowCount} hours without rollup rows, more than the ${gap.rows[0]?.n} generate.ts leaves out`);
    return { unlogged: gap.rows[0]?.n ?? 0 };
  } finally {
    await db.end();
  }
}

/** In-process answers of the raw path next to the rollup path: time both, check equal. */
async function rawComparison(url: string, label: string): Promise<string[]> {
  const db = createPool(url, 2);
  const out: string[] = [];
  const opts = { statementTimeoutMs: Number(args.timeoutMs) };
  try {
    for (const q of ['limit=50', 'limit=50&event=screen_view', `limit=50&filters=${enc([{ name: 'city', operator: 'is', value: ['Paris'] }])}`]) {
      const params = parseEventsParams(new URLSearchParams(q));
      const auto = await median(3, () => getEventsPage(db, MAIN_PROJECT, params, opts));
      const raw = await median(3, () => getEventsPage(db, MAIN_PROJECT, params, { ...opts, path: 'raw' }));
      assert.deepEqual(auto.value.meta, raw.value.meta, `${label}: totalCount ${q}`);
      out.push(`/export/events?${q} (totalCount ${auto.value.meta.totalCount.toLocaleString('en')}): raw ${fmt(raw.ms)}, rollups ${fmt(auto.ms)}`);
    }
    for (const [name, q] of [
      ['charts 30d event, country', chart([{ name: '*' }], COUNTRY)],
      ['charts 30d event, country, previous', chart([{ name: '*' }], COUNTRY, '&previous=true')],
      ['charts 30d screen_view, path', chart([{ name: 'screen_view' }], [{ name: 'path' }])],
      ['charts 30d property_sum, country', chart([{ name: 'purchase', segment: 'property_sum', property: 'properties.amount' }], COUNTRY)],
      ['charts 30d event, city filter, no breakdown', chart([{ name: '*' }], undefined, `&filters=${enc([{ name: 'city', operator: 'is', value: ['Paris'] }])}`)],
    ] as const) {
      const params = parseChartParams(new URLSearchParams(q.slice(q.indexOf('?') + 1)));
      const now = new Date();
      const auto = await median(3, () => getChart(db, MAIN_PROJECT, params, now, opts));
      const raw = await median(3, () => getChart(db, MAIN_PROJECT, params, now, { ...opts, path: 'raw' }));
      assert.deepEqual(auto.value, raw.value, `${label}: ${name}`);
      out.push(`${name}: raw ${fmt(raw.ms)}, rollups ${fmt(auto.ms)} (same answer)`);
    }
    // Distinct counts above TIDEMARK_EXACT_VISITORS_MAX: HyperLogLog estimates, every number
    // within HLL_ERROR_BOUND of the raw answer.
    for (const [name, q] of [
      ['charts 30d user, country', chart([{ name: 'screen_view', segment: 'user' }], COUNTRY)],
      ['charts 30d session, country', chart([{ name: '*', segment: 'session' }], COUNTRY)],
    ] as const) {
      const params = parseChartParams(new URLSearchParams(q.slice(q.indexOf('?') + 1)));
      const now = new Date();
      const auto = await median(3, () => getChart(db, MAIN_PROJECT, params, now, opts));
      const raw = await median(3, () => getChart(db, MAIN_PROJECT, params, now, { ...opts, path: 'raw' }));
      let worst = 0;
      let values = 0;
      assert.deepEqual(auto.value.series.map((x) => x.id), raw.value.series.map((x) => x.id), `${label}: ${name} series`);
      auto.value.series.forEach((x, i) => {
        const y = raw.value.series[i]!;
        const pairs: [number, number][] = [[x.metrics.count, y.metrics.count], ...x.data.map((d, j): [number, number] => [d.count, y.data[j]!.count])];
        for (const [a, b] of pairs) {
          values++;
          worst = Math.max(worst, b === 0 ? (a === 0 ? 0 : Infinity) : Math.abs(a - b) / b);
        }
      });
      assert.ok(worst <= HLL_ERROR_BOUND, `${label}: ${name}: an estimate ${(worst * 100).toFixed(2)}% off`);
      out.push(`${name}: raw ${fmt(raw.ms)}, sketches ${fmt(auto.ms)} (${values} numbers, largest relative error ${(worst * 100).toFixed(2)}%)`);
    }
  } finally {
    await db.end();
  }
  return out;
}

async function runOne(url: string): Promise<DbRun> {
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const { rows: [size] } = await db.query<{ events: number; main: number }>(
    `SELECT (SELECT count(*) FROM events)::int AS events, (SELECT count(*) FROM events WHERE project_id = $1)::int AS main`,
    [MAIN_PROJECT],
  );
  const meta: Record<string, string> = {};
  const m = await db.query<{ key: string; value: string }>('SELECT key, value FROM bench_meta').catch(() => ({ rows: [] as { key: string; value: string }[] }));
  for (const r of m.rows) meta[r.key] = r.value;
  const label = size!.events >= 1_000_000 ? `${Math.round(size!.events / 1_000_000)}M` : `${Math.round(size!.events / 1000)}k`;
  const { unlogged } = await prepare(url);
  console.log(`[${label}] ${unlogged} (project, hour) with events but no session start (not logged by generate.ts): logged and refreshed`);
  const raw = await rawComparison(url, label);
  for (const line of raw) console.log(`[${label}] ${line}`);

  const namespace = `bx-${randomBytes(4).toString('hex')}`;
  const cfg = loadConfig({
    PORT: '0', METRICS_PORT: '0', DATABASE_URL: url, NATS_URL, REDIS_URL, TIDEMARK_NAMESPACE: namespace,
    LOG_LEVEL: 'silent', TIDEMARK_SHARDS: '4', QUERY_TIMEOUT_MS: args.timeoutMs,
  });
  const clients: Creds[] = [];
  let app: Running | null = null;
  const results = new Map<string, Sample>();
  try {
    app = await start(cfg, { api: true, worker: false });
    const base = `http://127.0.0.1:${app.port}/export`;
    for (let i = 0; i < READ_CLIENTS; i++) {
      const secret = generateSecret();
      const c = await createClient(db, { projectId: MAIN_PROJECT, mode: 'read', secretHash: await hashSecret(secret), ingestRate: 0 });
      clients.push({ clientId: c.id, clientSecret: secret });
    }
    let turn = 0;
    const next = () => clients[turn++ % READ_CLIENTS]!;
    for (const c of clients) await request(`${base}/events?limit=1`, c);

    // Cursors of deep pages: page N-1 once by OFFSET, its cursor then gives page N by keyset.
    const first = await request(`${base}/events?limit=50`, next());
    const pages = first.body.meta.pages as number;
    const deepPages = [2, 1000, 10000, Math.floor(pages * 0.95)].filter((p) => p <= pages);
    const byPage = new Map<number, string>();
    for (const p of deepPages) {
      const r = await request(`${base}/events?limit=50&page=${p - 1}`, next());
      if (!r.ok || !r.body.meta.cursor) throw new Error(`no cursor for page ${p}: ${JSON.stringify(r.body).slice(0, 200)}`);
      byPage.set(p, r.body.meta.cursor);
    }
    const generated = new Date(meta.generated_at ?? Date.now());
    const weekAgo = new Date(generated.getTime() - 7 * 86_400_000).toISOString().slice(0, 10);
    const cursors: Cursors = { byPage, deepPages, weekAgo };
    console.log(`[${label}] app on ${base}; ${pages} pages of 50; deep pages ${deepPages.join(', ')}`);

    for (const ep of ENDPOINTS) {
      const u = `${base}/${typeof ep.path === 'string' ? ep.path : ep.path(cursors)}`;
      const t = await timeRoute(u, next, { n: N, minN: MIN_N, budgetMs: BUDGET_MS, warmup: WARMUP });
      const s: Sample = { p50: t.p50, p95: t.p95, n: t.n, errors: t.errors };
      results.set(ep.name, s);
      console.log(`[${label}] ${ep.name.padEnd(44)} p50 ${fmt(s.p50).padStart(8)}  p95 ${fmt(s.p95).padStart(8)}  n=${s.n}${s.errors ? ` errors=${s.errors}` : ''}`);
    }
  } finally {
    await app?.drain().catch(() => {});
    await db.query('DELETE FROM clients WHERE id = ANY($1)', [clients.map((c) => c.clientId)]).catch(() => {});
    await db.end();
    await cleanupNamespace(namespace);
  }
  return { label, url, events: size!.events, mainEvents: size!.main, meta, unloggedHours: unlogged, results, raw };
}



function table(runs: DbRun[]): string {
  const [small, big] = [runs[0]!, runs[runs.length - 1]!];
  const head = ['request', 'reads', ...runs.flatMap((r) => [`${r.label} p50`, `${r.label} p95`]), ...(runs.length > 1 ? [`${big.label}/${small.label} (p95)`] : []), 'aim (p95)', 'met'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const ep of ENDPOINTS) {
    const cells = [ep.name, ep.reads];
    for (const r of runs) {
      const s = r.results.get(ep.name);
      cells.push(s ? fmt(s.p50) : 'n/a', s ? `${fmt(s.p95)}${s.n !== N ? ` (n=${s.n})` : ''}${s.errors ? ` ${s.errors} err` : ''}` : 'n/a');
    }
    if (runs.length > 1) cells.push(`${((big.results.get(ep.name)?.p95 ?? NaN) / (small.results.get(ep.name)?.p95 ?? NaN)).toFixed(1)}x`);
    cells.push(ep.aim === null ? '-' : `< ${ep.aim} ms`);
    cells.push(ep.aim === null ? '-' : runs.map((r) => {
      const v = r.results.get(ep.name)?.p95 ?? NaN;
      return `${r.label} ${v <= ep.aim! ? 'yes' : `no (${(v / ep.aim!).toFixed(1)}x)`}`;
    }).join(', '));
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

function writeSection(body: string): void {
  writeResultsSection(SECTION.replace(/^## /, ''), body, RESULTS);
}

async function main(): Promise<void> {
  const loadBefore = os.loadavg();
  const started = new Date();
  const runs: DbRun[] = [];
  for (const url of DBS) runs.push(await runOne(url));
  runs.sort((a, b) => a.events - b.events);
  const loadAfter = os.loadavg();
  const m = await machine(DBS[0]!);
  const t = table(runs);
  console.log(`\n${t}\n`);
  if (args.noWrite) return;
  const missed = runs.map((r) => {
    const miss = ENDPOINTS.filter((ep) => ep.aim !== null && !((r.results.get(ep.name)?.p95 ?? NaN) <= ep.aim));
    return `- Aims at ${r.label}: ${ENDPOINTS.filter((ep) => ep.aim !== null).length - miss.length} of ${ENDPOINTS.filter((ep) => ep.aim !== null).length} met; missed: ${miss.map((ep) => ep.name).join('; ') || 'none'}.`;
  }).join('\n');
  const body = `${SECTION}

Sequential requests against Tidemark's API in-process (API role; read client; auth and rate
limit on every request) after a warm-up, main project (80% of the rows, Europe/Berlin: 30-day
charts have whole-UTC-hour day buckets, so event counts take the rollups). Up to ${N} requests per
request line, fewer when they would take more than ${BUDGET_MS / 1000} s (\`n=\`). Statement timeout ${Number(args.timeoutMs) / 1000} s for the run.
The last two hours of the main project are logged in rollup_invalidations (the live tail, read raw).
\`reads\`: how the answer is computed (rollup count / rollup: hourly event rollups + raw edge and
invalidated hours; keyset: the cursor page, totalCount carried in the cursor; cube: the event cube of sql/015 for filtered counts; raw: events rows).

- Date: ${started.toISOString()}; machine: ${m.nproc} vCPU (${m.cpu}), ${m.memory}, Node ${m.node}, ${m.postgres}
- PostgreSQL settings (server defaults): ${m.settings}
- Load average (1/5/15 min) before: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}, after: ${loadAfter.map((x) => x.toFixed(2)).join(' / ')}
- Data: ${runs.map((r) => `${r.label}: ${r.events.toLocaleString('en')} events, main project ${r.mainEvents.toLocaleString('en')} (\`${new URL(r.url).pathname.slice(1)}\`, generated ${r.meta.generated_at ?? '?'} in ${r.meta.total_s ?? '?'} s, load average then ${r.meta.load_avg ?? '?'})`).join('; ')}
- Hours with events that generate.ts did not log (no session started in them), logged and refreshed before timing: ${runs.map((r) => `${r.label} ${r.unloggedHours}`).join(', ')}
- Commands:
${[...runs.map((r) => r.meta.command ?? `npx tsx bench/generate.ts --events ${r.events} --db ${r.url}`), `npx tsx bench/export-queries.ts ${DBS.map((u) => `--db ${u}`).join(' ')} --n ${N}`].map((c) => `  - \`${c}\``).join('\n')}

${t}

${missed}

Raw path (ExportOptions \`path: 'raw'\`, in-process, median of 3) next to the rollup path (same answers checked) and the sketches (estimates within ${HLL_ERROR_BOUND * 100}% checked):
${runs.flatMap((r) => r.raw.map((line) => `- ${r.label}: ${line}`)).join('\n')}

${NOTES}
`;
  writeSection(body);
  console.log(`wrote the "${SECTION}" section of ${path.relative(ROOT, RESULTS)}`);
}

const NOTES = `Reading the table:
- Page 1 of /export/events costs the anchor (one index row), the page and meta.totalCount; the
  count now sums the hourly event rollups (events_hourly, sql/009_event_rollups.sql) for the
  whole UTC hours and counts raw only the partial edge hours and the hours in
  rollup_invalidations (here the last two), so it follows the hours, not the events: 1.1x
  from 1M to 10M (raw count: 38 -> 446 ms). Deeper pages by cursor are keyset range scans
  whose totalCount travels in the cursor: flat at any depth (95% deep at 10M = page 151,995).
- Charts: segment \`event\` without filters, with no breakdown or one on a rolled-up column,
  reads the rollups (per-column relations events_<column>_hourly: per hour, event name and
  value). Cost follows the rollup rows of the period: about 120k for country, 285k for path
  (screen views; 500 pages) in 30 days at 10M, hence path's 169 ms and 2.7x. The raw tail (two
  hours, ~22k events at 10M) is read per invalidated hour by index range (a nested loop).
- Distinct counts (\`user\`, \`session\`, \`user_average\`) over more than
  TIDEMARK_EXACT_VISITORS_MAX (25,000) events of the series are HyperLogLog estimates from
  events_sketches_* (sql/011_event_sketches.sql): per local day of the project's zone (complete
  days) and per hour (the rest), per event name and column value, plus the logged hours hashed
  raw; the event counts beside them (ranking, user_average) come from the event rollups.
- Property segments (\`property_sum\` ...) read event_properties_hourly (sql/013: per hour,
  event name, top-level key and column value the count, numeric sum, min and max of the
  numeric values) plus the logged hours raw: the same numbers as raw, where raw read the
  purchase events by the name index (~100k rows on ~90k heap pages at 10M).
- A page filtered on ONE rolled-up column (city=Paris, country=DE) counts its totalCount from
  that column's rollups (daily rows of complete days, hourly rows of the rest) plus the rows of
  the bots and session_start / session_end events they leave out (sql/020), logged hours raw.
- Other filtered event counts (charts of segment \`event\`, the filtered page's totalCount) read the
  event cube (sql/015_event_cube.sql) when every filter names one of the nine low-cardinality
  columns (referrer_name, referrer_type, utm_source, utm_medium, country, device, browser, os,
  brand) or \`name\`: complete local days from the daily rows of one PAIR of columns when
  the filters and breakdown name at most two, other hours from the hourly cube rows (every
  combination of the nine), logged hours raw.
- Raw by design, still linear in the events: filters on two columns not both in the cube,
  on properties, one_event_per_user and group.
- Hours with events but no session start (1M: the last hour of the main project and two hours
  of small projects) are not logged by bench/generate.ts (it logs the hours in which sessions
  start); without the fix-up above, charts over such an hour would miss its events on
  PostgreSQL. The worker logs the hour of every event it writes or deletes.`;

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
