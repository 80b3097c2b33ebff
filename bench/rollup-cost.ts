// What an event costs PostgreSQL all in, rollups included, against a bare insert of the same
// events, in one run:
//
//   1. A fresh `npm start` (cmd/all, defaults: TIDEMARK_SHARDS, ROLLUP_REFRESH_QUIET_MS unset),
//      on a new database migrated as a new user's would be (the hll extension created when the
//      server has it, unless --no-hll), a new project and write client.
//   2. Realistic traffic through POST /track: 300 pages (Zipf-like), ten real browser
//      user-agents, public IPs of many countries, search / social / other referrers, UTM tags
//      on 15% of visits, 1-6 views a visit (35% one), some custom events; a visit's events sent
//      in order, `--connections` visits at a time. Event times (`__timestamp`): over the three
//      UTC hours before the current one (default), or the current hour (--live, below).
//   3. PostgreSQL's CPU from the first request until it is quiet again: every event stored, the
//      rollup refresh with nothing pending (no rollup_invalidations entry for an hour the events
//      touched, no rollup_delta_sessions/rollup_delta_events rows, the visitor log folded), and its CPU rate back at the
//      idle rate (measured before, same polling, `--idle-s`) for `--quiet-s`; the idle rate
//      times the span is subtracted.
//   4. The bare insert: the same events (the rows Tidemark stored for them, every column, as
//      text) inserted into a table with the events table's columns and primary key and nothing
//      else, 500 rows a statement (one text array a column, cast in the statement), one
//      connection, after `npm start` was stopped; its CPU the same way (its own idle rate
//      measured first).
//
// PostgreSQL CPU: every process of the server on 127.0.0.1:5432 — the postmaster's own and
// reaped children's times (utime+stime+cutime+cstime: backends that exited are in cutime) plus
// utime+stime of each live child (/proc/<pid>/stat, ppid = postmaster), so backends that came
// and went are counted and other clusters on the machine are not. On a shared machine other
// users of the same server are in it too; the "own backends" column (this database's backends
// from pg_stat_activity, sampled every 500 ms: no WAL writer, checkpointer, or backends of
// other databases) is the less noisy floor of it.
//
// The service's CPU, for the sustained rate: the same span's CPU of PostgreSQL (as above),
// the `npm start` process (all its threads), nats-server and redis-server, less the idle rate
// of each measured before the load. The whole machine's /proc/stat figure is reported too, but
// its idle rate, taken over 20 s and subtracted over a span of ~100 s that is mostly waiting
// for quiet, swings with anything else the machine did meanwhile (641-1,019 µs an event in
// three runs of one commit, and 0 once: an idle window busier than the run's mean).
//
// Sessions end 30 minutes after their last event (SESSION_TIMEOUT_MINUTES), after the run:
// their session_end rows and the rollup work they cause are not counted unless
// --session-timeout-min N (e.g. 1), which sets it and also waits for every session to end.
//
// --live: a live hour that closes. Sending starts `--live-lead-s` (default 120) before the
// current UTC hour ends (the run waits for that moment, up to an hour), with event times in
// that hour up to the moment of sending; counting goes on until the hour has closed and its
// recompute (a rebuild: the current hour's writes are not logged as deltas) is done. This
// waits for the real close rather than faking it: sending into the previous hour with a small
// ROLLUP_REFRESH_QUIET_MS would take the past-hour delta path (sql/025: writes into an hour
// before the current one are logged as deltas), which is the default mode, not a live hour.
//
// --no-hll: the service's database role is not a superuser, so the migrations cannot create
// hll (an untrusted extension) and keep exact visitor counts — how the service decides
// (sql/008 tm_setup_visitors_rollup: hll when the extension can be created); there is no
// setting for it, only the extension's presence in the database.
//
//   npx tsx bench/rollup-cost.ts [--events 10000] [--no-hll] [--live] [--session-timeout-min 1]
//                                [--connections 16] [--idle-s 20] [--quiet-s 5] [--explain] [--record]
// --explain: auto_explain (ANALYZE, nested statements) in the benchmark database for every
// statement over 50 ms: their plans go to the PostgreSQL server's log.
// The section ends with where the time went: the rows of each kept rollup table and the SQL
// functions' own time (track_functions = pl, set on the benchmark database).
// Prints the markdown section and a JSON line (BENCH_RESULT ...); writes the "Rollup cost"
// section ("Rollup cost: live hour", each with ", without hll" when the database has no hll)
// of bench/RESULTS.md only with --record.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { TestEnv, spawnApp, PG_BASE, post, sleep, uniqueName, type Credentials } from '../test/support/harness';
import { stopChild } from '../test/support/private-services';
import { mulberry32 } from '../test/support/random';
import { commCpuS, serverCpuS, statOf } from './proc-cpu';
import { TICK_US } from './e2e';
import { percentile, sequential } from './openloop';
import { machineInfo, writeSection, type Machine } from './run';

const { values: a } = parseArgs({
  options: {
    events: { type: 'string', default: '10000' },
    'no-hll': { type: 'boolean', default: false },
    live: { type: 'boolean', default: false },
    'live-lead-s': { type: 'string', default: '120' },
    'session-timeout-min': { type: 'string' },
    connections: { type: 'string', default: '16' },
    'idle-s': { type: 'string', default: '20' },
    'quiet-s': { type: 'string', default: '5' },
    'max-wait-s': { type: 'string', default: '900' },
    'batch': { type: 'string', default: '500' },
    seed: { type: 'string', default: '1' },
    record: { type: 'boolean', default: false },
    explain: { type: 'boolean', default: false },
  },
});
const O = {
  events: Number(a.events), hll: !a['no-hll'], live: a.live === true, liveLeadS: Number(a['live-lead-s']),
  sessionTimeoutMin: a['session-timeout-min'] ? Number(a['session-timeout-min']) : null, connections: Number(a.connections),
  idleS: Number(a['idle-s']), quietS: Number(a['quiet-s']), maxWaitS: Number(a['max-wait-s']), batch: Number(a.batch), seed: Number(a.seed),
  explain: a.explain === true,
};
const log = (m: string) => console.error(`[rollup-cost ${new Date().toISOString().slice(11, 19)}] ${m}`);
const HOUR = 3_600_000;

// ---- PostgreSQL CPU ----

/** CPU of this database's backends: the ones seen alive at each sample (born after the start: counted whole). */
class OwnBackends {
  private first = new Map<number, number>();
  private last = new Map<number, number>();
  constructor(private readonly db: pg.Pool | pg.Client | TestEnv['db'], private readonly dbName: string) {}
  async sample(): Promise<void> {
    const r = await this.db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [this.dbName]);
    for (const { pid } of r.rows) {
      if (benchBackends.has(pid)) continue;
      const s = statOf(pid);
      if (s) this.last.set(pid, s.self);
    }
  }
  async start(): Promise<void> {
    await this.sample();
    this.first = new Map(this.last);
  }
  cpuS(): number {
    let t = 0;
    for (const [pid, v] of this.last) t += v - (this.first.get(pid) ?? 0);
    return (t * TICK_US) / 1e6;
  }
}

/**
 * `machine`: busy CPU seconds of every CPU (/proc/stat); `gen`: this process's (the load
 * generator's); `svc`: the service's processes' (PostgreSQL's server as `cpu`, the `npm start`
 * process with all its threads, nats-server, redis-server).
 */
interface Sample { t: number; cpu: number; own: number; machine: number; gen: number; svc: number }

/** The `npm start` process of the run (null before it starts and after it stops). */
let appPid: number | null = null;
const appCpuS = (): number => {
  const st = appPid === null ? null : statOf(appPid);
  return st ? ((st.self + st.children) * TICK_US) / 1e6 : 0;
};

function machineBusyS(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return ((f.reduce((x, y) => x + y, 0) - f[3]! - f[4]!) * TICK_US) / 1e6;
}
const genS = (): number => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
/**
 * The benchmark's own backends (its polling connection): their CPU is the benchmark's, not
 * Tidemark's, and is left out of the PostgreSQL figures (and, as this process's, of the
 * machine's). Polling a table of dead delta rows twice a second cost ~2 ms a poll.
 */
const benchBackends = new Set<number>();
const benchCpuS = (): number => {
  let t = 0;
  for (const pid of benchBackends) t += statOf(pid)?.self ?? 0;
  return (t * TICK_US) / 1e6;
};
const sampleNow = (postmaster: number, own: number): Sample => {
  const bench = benchCpuS();
  const cpu = serverCpuS(postmaster) - bench;
  return {
    t: performance.now(), cpu, own, machine: machineBusyS() - bench, gen: genS(),
    svc: cpu + appCpuS() + commCpuS('nats-server') + commCpuS('redis-server'),
  };
};

/**
 * Samples every 500 ms (server CPU, own backends, and `poll`, which the idle window runs too)
 * until `done(state)` holds and the CPU rate over the last quietS seconds is at most the idle
 * rate plus a margin. Returns the span from `t0` to the start of that quiet stretch.
 */
async function untilQuiet<P>(o: {
  postmaster: number; own: OwnBackends; t0: Sample; idleRate: number | null; seconds?: number;
  poll: () => Promise<P>; done: (p: P) => boolean; maxWaitS: number; label: string;
}): Promise<{ end: Sample; last: P; timedOut: boolean }> {
  const samples: Sample[] = [o.t0];
  let last = await o.poll();
  let lastLog = 0;
  let doneSince: Sample | null = null;
  for (;;) {
    await sleep(500);
    last = await o.poll();
    await o.own.sample();
    const s = sampleNow(o.postmaster, o.own.cpuS());
    samples.push(s);
    const elapsed = (s.t - o.t0.t) / 1000;
    if (o.seconds !== undefined) {
      if (elapsed >= o.seconds) return { end: s, last, timedOut: false };
      continue;
    }
    // The window: from the latest sample at least quietS seconds back.
    let from = samples[0]!;
    for (const x of samples) if (x.t <= s.t - O.quietS * 1000) from = x;
    const full = s.t - from.t >= O.quietS * 1000;
    const rate = (s.cpu - from.cpu) / Math.max(1e-3, (s.t - from.t) / 1000);
    const quiet = full && rate <= o.idleRate! * 1.5 + 0.02;
    if (elapsed - lastLog >= 10) {
      lastLog = elapsed;
      log(`  ${o.label}: ${elapsed.toFixed(0)} s, PostgreSQL ${(rate * 100).toFixed(0)}% of a core over the last ${((s.t - from.t) / 1000).toFixed(1)} s (idle ${(o.idleRate! * 100).toFixed(0)}%), ${JSON.stringify(last)}`);
    }
    // The quiet stretch must start once done() holds (the refresh has finished, say).
    if (!o.done(last)) doneSince = null;
    else doneSince ??= s;
    if (doneSince && from.t >= doneSince.t && quiet) return { end: from, last, timedOut: false };
    if (elapsed > o.maxWaitS) return { end: s, last, timedOut: true };
  }
}

// ---- traffic ----


const UAS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36',
  'Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.67',
  'Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/24.0 Chrome/117.0.0.0 Mobile Safari/537.36',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
];
// /16s of public address space in ~20 countries (DB-IP City Lite): US CA GB DE FR NL SE AT IT ES RU UA TR BR AU JP KR IN HK ZA NG.
const PREFIXES = ['8.8', '73.162', '24.48', '86.150', '178.62', '2.200', '85.214', '78.46', '62.210', '90.84', '151.101', '193.0', '31.13', '80.110',
  '83.103', '79.116', '77.88', '91.198', '212.58', '200.160', '201.17', '139.130', '1.120', '202.12', '126.0', '59.10', '14.139', '49.207', '103.21',
  '41.203', '197.210'];
const SEARCH = ['https://www.google.com/', 'https://www.google.de/', 'https://www.bing.com/', 'https://duckduckgo.com/', 'https://search.yahoo.com/', 'https://yandex.ru/'];
const SOCIAL = ['https://t.co/x1y2z3', 'https://www.facebook.com/', 'https://l.facebook.com/', 'https://www.linkedin.com/', 'https://www.reddit.com/r/webdev/', 'https://news.ycombinator.com/', 'https://www.instagram.com/'];
const OTHER = ['https://blog.example.org/best-tools', 'https://github.com/awesome/list', 'https://medium.com/@writer/review', 'https://stackoverflow.com/questions/1'];
const UTMS = [
  'utm_source=google&utm_medium=cpc&utm_campaign=brand', 'utm_source=newsletter&utm_medium=email&utm_campaign=spring_sale',
  'utm_source=facebook&utm_medium=social&utm_campaign=launch', 'utm_source=twitter&utm_medium=social&utm_campaign=launch',
  'utm_source=partner&utm_medium=referral&utm_campaign=affiliate',
];
const ORIGIN = 'https://www.acme-shop.example';
const SECTIONS = ['', 'pricing', 'features', 'about', 'contact', 'blog', 'docs', 'products', 'category', 'help'];
const PAGES = Array.from({ length: 300 }, (_, i) => {
  if (i < SECTIONS.length) return { path: `/${SECTIONS[i]}`, title: i ? `${SECTIONS[i]![0]!.toUpperCase()}${SECTIONS[i]!.slice(1)} – Acme` : 'Acme – Home' };
  const s = ['blog', 'docs', 'products', 'category', 'help'][i % 5]!;
  return { path: `/${s}/${s === 'blog' ? 'post' : 'item'}-${i}`, title: `${s} ${i} – Acme` };
});
const ZIPF = (() => {
  const w = PAGES.map((_, i) => 1 / (i + 1) ** 1.05);
  const total = w.reduce((x, y) => x + y, 0);
  let acc = 0;
  return w.map((x) => (acc += x / total));
})();
const CUSTOM: [string, (r: () => number) => Record<string, unknown>][] = [
  ['add_to_cart', (r) => ({ product_id: `sku-${Math.floor(r() * 200)}`, price: Math.round(r() * 20000) / 100, currency: 'EUR' })],
  ['signup', (r) => ({ plan: r() < 0.7 ? 'free' : 'pro' })],
  ['newsletter_subscribe', () => ({ source: 'footer' })],
  ['download', (r) => ({ file: `whitepaper-${Math.floor(r() * 5)}.pdf` })],
  ['search', (r) => ({ query_length: 3 + Math.floor(r() * 20) })],
];

interface Visit { ua: string; ip: string; events: { body: unknown }[] }

/** Visits whose events (n in all) fall in [from, to) (ms), each visit's in order. */
function traffic(n: number, from: number, to: number, seed: number): Visit[] {
  const r = mulberry32(seed || 1);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  const page = () => PAGES[Math.max(0, ZIPF.findIndex((c) => c >= r()))]!;
  const visits: Visit[] = [];
  let total = 0;
  while (total < n) {
    const views = r() < 0.35 ? 1 : 2 + Math.floor(r() * 5);
    const customs = r() < 0.3 ? 1 + Math.floor(r() * 2) : 0;
    const steps: ('view' | 'custom')[] = Array.from({ length: views }, () => 'view' as const);
    for (let c = 0; c < customs; c++) steps.splice(1 + Math.floor(r() * views), 0, 'custom');
    const gaps = steps.map(() => 5_000 + r() * 120_000);
    const span = gaps.reduce((x, y) => x + y, 0);
    let t = from + r() * Math.max(0, to - from - span - 1000);
    const x = r();
    let referrer = x < 0.4 ? '' : x < 0.7 ? pick(SEARCH) : x < 0.9 ? pick(SOCIAL) : pick(OTHER);
    const utm = r() < 0.15 ? pick(UTMS) : null;
    const v: Visit = { ua: pick(UAS), ip: `${pick(PREFIXES)}.${Math.floor(r() * 256)}.${1 + Math.floor(r() * 253)}`, events: [] };
    let current = page();
    let url = `${ORIGIN}${current.path}${utm ? `?${utm}` : ''}`;
    steps.forEach((step, i) => {
      if (total >= n) return;
      if (step === 'view') {
        if (i > 0) {
          referrer = url;
          current = page();
          url = `${ORIGIN}${current.path}`;
        }
        v.events.push({ body: { type: 'track', payload: { name: 'screen_view', properties: { __path: url, __title: current.title, __referrer: referrer, __timestamp: new Date(t).toISOString() } } } });
      } else {
        const [name, props] = pick(CUSTOM);
        v.events.push({ body: { type: 'track', payload: { name, properties: { ...props(r), __path: url, __timestamp: new Date(t).toISOString() } } } });
      }
      total++;
      t += gaps[i]!;
    });
    visits.push(v);
  }
  return visits;
}

/**
 * Sends the visits over `connections` keep-alive sockets (visits dealt round robin; each
 * socket sends its visits' events one at a time, in order); returns the statuses and latencies.
 */
async function send(port: number, creds: Credentials, visits: Visit[], connections: number): Promise<{ statuses: Record<string, number>; latencies: number[] }> {
  const lists: Buffer[][] = Array.from({ length: connections }, () => []);
  visits.forEach((v, i) => {
    for (const e of v.events) {
      const body = JSON.stringify(e.body);
      const head = ['POST /track HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json', `User-Agent: ${v.ua}`, `X-Client-Ip: ${v.ip}`,
        `service-client-id: ${creds.clientId}`, `service-client-secret: ${creds.clientSecret}`, `Content-Length: ${Buffer.byteLength(body)}`];
      lists[i % connections]!.push(Buffer.from(`${head.join('\r\n')}\r\n\r\n${body}`));
    }
  });
  const runs = await Promise.all(lists.filter((l) => l.length).map((requests) => sequential({ port, requests, count: requests.length })));
  const statuses: Record<string, number> = {};
  for (const r of runs) {
    for (const [k, n] of Object.entries(r.statuses)) statuses[k] = (statuses[k] ?? 0) + n;
    if (r.ok + r.non2xx < r.sent) statuses.lost = (statuses.lost ?? 0) + r.sent - r.ok - r.non2xx;
  }
  return { statuses, latencies: runs.flatMap((r) => r.latencies) };
}

// ---- the run ----

interface Phase {
  windowS: number;
  idleRate: number;
  cpuS: number;
  idleS: number;
  netS: number;
  usPerEvent: number;
  ownCpuS: number;
  ownIdleS: number;
  ownUsPerEvent: number;
  /** The whole machine's busy CPU less this process's (the load generator), its idle rate subtracted, per event. */
  machineUsPerEvent: number;
  /** The service's processes' CPU (PostgreSQL, npm start, NATS, Redis), their idle rate subtracted, per event. */
  serviceUsPerEvent: number;
  timedOut: boolean;
}

interface Idle { rate: number; ownRate: number; machineRate: number; svcRate: number }

interface Result {
  machine: Machine;
  options: typeof O;
  hll: boolean;
  sent: number;
  statuses: Record<string, number>;
  sendS: number;
  trackMs: { p50: number; p99: number };
  storedS: number;
  rows: { events: number; sessions: number; sessionStarts: number; sessionEnds: number; openSessions: number };
  hours: string[];
  census: Census;
  tidemark: Phase;
  bare: Phase & { rows: number; statements: number; insertS: number };
  ratio: number;
  ownRatio: number;
}

function phase(t0: Sample, end: Sample, idle: Idle, events: number, timedOut: boolean): Phase {
  const windowS = (end.t - t0.t) / 1000;
  const cpuS = end.cpu - t0.cpu;
  const ownCpuS = end.own - t0.own;
  const idleS = idle.rate * windowS;
  const ownIdleS = idle.ownRate * windowS;
  const netS = Math.max(0, cpuS - idleS);
  return {
    windowS, idleRate: idle.rate, cpuS, idleS, netS, usPerEvent: (netS * 1e6) / events, ownCpuS, ownIdleS,
    ownUsPerEvent: (Math.max(0, ownCpuS - ownIdleS) * 1e6) / events,
    machineUsPerEvent: (Math.max(0, end.machine - t0.machine - (end.gen - t0.gen) - idle.machineRate * windowS) * 1e6) / events,
    serviceUsPerEvent: (Math.max(0, end.svc - t0.svc - idle.svcRate * windowS) * 1e6) / events, timedOut,
  };
}

async function measureIdle(postmaster: number, own: OwnBackends, poll: () => Promise<unknown>): Promise<Idle> {
  await own.start();
  const t0 = sampleNow(postmaster, 0);
  const { end } = await untilQuiet({ postmaster, own, t0, idleRate: null, seconds: O.idleS, poll, done: () => true, maxWaitS: O.idleS + 5, label: 'idle' });
  const span = (end.t - t0.t) / 1000;
  return {
    rate: (end.cpu - t0.cpu) / span, ownRate: end.own / span, machineRate: (end.machine - t0.machine - (end.gen - t0.gen)) / span,
    svcRate: (end.svc - t0.svc) / span,
  };
}

async function run(): Promise<Result> {
  const machine = machineInfo();
  const env = new TestEnv('rollupcost');
  const pollers: pg.Client[] = [];
  let role: string | null = null;
  const admin = new pg.Client({ connectionString: `${PG_BASE}/postgres` });
  await admin.connect();
  if (!O.hll) {
    // A database owned by a role that is not a superuser: the migrations cannot create hll.
    role = uniqueName('rollupcost_role').toLowerCase();
    await admin.query(`CREATE ROLE ${pg.escapeIdentifier(role)} LOGIN`);
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(env.dbName)} OWNER ${pg.escapeIdentifier(role)}`);
    const u = new URL(env.databaseUrl);
    u.username = role;
    (env as { databaseUrl: string }).databaseUrl = u.toString();
  }
  try {
    await env.setup();
    // Per-function time (pg_stat_user_functions) for the census below: the service's backends
    // read the database's settings when they connect, after this.
    await admin.query(`ALTER DATABASE ${pg.escapeIdentifier(env.dbName)} SET track_functions = 'pl'`);
    if (O.explain) {
      for (const q of [`SET session_preload_libraries = 'auto_explain'`, `SET auto_explain.log_min_duration = 50`, `SET auto_explain.log_nested_statements = on`, `SET auto_explain.log_analyze = on`])
        await admin.query(`ALTER DATABASE ${pg.escapeIdentifier(env.dbName)} ${q}`);
    }
    const hll = (await env.db.query<{ n: boolean }>("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'hll') AS n")).rows[0]!.n;
    if (hll !== O.hll) throw new Error(`hll ${hll ? 'installed' : 'not installed'} in the benchmark database, ${O.hll ? 'asked for' : 'asked without'} (is postgresql-15-hll installed?)`);
    const postmaster = statOf((await env.db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid)!.ppid;
    log(`database ${env.dbName} (hll ${hll ? 'on' : 'off'}), PostgreSQL postmaster pid ${postmaster}; ${O.events} events${O.live ? ', live hour' : ''}`);

    const extra: Record<string, string> = { TIDEMARK_SHARDS: '', ROLLUP_REFRESH_QUIET_MS: '', LOG_LEVEL: 'warn' };
    if (O.sessionTimeoutMin !== null) extra.SESSION_TIMEOUT_MINUTES = String(O.sessionTimeoutMin);
    const app = await spawnApp(env, 'all', extra);
    appPid = app.child.pid ?? null;
    let appStopped = false;
    try {
      const projectId = await env.project({ name: 'rollup cost' });
      const creds = await env.client(projectId, 'write', 0);
      // Warm the client (secret verified, cached) with a request that stores nothing.
      const warm = await post(`${app.url}/track`, { type: 'track', payload: {} }, creds);
      if (warm.status !== 400) throw new Error(`warm-up answered ${warm.status}, not 400`);

      // Event times: the three hours before the current one, or (--live) the current hour up
      // to the moment of sending, which starts liveLeadS before it ends.
      let from: number;
      let closeAt: number;
      if (O.live) {
        const now = Date.now();
        closeAt = Math.ceil(now / HOUR) * HOUR;
        const before = (O.liveLeadS + O.idleS + 3) * 1000;
        if (closeAt - now < before + 5000) closeAt += HOUR;
        const startAt = closeAt - before;
        log(`live hour ${new Date(closeAt - HOUR).toISOString()}: waiting ${((startAt - now) / 1000).toFixed(0)} s, until ${before / 1000} s before it ends`);
        while (Date.now() < startAt) await sleep(Math.min(10_000, startAt - Date.now()));
        from = closeAt - HOUR;
      } else {
        closeAt = Math.floor(Date.now() / HOUR) * HOUR;
        from = closeAt - 3 * HOUR;
      }

      // The poll's own cost is in the measured CPU (and, at the idle rate, subtracted): counting
      // the stored events on every poll cost ~6 ms a poll at 13k rows (0.7 s of a run's 4 s), so
      // they are counted only until every accepted event is in; of open sessions (when the run
      // waits for them to end) and logged deltas, only whether any is left (1 or 0).
      const poller = new pg.Client({ connectionString: env.databaseUrl });
      await poller.connect();
      pollers.push(poller);
      benchBackends.add((await poller.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
      const target = { stored: Infinity };
      let storedSeen = 0;
      const poll = async () => {
        const countStored = storedSeen < target.stored;
        const q = await poller.query<{ inv: number; deltas: number; stored: number | null; open: number | null }>(
          `SELECT (SELECT count(*)::int FROM rollup_invalidations WHERE bucket < $1) AS inv,
                  (EXISTS (SELECT 1 FROM rollup_delta_sessions) OR EXISTS (SELECT 1 FROM rollup_delta_events)
                   OR EXISTS (SELECT 1 FROM visitor_log))::int AS deltas,
                  CASE WHEN $3 THEN (SELECT count(*)::int FROM events WHERE project_id = $2 AND name NOT IN ('session_start', 'session_end')) END AS stored,
                  CASE WHEN $4 THEN (EXISTS (SELECT 1 FROM sessions WHERE project_id = $2 AND NOT ended))::int END AS open`,
          [new Date(closeAt).toISOString(), projectId, countStored, O.sessionTimeoutMin !== null]);
        const row = q.rows[0]!;
        if (row.stored !== null) storedSeen = row.stored;
        return { inv: row.inv, deltas: row.deltas, stored: storedSeen, open: row.open ?? 0 };
      };
      const own = new OwnBackends(poller, env.dbName);
      await sleep(3000);
      log(`idle: ${O.idleS} s with npm start running`);
      const idle = await measureIdle(postmaster, own, poll);
      log(`  idle rate: PostgreSQL ${(idle.rate * 100).toFixed(1)}% of a core (own backends ${(idle.ownRate * 100).toFixed(1)}%)`);

      const to = O.live ? Date.now() : closeAt;
      const visits = traffic(O.events, from, to, O.seed);
      const sent = visits.reduce((x, v) => x + v.events.length, 0);
      await own.start();
      const t0 = sampleNow(postmaster, 0);
      log(`sending ${sent} events in ${visits.length} visits (times ${new Date(from).toISOString()} .. ${new Date(to).toISOString()})`);
      const { statuses, latencies } = await send(app.port, creds, visits, O.connections);
      const sendS = (performance.now() - t0.t) / 1000;
      const accepted = statuses['202'] ?? 0;
      target.stored = accepted;
      const trackMs = { p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
      log(`  sent in ${sendS.toFixed(1)} s (${Math.round(sent / sendS)}/s; /track p50 ${trackMs.p50.toFixed(1)} ms, p99 ${trackMs.p99.toFixed(1)} ms): ${JSON.stringify(statuses)}`);
      const stored = { at: NaN };
      const q = await untilQuiet({
        postmaster, own, t0, idleRate: idle.rate, poll, maxWaitS: O.maxWaitS, label: 'until quiet',
        done: (p) => {
          if (Number.isNaN(stored.at) && p.stored >= accepted) stored.at = performance.now();
          return p.stored >= accepted && p.inv === 0 && p.deltas === 0 && Date.now() >= closeAt && (O.sessionTimeoutMin === null || p.open === 0);
        },
      });
      const tidemark = phase(t0, q.end, idle, accepted, q.timedOut);
      log(`  quiet after ${tidemark.windowS.toFixed(1)} s${q.timedOut ? ' (TIMED OUT)' : ''}: PostgreSQL ${tidemark.cpuS.toFixed(2)} s CPU, idle ${tidemark.idleS.toFixed(2)} s -> ${tidemark.usPerEvent.toFixed(0)} µs/event (own backends ${tidemark.ownUsPerEvent.toFixed(0)})`);
      const rows = (await env.db.query<Result['rows']>(
        `SELECT (SELECT count(*)::int FROM events WHERE project_id = $1) AS events, (SELECT count(*)::int FROM sessions WHERE project_id = $1) AS sessions,
                (SELECT count(*)::int FROM events WHERE project_id = $1 AND name = 'session_start') AS "sessionStarts",
                (SELECT count(*)::int FROM events WHERE project_id = $1 AND name = 'session_end') AS "sessionEnds",
                (SELECT count(*)::int FROM sessions WHERE project_id = $1 AND NOT ended) AS "openSessions"`, [projectId])).rows[0]!;
      const census = await rollupCensus(env.db, projectId, accepted);
      const hours = (await env.db.query<{ h: string }>(
        "SELECT DISTINCT to_char(date_trunc('hour', created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:00') AS h FROM events WHERE project_id = $1 ORDER BY 1", [projectId])).rows.map((r) => r.h);

      // ---- the bare insert of the same events ----
      const raw = await env.db.query({
        text: "SELECT * FROM events WHERE project_id = $1 AND name NOT IN ('session_start', 'session_end') ORDER BY created_at",
        values: [projectId], types: { getTypeParser: () => (v: string) => v },
      } as pg.QueryConfig);
      await stopChild(app.child, 'SIGTERM');
      appStopped = true;
      appPid = null;
      const cols = raw.fields.map((f) => f.name);
      const pk = (await env.db.query<{ col: string }>(
        `SELECT a.attname AS col FROM pg_index i JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) ON true
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
         WHERE i.indrelid = 'events'::regclass AND i.indisprimary ORDER BY k.n`)).rows.map((r) => r.col);
      const ident = (c: string) => pg.escapeIdentifier(c);
      const types = new Map((await env.db.query<{ col: string; type: string }>(
        `SELECT attname AS col, format_type(atttypid, atttypmod) AS type FROM pg_attribute
         WHERE attrelid = 'events'::regclass AND attnum > 0 AND NOT attisdropped`)).rows.map((r) => [r.col, r.type]));
      await env.db.query(`CREATE TABLE bare_events (LIKE events INCLUDING DEFAULTS, PRIMARY KEY (${(pk.length ? pk : ['id']).map(ident).join(', ')}))`);
      const bareDb = new pg.Client({ connectionString: env.databaseUrl });
      await bareDb.connect();
      try {
        await sleep(3000);
        log(`bare insert: idle ${O.idleS} s (npm start stopped)`);
        const barePoll = async () => ({});
        const bareIdle = await measureIdle(postmaster, own, barePoll);
        log(`  idle rate: PostgreSQL ${(bareIdle.rate * 100).toFixed(1)}% of a core`);
        await own.start();
        const b0 = sampleNow(postmaster, 0);
        let statements = 0;
        // One array a column (text, cast to the column's type in the statement): a 500-row
        // VALUES list with one parameter per field (~18,000 parameters a statement) cost the
        // backend 84 µs a row, this 15 µs: the floor has to be the cheap way to insert.
        const insert = `INSERT INTO bare_events (${cols.map(ident).join(', ')})
          SELECT ${cols.map((c, k) => `u.c${k}::${types.get(c)}`).join(', ')}
          FROM unnest(${cols.map((_, k) => `$${k + 1}::text[]`).join(', ')}) AS u(${cols.map((_, k) => `c${k}`).join(', ')})`;
        for (let i = 0; i < raw.rows.length; i += O.batch) {
          const chunk = raw.rows.slice(i, i + O.batch) as Record<string, string | null>[];
          await bareDb.query(insert, cols.map((c) => chunk.map((row) => row[c] ?? null)));
          statements++;
        }
        const insertS = (performance.now() - b0.t) / 1000;
        const bq = await untilQuiet({ postmaster, own, t0: b0, idleRate: bareIdle.rate, poll: barePoll, done: () => true, maxWaitS: 120, label: 'bare until quiet' });
        const bare = { ...phase(b0, bq.end, bareIdle, raw.rows.length, bq.timedOut), rows: raw.rows.length, statements, insertS };
        log(`  ${raw.rows.length} rows in ${statements} statements, ${insertS.toFixed(2)} s; quiet after ${bare.windowS.toFixed(1)} s: ${bare.cpuS.toFixed(2)} s CPU, idle ${bare.idleS.toFixed(2)} s -> ${bare.usPerEvent.toFixed(1)} µs/event (own backends ${bare.ownUsPerEvent.toFixed(1)})`);
        machine.loadAfter = os.loadavg().map((l) => l.toFixed(1)).join(' ');
        return {
          machine, options: O, hll, sent, statuses, sendS, trackMs, storedS: (stored.at - t0.t) / 1000, rows, hours, tidemark, bare, census,
          ratio: tidemark.usPerEvent / bare.usPerEvent, ownRatio: tidemark.ownUsPerEvent / bare.ownUsPerEvent,
        };
      } finally {
        await bareDb.end();
      }
    } finally {
      if (!appStopped) await stopChild(app.child, 'SIGTERM');
    }
  } finally {
    for (const c of pollers) await c.end().catch(() => {});
    await env.teardown();
    if (role) await admin.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(role)}`).catch((err) => log(`could not drop role ${role}: ${err}`));
    await admin.end();
  }
}

// ---- where it goes ----

interface Census {
  /** Rows of each kept rollup table for the project, busiest first (a row is one key of a bucket). */
  tables: { relation: string; rows: number }[];
  /** The refresh functions' own time (pg_stat_user_functions, track_functions = pl), busiest first. */
  functions: { name: string; calls: number; selfMs: number; totalMs: number }[];
}

/** What the rollups hold and what their functions took: where an event's PostgreSQL time goes. */
async function rollupCensus(db: TestEnv['db'], projectId: string, events: number): Promise<Census> {
  const rels = (await db.query<{ relation: string }>(
    `SELECT r.relation FROM rollup_registry r
      WHERE r.refresh_fn IS NOT NULL AND to_regclass(r.relation) IS NOT NULL
        AND (SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass(r.relation)) = 'r' ORDER BY 1`)).rows.map((r) => r.relation);
  const tables: Census['tables'] = [];
  for (const relation of rels) {
    const n = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${pg.escapeIdentifier(relation)} WHERE project_id = $1`, [projectId])).rows[0]!.n;
    tables.push({ relation, rows: n });
  }
  tables.sort((a, b) => b.rows - a.rows);
  const functions = (await db.query<{ name: string; calls: number; self_ms: number; total_ms: number }>(
    `SELECT funcname AS name, calls::int, self_time AS self_ms, total_time AS total_ms FROM pg_stat_user_functions
      WHERE funcname LIKE 'tm\\_%' ORDER BY self_time DESC`)).rows
    .map((r) => ({ name: r.name, calls: r.calls, selfMs: Number(r.self_ms), totalMs: Number(r.total_ms) }));
  log(`  rollup rows: ${tables.reduce((s, t) => s + t.rows, 0)} in ${tables.length} tables (${(tables.reduce((s, t) => s + t.rows, 0) / Math.max(1, events)).toFixed(2)} a stored event)`);
  return { tables, functions };
}

// ---- report ----

/** The section of bench/RESULTS.md a run writes: backfilled hours or a live hour, with hll or without it. */
const sectionTitle = (r: Result) => `${r.options.live ? 'Rollup cost: live hour' : 'Rollup cost'}${r.hll ? '' : ', without hll'}`;

/**
 * The rate this machine's cores could sustain with every event's work done, rollups included:
 * cores / the service's CPU per event (its processes, each with its idle rate subtracted; the
 * whole machine's /proc/stat less its idle rate swings with whatever else the machine did in
 * the idle window, over a span mostly spent waiting for quiet).
 */
export const sustainedRate = (r: Result): number => Math.round((Number(r.machine.nproc) * 1e6) / Math.max(1, r.tidemark.serviceUsPerEvent));

function markdown(r: Result, command: string): string {
  const title = sectionTitle(r);
  const T = r.tidemark;
  const B = r.bare;
  const L = [`## ${title}`, ''];
  L.push(`Command: \`${command}\``, '');
  L.push(`Machine: ${r.machine.nproc} CPUs, ${r.machine.cpu}, Node ${r.machine.node}; load average before ${r.machine.load}, after ${r.machine.loadAfter ?? '?'}. Date: ${r.machine.date}. A fresh \`npm start\` (defaults${r.options.sessionTimeoutMin !== null ? `, SESSION_TIMEOUT_MINUTES=${r.options.sessionTimeoutMin}` : ''}) on a new database, hll **${r.hll ? 'installed' : 'not installed'}**. ${r.sent.toLocaleString('en-US')} events through POST /track (300 pages, 10 browser user-agents, IPs of ~20 countries, search/social referrers, UTM on 15% of visits, 1-6 views a visit, custom events; ${r.options.connections} visits at a time), event times in ${r.hours.join(', ')} UTC${r.options.live ? ' (the live hour, counted until it closed and was recomputed)' : ' (the three hours before the current one)'}. Statuses ${JSON.stringify(r.statuses)}; sent in ${r.sendS.toFixed(1)} s (/track p50 ${r.trackMs.p50.toFixed(1)} ms, p99 ${r.trackMs.p99.toFixed(1)} ms), all stored after ${r.storedS.toFixed(1)} s. Rows: ${r.rows.events} events (${r.rows.sessionStarts} session_start, ${r.rows.sessionEnds} session_end), ${r.rows.sessions} sessions (${r.rows.openSessions} still open${r.options.sessionTimeoutMin === null ? ': they end 30 min later, not counted here' : ''}).`, '');
  L.push(`PostgreSQL CPU: the whole server (postmaster with its reaped children + live children, /proc), from the first request until every event was stored, the refresh had nothing pending (rollup_invalidations of those hours, rollup_delta_*, visitor_log) and the CPU rate was back at idle for ${r.options.quietS} s; the idle rate (measured over ${r.options.idleS} s just before, same polling) times the span subtracted, and the benchmark's own polling connection left out. Own backends: this database's backends only (sampled every 500 ms).`, '');
  L.push('| | events | span s | PostgreSQL CPU s | idle s | net s | **µs/event** | own backends µs/event |', '|---|---:|---:|---:|---:|---:|---:|---:|');
  L.push(`| Tidemark, all in (rollups included) | ${r.sent} | ${T.windowS.toFixed(1)}${T.timedOut ? ' (timed out)' : ''} | ${T.cpuS.toFixed(2)} | ${T.idleS.toFixed(2)} | ${T.netS.toFixed(2)} | **${T.usPerEvent.toFixed(0)}** | ${T.ownUsPerEvent.toFixed(0)} |`);
  L.push(`| bare insert (PK only, ${r.options.batch} a statement as one array a column, ${B.statements} statements in ${B.insertS.toFixed(2)} s) | ${B.rows} | ${B.windowS.toFixed(1)}${B.timedOut ? ' (timed out)' : ''} | ${B.cpuS.toFixed(2)} | ${B.idleS.toFixed(2)} | ${B.netS.toFixed(2)} | **${B.usPerEvent.toFixed(1)}** | ${B.ownUsPerEvent.toFixed(1)} |`);
  L.push('');
  L.push(`Ratio Tidemark / bare insert: **${r.ratio.toFixed(1)}x** (own backends: ${r.ownRatio.toFixed(1)}x).`, '');
  L.push(`The service over the same span (the CPU of its processes: the \`npm start\` process with all its threads, PostgreSQL's whole server, nats-server and redis-server, each one's idle rate subtracted; the kernel's work outside them, e.g. network interrupts, is not in it): **${T.serviceUsPerEvent.toFixed(0)} µs an event** all in, so ${r.machine.nproc} cores sustain at most **${sustainedRate(r).toLocaleString('en-US')} events/s** of this traffic with its rollups kept. The whole machine by /proc/stat over the same span (less this benchmark's own process, the load generator; the machine's idle rate subtracted, which swings with whatever else ran in the idle window): ${T.machineUsPerEvent.toFixed(0)} µs an event.`, '');
  const C = r.census;
  const rollupRows = C.tables.reduce((s, t) => s + t.rows, 0);
  L.push(`Where it goes: the kept rollup tables hold ${rollupRows.toLocaleString('en-US')} rows for these events (${(rollupRows / r.sent).toFixed(1)} an event; busiest: ${C.tables.slice(0, 6).map((t) => `${t.relation} ${t.rows.toLocaleString('en-US')}`).join(', ')}). The SQL functions' own time (pg_stat_user_functions): ${C.functions.slice(0, 8).map((f) => `${f.name} ${(f.selfMs / 1000).toFixed(2)} s (${f.calls} calls)`).join(', ')}; all of them ${(C.functions.reduce((s, f) => s + f.selfMs, 0) / 1000).toFixed(2)} s.`, '');
  const busy = Math.max(T.idleRate, B.idleRate);
  if (busy > 0.1) L.push(`**Not a quiet machine:** PostgreSQL's idle rate was ${(busy * 100).toFixed(0)}% of a core (other users of the server), so the whole-server figures are noise; only the own-backends column means anything here.`, '');
  return L.join('\n');
}

if (process.argv[1] && /bench[\\/]rollup-cost\.ts$/.test(process.argv[1])) {
  const argv = process.argv.slice(2);
  run().then(
    (r) => {
      const md = markdown(r, `npx tsx bench/rollup-cost.ts${argv.length ? ` ${argv.join(' ')}` : ''}`);
      process.stdout.write(`${md}\n`);
      process.stdout.write(`BENCH_RESULT ${JSON.stringify(r)}\n`);
      if (a.record) writeSection(sectionTitle(r), md);
      process.exit(0);
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
