// The generated dataset of the insights service's tests (internal/insights/service.test.ts):
// seeded sessions and events (ids excepted) with every value the tests rely on, inserted
// directly into a migrated database; and the answers expected from it (metrics, pages,
// breakdowns, under any filters), computed here in TypeScript from the generated rows, never
// by SQL.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { SESSION_DIMENSIONS, type SessionDimension } from '../../internal/model/event';
import type { Filter } from '../../internal/query/params';
import type { BreakdownRow, MetricValues, MetricsResponse, PageRow } from '../../internal/insights/service';
import { mulberry32 } from './random';

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

export interface GenSession {
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
export function generate(seed: number): GenSession[] {
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

export interface Scenario {
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

export function expectedMetrics(sc: Scenario, buckets: string[]): MetricsResponse {
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

export function expectedPages(sc: Scenario): PageRow[] {
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

export function expectedBreakdown(sc: Scenario, dim: SessionDimension): BreakdownRow[] {
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

/** Inserts one project's generated sessions and events (every row of `events` for them). */
export async function insertDataset(client: pg.ClientBase, projectId: string, sessions: GenSession[]): Promise<void> {
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
