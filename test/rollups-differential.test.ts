// Differential property test of the rollups: random traffic through the real pipeline
// (POST /track -> JetStream -> shard workers -> PostgreSQL), written in three rounds with the
// rollup refresh drained BETWEEN the rounds, so the later rounds change hours that are
// already rolled up: late events, sessions continued after the refresh, sessions idle-ended
// by the session check and then reopened (their session_end row deleted), whole sessions
// backfilled into an earlier, empty day; round 3 is written while the refresh runs. After
// each round (refreshed, and once also before the refresh, with hours still logged) every
// rollup-backed read must equal its raw answer:
// insights metrics, breakdowns (whole and paged) and pages; export event pages (totalCount)
// and charts (event counts, property sum / min / max / average). One project per run, in
// the project timezones and DST days of SCENARIOS, one shared TestEnv database.
//
// The worker is built here (as test/sessions-end.test.ts does) with a clock the test moves
// forward: SESSION_TIMEOUT_MINUTES is 30 min of event time AND of wall time, so to idle-end
// a session without waiting, the test advances the worker's clock 31 minutes and publishes
// the session_check ops the BullMQ check would publish (same subject, same op). Everything
// else (API, NATS, ShardManager/ShardRunner, commit, rollup refresh) is the product's.
//
// Everything compared is exact by design here: unique visitors (insights) and chart user /
// session counts come from HyperLogLog sketches only above TIDEMARK_EXACT_VISITORS_MAX
// (25,000) sessions / events, and only with the hll extension (the migrations install it when
// the server has it); these runs have a few dozen. Every other rollup read is exact by
// construction. So auto and raw must be deep-equal, JSON and order included. With hll, the
// sketch path is also forced (exactVisitorsMax 0) and compared exactly: at these sizes a
// sketch is an explicit list of hashes (as internal/insights/filtered-rollups.test.ts does).
//
// Seed: DIFFTEST_SEED (default below); a failure prints the seed and the fast-check path.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { shardOf } from '../internal/bus/bus';
import { getChart } from '../internal/export/charts';
import { getEventsPage } from '../internal/export/events';
import { parseChartParams, parseEventsParams } from '../internal/export/params';
import { getBreakdown, getMetrics, getPages, type BreakdownDimension, type InsightsOptions } from '../internal/insights/service';
import { planFor } from '../internal/insights/rollups';
import type { QueuedSessionCheck } from '../internal/model/event';
import { parsePageParams, parsePeriodParams, type Filter } from '../internal/query/params';
import { addDays, parseLocalDate, resolvePeriod, startOfDay, type LocalDate } from '../internal/query/period';
import { refreshRollups } from '../internal/store/rollups';
import { TestEnv, closeWorker, startApp, startTestWorker, waitFor, type Credentials } from './support/harness';
import { mulberry32 } from './support/random';
import { IPS, SITE, UAS, postEvent } from './support/sessions-traffic';
import { allRows, searchParams } from './support/sql-db';

const SEED = Number(process.env.DIFFTEST_SEED ?? 20261127);
const MIN = 60_000;
const HOUR = 60 * MIN;
const TIMEOUT_MS = 30 * MIN;

/** One run each: a fresh project in this timezone, traffic on the local days around `day`. */
const SCENARIOS = [
  { tz: 'UTC', day: '2026-11-18', what: 'UTC' },
  { tz: 'Europe/Berlin', day: '2026-10-25', what: 'Europe/Berlin across the 25-hour day 2026-10-25' },
  { tz: 'Europe/Berlin', day: '2026-03-29', what: 'Europe/Berlin across the 23-hour day 2026-03-29' },
  { tz: 'America/New_York', day: '2026-11-01', what: 'America/New_York across the 25-hour day 2026-11-01' },
  { tz: 'Asia/Kolkata', day: '2026-11-10', what: 'Asia/Kolkata (half-hour offset: insights and charts read raw, export totalCount reads UTC hours)' },
] as const;

// ---------------------------------------------------------------- traffic plan
type UaKey = keyof typeof UAS;
const UA_KEYS: UaKey[] = ['chrome', 'iphone', 'android', 'ipad', 'firefox', 'chrome', 'iphone', 'googlebot'];
const REFERRERS = [null, null, 'https://www.google.com/', 'https://www.facebook.com/', 'https://t.co/abc', `${SITE}/from-inside`, 'https://some-blog.example.org/post/1'];
const UTMS = ['', '', '?utm_source=newsletter&utm_medium=email&utm_campaign=spring', '?utm_source=fb&utm_campaign=retargeting'];
const PAGES = ['/', '/pricing', '/docs', '/docs/api', '/blog/post-1', '/checkout'];
const CUSTOM = ['click', 'signup', 'add_to_cart'];
const PRICES = [0.1, 0.5, 1.25, 9.99, 100, 3];

/** How a session's events are spread over the rounds. */
type Mode = 'r1' | 'tail2' | 'tail3' | 'late2' | 'late3' | 'r2' | 'r3';

interface GenEvent { gapMin: number; gapSec: number; view: boolean; page: string; custom: string; n: number; price: number; late: boolean; title: string }
interface GenSession { dayOffset: number; minute: number; second: number; events: GenEvent[]; mode: Mode; cut: number; ref: string | null; utm: string; early: number }
interface GenDevice { ua: UaKey; profile: boolean; idleEnd: boolean; shuffle: number; sessions: GenSession[] }
interface GenPlan { ipBase: number; devices: GenDevice[]; backfill: GenSession[]; queries: GenQueries }

interface GenQueries {
  filterCases: number[];
  dims: BreakdownDimension[];
  breakdownFilters: number[];
  periods: number[];
  eventCases: number[];
  chartCases: number[];
}

const eventArb: fc.Arbitrary<GenEvent> = fc.record({
  gapMin: fc.integer({ min: 0, max: 25 }),
  gapSec: fc.integer({ min: 0, max: 59 }),
  view: fc.boolean(),
  page: fc.constantFrom(...PAGES),
  custom: fc.constantFrom(...CUSTOM),
  n: fc.integer({ min: 1, max: 9 }),
  price: fc.constantFrom(...PRICES),
  late: fc.boolean(),
  // A page's title is its latest non-empty one: titles change between views, some are empty.
  title: fc.constantFrom('', 'A', 'B'),
});

const sessionArb = (modes: Mode[]): fc.Arbitrary<GenSession> => fc.record({
  dayOffset: fc.integer({ min: -1, max: 1 }),
  minute: fc.integer({ min: 0, max: 24 * 60 - 1 }),
  // 0: the session starts exactly on a local hour (and its events on whole minutes after it).
  second: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 59 })),
  events: fc.array(eventArb, { minLength: 2, maxLength: 6 }),
  mode: fc.constantFrom(...modes),
  cut: fc.integer({ min: 1, max: 5 }),
  ref: fc.constantFrom(...REFERRERS),
  utm: fc.constantFrom(...UTMS),
  // Late sessions (late2 / late3) also get a screen view this many minutes BEFORE their first
  // event (0: none), sent in that later round: often in the hour before the session's start.
  early: fc.constantFrom(0, 0, 4, 17, 29),
});

const deviceArb: fc.Arbitrary<GenDevice> = fc.record({
  ua: fc.constantFrom(...UA_KEYS),
  profile: fc.boolean(),
  idleEnd: fc.boolean(),
  shuffle: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  sessions: fc.array(sessionArb(['r1', 'r1', 'r1', 'tail2', 'tail3', 'late2', 'late3', 'r2', 'r3']), { minLength: 1, maxLength: 3 }),
});

const DIMS: BreakdownDimension[] = [
  'device', 'country', 'browser', 'os', 'referrer_name', 'referrer_type', 'referrer', 'utm_source', 'utm_campaign',
  'region', 'city', 'browser_version', 'os_version', 'brand', 'model',
];

const f = (name: string, operator: Filter['operator'], ...value: string[]): Filter => ({ name, operator, value });
/** Filters of insights reads: one dimension, a dimension and its parent, two cube dimensions, an event column. */
const FILTER_CASES: Filter[][] = [
  [f('device', 'is', 'mobile')],
  [f('country', 'is', 'US')],
  [f('country', 'isNot', 'DE')],
  [f('browser', 'is', 'Chrome')],
  [f('referrer_name', 'is', 'Google')],
  [f('referrer_name', 'is', '')],
  [f('utm_source', 'is', 'newsletter')],
  [f('os', 'is', 'iOS'), f('device', 'is', 'mobile')],
  [f('country', 'is', 'GB'), f('device', 'isNot', 'mobile')],
  [f('city', 'isNot', '')],
  [f('path', 'is', '/pricing')],
  [f('region', 'startsWith', 'C'), f('country', 'is', 'US')],
  [f('browser_version', 'startsWith', '1'), f('browser', 'is', 'Chrome')],
  [f('device', 'is', 'desktop'), f('referrer_type', 'is', 'search')],
  [f('properties.button', 'is', 'buy')],
  [f('name', 'is', 'click'), f('country', 'isNot', 'BR')],
];

const queriesArb: fc.Arbitrary<GenQueries> = fc.record({
  filterCases: fc.shuffledSubarray(FILTER_CASES.map((_, i) => i), { minLength: 4, maxLength: 4 }),
  dims: fc.shuffledSubarray(DIMS, { minLength: 5, maxLength: 5 }),
  breakdownFilters: fc.array(fc.integer({ min: -1, max: FILTER_CASES.length - 1 }), { minLength: 5, maxLength: 5 }),
  periods: fc.array(fc.nat(), { minLength: 8, maxLength: 8 }),
  eventCases: fc.shuffledSubarray([0, 1, 2, 3, 4, 5, 6, 7], { minLength: 5, maxLength: 5 }),
  chartCases: fc.shuffledSubarray([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], { minLength: 8, maxLength: 8 }),
});

const planArb: fc.Arbitrary<GenPlan> = fc.record({
  ipBase: fc.nat({ max: IPS.length - 1 }),
  devices: fc.array(deviceArb, { minLength: 4, maxLength: 7 }),
  backfill: fc.array(sessionArb(['r2', 'r3']), { minLength: 1, maxLength: 2 }),
  queries: queriesArb,
}).map((p) => {
  // The cases that matter in every run, whatever was drawn: device 0's one session continues
  // after the refresh once the check idle-ended it (a reopen); device 1's continues without
  // an end; device 2 gets late events into its refreshed hours; device 3's session on the
  // last day continues in round 3 (after two refreshes; reopened when it was idle-ended).
  const d = p.devices.map((x) => ({ ...x, sessions: [...x.sessions] }));
  d[0] = { ...d[0]!, ua: d[0]!.ua === 'googlebot' ? 'chrome' : d[0]!.ua, idleEnd: true, shuffle: d[0]!.shuffle & ~1, sessions: [{ ...d[0]!.sessions[0]!, mode: 'tail2' }] };
  d[1] = { ...d[1]!, ua: d[1]!.ua === 'googlebot' ? 'firefox' : d[1]!.ua, idleEnd: false, sessions: [{ ...d[1]!.sessions[0]!, mode: 'tail2' }, ...d[1]!.sessions.slice(1)] };
  d[2] = { ...d[2]!, sessions: [{ ...d[2]!.sessions[0]!, mode: 'late2', early: 17, events: d[2]!.sessions[0]!.events.map((e, i) => ({ ...e, late: i % 2 === 1 })) }, ...d[2]!.sessions.slice(1)] };
  d[3] = { ...d[3]!, ua: d[3]!.ua === 'googlebot' ? 'android' : d[3]!.ua, idleEnd: true, sessions: [...d[3]!.sessions.slice(1), { ...d[3]!.sessions[0]!, mode: 'tail3', dayOffset: 1 }] };
  return { ...p, devices: d };
});

// ---------------------------------------------------------------- plan -> events
interface PlannedEvent { device: number; at: number; round: 1 | 2 | 3; name: string; url: string | null; title: string | null; referrer: string | null; props: Record<string, unknown> }

const fmt = (d: LocalDate) => `${d.year}-${String(d.month).padStart(2, '0')}-${String(d.day).padStart(2, '0')}`;

function roundOf(s: GenSession, k: number): 1 | 2 | 3 {
  const cut = Math.min(s.cut, s.events.length - 1);
  switch (s.mode) {
    case 'r1': return 1;
    case 'r2': return 2;
    case 'r3': return 3;
    case 'tail2': return k >= cut ? 2 : 1;
    case 'tail3': return k >= cut ? 3 : 1;
    case 'late2': return k > 0 && s.events[k]!.late ? 2 : 1;
    case 'late3': return k > 0 && s.events[k]!.late ? 3 : 1;
  }
}

function expand(plan: GenPlan, tz: string, day: LocalDate): PlannedEvent[] {
  const out: PlannedEvent[] = [];
  const place = (device: number, s: GenSession, dayStart: number) => {
    const minute = s.second === 0 ? Math.floor(s.minute / 60) * 60 : s.minute;
    let t = dayStart + minute * MIN + s.second * 1000;
    let page = s.events[0]!.page;
    s.events.forEach((e, k) => {
      if (k > 0) t += e.gapMin * MIN + (s.second === 0 ? 0 : e.gapSec * 1000);
      const first = k === 0;
      const view = first || e.view;
      if (view) page = e.page;
      const url = view ? `${SITE}${page}${first ? s.utm : ''}` : e.n % 3 === 0 ? null : `${SITE}${page}`;
      out.push({
        device, at: t, round: roundOf(s, k), name: view ? 'screen_view' : e.custom, url, title: view ? (e.title && `${page} ${e.title}`) : null,
        referrer: first ? s.ref : view ? `${SITE}/` : null,
        props: view ? {} : { n: e.n, price: e.price, button: e.n % 2 ? 'buy' : 'more' },
      });
    });
    if (s.early > 0 && (s.mode === 'late2' || s.mode === 'late3')) {
      const at = dayStart + (s.second === 0 ? Math.floor(s.minute / 60) * 60 : s.minute) * MIN + s.second * 1000 - s.early * MIN;
      out.push({ device, at, round: s.mode === 'late2' ? 2 : 3, name: 'screen_view', url: `${SITE}/early`, title: 'Early', referrer: null, props: {} });
    }
  };
  plan.devices.forEach((d, i) => {
    for (const s of d.sessions) place(i, s, startOfDay(addDays(day, s.dayOffset), tz));
  });
  // Backfill: whole sessions on a local day 4 days before, nothing else on it, in round 2 or 3.
  const bf = plan.devices.length; // its own device
  for (const s of plan.backfill) place(bf, s, startOfDay(addDays(day, -4), tz));
  return out;
}

// ---------------------------------------------------------------- pipeline
let env: TestEnv;
let api: Awaited<ReturnType<typeof startApp>>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
/** The worker's clock runs this far ahead of the wall clock (moved forward for idle ends). */
let skewMs = 0;
const projects: string[] = [];

before(async () => {
  env = await new TestEnv('difft').setup();
  api = await startApp(env, { api: true, worker: false });
  worker = await startTestWorker(env, {
    tickMs: 200,
    runner: () => ({
      timeoutMs: TIMEOUT_MS, batchMax: 200,
      cacheMax: 2, // most devices are loaded from PostgreSQL on their next event
      onOpened: async () => {}, // the checks are published by the test (idleEnd)
      now: () => Date.now() + skewMs,
    }),
  });
  hll = (await env.db.query("SELECT 1 FROM pg_extension WHERE extname = 'hll'")).rowCount === 1;
});

after(async () => {
  await closeWorker(worker);
  await api?.drain();
  await env?.teardown();
});

const realEvents = async (projectId: string): Promise<number> =>
  (await env.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name NOT IN ('session_start', 'session_end')", [projectId],
  )).rows[0]!.n;

/** Sends one round: per device in its (maybe shuffled) order, devices concurrently. */
async function sendRound(
  projectId: string, writer: Credentials, plan: GenPlan, events: PlannedEvent[], round: number, deviceIds: Map<number, string>,
): Promise<number> {
  const mine = events.filter((e) => e.round === round);
  const byDevice = new Map<number, PlannedEvent[]>();
  for (const e of mine) byDevice.set(e.device, [...(byDevice.get(e.device) ?? []), e]);
  await Promise.all([...byDevice].map(async ([i, list]) => {
    const d = plan.devices[i];
    const ua = UAS[d?.ua ?? 'ipad'].ua;
    const ip = IPS[(plan.ipBase + i) % IPS.length]![0];
    const profileId = d?.profile ? `user-${i % 2}` : undefined; // two devices may share a profile
    list.sort((a, b) => a.at - b.at);
    if (d && d.shuffle % 2 === 1) {
      // Out of order: a deterministic shuffle of the round's events of this device.
      const rnd = mulberry32(d.shuffle + round);
      for (let k = list.length - 1; k > 0; k--) {
        const j = Math.floor(rnd() * (k + 1));
        [list[k], list[j]] = [list[j]!, list[k]!];
      }
    }
    for (const e of list) {
      const deviceId = await postEvent(api.url, writer, e, { userAgent: ua, ip, profileId });
      const known = deviceIds.get(i);
      if (known) assert.equal(deviceId, known);
      else deviceIds.set(i, deviceId);
    }
  }));
  void projectId;
  return mine.length;
}

/** Idle-ends the open sessions of these devices: the worker's clock jumps 31 min, then the checks. */
async function idleEnd(projectId: string, deviceIds: string[]): Promise<number> {
  if (!deviceIds.length) return 0;
  skewMs += TIMEOUT_MS + MIN;
  const open = (await env.db.query<{ id: string; device_id: string }>(
    'SELECT id, device_id FROM sessions WHERE project_id = $1 AND NOT ended AND device_id = ANY($2::text[])', [projectId, deviceIds],
  )).rows;
  const { bus } = worker;
  for (const s of open) {
    const op: QueuedSessionCheck = {
      kind: 'session_check', id: `check-${s.id}-${skewMs}`, projectId, deviceId: s.device_id,
      receivedAt: new Date().toISOString(), sessionId: s.id,
    };
    await bus.publishJson(bus.subjectFor(projectId, shardOf(s.device_id, bus.opts.shards)), { v: 1, ops: [op] }, op.id);
  }
  const ids = open.map((s) => s.id);
  await waitFor(async () => (await env.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM sessions WHERE id::text = ANY($1::text[]) AND NOT ended', [ids],
  )).rows[0]!.n === 0, { timeoutMs: 20_000, what: 'the checked sessions to end' });
  return open.length;
}

async function drainRefresh(projectId: string): Promise<void> {
  while ((await refreshRollups(env.db, worker.timescale, { before: new Date(Date.now() + 86_400_000) })).buckets > 0);
  const left = await env.db.query<{ n: number }>('SELECT count(*)::int AS n FROM rollup_invalidations WHERE project_id = $1', [projectId]);
  assert.equal(left.rows[0]!.n, 0, 'rollup_invalidations is empty for the project after the drained refresh');
}

// ---------------------------------------------------------------- reads, auto vs raw
type Q = Record<string, unknown>;
const query = searchParams;
const RAW: InsightsOptions = { path: 'raw' };
const AUTO: InsightsOptions = {};
const SKETCHES: InsightsOptions = { exactVisitorsMax: 0 };
/** The hll extension is installed in the test database (then the sketch paths exist). */
let hll = false;

interface ReadContext { projectId: string; tz: string; day: LocalDate; now: Date; queries: GenQueries }

/** Counts of reads compared and of those whose auto plan is the rollup path (insights). */
interface Tally { reads: number; rollupPlans: number; nonEmpty: number }

async function sameAnswers(ctx: ReadContext, phase: string, tally: Tally): Promise<void> {
  const { projectId, tz, day, now, queries } = ctx;
  const d = (n: number) => fmt(addDays(day, n));
  const PERIODS: Q[] = [
    { startDate: d(0), endDate: d(0) }, // the (DST) day, hour buckets
    { startDate: d(-1), endDate: d(1) }, // three local days
    { range: '7d' },
    { range: '30d' },
    { range: 'yesterday' },
    { range: 'today' },
    { startDate: d(-4), endDate: d(-4) }, // the backfilled day
    { startDate: d(-5), endDate: d(2) },
    { range: 'last24h' }, // sliding: not on whole hours
  ];
  const label = (what: string, q: unknown) => `[${phase}] ${tz} ${what} ${JSON.stringify(q)}`;
  const planOf = (q: Q, target: Parameters<typeof planFor>[3]) => {
    const params = parsePeriodParams(query(q));
    return planFor(resolvePeriod(params, tz, now), params.filters, 'auto', target);
  };
  const count = (q: Q, target: Parameters<typeof planFor>[3], nonEmpty: boolean) => {
    tally.reads++;
    if (planOf(q, target) === 'rollup') tally.rollupPlans++;
    if (nonEmpty) tally.nonEmpty++;
  };

  // Metrics: every period unfiltered; the drawn filters over two drawn periods each.
  const metricQueries: Q[] = [...PERIODS];
  queries.filterCases.forEach((fi, k) => {
    metricQueries.push({ ...PERIODS[queries.periods[k]! % 4]!, filters: FILTER_CASES[fi]! });
    metricQueries.push({ ...PERIODS[(queries.periods[k + 4]! % 5) + 2]!, filters: FILTER_CASES[fi]! });
  });
  // The six kinds of read below are independent of each other (reads only): they run in three
  // lanes side by side (metrics; breakdowns and pages; export events and charts), each read
  // holding one of env.db's four connections, so none waits for one; the first failure is
  // thrown once every lane has settled.
  const kinds: (() => Promise<void>)[] = [];
  kinds.push(async () => {
    for (const q of metricQueries) {
      const params = parsePeriodParams(query(q));
      const raw = await getMetrics(env.db, projectId, params, now, RAW);
      assert.deepStrictEqual(await getMetrics(env.db, projectId, params, now, AUTO), raw, label('metrics', q));
      if (hll) assert.deepStrictEqual(await getMetrics(env.db, projectId, params, now, SKETCHES), raw, label('metrics from sketches', q));
      count(q, 'metrics', raw.metrics.total_sessions > 0);
    }
  });

  // Breakdowns: the drawn dimensions, each under a drawn filter (or none), whole and by 3s.
  kinds.push(async () => {
    for (const [k, dim] of queries.dims.entries()) {
      const fi = queries.breakdownFilters[k]!;
      const q: Q = { ...PERIODS[queries.periods[k]! % 8]!, ...(fi >= 0 ? { filters: FILTER_CASES[fi]! } : {}) };
      const base = parsePageParams(query(q));
      const expected = await allRows((p) => getBreakdown(env.db, projectId, dim, p, now, RAW), base, 50);
      assert.deepStrictEqual(await allRows((p) => getBreakdown(env.db, projectId, dim, p, now, AUTO), base, 50), expected, label(`breakdown ${dim}`, q));
      assert.deepStrictEqual(await allRows((p) => getBreakdown(env.db, projectId, dim, p, now, AUTO), base, 3), expected, label(`breakdown ${dim} by 3s`, q));
      count(q, dim, expected.length > 0);
    }
  });
  // Unfiltered breakdowns of two cube dimensions over the whole traffic (always rollup-eligible).
  kinds.push(async () => {
    for (const dim of ['device', 'referrer_name'] as BreakdownDimension[]) {
      const q: Q = PERIODS[7]!;
      const base = parsePageParams(query(q));
      const expected = await allRows((p) => getBreakdown(env.db, projectId, dim, p, now, RAW), base, 50);
      assert.deepStrictEqual(await allRows((p) => getBreakdown(env.db, projectId, dim, p, now, AUTO), base, 50), expected, label(`breakdown ${dim}`, q));
      count(q, dim, expected.length > 0);
    }
  });

  // Pages: the DST day, the whole span, and one filtered; whole and by 4s.
  kinds.push(async () => {
    for (const q of [PERIODS[0]!, PERIODS[7]!, { ...PERIODS[2]!, filters: FILTER_CASES[queries.filterCases[0]!]! }]) {
      const base = parsePageParams(query(q));
      const expected = await allRows((p) => getPages(env.db, projectId, p, now, RAW), base, 50);
      assert.deepStrictEqual(await allRows((p) => getPages(env.db, projectId, p, now, AUTO), base, 50), expected, label('pages', q));
      assert.deepStrictEqual(await allRows((p) => getPages(env.db, projectId, p, now, AUTO), base, 4), expected, label('pages by 4s', q));
      count(q, 'pages', expected.length > 0);
    }
  });

  // Export events: pages 1..3 by number (meta.totalCount from the rollups on the auto path).
  const startOfLocal = (n: number) => new Date(startOfDay(addDays(day, n), tz));
  const EVENT_CASES: Record<string, string | string[]>[] = [
    { limit: '7' },
    { limit: '5', event: 'screen_view' },
    { limit: '5', event: ['click', 'add_to_cart'], start: d(-1), end: d(1) },
    { limit: '6', filters: JSON.stringify([f('device', 'is', 'mobile')]) },
    { limit: '6', event: 'screen_view', filters: JSON.stringify([f('country', 'is', 'US')]) },
    { limit: '4', filters: JSON.stringify([f('path', 'is', '/docs')]), start: d(-1) },
    { limit: '5', start: new Date(startOfLocal(0).getTime() + 3 * HOUR).toISOString(), end: new Date(startOfLocal(1).getTime() + 17 * MIN + 12_345).toISOString() },
    { limit: '8', filters: JSON.stringify([f('device', 'isNot', 'desktop'), f('country', 'isNot', 'GB')]), end: d(1) },
  ];
  kinds.push(async () => {
    for (const ci of queries.eventCases) {
      const c = EVENT_CASES[ci]!;
      for (let page = 1; page <= 3; page++) {
        const q = new URLSearchParams();
        for (const [k, v] of Object.entries(c)) for (const x of [v].flat()) q.append(k, x);
        q.set('page', String(page));
        const params = parseEventsParams(q);
        const raw = await getEventsPage(env.db, projectId, params, { path: 'raw' });
        assert.deepStrictEqual(await getEventsPage(env.db, projectId, params), raw, label('export events', q.toString()));
        tally.reads++;
        if (raw.meta.totalCount > 0) tally.nonEmpty++;
        if (page === 1 && raw.meta.cursor) {
          // The page after page 1's cursor (the total carried in the cursor) is page 2 by number.
          q.delete('page');
          q.set('cursor', raw.meta.cursor);
          const next = await getEventsPage(env.db, projectId, parseEventsParams(q), { path: 'raw' });
          q.delete('cursor');
          q.set('page', '2');
          assert.deepStrictEqual(await getEventsPage(env.db, projectId, parseEventsParams(q)), next, label('export events cursor = page 2', q.toString()));
        }
        if (page >= raw.meta.pages) break;
      }
    }
  });

  // Export charts: event counts (plain, by name, by a column, filtered on a column or the
  // cube's columns), property sum / min / max / average, distinct users and sessions.
  const CHART_CASES: Record<string, unknown>[] = [
    { series: [{ name: '*' }], startDate: d(0), endDate: d(0), interval: 'hour' },
    { series: [{ name: '*' }], range: '7d', interval: 'day', breakdowns: [{ name: 'name' }] },
    { series: [{ name: 'screen_view' }], startDate: d(-1), endDate: d(1), interval: 'hour', breakdowns: [{ name: 'country' }] },
    { series: [{ name: '*', filters: [f('path', 'is', '/pricing')] }], range: '30d', interval: 'day' },
    { series: [{ name: '*', filters: [f('device', 'is', 'mobile'), f('country', 'isNot', 'DE')] }], startDate: d(-5), endDate: d(2), interval: 'day', breakdowns: [{ name: 'device' }] },
    { series: [{ name: 'click', segment: 'property_sum', property: 'properties.n' }, { name: '*', segment: 'property_max', property: 'properties.price' }], startDate: d(-1), endDate: d(1), interval: 'hour' },
    { series: [{ name: '*', segment: 'property_min', property: 'properties.price' }, { name: '*', segment: 'property_average', property: 'properties.price' }], range: '30d', interval: 'day', breakdowns: [{ name: 'name' }] },
    { series: [{ name: '*', segment: 'property_sum', property: 'properties.price' }], startDate: d(0), endDate: d(0), interval: 'hour', breakdowns: [{ name: 'browser' }] },
    { series: [{ name: '*' }, { name: 'screen_view', segment: 'user' }, { name: '*', segment: 'session' }], startDate: d(-4), endDate: d(1), interval: 'day', previous: 'true' },
    { series: [{ name: 'add_to_cart' }, { name: 'click', segment: 'property_sum', property: 'properties.price' }], range: 'yesterday', interval: 'hour', filters: [f('device', 'is', 'mobile')] },
    { series: [{ name: '*' }], range: '30d', interval: 'week', breakdowns: [{ name: 'referrer_name' }] },
    { series: [{ name: '*', segment: 'property_max', property: 'properties.n' }, { name: 'screen_view' }], range: '3m', interval: 'month', breakdowns: [{ name: 'path' }] },
    { series: [{ name: '*', filters: [f('country', 'is', 'US')] }, { name: 'signup', filters: [f('utm_source', 'is', 'newsletter')] }], startDate: d(-1), endDate: d(1), interval: 'hour', breakdowns: [{ name: 'country' }], previous: 'true' },
  ];
  kinds.push(async () => {
    for (const ci of queries.chartCases) {
      const c = CHART_CASES[ci]!;
      const params = parseChartParams(query(c));
      const raw = await getChart(env.db, projectId, params, now, { path: 'raw' });
      assert.deepStrictEqual(await getChart(env.db, projectId, params, now), raw, label('export chart', c));
      if (hll && params.series.some((x) => x.segment === 'user' || x.segment === 'session')) {
        assert.deepStrictEqual(await getChart(env.db, projectId, params, now, { exactVisitorsMax: 0 }), raw, label('export chart from sketches', c));
      }
      tally.reads++;
      if (raw.series.some((s) => s.data.some((p) => p.count !== 0))) tally.nonEmpty++;
    }
  });
  const lanes = [[kinds[0]!], [kinds[1]!, kinds[2]!, kinds[3]!], [kinds[4]!, kinds[5]!]];
  assert.equal(lanes.flat().length, kinds.length);
  const settled = await Promise.allSettled(lanes.map(async (lane) => {
    for (const kind of lane) await kind();
  }));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

// ---------------------------------------------------------------- the runs
async function runScenario(plan: GenPlan, sc: (typeof SCENARIOS)[number], log: (s: string) => void): Promise<void> {
  const started = Date.now();
  const projectId = await env.project({ timezone: sc.tz });
  projects.push(projectId);
  const writer = await env.client(projectId, 'write');
  const day = parseLocalDate(sc.day);
  const events = expand(plan, sc.tz, day);
  const now = new Date(startOfDay(addDays(day, 2), sc.tz) + 12 * HOUR);
  assert.ok(Math.max(...events.map((e) => e.at)) < now.getTime() && now.getTime() < Date.now(), 'the traffic and the read time are in the past');
  const ctx: ReadContext = { projectId, tz: sc.tz, day, now, queries: plan.queries };
  const tally: Tally = { reads: 0, rollupPlans: 0, nonEmpty: 0 };
  const spent = { pipeline: 0, refresh: 0, reads: 0 };
  const timed = async <T>(what: keyof typeof spent, fn: () => Promise<T>): Promise<T> => {
    const t0 = Date.now();
    try {
      return await fn();
    } finally {
      spent[what] += Date.now() - t0;
    }
  };
  const deviceIds = new Map<number, string>();
  const idleDevices = () => plan.devices.flatMap((d, i) => (d.idleEnd && deviceIds.has(i) ? [deviceIds.get(i)!] : []));
  let sent = 0;
  const stored = async (what: string) => {
    await waitFor(async () => (await realEvents(projectId)) === sent, { timeoutMs: 30_000, what });
    assert.equal(await realEvents(projectId), sent, `${what}: no event more`);
  };

  // Round 1, then idle-end the sessions of the idleEnd devices (session_end rows), refresh.
  sent += await timed('pipeline', () => sendRound(projectId, writer, plan, events, 1, deviceIds));
  await timed('pipeline', () => stored('round 1 stored'));
  const ended1 = await timed('pipeline', () => idleEnd(projectId, idleDevices()));
  await timed('refresh', () => drainRefresh(projectId));
  await timed('reads', () => sameAnswers(ctx, 'round 1, refreshed', tally));
  const rolled = (await env.db.query<{ n: number }>('SELECT count(*)::int AS n FROM rollup_sessions_hourly WHERE project_id = $1', [projectId])).rows[0]!.n;
  assert.ok(rolled > 0, 'round 1 is rolled up');

  // Round 2 into the rolled-up hours: late events, continued and reopened sessions, backfill.
  const endsBefore = (await env.db.query<{ n: number }>("SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = 'session_end'", [projectId])).rows[0]!.n;
  sent += await timed('pipeline', () => sendRound(projectId, writer, plan, events, 2, deviceIds));
  await timed('pipeline', () => stored('round 2 stored'));
  const logged = (await env.db.query<{ n: number }>('SELECT count(DISTINCT bucket)::int AS n FROM rollup_invalidations WHERE project_id = $1', [projectId])).rows[0]!.n;
  assert.ok(logged > 0, 'round 2 logged hours to recompute');
  await timed('reads', () => sameAnswers(ctx, 'round 2, hours logged, not refreshed', tally));
  const ended2 = await timed('pipeline', () => idleEnd(projectId, idleDevices()));
  await timed('refresh', () => drainRefresh(projectId));
  await timed('reads', () => sameAnswers(ctx, 'round 2, refreshed', tally));

  // Round 3: more late events and tails, the rest of the backfill, written WHILE the refresh
  // runs (its version check must keep every hour a commit changed meanwhile); then a last
  // idle end and the drained refresh.
  let writing = true;
  let concurrentRefreshes = 0;
  const refresher = (async () => {
    while (writing) {
      concurrentRefreshes += (await refreshRollups(env.db, worker.timescale, { before: new Date(Date.now() + 86_400_000), limit: 3 })).buckets;
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  try {
    sent += await timed('pipeline', () => sendRound(projectId, writer, plan, events, 3, deviceIds));
    await timed('pipeline', () => stored('round 3 stored'));
  } finally {
    writing = false;
    await refresher;
  }
  const ended3 = await timed('pipeline', () => idleEnd(projectId, idleDevices()));
  await timed('refresh', () => drainRefresh(projectId));
  await timed('reads', () => sameAnswers(ctx, 'round 3, refreshed', tally));

  // The run did what it is for: a reopened session (device 0: idle-ended after round 1,
  // continued in round 2, its session_end row of round 1 deleted, a new one at the end).
  const dev0 = deviceIds.get(0)!;
  const s0 = (await env.db.query('SELECT id, event_count, ended FROM sessions WHERE project_id = $1 AND device_id = $2 ORDER BY started_at', [projectId, dev0])).rows;
  const tail0 = events.filter((e) => e.device === 0);
  assert.equal(s0.length, 1, 'device 0 has one session (reopened, not a new one)');
  assert.equal(s0[0].event_count, tail0.length, 'the reopened session holds every event of device 0');
  const ends0 = (await env.db.query<{ n: number }>("SELECT count(*)::int AS n FROM events WHERE session_id = $1 AND name = 'session_end'", [s0[0].id])).rows[0]!.n;
  assert.equal(ends0, 1, 'the reopened session has exactly one session_end row');
  const backfilled = (await env.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND created_at >= $2 AND created_at < $3', [projectId, new Date(startOfDay(addDays(day, -4), sc.tz)), new Date(startOfDay(addDays(day, -3), sc.tz))],
  )).rows[0]!.n;
  assert.ok(backfilled > 0, 'the earlier day got its backfilled events');
  log(`${sc.what}: ${events.length} events (${[1, 2, 3].map((r) => events.filter((e) => e.round === r).length).join('/')} by round), ` +
    `${plan.devices.length + 1} devices, hll ${hll ? 'installed' : 'absent'}, idle-ended ${ended1}/${ended2}/${ended3}, session_end rows before round 2 ${endsBefore}, ` +
    `hours logged by round 2 ${logged}, refreshed during round 3 ${concurrentRefreshes}; ${tally.reads} reads compared (${tally.nonEmpty} non-empty, ${tally.rollupPlans} insights reads on the rollup plan), ${Date.now() - started} ms ` +
    `(pipeline ${spent.pipeline}, refresh ${spent.refresh}, reads ${spent.reads})`);
}

describe('rollup reads equal raw reads after late, out-of-order, continued, reopened and backfilled traffic refreshed between rounds', () => {
  SCENARIOS.forEach((sc, index) => {
    it(`metrics, breakdowns, pages, export events and charts: auto = raw, ${sc.what}`, { timeout: 120_000 }, async (t) => {
      const seed = SEED + index;
      let failure: unknown = null;
      try {
        await fc.assert(
          fc.asyncProperty(planArb, async (plan) => {
            try {
              await runScenario(plan, sc, (s) => t.diagnostic(s));
            } catch (err) {
              failure = err;
              throw err;
            }
          }),
          // No shrinking: each run is a whole pipeline round trip; the seed reproduces it.
          { seed, numRuns: 1, endOnFailure: true },
        );
      } catch (err) {
        const first = failure instanceof Error ? `${failure.message}\n\n` : '';
        (err as Error).message = `${first}DIFFTEST_SEED=${SEED} (run seed ${seed}, ${sc.what}): ${(err as Error).message}`;
        throw err;
      }
    });
  });

  it('no project is left with rollup_invalidations after its last drained refresh', async () => {
    assert.equal(projects.length, SCENARIOS.length);
    const r = await env.db.query<{ n: number }>('SELECT count(*)::int AS n FROM rollup_invalidations WHERE project_id = ANY($1::text[])', [projects]);
    assert.equal(r.rows[0]!.n, 0);
  });
});
