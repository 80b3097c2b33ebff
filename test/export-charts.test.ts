// GET /export/charts over HTTP (exportRoutes on the real Router/HttpServer, auth, rate-limit
// gate) against a generated dataset written straight into the tables. Bucket instants are
// written out by hand for Europe/Berlin; every value is computed here from the generated
// rows, never by SQL.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { get, TestEnv, type Credentials } from './support/harness';
import { eventRow, insertEvents, startExportServer, type EventRow, type ExportServer } from './support/export-server';
import { mulberry32 } from './support/random';

const TZ = 'Europe/Berlin';
const NOW = new Date('2026-03-12T10:00:00Z');
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const RESERVED = new Set(['session_start', 'session_end']);

let env: TestEnv;
let server: ExportServer;
let project: string;
let other: string;
const readers: Credentials[] = [];
let root: Credentials;
let writer: Credentials;
let otherReader: Credentials;
let rows: EventRow[] = [];
let turn = 0;
const reader = () => readers[turn++ % readers.length]!;

// ---------------------------------------------------------------------------------------
// Dataset: 2026-01-25 .. 2026-03-12, bots and the service's session rows mixed in.

const pick = <T>(rnd: () => number, xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;

function generate(projectId: string, seed: number): EventRow[] {
  const rnd = mulberry32(seed);
  const out: EventRow[] = [];
  const from = Date.UTC(2026, 0, 25);
  const to = NOW.getTime();
  for (let d = 0; d < 120; d++) {
    const deviceId = `d${d}`;
    const profileId = d % 3 === 0 ? deviceId : `u${d % 40}`;
    const country = pick(rnd, ['DE', 'DE', 'US', 'FR', '']);
    const isBot = d % 17 === 3;
    let t = from + Math.floor(rnd() * (to - from));
    const sessions = 1 + Math.floor(rnd() * 3);
    for (let s = 0; s < sessions && t < to; s++) {
      const sessionId = rnd() < 0.05 ? null : randomUUID();
      const common = { device_id: deviceId, profile_id: profileId, session_id: sessionId, country, is_bot: isBot, bot_reason: isBot ? 'ua:bot' : null };
      out.push(eventRow(projectId, { ...common, name: 'session_start', created_at: new Date(t).toISOString() }));
      const n = 1 + Math.floor(rnd() * 6);
      for (let i = 0; i < n && t < to; i++) {
        const name = pick(rnd, ['screen_view', 'screen_view', 'screen_view', 'signup', 'purchase']);
        const properties: Record<string, unknown> = {};
        const plan = pick(rnd, ['free', 'pro', null]);
        if (plan) properties.plan = plan;
        const price = pick(rnd, [12.5, 3, 99.99, 0.25, '7.25', ' 4 ', '1e2', 'abc', '', true, null, null]);
        if (price !== null) properties.price = price;
        const groups = pick(rnd, [[], [], ['g1'], ['g1', 'g2'], ['g3']]);
        out.push(eventRow(projectId, {
          ...common, name, created_at: new Date(t).toISOString(), properties, groups,
          path: pick(rnd, ['/', '/pricing', '/docs']), origin: 'https://x.example',
        }));
        t += 20_000 + Math.floor(rnd() * 600_000);
      }
      out.push(eventRow(projectId, { ...common, name: 'session_end', created_at: new Date(Math.min(t, to - 1)).toISOString() }));
      t += 2 * DAY * rnd() + HOUR;
    }
  }
  // A few events in the last 30 minutes before NOW (minute buckets), one exactly at NOW.
  for (let i = 0; i < 12; i++) {
    out.push(eventRow(projectId, { name: 'screen_view', profile_id: `u${i % 4}`, session_id: randomUUID(), country: 'DE', created_at: new Date(NOW.getTime() - i * 150_000).toISOString() }));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Expected charts, computed from the rows

type Segment = 'event' | 'user' | 'session' | 'user_average' | 'one_event_per_user' | 'property_sum' | 'property_average' | 'property_min' | 'property_max' | 'group';
interface Item { name: string; segment?: Segment; property?: string; filters?: Filter[]; id?: string }
interface Filter { name: string; operator: 'is' | 'isNot' | 'contains' | 'startsWith'; value: string[] }
interface Win { start: number; end: number; buckets: number[] }

const NUMERIC = /^\s*[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]{1,3})?\s*$/;

/** `properties ->> key` as PostgreSQL gives it (missing: null). */
function propText(r: EventRow, key: string): string | null {
  const v = r.properties[key];
  if (v === undefined || v === null) return null;
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function valueOf(r: EventRow, name: string): string {
  if (name.startsWith('properties.')) return propText(r, name.slice('properties.'.length)) ?? '';
  return String((r as unknown as Record<string, unknown>)[name] ?? '');
}

function holds(r: EventRow, f: Filter): boolean {
  const v = valueOf(r, f.name);
  switch (f.operator) {
    case 'is': return f.value.includes(v);
    case 'isNot': return !f.value.includes(v);
    case 'contains': return f.value.some((x) => v.includes(x));
    case 'startsWith': return f.value.some((x) => v.startsWith(x));
  }
}

function numeric(r: EventRow, property: string): number | null {
  const t = propText(r, property.replace(/^properties\./, ''));
  return t !== null && NUMERIC.test(t) ? Number(t) : null;
}

function aggregate(segment: Segment, rs: EventRow[], property: string | undefined): number | null {
  if (rs.length === 0) return null;
  const nums = () => rs.map((r) => numeric(r, property!)!);
  switch (segment) {
    case 'event':
    case 'one_event_per_user': return rs.length;
    case 'user': return new Set(rs.map((r) => r.profile_id)).size;
    case 'session': return new Set(rs.map((r) => r.session_id).filter((s) => s !== null)).size;
    case 'user_average': return rs.length / new Set(rs.map((r) => r.profile_id)).size;
    case 'property_sum': return nums().reduce((a, b) => a + b, 0);
    case 'property_average': return nums().reduce((a, b) => a + b, 0) / rs.length;
    case 'property_min': return Math.min(...nums());
    case 'property_max': return Math.max(...nums());
    case 'group': {
      const ids = new Set(rs.flatMap((r) => r.groups));
      return ids.size ? ids.size : null;
    }
  }
}

const round = (n: number, d = 2) => Math.round((n + Number.EPSILON) * 10 ** d) / 10 ** d;
function metricsOf(values: number[]) {
  const nz = values.filter((v) => v !== 0);
  return {
    sum: round(values.reduce((a, b) => a + b, 0)),
    average: round(nz.length ? nz.reduce((a, b) => a + b, 0) / nz.length : 0),
    min: Math.min(...values),
    max: Math.max(...values),
  };
}
function prevMetric(cur: number, prev: number) {
  const diff = prev === 0 ? null : round(Math.abs((cur - prev) / prev) * 100, 1);
  return { diff: cur === prev ? null : diff, state: cur > prev ? 'positive' : cur < prev ? 'negative' : 'neutral', value: prev };
}

interface Computed { combos: string[][]; points: number[][]; totals: number[] }

function compute(item: Item, w: Win, breakdowns: string[], limit: number, globalFilters: Filter[], combos: string[][] | null): Computed {
  const segment = item.segment ?? 'event';
  const isProperty = segment.startsWith('property_');
  const ev = rows.filter((r) => {
    const t = Date.parse(r.created_at);
    return r.project_id === project && t >= w.start && t < w.end && !r.is_bot && !RESERVED.has(r.name)
      && (item.name === '*' || r.name === item.name)
      && [...(item.filters ?? []), ...globalFilters].every((f) => holds(r, f))
      && (!isProperty || numeric(r, item.property!) !== null);
  });
  const key = (r: EventRow) => breakdowns.map((b) => valueOf(r, b));
  let chosen: string[][];
  if (breakdowns.length === 0) chosen = [[]];
  else if (combos) chosen = combos;
  else {
    const counts = new Map<string, { combo: string[]; n: number }>();
    for (const r of ev) {
      const c = key(r);
      const k = JSON.stringify(c);
      const e = counts.get(k) ?? { combo: c, n: 0 };
      e.n++;
      counts.set(k, e);
    }
    const cmp = (a: string[], b: string[]) => {
      for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1;
      return 0;
    };
    chosen = [...counts.values()].sort((a, b) => b.n - a.n || cmp(a.combo, b.combo)).slice(0, limit).map((e) => e.combo);
  }
  const result: Computed = { combos: chosen, points: [], totals: [] };
  for (const combo of chosen) {
    let rs = ev.filter((r) => JSON.stringify(key(r)) === JSON.stringify(combo));
    if (segment === 'one_event_per_user') {
      const latest = new Map<string, EventRow>();
      for (const r of rs) {
        const cur = latest.get(r.profile_id);
        if (!cur || r.created_at > cur.created_at || (r.created_at === cur.created_at && r.id > cur.id)) latest.set(r.profile_id, r);
      }
      rs = [...latest.values()];
    }
    const bucketOf = (r: EventRow) => {
      const t = Date.parse(r.created_at);
      let i = 0;
      while (i + 1 < w.buckets.length && w.buckets[i + 1]! <= t) i++;
      return i;
    };
    result.points.push(w.buckets.map((_, i) => aggregate(segment, rs.filter((r) => bucketOf(r) === i), item.property) ?? 0));
    result.totals.push(aggregate(segment, rs, item.property) ?? 0);
  }
  if (chosen.length === 0) return { combos: [[]], points: [w.buckets.map(() => 0)], totals: [0] };
  return result;
}

const slug = (s: string) => s.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '') || 'all';

function expectChart(o: { items: Item[]; win: Win; prev?: Win; breakdowns?: string[]; limit?: number; filters?: Filter[] }) {
  const breakdowns = o.breakdowns ?? [];
  const series: unknown[] = [];
  o.items.forEach((item, index) => {
    const cur = compute(item, o.win, breakdowns, o.limit ?? 100, o.filters ?? [], null);
    const withValues = cur.combos[0]!.length > 0;
    const prev = o.prev ? compute(item, o.prev, withValues ? breakdowns : [], o.limit ?? 100, o.filters ?? [], withValues ? cur.combos : null) : null;
    const defId = item.id ?? 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'[index]!;
    cur.combos.forEach((combo, ci) => {
      const names = [item.name, ...combo];
      const values = cur.points[ci]!;
      const metrics: Record<string, unknown> = { ...metricsOf(values), count: cur.totals[ci] };
      const pv = prev?.points[ci];
      if (prev) {
        const pm = { ...metricsOf(pv!), count: prev.totals[ci]! };
        const m = metrics as Record<string, number>;
        metrics.previous = {
          sum: prevMetric(m.sum!, pm.sum), average: prevMetric(m.average!, pm.average), min: prevMetric(m.min!, pm.min),
          max: prevMetric(m.max!, pm.max), count: prevMetric(m.count!, pm.count),
        };
      }
      series.push({
        id: `${slug(item.name)}-${defId}-${names.join('-')}`,
        names,
        event: { id: defId, name: item.name, ...(withValues ? { breakdowns: Object.fromEntries(breakdowns.map((b, i) => [b, combo[i]])) } : {}) },
        metrics,
        data: o.win.buckets.map((b, i) => ({
          date: new Date(b).toISOString(),
          count: values[i],
          ...(pv && i < pv.length ? { previous: prevMetric(values[i]!, pv[i]!) } : {}),
        })),
      });
    });
  });
  const all = (series as { data: { count: number }[] }[]).flatMap((s) => s.data.map((d) => d.count));
  return { series, metrics: metricsOf(all) };
}

/** deepEqual with numbers compared to 1e-9 relative (SQL numeric / float8 vs JS doubles). */
function approx(actual: unknown, expected: unknown, path = '$'): void {
  if (typeof expected === 'number' && typeof actual === 'number') {
    const tol = /\.(sum|average)$/.test(path) ? 0.0100001 : 1e-9 * Math.max(1, Math.abs(expected));
    assert.ok(Math.abs(actual - expected) <= tol, `${path}: ${actual} != ${expected}`);
    return;
  }
  if (expected && typeof expected === 'object') {
    assert.ok(actual && typeof actual === 'object', `${path}: expected an object, got ${JSON.stringify(actual)}`);
    const ek = Object.keys(expected).sort();
    const ak = Object.keys(actual as object).sort();
    assert.deepEqual(ak, ek, `${path}: keys`);
    for (const k of ek) approx((actual as Record<string, unknown>)[k], (expected as Record<string, unknown>)[k], `${path}.${k}`);
    return;
  }
  assert.deepEqual(actual, expected, path);
}

// Berlin is UTC+1 until 2026-03-29: local midnight = 23:00Z the day before.
const days = (firstUtc: string, n: number): Win => {
  const start = Date.parse(firstUtc);
  return { start, end: start + n * DAY, buckets: Array.from({ length: n }, (_, i) => start + i * DAY) };
};
const WEEK_MAR2_TO_8 = days('2026-03-01T23:00:00Z', 7); // startDate=2026-03-02&endDate=2026-03-08
const WEEK_BEFORE = days('2026-02-22T23:00:00Z', 7);

// ---------------------------------------------------------------------------------------
// HTTP helpers

function url(params: Record<string, unknown>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, typeof v === 'string' ? v : JSON.stringify(v));
  return `${server.url}/export/charts?${q}`;
}

async function chart(params: Record<string, unknown>, creds: Credentials = reader()) {
  const res = await get(url(params), creds);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

async function bad(params: Record<string, unknown>, path: string[]) {
  const res = await get(url(params), reader());
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.equal(res.body.error, 'Bad Request');
  assert.equal(typeof res.body.message, 'string');
  assert.ok(
    res.body.details.issues.some((i: { path: string[]; message: string }) => JSON.stringify(i.path) === JSON.stringify(path) && i.message.length > 0),
    `expected an issue at ${JSON.stringify(path)}: ${JSON.stringify(res.body)}`,
  );
}

// ---------------------------------------------------------------------------------------

before(async () => {
  env = await new TestEnv('exportc').setup();
  project = await env.project({ name: 'Charts', timezone: TZ });
  other = await env.project({ name: 'Other', timezone: 'UTC' });
  for (let i = 0; i < 8; i++) readers.push(await env.client(project, 'read'));
  root = await env.client(other, 'root');
  writer = await env.client(project, 'write');
  otherReader = await env.client(other, 'read');
  rows = generate(project, 42);
  await insertEvents(env.db, [...rows, ...generate(other, 43)]);
  await env.db.query('ANALYZE');
  server = await startExportServer(env, { now: () => NOW });
});

after(async () => {
  await server?.close();
  await env?.teardown();
});

describe('GET /export/charts', () => {
  const period = { startDate: '2026-03-02', endDate: '2026-03-08' };

  it('every segment, day buckets aligned in the project timezone, no breakdown', async () => {
    const items: Item[] = [
      { name: 'screen_view', segment: 'event' },
      { name: '*', segment: 'event' },
      { name: '*', segment: 'user' },
      { name: '*', segment: 'session' },
      { name: 'screen_view', segment: 'user_average' },
      { name: '*', segment: 'one_event_per_user' },
      { name: '*', segment: 'property_sum', property: 'properties.price' },
      { name: 'purchase', segment: 'property_average', property: 'properties.price' },
      { name: '*', segment: 'property_min', property: 'price' },
      { name: '*', segment: 'property_max', property: 'properties.price' },
      { name: '*', segment: 'group' },
    ];
    const body = await chart({ ...period, series: items });
    approx(body, expectChart({ items, win: WEEK_MAR2_TO_8 }));
    assert.equal(body.series[0].data[0].date, '2026-03-01T23:00:00.000Z');
    // Sanity of the dataset: the chart is not trivially empty, and one_event_per_user sums to users.
    assert.ok(body.series[1].metrics.sum > 50);
    assert.equal(body.series[5].metrics.sum, body.series[2].metrics.count);
    assert.ok(body.series[2].metrics.count < body.series[2].metrics.sum, 'users over the period are fewer than the sum of daily users');
  });

  it('breakdown by a column (country), event and user segments', async () => {
    const items: Item[] = [{ name: 'screen_view' }, { name: '*', segment: 'user' }];
    const body = await chart({ ...period, series: items, breakdowns: [{ name: 'country' }] });
    approx(body, expectChart({ items, win: WEEK_MAR2_TO_8, breakdowns: ['country'] }));
    assert.deepEqual(body.series[0].names.slice(0, 1), ['screen_view']);
    assert.ok(body.series.some((s: { names: string[] }) => s.names[1] === ''), 'no country is a value of its own');
  });

  it('breakdown by properties.<key> (missing = ""), session segment, and two breakdowns', async () => {
    const items: Item[] = [{ name: '*', segment: 'session' }];
    const one = await chart({ ...period, series: items, breakdowns: [{ name: 'properties.plan' }] });
    approx(one, expectChart({ items, win: WEEK_MAR2_TO_8, breakdowns: ['properties.plan'] }));
    assert.deepEqual(one.series.map((s: { names: string[] }) => s.names[1]).sort(), ['', 'free', 'pro']);
    const items2: Item[] = [{ name: 'screen_view', segment: 'event' }, { name: '*', segment: 'property_sum', property: 'properties.price' }];
    const two = await chart({ ...period, series: items2, breakdowns: [{ name: 'country' }, { name: 'properties.plan' }] });
    approx(two, expectChart({ items: items2, win: WEEK_MAR2_TO_8, breakdowns: ['country', 'properties.plan'] }));
  });

  it('limit keeps the breakdown values with the most events', async () => {
    const items: Item[] = [{ name: 'screen_view' }];
    const body = await chart({ ...period, series: items, breakdowns: [{ name: 'path' }, { name: 'country' }], limit: 3 });
    approx(body, expectChart({ items, win: WEEK_MAR2_TO_8, breakdowns: ['path', 'country'], limit: 3 }));
    assert.equal(body.series.length, 3);
  });

  it('previous=true: the 7 days before, per bucket and per metric', async () => {
    const items: Item[] = [{ name: 'screen_view', segment: 'user' }, { name: '*', segment: 'event' }];
    const body = await chart({ ...period, series: items, breakdowns: [{ name: 'country' }], previous: 'true' });
    approx(body, expectChart({ items, win: WEEK_MAR2_TO_8, prev: WEEK_BEFORE, breakdowns: ['country'] }));
    assert.ok(body.series[0].data.every((d: { previous?: unknown }) => d.previous !== undefined));
    const noBreakdown = await chart({ ...period, series: [{ name: '*', segment: 'one_event_per_user' }], previous: '1' });
    approx(noBreakdown, expectChart({ items: [{ name: '*', segment: 'one_event_per_user' }], win: WEEK_MAR2_TO_8, prev: WEEK_BEFORE }));
  });

  it('series filters and top-level filters', async () => {
    const items: Item[] = [
      { name: '*', filters: [{ name: 'path', operator: 'is', value: ['/pricing'] }] },
      { name: '*', segment: 'user', filters: [{ name: 'properties.plan', operator: 'isNot', value: ['pro'] }] },
    ];
    const global: Filter[] = [{ name: 'country', operator: 'startsWith', value: ['D', 'U'] }];
    const body = await chart({ ...period, series: items, filters: global });
    approx(body, expectChart({ items, win: WEEK_MAR2_TO_8, filters: global }));
  });

  it('hour buckets by default for one day; week and month intervals', async () => {
    const items: Item[] = [{ name: '*', segment: 'user' }];
    const hourWin: Win = { start: Date.parse('2026-03-04T23:00:00Z'), end: Date.parse('2026-03-05T23:00:00Z'), buckets: Array.from({ length: 24 }, (_, i) => Date.parse('2026-03-04T23:00:00Z') + i * HOUR) };
    approx(await chart({ startDate: '2026-03-05', endDate: '2026-03-05', series: items }), expectChart({ items, win: hourWin }));
    // Mondays 2026-02-02 .. 2026-03-02, local midnight.
    const weekWin: Win = { start: Date.parse('2026-02-01T23:00:00Z'), end: Date.parse('2026-03-08T23:00:00Z'), buckets: [0, 1, 2, 3, 4].map((i) => Date.parse('2026-02-01T23:00:00Z') + i * 7 * DAY) };
    approx(await chart({ startDate: '2026-02-02', endDate: '2026-03-08', interval: 'week', series: items }), expectChart({ items, win: weekWin }));
    const monthWin: Win = { start: Date.parse('2026-01-31T23:00:00Z'), end: Date.parse('2026-03-11T23:00:00Z'), buckets: [Date.parse('2026-01-31T23:00:00Z'), Date.parse('2026-02-28T23:00:00Z')] };
    const monthly = await chart({ startDate: '2026-02-01', endDate: '2026-03-11', interval: 'month', series: [{ name: '*' }] });
    approx(monthly, expectChart({ items: [{ name: '*' }], win: monthWin }));
  });

  it('minute buckets over range=30min (now included) and the default range 7d', async () => {
    const start = NOW.getTime() - 30 * 60_000;
    const minuteWin: Win = { start, end: NOW.getTime() + 1, buckets: Array.from({ length: 31 }, (_, i) => start + i * 60_000) };
    const items: Item[] = [{ name: 'screen_view' }];
    const body = await chart({ range: '30min', interval: 'minute', series: items });
    approx(body, expectChart({ items, win: minuteWin }));
    assert.equal(body.series[0].metrics.sum, 12);
    const sevenDays = days('2026-03-05T23:00:00Z', 7);
    approx(await chart({ series: [{ name: '*', segment: 'session' }] }), expectChart({ items: [{ name: '*', segment: 'session' }], win: sevenDays }));
  });

  it('OpenPanel `events` alias, item ids, and an item without events', async () => {
    const items: Item[] = [{ name: 'purchase', id: 'rev' }, { name: 'nothing' }];
    const body = await chart({ ...period, events: items, breakdowns: [{ name: 'country' }] });
    approx(body, expectChart({ items, win: WEEK_MAR2_TO_8, breakdowns: ['country'] }));
    const empty = body.series[body.series.length - 1];
    assert.deepEqual(empty.names, ['nothing']);
    assert.deepEqual(empty.metrics, { sum: 0, average: 0, min: 0, max: 0, count: 0 });
    assert.ok(body.series[0].event.id === 'rev' && body.series[0].id.startsWith('purchase-rev-purchase-'));
  });

  it('a root client names the project; read client of another project and write client get 403', async () => {
    const items: Item[] = [{ name: '*' }];
    approx(await chart({ ...period, series: items, projectId: project }, root), expectChart({ items, win: WEEK_MAR2_TO_8 }));
    const rootNoProject = await get(url({ ...period, series: items }), root);
    assert.equal(rootNoProject.status, 400);
    assert.deepEqual(rootNoProject.body.details.issues[0].path, ['projectId']);
    const forbidden = await get(url({ series: items, projectId: project }), otherReader);
    assert.equal(forbidden.status, 403);
    assert.deepEqual(Object.keys(forbidden.body).sort(), ['error', 'message']);
    const write = await get(url({ series: items }), writer);
    assert.equal(write.status, 403);
    const ok = await get(url({ series: items, project_id: project }), reader());
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('x-ratelimit-limit'), '100');
  });

  it('400 for every bad parameter, with the issues body', async () => {
    const s = [{ name: '*' }];
    await bad({}, ['series']);
    await bad({ series: '[{"name":' }, ['series']);
    await bad({ series: [{ name: '*', segment: 'visits' }] }, ['series', '0', 'segment']);
    await bad({ series: [{ name: '*', segment: 'property_average' }] }, ['series', '0', 'property']);
    await bad({ series: [{ name: 'session_end' }] }, ['series', '0', 'name']);
    await bad({ series: [{ name: '*', filters: [{ name: 'colour', operator: 'is', value: ['x'] }] }] }, ['series', '0', 'filters', '0', 'name']);
    await bad({ series: [{ name: '*', filters: [{ name: 'path', operator: 'regex', value: ['x', '(('] }] }] }, ['series', '0', 'filters', '0', 'value', '1']);
    await bad({ series: s, filters: [{ name: 'path', operator: 'regex', value: ['[b-a]'] }] }, ['filters', '0', 'value', '0']);
    await bad({ series: s, breakdowns: [{ name: 'colour' }] }, ['breakdowns', '0', 'name']);
    await bad({ series: s, breakdowns: '{' }, ['breakdowns']);
    await bad({ series: s, interval: 'fortnight' }, ['interval']);
    await bad({ series: s, interval: 'minute', range: '30d' }, ['interval']); // > 3000 buckets
    await bad({ series: s, limit: 1001 }, ['limit']);
    await bad({ series: s, previous: 'maybe' }, ['previous']);
    await bad({ series: s, range: '5d' }, ['range']);
    await bad({ series: s, startDate: '2026-03-01' }, ['endDate']);
    await bad({ series: s, startDate: '2026-03-05', endDate: '2026-03-01' }, ['endDate']);
    await bad({ series: s, startDate: '2026-02-30', endDate: '2026-03-01' }, ['startDate']);
  });
});
