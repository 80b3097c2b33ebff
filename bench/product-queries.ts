// Product-analytics query benchmark: OpenPanel's insights routes (internal/insights/: funnel,
// retention, active users, the event catalogue, raw lists and profiles) against a bench
// database made by bench/generate.ts, with Tidemark's API in-process (API role only), read
// clients, and sequential requests per route after a warm-up (latency, not throughput):
// p50/p95/p99 per route against its aim. With --record it writes the "## Product analytics
// queries" section of bench/RESULTS.md (appended at the end the first time).
//
//   npx tsx bench/generate.ts --events 10000000 --db postgres://postgres@127.0.0.1:5432/bench_product_10m --no-rollups
//   npx tsx bench/product-queries.ts --db postgres://postgres@127.0.0.1:5432/bench_product_10m [--n 200] [--budget-s 40] [--record]
//
// - Parameters come from the generator's data: custom events click, search, add_to_cart,
//   signup, purchase (purchase: properties plan and amount), identified profiles 'user-<n>'
//   stored with a first/last name and email; the profile timed is the main project's stored
//   profile with the most events.
// - Each route gets `--n` timed requests, fewer when they would take more than `--budget-s`
//   seconds (at least --min-n); the sample count is reported.
// - The read rate limit (100 requests / 10 s per client) is respected by rotating over
//   READ_CLIENTS read clients: every request pays the same auth and rate-limit work as a
//   dashboard's.
// - QUERY_TIMEOUT_MS is raised to --timeout-ms (60 s) so that slow answers are measured
//   instead of cut at the default 5 s (503).
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { start, type Running } from '../internal/app/runtime';
import { generateSecret, hashSecret } from '../internal/auth/secrets';
import { loadConfig } from '../internal/config/config';
import { createClient } from '../internal/store/accounts';
import { MAIN_PROJECT } from './generate';
import { cleanupNamespace, fmt, machine, NATS_URL, timeRoute, request, REDIS_URL, type Creds } from './query-support';
import { writeSection } from './run';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS = path.join(ROOT, 'bench/RESULTS.md');
const TITLE = 'Product analytics queries';
const READ_CLIENTS = 60;

const { values } = parseArgs({
  options: {
    db: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/bench_product_10m' },
    n: { type: 'string', default: '200' },
    'min-n': { type: 'string', default: '20' },
    warmup: { type: 'string', default: '10' },
    'budget-s': { type: 'string', default: '40' },
    'timeout-ms': { type: 'string', default: '60000' },
    record: { type: 'boolean', default: false },
  },
});
const DB = values.db!;
const N = Number(values.n);
const MIN_N = Number(values['min-n']);
const WARMUP = Number(values.warmup);
const BUDGET_MS = Number(values['budget-s']) * 1000;

interface Route {
  route: string;
  query: string;
  /** Aim for the p95, ms (null: none given). */
  aim: number | null;
}

interface Sample {
  p50: number;
  p95: number;
  p99: number;
  n: number;
  errors: number;
  error?: string;
}

const SEARCH_WORD = 'tanaka';

function routes(profileId: string): Route[] {
  const steps = encodeURIComponent(JSON.stringify(['click', 'add_to_cart', 'purchase']));
  return [
    { route: 'funnel', query: `steps=${steps}&range=30d`, aim: 500 },
    { route: 'funnel', query: `steps=${steps}&range=30d&groupBy=profile_id`, aim: 500 },
    { route: 'retention', query: '', aim: 500 },
    { route: 'retention/cohort', query: '', aim: 500 },
    { route: 'active_users', query: 'days=7', aim: null },
    { route: 'events/names', query: '', aim: 50 },
    { route: 'events/properties', query: 'eventName=purchase', aim: 50 },
    { route: 'events/property_values', query: 'eventName=purchase&propertyKey=plan', aim: 50 },
    { route: 'profiles', query: 'limit=50', aim: 100 },
    { route: 'profiles', query: `name=${SEARCH_WORD}&limit=50`, aim: 100 },
    { route: `profiles/${profileId}`, query: '', aim: 100 },
    { route: 'sessions', query: 'limit=50', aim: 100 },
    { route: 'events', query: 'limit=50', aim: null },
  ];
}

const label = (r: Route) => `${r.route}${r.query ? `?${decodeURIComponent(r.query)}` : ''}`;

async function main(): Promise<void> {
  const loadBefore = os.loadavg();
  const started = new Date();
  const db = new pg.Pool({ connectionString: DB, max: 2 });
  const { rows: [size] } = await db.query<{ events: number; sessions: number; profiles: number }>(
    `SELECT (SELECT count(*) FROM events)::int AS events, (SELECT count(*) FROM sessions)::int AS sessions,
            (SELECT count(*) FROM profiles WHERE project_id = $1)::int AS profiles`,
    [MAIN_PROJECT],
  );
  const meta: Record<string, string> = {};
  for (const r of (await db.query<{ key: string; value: string }>('SELECT key, value FROM bench_meta').catch(() => ({ rows: [] }))).rows) meta[r.key] = r.value;
  // The stored profile with the most events (by its sessions' event counts).
  const { rows: [top] } = await db.query<{ profile_id: string; events: number; sessions: number }>(
    `SELECT s.profile_id, sum(s.event_count)::int AS events, count(*)::int AS sessions FROM sessions s
     WHERE s.project_id = $1 AND s.profile_id LIKE 'user-%' AND NOT s.is_bot
     GROUP BY s.profile_id ORDER BY 2 DESC, 1 LIMIT 1`,
    [MAIN_PROJECT],
  );
  const { rows: [matches] } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM profiles WHERE project_id = $1 AND lower(last_name) = $2`,
    [MAIN_PROJECT, SEARCH_WORD],
  );
  const ROUTES = routes(top!.profile_id);
  console.log(`${size!.events.toLocaleString('en')} events, ${size!.sessions.toLocaleString('en')} sessions, ${size!.profiles.toLocaleString('en')} stored profiles of ${MAIN_PROJECT}; `
    + `profile ${top!.profile_id}: ${top!.events} events in ${top!.sessions} sessions; "${SEARCH_WORD}" matches ${matches!.n} profiles`);

  const namespace = `bpq-${randomBytes(4).toString('hex')}`;
  const cfg = loadConfig({
    PORT: '0', METRICS_PORT: '0', DATABASE_URL: DB, NATS_URL, REDIS_URL, TIDEMARK_NAMESPACE: namespace,
    LOG_LEVEL: 'silent', TIDEMARK_SHARDS: '4', QUERY_TIMEOUT_MS: values['timeout-ms']!,
  });
  const clients: Creds[] = [];
  let app: Running | null = null;
  const results = new Map<Route, Sample>();
  try {
    app = await start(cfg, { api: true, worker: false });
    const base = `http://127.0.0.1:${app.port}/insights/${MAIN_PROJECT}`;
    for (let i = 0; i < READ_CLIENTS; i++) {
      const secret = generateSecret();
      const c = await createClient(db, { projectId: MAIN_PROJECT, mode: 'read', secretHash: await hashSecret(secret), ingestRate: 0 });
      clients.push({ clientId: c.id, clientSecret: secret });
    }
    let turn = 0;
    const next = () => clients[turn++ % READ_CLIENTS]!;
    for (const c of clients) await request(`${base}/live`, c);
    for (const r of ROUTES) {
      const url = `${base}/${r.route}${r.query ? `?${r.query}` : ''}`;
      const first = await request(url, next());
      if (!first.ok) {
        console.log(`${label(r).padEnd(62)} FAILED: ${String(first.body).slice(0, 300)}`);
        results.set(r, { p50: NaN, p95: NaN, p99: NaN, n: 0, errors: 1, error: String(first.body).slice(0, 200) });
        continue;
      }
      const s: Sample = await timeRoute(url, next, { n: N, minN: MIN_N, budgetMs: BUDGET_MS, warmup: WARMUP, warmed: 1 });
      results.set(r, s);
      const size = JSON.stringify(first.body).length;
      console.log(`${label(r).padEnd(62)} p50 ${fmt(s.p50).padStart(8)}  p95 ${fmt(s.p95).padStart(8)}  p99 ${fmt(s.p99).padStart(8)}  n=${s.n}${s.errors ? ` errors=${s.errors}` : ''}  (${size} B)`);
    }
  } finally {
    await app?.drain().catch(() => {});
    await db.query('DELETE FROM clients WHERE id = ANY($1)', [clients.map((c) => c.clientId)]).catch(() => {});
    await db.end();
    await cleanupNamespace(namespace);
  }
  const loadAfter = os.loadavg();

  const met = (r: Route) => {
    const s = results.get(r)!;
    if (r.aim === null) return '(no aim)';
    if (!(s.p95 <= r.aim)) return Number.isNaN(s.p95) ? 'no (failed)' : `**no** (${(s.p95 / r.aim).toFixed(1)}x)`;
    return 'yes';
  };
  const lines = ['| route | query | p50 | p95 | p99 | n | aim (p95) | met? |', '|---|---|---|---|---|---|---|---|'];
  for (const r of ROUTES) {
    const s = results.get(r)!;
    const q = r.query ? `\`${decodeURIComponent(r.query)}\`` : '(defaults)';
    lines.push(`| \`${r.route}\` | ${q} | ${fmt(s.p50)} | ${fmt(s.p95)} | ${fmt(s.p99)} | ${s.n}${s.errors ? ` (${s.errors} err)` : ''} | ${r.aim === null ? '-' : `< ${r.aim} ms`} | ${met(r)} |`);
  }
  const table = lines.join('\n');
  console.log(`\n${table}\n`);
  if (!values.record) return;

  const m = await machine(DB);
  const aimed = ROUTES.filter((r) => r.aim !== null);
  const missed = aimed.filter((r) => !(results.get(r)!.p95 <= r.aim!));
  const body = `## ${TITLE}

OpenPanel's product-analytics routes (internal/insights/: funnel, retention, active users,
event catalogue, raw lists, profiles) at ${Math.round(size!.events / 1e6)}M events: sequential requests against Tidemark's API
in-process (API role; read clients; auth and rate limit on every request), after ${WARMUP}
warm-up requests, ${N} timed requests per route (fewer, at least ${MIN_N}, where ${BUDGET_MS / 1000} s did not
suffice: see n); project \`${MAIN_PROJECT}\` (80% of the rows, Europe/Berlin). Statement timeout
raised to ${Number(values['timeout-ms']) / 1000} s for the run.

- Date: ${started.toISOString()}; machine: ${m.nproc} vCPU (${m.cpu}), ${m.memory}, Node ${m.node}, ${m.postgres}
- PostgreSQL settings (server defaults, untuned): ${m.settings}
- Load average (1/5/15 min) before: ${loadBefore.map((x) => x.toFixed(2)).join(' / ')}, after: ${loadAfter.map((x) => x.toFixed(2)).join(' / ')} (the machine is shared: other work ran meanwhile)
- Data: ${size!.events.toLocaleString('en')} events, ${size!.sessions.toLocaleString('en')} sessions, ${size!.profiles.toLocaleString('en')} stored profiles in the main project (\`${new URL(DB).pathname.slice(1)}\`), generated ${meta.generated_at ?? '?'} in ${meta.total_s ?? '?'} s (rows ${meta.rows_s ?? '?'} s); rollups ${meta.rollups ?? '?'}
- Profile timed: \`${top!.profile_id}\` (the stored profile with the most events: ${top!.events} in ${top!.sessions} sessions); search word \`${SEARCH_WORD}\` (a last name: ${matches!.n} profiles)
- Commands:
  - \`${meta.command ?? `npx tsx bench/generate.ts --db ${DB}`}\`
  - \`npx tsx bench/product-queries.ts --db ${DB} --record\`

${table}

- Aims met: ${aimed.length - missed.length} of ${aimed.length}; missed: ${missed.map((r) => `\`${label(r)}\` (p95 ${fmt(results.get(r)!.p95)}, aim ${r.aim} ms)`).join('; ') || 'none'}.
`;
  writeSection(TITLE, body, RESULTS);
  console.log(`wrote the "## ${TITLE}" section of ${path.relative(ROOT, RESULTS)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
