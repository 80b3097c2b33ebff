// Integration tests of the insights service against a real PostgreSQL: a fresh database
// per run, the migrations of sql/, a seeded generated dataset inserted directly, and the
// expected numbers computed here in TypeScript from the generated rows (never by SQL).
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { BadRequestError, NotFoundError } from '../http/errors';
import { SESSION_DIMENSIONS, type SessionDimension } from '../model/event';
import { withTimeout } from '../query/db';
import { QueryTimeoutError } from '../query/errors';
import { parsePageParams, parsePeriodParams, type Filter } from '../query/params';
import { refreshRollups } from '../store/rollups';
import { mulberry32 } from '../../test/support/random';
import { allRows, dropSqlDb, functionsSql, searchParams } from '../../test/support/sql-db';
import {
  getBreakdown,
  getMetrics,
  getPages,
  type BreakdownRow,
  type MetricValues,
  type MetricsResponse,
  type PageRow,
} from './service';

const SERVER_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const DB_NAME = `tidemark_test_insights_${randomBytes(6).toString('hex')}`;
const SQL_DIR = new URL('../../sql/', import.meta.url);

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const RESERVED = new Set(['session_start', 'session_end']);

// ---------------------------------------------------------------------------------------
// Generated dataset

type Dims = Record<SessionDimension, string>;

interface GenEvent {
  id: string;
  sessionId: string;
  name: string;
  createdAt: number;
  origin: string;
  path: string;
  title: string;
  properties: Record<string, string | number>;
  dims: Dims;
  profileId: string;
  deviceId: string;
  isBot: boolean;
  durationMs: number | null;
}

interface GenSession {
  id: string;
  deviceId: string;
  profileId: string;
  startedAt: number;
  lastEventAt: number;
  durationMs: number;
  screenViewCount: number;
  eventCount: number;
  isBounce: boolean;
  isBot: boolean;
  entryOrigin: string;
  entryPath: string;
  exitOrigin: string;
  exitPath: string;
  dims: Dims;
  /** Every row written to `events` for this session, session_start/end included. */
  events: GenEvent[];
}


const TECH = [
  { device: 'desktop', browser: 'Chrome', browser_version: '120', os: 'Windows', os_version: '10', brand: '', model: '' },
  { device: 'desktop', browser: 'Edge', browser_version: '120', os: 'Windows', os_version: '11', brand: '', model: '' },
  { device: 'desktop', browser: 'Firefox', browser_version: '121', os: 'Mac OS', os_version: '14.2', brand: 'Apple', model: 'Macintosh' },
  { device: 'mobile', browser: 'Mobile Safari', browser_version: '17.1', os: 'iOS', os_version: '17.1', brand: 'Apple', model: 'iPhone' },
  { device: 'mobile', browser: 'Chrome', browser_version: '120', os: 'Android', os_version: '14', brand: 'Samsung', model: 'SM-S911B' },
  { device: 'tablet', browser: 'Safari', browser_version: '17.0', os: 'iOS', os_version: '17.0', brand: 'Apple', model: 'iPad' },
  { device: '', browser: '', browser_version: '', os: '', os_version: '', brand: '', model: '' },
] as const;

const GEO = [
  { country: 'US', region: 'California', city: 'San Francisco' },
  { country: 'US', region: 'Texas', city: 'Paris' },
  { country: 'FR', region: 'Île-de-France', city: 'Paris' },
  { country: 'DE', region: 'Berlin', city: 'Berlin' },
  { country: 'DE', region: 'Bavaria', city: 'Munich' },
  { country: 'IN', region: 'Karnataka', city: 'Bengaluru' },
  { country: 'US', region: '', city: '' },
  { country: '', region: '', city: '' },
] as const;

const NO_SOURCE = { referrer: '', referrer_name: '', referrer_type: '', utm_source: '', utm_medium: '', utm_campaign: '', utm_term: '', utm_content: '' };
const SOURCES = [
  NO_SOURCE,
  { ...NO_SOURCE, referrer: 'https://www.google.com/', referrer_name: 'Google', referrer_type: 'search' },
  { ...NO_SOURCE, referrer: 'https://t.co/x1', referrer_name: 'Twitter', referrer_type: 'social' },
  { ...NO_SOURCE, referrer: 'https://news.ycombinator.com/', referrer_name: 'Hacker News', referrer_type: 'social' },
  { ...NO_SOURCE, utm_source: 'newsletter', utm_medium: 'email', utm_campaign: 'spring_sale', utm_content: 'hero' },
  {
    referrer: 'https://www.google.com/', referrer_name: 'Google', referrer_type: 'search',
    utm_source: 'google', utm_medium: 'cpc', utm_campaign: 'brand', utm_term: 'tidemark analytics', utm_content: '',
  },
] as const;

const SITE = 'https://tidemark.dev';
const DOCS = 'https://docs.tidemark.dev';
const PAGES = [
  { origin: SITE, path: '/', title: 'Tidemark' },
  { origin: SITE, path: '/pricing', title: 'Pricing' },
  { origin: SITE, path: '/signup', title: 'Sign up' },
  { origin: SITE, path: '/blog/launch', title: 'We launched' },
  { origin: SITE, path: '/promo/50%_off', title: 'Promo' },
  { origin: SITE, path: '/Docs/API', title: 'Old API docs' },
  { origin: SITE, path: '/docs/api', title: 'API (mirror)' },
  { origin: DOCS, path: '/', title: 'Docs' },
  { origin: DOCS, path: '/docs/getting-started', title: 'Getting started' },
  { origin: DOCS, path: '/docs/api', title: 'API' },
] as const;
const RETITLED_AT = Date.parse('2026-03-10T12:00:00Z');

const DEVICE_COUNT = 40;
const FIRST_BOT_DEVICE = 37;

interface Device {
  index: number;
  deviceId: string;
  profileId: string;
  tech: (typeof TECH)[number];
  geo: (typeof GEO)[number];
  isBot: boolean;
}

function devices(): Device[] {
  return Array.from({ length: DEVICE_COUNT }, (_, index) => {
    const deviceId = index.toString(16).padStart(32, 'd');
    return {
      index,
      deviceId,
      // Devices 0..9 pair up into 5 identified profiles: unique visitors < devices.
      profileId: index < 10 ? `user-${index >> 1}` : deviceId,
      tech: TECH[index % TECH.length]!,
      geo: GEO[(index * 3) % GEO.length]!,
      isBot: index >= FIRST_BOT_DEVICE,
    };
  });
}

/** Deterministic sessions and events (ids excepted) for a seed. */
function generate(seed: number): GenSession[] {
  const rng = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;
  const int = (lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1));
  const devs = devices();
  const sessions: GenSession[] = [];

  const makeSession = (startedAt: number, device: Device = pick(devs)): void => {
    const source = pick(SOURCES);
    const sessionDims: Dims = { ...source, ...device.tech, ...device.geo };
    const laterDims: Dims = { ...NO_SOURCE, ...device.tech, ...device.geo };
    const count = rng() < 0.35 ? 1 : int(2, 8);
    const id = randomUUID();
    const events: GenEvent[] = [];
    let t = startedAt;
    let page: (typeof PAGES)[number] = pick(PAGES);
    let profileId = device.profileId;
    for (let i = 0; i < count; i++) {
      if (i > 0) t += rng() < 0.1 ? 0 : int(1, 25 * 60) * 1000 + int(0, 999);
      const isView = i === 0 ? rng() < 0.85 : rng() < 0.65;
      const base = {
        id: randomUUID(), sessionId: id, createdAt: t, dims: i === 0 ? sessionDims : laterDims,
        profileId, deviceId: device.deviceId, isBot: device.isBot, durationMs: null,
      };
      if (isView) {
        page = pick(PAGES);
        const title = rng() < 0.1 ? '' : t >= RETITLED_AT ? `${page.title} | Tidemark` : page.title;
        const properties: Record<string, string> = page.path.startsWith('/docs') ? { section: 'docs' } : rng() < 0.3 ? { section: 'marketing' } : {};
        events.push({ ...base, name: 'screen_view', origin: page.origin, path: page.path, title, properties });
      } else {
        const kind = pick(['click', 'purchase', 'signup'] as const);
        const properties: Record<string, string | number> =
          kind === 'click' ? { button: pick(['cta', 'nav', 'footer']) }
          : kind === 'purchase' ? { plan: pick(['pro', 'free', 'Enterprise']), amount: pick([49, 0, 499]) }
          : { plan: pick(['free', 'pro']) };
        events.push({ ...base, name: kind, origin: page.origin, path: page.path, title: '', properties });
        // Devices 30..34 identify on signup: later events carry another profile id.
        if (kind === 'signup' && device.index >= 30 && device.index < 35) profileId = `member-${device.index}`;
      }
    }
    for (let i = 0; i < events.length; i++) {
      const ev = events[i]!;
      if (ev.name === 'screen_view') ev.durationMs = i + 1 < events.length ? events[i + 1]!.createdAt - ev.createdAt : null;
    }
    const first = events[0]!;
    const last = events.at(-1)!;
    const views = events.filter((e) => e.name === 'screen_view').length;
    // The service's own rows: same pages and a property no real event has; never counted.
    const marker = (name: string, at: GenEvent): GenEvent => ({
      ...at, id: randomUUID(), name, title: 'marker', properties: { plan: 'ghost' }, durationMs: null,
    });
    sessions.push({
      id,
      deviceId: device.deviceId,
      profileId: device.profileId,
      startedAt,
      lastEventAt: last.createdAt,
      durationMs: last.createdAt - first.createdAt,
      screenViewCount: views,
      eventCount: events.length,
      isBounce: views <= 1,
      isBot: device.isBot,
      entryOrigin: first.origin,
      entryPath: first.path,
      exitOrigin: last.origin,
      exitPath: last.path,
      dims: sessionDims,
      events: [marker('session_start', first), ...events, marker('session_end', last)],
    });
  };

  const spread = (count: number, from: string, to: string) => {
    const a = Date.parse(from);
    const b = Date.parse(to);
    for (let i = 0; i < count; i++) makeSession(a + Math.floor(rng() * (b - a)));
  };
  spread(420, '2026-03-05T00:00:00Z', '2026-03-16T00:00:00Z');
  spread(70, '2026-03-28T18:00:00Z', '2026-03-30T04:00:00Z');
  spread(70, '2026-10-24T18:00:00Z', '2026-10-26T04:00:00Z');
  // Edges of the UTC day periods used below; a midnight-crossing session.
  for (const at of [
    '2026-03-09T00:00:00.000Z', '2026-03-08T23:59:59.999Z', '2026-03-11T23:59:59.999Z',
    '2026-03-12T00:00:00.000Z', '2026-03-09T23:50:00.000Z', '2026-03-10T23:59:00.000Z',
  ]) makeSession(Date.parse(at), devs[11]!);
  return sessions;
}

// ---------------------------------------------------------------------------------------
// Expected numbers, computed from the generated rows

/** num/den rounded half-up to 2 decimals, in exact integer arithmetic. */
function round2(num: number, den: number): number {
  if (den === 0) return 0;
  const n = BigInt(num) * 100n;
  const d = BigInt(den);
  return Number((2n * n + d) / (2n * d)) / 100;
}

const isSessionDim = (name: string): name is SessionDimension => (SESSION_DIMENSIONS as readonly string[]).includes(name);

function matches(filter: Filter, actual: string): boolean {
  const anyOf = (test: (v: string) => boolean) => filter.value.some(test);
  switch (filter.operator) {
    case 'is': return anyOf((v) => actual === v);
    case 'isNot': return !anyOf((v) => actual === v);
    case 'contains': return anyOf((v) => actual.includes(v));
    case 'doesNotContain': return !anyOf((v) => actual.includes(v));
    case 'startsWith': return anyOf((v) => actual.startsWith(v));
    case 'endsWith': return anyOf((v) => actual.endsWith(v));
    case 'regex': return anyOf((v) => new RegExp(v).test(actual));
    case 'isNull': return actual === '';
    case 'isNotNull': return actual !== '';
    default: {
      // gt, gte, lt, lte: numbers only; a value that is not a decimal number never matches.
      const n = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(actual) ? Number(actual) : NaN;
      if (Number.isNaN(n)) return false;
      const cmp = { gt: (a: number, b: number) => a > b, gte: (a: number, b: number) => a >= b, lt: (a: number, b: number) => a < b, lte: (a: number, b: number) => a <= b }[filter.operator];
      return anyOf((v) => cmp(n, Number(v)));
    }
  }
}

function eventValue(e: GenEvent, name: string): string {
  if (name.startsWith('properties.')) {
    const v = e.properties[name.slice('properties.'.length)];
    return v === undefined ? '' : String(v);
  }
  switch (name) {
    case 'path': return e.path;
    case 'origin': return e.origin;
    case 'name': return e.name;
    case 'profile_id': return e.profileId;
  }
  throw new Error(`no event value ${name}`);
}

const eventFiltersOf = (filters: Filter[]) => filters.filter((f) => !isSessionDim(f.name));
const sessionFiltersOf = (filters: Filter[]) => filters.filter((f) => isSessionDim(f.name));
const realEvents = (s: GenSession) => s.events.filter((e) => !RESERVED.has(e.name));
const eventPasses = (e: GenEvent, filters: Filter[]) => eventFiltersOf(filters).every((f) => matches(f, eventValue(e, f.name)));
const sessionDimsPass = (s: GenSession, filters: Filter[]) =>
  sessionFiltersOf(filters).every((f) => matches(f, s.dims[f.name as SessionDimension]));

interface Scenario {
  sessions: GenSession[];
  start: number;
  end: number;
  filters: Filter[];
}

function periodSessions(sc: Scenario, withEventFilters: boolean): GenSession[] {
  return sc.sessions.filter(
    (s) =>
      !s.isBot && s.startedAt >= sc.start && s.startedAt < sc.end && sessionDimsPass(s, sc.filters) &&
      (!withEventFilters || eventFiltersOf(sc.filters).length === 0 || realEvents(s).some((e) => eventPasses(e, sc.filters))),
  );
}

function metricsOf(sessions: GenSession[]): MetricValues {
  const n = sessions.length;
  const timed = sessions.filter((s) => s.durationMs > 0);
  const views = sessions.reduce((sum, s) => sum + s.screenViewCount, 0);
  return {
    bounce_rate: round2(sessions.filter((s) => s.isBounce).length * 100, n),
    unique_visitors: new Set(sessions.map((s) => s.profileId)).size,
    total_sessions: n,
    avg_session_duration: round2(timed.reduce((sum, s) => sum + s.durationMs, 0), timed.length * 1000),
    total_screen_views: views,
    views_per_session: round2(views, n),
  };
}

function expectedMetrics(sc: Scenario, buckets: string[]): MetricsResponse {
  const sessions = periodSessions(sc, true);
  const starts = buckets.map((b) => Date.parse(b));
  const bucketOf = (t: number) => {
    let i = -1;
    for (let k = 0; k < starts.length; k++) if (starts[k]! <= t) i = k;
    return i;
  };
  return {
    metrics: metricsOf(sessions),
    series: buckets.map((date, i) => ({ date, ...metricsOf(sessions.filter((s) => bucketOf(s.startedAt) === i)) })),
  };
}

const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function expectedPages(sc: Scenario): PageRow[] {
  const groups = new Map<string, { origin: string; path: string; views: { e: GenEvent; s: GenSession }[] }>();
  for (const s of periodSessions(sc, false)) {
    for (const e of s.events) {
      if (e.name !== 'screen_view' || !eventPasses(e, sc.filters)) continue;
      const key = `${e.origin}\u0001${e.path}`;
      const g = groups.get(key) ?? { origin: e.origin, path: e.path, views: [] };
      g.views.push({ e, s });
      groups.set(key, g);
    }
  }
  const rows = [...groups.values()].map((g) => {
    const sessions = new Map(g.views.map(({ s }) => [s.id, s]));
    const entered = [...sessions.values()].filter((s) => s.entryOrigin === g.origin && s.entryPath === g.path);
    const timed = g.views.filter(({ e }) => e.durationMs !== null);
    const titled = g.views
      .filter(({ e }) => e.title !== '')
      .sort((a, b) => b.e.createdAt - a.e.createdAt || byCodeUnits(b.e.id, a.e.id));
    return {
      title: titled[0]?.e.title ?? '',
      origin: g.origin,
      path: g.path,
      sessions: sessions.size,
      bounce_rate: round2(entered.filter((s) => s.isBounce).length * 100, entered.length),
      avg_duration: round2(timed.reduce((sum, { e }) => sum + e.durationMs!, 0), timed.length * 1000),
      pageviews: g.views.length,
    };
  });
  return rows.sort((a, b) => b.sessions - a.sessions || byCodeUnits(a.path, b.path) || byCodeUnits(a.origin, b.origin));
}

const PARENT: Partial<Record<SessionDimension, SessionDimension>> = {
  region: 'country', city: 'country', browser_version: 'browser', os_version: 'os',
};

function expectedBreakdown(sc: Scenario, dim: SessionDimension): BreakdownRow[] {
  const parent = PARENT[dim];
  const groups = new Map<string, GenSession[]>();
  for (const s of periodSessions(sc, true)) {
    // semantics.md: the sessions with no value are ONE row, whatever their parents
    const key = JSON.stringify([s.dims[dim], parent && s.dims[dim] !== '' ? s.dims[parent] : null]);
    groups.set(key, [...(groups.get(key) ?? []), s]);
  }
  const rows = [...groups.entries()].map(([key, list]) => {
    const [name, keyPrefix] = JSON.parse(key) as [string, string | null];
    // the '' row shows the parent its sessions share, or '' when they differ
    const parents = new Set(list.map((x) => (parent ? x.dims[parent] : '')));
    const prefix = keyPrefix ?? (parents.size === 1 ? [...parents][0]! : '');
    const m = metricsOf(list);
    const row: BreakdownRow = parent
      ? { name, prefix: prefix!, sessions: list.length, bounce_rate: m.bounce_rate, avg_session_duration: m.avg_session_duration, pageviews: m.total_screen_views }
      : { name, sessions: list.length, bounce_rate: m.bounce_rate, avg_session_duration: m.avg_session_duration, pageviews: m.total_screen_views };
    return row;
  });
  return rows.sort((a, b) => b.sessions - a.sessions || byCodeUnits(a.name, b.name) || byCodeUnits(a.prefix ?? '', b.prefix ?? ''));
}

// ---------------------------------------------------------------------------------------
// Database

let pool: pg.Pool;
const data = new Map<string, GenSession[]>();
const PROJECTS = [
  { id: 'p_utc', timezone: 'UTC' },
  { id: 'p_ny', timezone: 'America/New_York' },
  { id: 'p_kol', timezone: 'Asia/Kolkata' },
  { id: 'p_ber', timezone: 'Europe/Berlin' },
  { id: 'p_empty', timezone: 'Pacific/Auckland' },
];

async function insertDataset(client: pg.ClientBase, projectId: string, sessions: GenSession[]): Promise<void> {
  const sessionRows = sessions.map((s) => ({
    id: s.id, project_id: projectId, device_id: s.deviceId, profile_id: s.profileId,
    started_at: new Date(s.startedAt).toISOString(), last_event_at: new Date(s.lastEventAt).toISOString(),
    duration_ms: s.durationMs, ended: true, entry_origin: s.entryOrigin, entry_path: s.entryPath,
    exit_origin: s.exitOrigin, exit_path: s.exitPath, screen_view_count: s.screenViewCount,
    event_count: s.eventCount, is_bounce: s.isBounce, is_bot: s.isBot, ...s.dims,
    updated_at: new Date(s.lastEventAt).toISOString(),
  }));
  const eventRows = sessions.flatMap((s) =>
    s.events.map((e) => ({
      id: e.id, project_id: projectId, name: e.name, device_id: e.deviceId, profile_id: e.profileId,
      session_id: e.sessionId, created_at: new Date(e.createdAt).toISOString(),
      received_at: new Date(e.createdAt).toISOString(), properties: e.properties, groups: [],
      origin: e.origin, path: e.path, title: e.title, ...e.dims, latitude: null, longitude: null,
      is_bot: e.isBot, bot_reason: e.isBot ? 'user-agent' : null, duration_ms: e.durationMs,
    })),
  );
  // Only the columns given here; any other column keeps its default (the schema grows).
  const insert = async (table: 'sessions' | 'events', rows: Record<string, unknown>[]) => {
    const columns = Object.keys(rows[0]!).join(', ');
    await client.query(
      `INSERT INTO ${table} (${columns}) SELECT ${columns} FROM json_populate_recordset(NULL::${table}, $1::json)`,
      [JSON.stringify(rows)],
    );
  };
  await insert('sessions', sessionRows);
  await insert('events', eventRows);
}

before(async () => {
  const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${DB_NAME}`);
  await admin.end();
  pool = new pg.Pool({ connectionString: `${SERVER_URL}/${DB_NAME}`, max: 8 });
  const client = await pool.connect();
  try {
    await client.query(await functionsSql());
    for (const file of readdirSync(SQL_DIR).filter((f) => f.endsWith('.sql')).sort()) {
      await client.query(readFileSync(new URL(file, SQL_DIR), 'utf8'));
    }
    await client.query(await functionsSql());
    const { rows } = await client.query<{ partitioned: boolean }>(
      "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'events'::regclass) AS partitioned",
    );
    if (rows[0]?.partitioned) await client.query('CREATE TABLE events_test PARTITION OF events DEFAULT');
    for (const p of PROJECTS) {
      await client.query('INSERT INTO projects (id, name, timezone) VALUES ($1, $1, $2)', [p.id, p.timezone]);
      if (p.id === 'p_empty') continue;
      const sessions = generate(20260310);
      data.set(p.id, sessions);
      await insertDataset(client, p.id, sessions);
    }
    // As the worker does: every hour with sessions is logged for the rollup refresh. The
    // hours before 2026-03-10 12:00Z are then rolled up, the later ones stay in the log, so
    // unfiltered queries read rollups and the raw tail together (rollups.ts). Not p_kol's:
    // Asia/Kolkata buckets are never whole UTC hours, so its reads are raw and its rollups
    // would be a quarter of the refresh for nothing (unrefreshed, a rollup read would show).
    await client.query(
      `INSERT INTO rollup_invalidations (project_id, bucket)
       SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions WHERE project_id <> 'p_kol'`,
    );
    while ((await refreshRollups(pool, false, { before: new Date('2026-03-10T12:00:00Z') })).buckets > 0);
    await client.query('ANALYZE');
  } finally {
    client.release();
  }
});

after(() => dropSqlDb(pool, DB_NAME));

// ---------------------------------------------------------------------------------------
// Helpers

const query = searchParams;

const NOW = new Date('2026-03-12T10:00:00Z');

interface Check {
  project: string;
  q: Record<string, string | number | Filter[]>;
  start: string;
  end: string;
  buckets: string[];
  now?: Date;
}

/** Metrics + series, pages, and all 18 breakdowns (summing to total_sessions) vs expected. */
async function checkEverything(c: Check): Promise<MetricsResponse> {
  const now = c.now ?? NOW;
  const params = parsePageParams(query(c.q));
  const sc: Scenario = { sessions: data.get(c.project)!, start: Date.parse(c.start), end: Date.parse(c.end), filters: params.filters };
  const metrics = await getMetrics(pool, c.project, parsePeriodParams(query(c.q)), now);
  assert.deepEqual(metrics, expectedMetrics(sc, c.buckets), 'metrics');
  const pages = await allRows((p) => getPages(pool, c.project, p, now), params, 50);
  assert.deepEqual(pages, expectedPages(sc), 'pages');
  await Promise.all(
    SESSION_DIMENSIONS.map(async (dim) => {
      const rows = await allRows((p) => getBreakdown(pool, c.project, dim, p, now), params, 50);
      assert.deepEqual(rows, expectedBreakdown(sc, dim), `breakdown ${dim}`);
      assert.equal(rows.reduce((sum, r) => sum + r.sessions, 0), metrics.metrics.total_sessions, `${dim} sums to total`);
    }),
  );
  return metrics;
}

const everyHour = (from: string, count: number) => Array.from({ length: count }, (_, i) => new Date(Date.parse(from) + i * HOUR).toISOString());
const everyDay = (from: string, count: number) => Array.from({ length: count }, (_, i) => new Date(Date.parse(from) + i * DAY).toISOString());

// ---------------------------------------------------------------------------------------
// Tests

describe('insights service (PostgreSQL)', () => {
  it('the dataset has what the tests rely on', () => {
    const sessions = data.get('p_utc')!;
    const inMain = sessions.filter((s) => s.startedAt < Date.parse('2026-03-16T00:00:00Z'));
    assert.ok(inMain.some((s) => s.isBot));
    assert.ok(inMain.some((s) => s.durationMs === 0 && !s.isBot));
    assert.ok(inMain.some((s) => s.lastEventAt > s.startedAt + HOUR));
    assert.ok(inMain.some((s) => s.events.some((e) => e.profileId.startsWith('member-'))));
    assert.ok(inMain.some((s) => s.events.some((e) => e.path === '/promo/50%_off')));
    assert.ok(inMain.some((s) => s.screenViewCount === 0));
  });

  it('UTC, three explicit days: day buckets', async () => {
    const m = await checkEverything({
      project: 'p_utc',
      q: { startDate: '2026-03-09', endDate: '2026-03-11' },
      start: '2026-03-09T00:00:00Z',
      end: '2026-03-12T00:00:00Z',
      buckets: everyDay('2026-03-09T00:00:00.000Z', 3),
    });
    assert.ok(m.metrics.total_sessions > 50);
    assert.ok(m.metrics.unique_visitors < m.metrics.total_sessions);
    assert.ok(m.metrics.bounce_rate > 0 && m.metrics.bounce_rate < 100);
  });

  it('UTC, range 7d with a fixed now', async () => {
    await checkEverything({
      project: 'p_utc',
      q: { range: '7d' },
      start: '2026-03-06T00:00:00Z',
      end: '2026-03-13T00:00:00Z',
      buckets: everyDay('2026-03-06T00:00:00.000Z', 7),
    });
  });

  it('UTC, range today: 24 hourly buckets', async () => {
    await checkEverything({
      project: 'p_utc',
      q: { range: 'today' },
      start: '2026-03-10T00:00:00Z',
      end: '2026-03-11T00:00:00Z',
      buckets: everyHour('2026-03-10T00:00:00.000Z', 24),
      now: new Date('2026-03-10T18:00:00Z'),
    });
  });

  it('New York (UTC-5/-4): days across the spring-forward of 2026-03-08', async () => {
    await checkEverything({
      project: 'p_ny',
      q: { startDate: '2026-03-07', endDate: '2026-03-09' },
      start: '2026-03-07T05:00:00Z',
      end: '2026-03-10T04:00:00Z',
      buckets: ['2026-03-07T05:00:00.000Z', '2026-03-08T05:00:00.000Z', '2026-03-09T04:00:00.000Z'],
    });
  });

  it('New York: 2026-03-08 has 23 hourly buckets', async () => {
    const m = await checkEverything({
      project: 'p_ny',
      q: { startDate: '2026-03-08', endDate: '2026-03-08' },
      start: '2026-03-08T05:00:00Z',
      end: '2026-03-09T04:00:00Z',
      buckets: everyHour('2026-03-08T05:00:00.000Z', 23),
    });
    assert.equal(m.series.length, 23);
  });

  it('Kolkata (UTC+05:30): day and hour buckets at :30', async () => {
    await checkEverything({
      project: 'p_kol',
      q: { startDate: '2026-03-09', endDate: '2026-03-11' },
      start: '2026-03-08T18:30:00Z',
      end: '2026-03-11T18:30:00Z',
      buckets: everyDay('2026-03-08T18:30:00.000Z', 3),
    });
    await checkEverything({
      project: 'p_kol',
      q: { startDate: '2026-03-10', endDate: '2026-03-10' },
      start: '2026-03-09T18:30:00Z',
      end: '2026-03-10T18:30:00Z',
      buckets: everyHour('2026-03-09T18:30:00.000Z', 24),
    });
  });

  it('Berlin 2026-03-29 (23 h) and 2026-10-25 (25 h)', async () => {
    const spring = await checkEverything({
      project: 'p_ber',
      q: { startDate: '2026-03-29', endDate: '2026-03-29' },
      start: '2026-03-28T23:00:00Z',
      end: '2026-03-29T22:00:00Z',
      buckets: everyHour('2026-03-28T23:00:00.000Z', 23),
    });
    assert.equal(spring.series.length, 23);
    assert.ok(spring.metrics.total_sessions > 0);
    const autumn = await checkEverything({
      project: 'p_ber',
      q: { startDate: '2026-10-25', endDate: '2026-10-25' },
      start: '2026-10-24T22:00:00Z',
      end: '2026-10-25T23:00:00Z',
      buckets: everyHour('2026-10-24T22:00:00.000Z', 25),
    });
    assert.equal(autumn.series.length, 25);
    assert.ok(autumn.metrics.total_sessions > 0);
  });

  it('bots, session_start/session_end and other projects do not count', async () => {
    const params = parsePeriodParams(query({ startDate: '2026-03-01', endDate: '2026-03-31' }));
    const m = await getMetrics(pool, 'p_utc', params, NOW);
    const sessions = data.get('p_utc')!.filter((s) => s.startedAt < Date.parse('2026-04-01T00:00:00Z'));
    const humans = sessions.filter((s) => !s.isBot);
    assert.equal(m.metrics.total_sessions, humans.length);
    assert.equal(m.metrics.total_screen_views, humans.reduce((n, s) => n + s.events.filter((e) => e.name === 'screen_view').length, 0));
    const pages = await getPages(pool, 'p_utc', { ...params, cursor: 1, limit: 50 }, NOW);
    assert.ok(pages.every((p) => p.title !== 'marker'));
    const ghost = await getMetrics(pool, 'p_utc', parsePeriodParams(query({ startDate: '2026-03-01', endDate: '2026-03-31', filters: [{ name: 'properties.plan', operator: 'is', value: ['ghost'] }] })), NOW);
    assert.equal(ghost.metrics.total_sessions, 0);
    const reserved = await getMetrics(pool, 'p_utc', parsePeriodParams(query({ startDate: '2026-03-01', endDate: '2026-03-31', filters: [{ name: 'name', operator: 'is', value: ['session_start', 'session_end'] }] })), NOW);
    assert.equal(reserved.metrics.total_sessions, 0);
  });

  it('an empty project: zeros and every bucket', async () => {
    const m = await getMetrics(pool, 'p_empty', parsePeriodParams(query({ range: '7d' })), NOW);
    const zero = { bounce_rate: 0, unique_visitors: 0, total_sessions: 0, avg_session_duration: 0, total_screen_views: 0, views_per_session: 0 };
    assert.deepEqual(m.metrics, zero);
    assert.equal(m.series.length, 7);
    // Auckland is UTC+13 on 2026-03-12 10:00Z = 23:00 local: 7d is 03-06 .. 03-12 local.
    assert.equal(m.series[0]?.date, '2026-03-05T11:00:00.000Z');
    for (const row of m.series) assert.deepEqual({ ...row, date: undefined }, { ...zero, date: undefined });
    assert.deepEqual(await getPages(pool, 'p_empty', parsePageParams(query({})), NOW), []);
    assert.deepEqual(await getBreakdown(pool, 'p_empty', 'country', parsePageParams(query({})), NOW), []);
  });

  it('an unknown project is a NotFoundError', async () => {
    await assert.rejects(getMetrics(pool, 'nope', parsePeriodParams(query({})), NOW), NotFoundError);
    await assert.rejects(getPages(pool, 'nope', parsePageParams(query({})), NOW), NotFoundError);
    await assert.rejects(getBreakdown(pool, 'nope', 'city', parsePageParams(query({})), NOW), NotFoundError);
  });

  it('pagination: pages of 3 add up, the last is partial, past the end is []', async () => {
    const base = parsePageParams(query({ startDate: '2026-03-05', endDate: '2026-03-15' }));
    const all = await getPages(pool, 'p_utc', { ...base, limit: 50 }, NOW);
    assert.ok(all.length > 6 && all.length % 3 !== 0, `need a partial last page, have ${all.length} rows`);
    const pages: PageRow[][] = [];
    for (let cursor = 1; cursor <= Math.ceil(all.length / 3); cursor++) pages.push(await getPages(pool, 'p_utc', { ...base, cursor, limit: 3 }, NOW));
    assert.deepEqual(pages.flat(), all);
    assert.equal(pages.at(-1)!.length, all.length % 3);
    assert.deepEqual(await getPages(pool, 'p_utc', { ...base, cursor: pages.length + 1, limit: 3 }, NOW), []);
    assert.deepEqual(await getPages(pool, 'p_utc', { ...base, cursor: 1_000_000, limit: 50 }, NOW), []);

    const cities = await getBreakdown(pool, 'p_utc', 'city', { ...base, limit: 50 }, NOW);
    const firstTwo = await getBreakdown(pool, 'p_utc', 'city', { ...base, cursor: 1, limit: 2 }, NOW);
    const next = await getBreakdown(pool, 'p_utc', 'city', { ...base, cursor: 2, limit: 2 }, NOW);
    assert.deepEqual([...firstTwo, ...next], cities.slice(0, 4));
    assert.equal(firstTwo.length, 2);
    assert.deepEqual(await getBreakdown(pool, 'p_utc', 'city', { ...base, cursor: 99, limit: 2 }, NOW), []);
    // default limit 10
    assert.equal((await getPages(pool, 'p_utc', base, NOW)).length, Math.min(10, all.length));
  });

  it('prefixed breakdowns keep same-named values apart (Paris, US vs Paris, FR; Chrome vs Edge 120)', async () => {
    const base = parsePageParams(query({ startDate: '2026-03-05', endDate: '2026-03-15', limit: 50 }));
    const cities = await getBreakdown(pool, 'p_utc', 'city', base, NOW);
    assert.deepEqual(cities.filter((c) => c.name === 'Paris').map((c) => c.prefix).sort(), ['FR', 'US']);
    const versions = await getBreakdown(pool, 'p_utc', 'browser_version', base, NOW);
    assert.deepEqual(versions.filter((c) => c.name === '120').map((c) => c.prefix).sort(), ['Chrome', 'Edge']);
    const countries = await getBreakdown(pool, 'p_utc', 'country', base, NOW);
    assert.ok(countries.every((c) => !('prefix' in c)));
    assert.ok(countries.some((c) => c.name === ''));
  });

  const FILTER_CASES: Array<[string, Filter[]]> = [
    ['column is (session-level)', [{ name: 'country', operator: 'is', value: ['DE', 'IN'] }]],
    ['column isNot (session-level, includes empty)', [{ name: 'country', operator: 'isNot', value: ['US'] }]],
    ['utm_source is: the session value, not later events', [{ name: 'utm_source', operator: 'is', value: ['google'] }]],
    ['utm_source isNot: the session value, not later events', [{ name: 'utm_source', operator: 'isNot', value: ['google'] }]],
    ['column contains (event-level)', [{ name: 'path', operator: 'contains', value: ['docs'] }]],
    ['column doesNotContain', [{ name: 'path', operator: 'doesNotContain', value: ['docs', 'pricing'] }]],
    ['column startsWith', [{ name: 'path', operator: 'startsWith', value: ['/docs/'] }]],
    ['column endsWith', [{ name: 'origin', operator: 'endsWith', value: ['docs.tidemark.dev'] }]],
    ['column regex', [{ name: 'path', operator: 'regex', value: ['^/(pricing|signup)$'] }]],
    ['session column regex', [{ name: 'referrer_name', operator: 'regex', value: ['^(Google|Twitter)$'] }]],
    ['case-sensitive is', [{ name: 'path', operator: 'is', value: ['/docs/api'] }]],
    ['LIKE wildcards are literal', [{ name: 'path', operator: 'contains', value: ['%_'] }]],
    ['name is', [{ name: 'name', operator: 'is', value: ['purchase'] }]],
    ['profile_id is (event-level)', [{ name: 'profile_id', operator: 'startsWith', value: ['member-'] }]],
    ['property is', [{ name: 'properties.plan', operator: 'is', value: ['pro'] }]],
    ['property isNot (missing is empty)', [{ name: 'properties.plan', operator: 'isNot', value: ['pro'] }]],
    ['property contains, case-sensitive', [{ name: 'properties.plan', operator: 'contains', value: ['Enter'] }]],
    ['property contains, wrong case', [{ name: 'properties.plan', operator: 'contains', value: ['ENTER'] }]],
    ['property doesNotContain', [{ name: 'properties.plan', operator: 'doesNotContain', value: ['e'] }]],
    ['property startsWith', [{ name: 'properties.plan', operator: 'startsWith', value: ['fr'] }]],
    ['property endsWith', [{ name: 'properties.plan', operator: 'endsWith', value: ['prise'] }]],
    ['property regex', [{ name: 'properties.plan', operator: 'regex', value: ['^(pro|free)$'] }]],
    ['numeric property as text', [{ name: 'properties.amount', operator: 'is', value: ['49'] }]],
    ['property is empty (missing)', [{ name: 'properties.button', operator: 'is', value: [''] }]],
    [
      'session + event filters, event filters on the same event',
      [
        { name: 'country', operator: 'is', value: ['US'] },
        { name: 'path', operator: 'startsWith', value: ['/docs'] },
        { name: 'properties.section', operator: 'is', value: ['marketing'] },
      ],
    ],
    [
      'two event filters together',
      [
        { name: 'name', operator: 'is', value: ['screen_view'] },
        { name: 'properties.section', operator: 'is', value: ['docs'] },
        { name: 'device', operator: 'isNot', value: ['mobile'] },
      ],
    ],
  ];

  for (const [label, filters] of FILTER_CASES) {
    it(`filter: ${label}`, async () => {
      await checkEverything({
        project: 'p_utc',
        q: { startDate: '2026-03-05', endDate: '2026-03-15', filters },
        start: '2026-03-05T00:00:00Z',
        end: '2026-03-16T00:00:00Z',
        buckets: everyDay('2026-03-05T00:00:00.000Z', 11),
      });
    });
  }

  it('each filter case selects some sessions (or none where expected)', async () => {
    const count = async (filters: Filter[]) =>
      (await getMetrics(pool, 'p_utc', parsePeriodParams(query({ startDate: '2026-03-05', endDate: '2026-03-15', filters })), NOW)).metrics.total_sessions;
    const all = await count([]);
    for (const [label, filters] of FILTER_CASES) {
      const n = await count(filters);
      if (label.includes('wrong case') || label.includes('same event')) assert.equal(n, 0, label);
      else assert.ok(n > 0 && n <= all, `${label}: ${n} of ${all}`);
    }
  });

  it('an invalid regex is a 400 naming the value', async () => {
    const params = parsePageParams(query({ filters: [{ name: 'path', operator: 'is', value: ['/'] }, { name: 'path', operator: 'regex', value: ['^ok$', '(unclosed'] }] }));
    for (const run of [
      () => getMetrics(pool, 'p_utc', params, NOW),
      () => getPages(pool, 'p_utc', params, NOW),
      () => getBreakdown(pool, 'p_utc', 'browser', params, NOW),
    ]) {
      await assert.rejects(run(), (err: unknown) => {
        assert.ok(err instanceof BadRequestError);
        assert.deepEqual(err.issues[0]?.path, ['filters', '1', 'value', '1']);
        return true;
      });
    }
  });

  it('a statement past the timeout is a QueryTimeoutError (503) and the pool stays usable', async () => {
    await assert.rejects(withTimeout(pool, 50, (db) => db.query('SELECT pg_sleep(2)')), (err: unknown) => {
      assert.ok(err instanceof QueryTimeoutError);
      assert.equal(err.status, 503);
      return true;
    });
    const m = await getMetrics(pool, 'p_utc', parsePeriodParams(query({ range: 'today' })), NOW, { statementTimeoutMs: 10_000 });
    assert.equal(typeof m.metrics.total_sessions, 'number');
  });

  it('the timeout is set per transaction only', async () => {
    const inside = await withTimeout(pool, 1234, async (db) => (await db.query<{ t: string }>("SELECT current_setting('statement_timeout') AS t")).rows[0]?.t);
    assert.equal(inside, '1234ms');
    const outside = await pool.query<{ t: string }>("SELECT current_setting('statement_timeout') AS t");
    assert.equal(outside.rows[0]?.t, '0');
  });
});
