// The export event rollups (sql/009_event_rollups.sql) on TimescaleDB, where they are real-time
// continuous aggregates over the events hypertable, against plain PostgreSQL, where they are
// tables kept by tm_refresh_event_rollups(): the same seeded events go into both (straight
// into `events`, their hours logged in rollup_invalidations as the worker's commit does), and
// /export/events totalCount (also filtered on one column: the continuous aggregate of that
// column plus the plain tables of sql/020) and /export/charts (rollup path on TimescaleDB, also
// filtered on one column) must equal the raw path on PostgreSQL:
//   (a) before any refresh, (b) after refreshRollups() has emptied the log,
//   (c) after late events into refreshed hours (logged, not yet refreshed).
//   node --import tsx --test test/export-timescale.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { getChart } from '../internal/export/charts';
import { getEventsPage } from '../internal/export/events';
import { parseChartParams, parseEventsParams } from '../internal/export/params';
import { EVENT_ROLLUP_DIMENSIONS } from '../internal/query/planner';
import { migrate } from '../internal/store/migrate';
import { refreshRollups } from '../internal/store/rollups';
import type { Pool } from '../internal/store/db';
import { eventRow, insertEvents, type EventRow } from './support/export-server';
import { TestEnv } from './support/harness';
import { startTimescale, type Timescale } from './support/timescale';
import { mulberry32 } from './support/random';

const HOUR = 3_600_000;
const NOW = new Date('2026-06-10T15:20:00Z');


const NAMES = ['screen_view', 'screen_view', 'click', 'purchase', 'session_start', 'session_end'];
const COUNTRIES = [['DE', 'Berlin', 'Berlin'], ['US', 'Texas', 'Paris'], ['FR', 'Île-de-France', 'Paris'], ['', '', '']];
const PATHS = ['/', '/pricing', '/docs', ''];

/** Seeded events over the 9 days before NOW (some on hour edges, a few bots). */
function events(projectId: string, n: number, seed: number, fromMs: number, spanMs: number): EventRow[] {
  const rnd = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  return Array.from({ length: n }, (_, i) => {
    let at = fromMs + Math.floor(rnd() * spanMs);
    if (i % 41 === 0) at = Math.floor(at / HOUR) * HOUR;
    const [country, region, city] = pick(COUNTRIES);
    return eventRow(projectId, {
      name: pick(NAMES), created_at: new Date(at).toISOString(), profile_id: `u${Math.floor(rnd() * 40)}`,
      country, region, city, path: pick(PATHS), browser: pick(['Chrome', 'Firefox', '']), is_bot: rnd() < 0.05,
      referrer_name: pick(['Google', '']), properties: { amount: Math.floor(rnd() * 10) },
    });
  });
}

async function refreshAll(db: Pool, timescale: boolean): Promise<number> {
  let n = 0;
  for (let i = 0; i < 50; i++) {
    const { buckets } = await refreshRollups(db, timescale, { before: new Date(NOW.getTime() + 86_400_000) });
    if (!buckets) return n;
    n += buckets;
  }
  throw new Error('refreshRollups never finished');
}

const s = (x: unknown) => JSON.stringify(x);
const EVENT_QUERIES = [
  'limit=20', 'limit=20&event=screen_view,session_start', 'limit=20&start=2026-06-03', 'limit=20&start=2026-06-04T10:30:00Z&end=2026-06-09',
  `limit=20&start=2026-06-02&filters=${encodeURIComponent(s([{ name: 'browser', operator: 'isNot', value: ['Firefox'] }, { name: 'country', operator: 'is', value: ['DE', 'US'] }, { name: 'os', operator: 'is', value: [''] }]))}`,
  // filtered on one non-cube column: its continuous aggregate and daily rows plus the uncharted rows of sql/020
  `limit=20&filters=${encodeURIComponent(s([{ name: 'city', operator: 'is', value: ['Paris'] }]))}`,
  `limit=20&event=screen_view,session_start&start=2026-06-04T10:30:00Z&end=2026-06-09&filters=${encodeURIComponent(s([{ name: 'path', operator: 'doesNotContain', value: ['doc'] }, { name: 'path', operator: 'isNot', value: [''] }]))}`,
];
const CHART_QUERIES: Record<string, string>[] = [
  { range: '7d', series: s([{ name: '*' }]) },
  { range: '7d', previous: 'true', series: s([{ name: '*' }]), breakdowns: s([{ name: 'country' }]) },
  { range: '30d', series: s([{ name: 'screen_view' }]), breakdowns: s([{ name: 'path' }]) },
  { range: 'last24h', series: s([{ name: '*' }]), breakdowns: s([{ name: 'name' }]) },
  { startDate: '2026-06-02', endDate: '2026-06-09', interval: 'hour', series: s([{ name: 'click' }]), breakdowns: s([{ name: 'browser' }]) },
  { range: '7d', series: s([{ name: '*', segment: 'user' }]), breakdowns: s([{ name: 'country' }]) },
  // filtered on one column: that column's daily rows and hourly continuous aggregate (the event_column entry)
  { range: '7d', series: s([{ name: '*' }]), breakdowns: s([{ name: 'city' }]), filters: s([{ name: 'city', operator: 'isNot', value: ['Berlin'] }]) },
  { startDate: '2026-06-02', endDate: '2026-06-09', interval: 'hour', series: s([{ name: '*' }]), breakdowns: s([{ name: 'name' }]), filters: s([{ name: 'path', operator: 'contains', value: ['doc', 'pri'] }]) },
  // filtered on three cube columns: the event cube's full-combination days (sql/017) and hours
  { range: '7d', series: s([{ name: '*' }]), breakdowns: s([{ name: 'country' }]), filters: s([{ name: 'browser', operator: 'is', value: ['Chrome', ''] }, { name: 'referrer_name', operator: 'isNot', value: [''] }, { name: 'device', operator: 'is', value: [''] }]) },
];

async function answers(db: Pool, projectId: string, path: 'auto' | 'raw'): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const q of EVENT_QUERIES) out.push((await getEventsPage(db, projectId, parseEventsParams(new URLSearchParams(q)), { path })).meta);
  for (const q of CHART_QUERIES) out.push(await getChart(db, projectId, parseChartParams(new URLSearchParams(q)), NOW, { path }));
  return out;
}

test('export event rollups: TimescaleDB continuous aggregates answer like raw PostgreSQL', { timeout: 300_000 }, async (t) => {
  let engine: Timescale | undefined;
  const env = new TestEnv('export_ts');
  let ts: Pool | undefined;
  try {
    [engine] = await Promise.all([startTimescale(), env.setup()]);
    ts = new pg.Pool({ connectionString: engine.url, max: 1 }) as unknown as Pool;
    assert.equal((await migrate(ts)).timescale, true);
    const caggs = await ts.query<{ view_name: string }>(
      `SELECT view_name FROM timescaledb_information.continuous_aggregates WHERE view_name LIKE 'events\\_%' ORDER BY view_name`,
    );
    assert.deepEqual(caggs.rows.map((r) => r.view_name), ['events_hourly', ...EVENT_ROLLUP_DIMENSIONS.map((d) => `events_${d}_hourly`)].sort());
    const reg = await ts.query(`SELECT count(*)::int AS n FROM rollup_registry WHERE relation LIKE 'events\\_%' AND refresh_fn IS NULL`);
    assert.equal(reg.rows[0].n, EVENT_ROLLUP_DIMENSIONS.length + 1);

    const projects: Record<string, string> = {};
    for (const [name, db] of [['pg', env.db], ['ts', ts]] as const) {
      await db.query(`INSERT INTO projects (id, name, timezone) VALUES ('xp', 'xp', 'America/New_York') ON CONFLICT DO NOTHING`);
      projects[name] = 'xp';
    }
    const rows = events('xp', 2500, 7, NOW.getTime() - 9 * 24 * HOUR, 9 * 24 * HOUR - 10 * 60_000);
    for (const db of [env.db, ts]) {
      await insertEvents(db, rows); // logs the hours in rollup_invalidations, as the worker does
    }
    const compare = async (phase: string) => {
      const reference = await answers(env.db, 'xp', 'raw');
      assert.deepEqual(await answers(env.db, 'xp', 'auto'), reference, `${phase}: PostgreSQL rollups`);
      assert.deepEqual(await answers(ts!, 'xp', 'auto'), reference, `${phase}: TimescaleDB continuous aggregates`);
      assert.deepEqual(await answers(ts!, 'xp', 'raw'), reference, `${phase}: TimescaleDB raw`);
      return reference;
    };
    await compare('(a) before refresh');
    const [nPg, nTs] = [await refreshAll(env.db, false), await refreshAll(ts, true)];
    assert.equal(nTs, nPg);
    const mat = await ts.query<{ s: string; t: string }>(
      `SELECT materialization_hypertable_schema AS s, materialization_hypertable_name AS t
       FROM timescaledb_information.continuous_aggregates WHERE view_name = 'events_country_hourly'`,
    );
    const materialized = await ts.query(`SELECT count(*)::int AS n FROM ${JSON.stringify(mat.rows[0]!.s)}.${JSON.stringify(mat.rows[0]!.t)}`);
    assert.ok(materialized.rows[0].n > 100, `materialized rows: ${materialized.rows[0].n}`);
    const b = await compare('(b) after refresh');
    t.diagnostic(`totalCount ${JSON.stringify((b[0] as { totalCount: number }).totalCount)}`);

    const late = events('xp', 60, 8, NOW.getTime() - 5 * 24 * HOUR, 3 * HOUR);
    for (const db of [env.db, ts]) {
      await insertEvents(db, late);
    }
    const c = await compare('(c) late events');
    assert.equal((c[0] as { totalCount: number }).totalCount, (b[0] as { totalCount: number }).totalCount + late.length);
    await refreshAll(env.db, false);
    await refreshAll(ts, true);
    await compare('(c) refreshed again');
  } finally {
    await ts?.end();
    await engine?.stop().catch((err) => t.diagnostic(`engine stop: ${err}`));
    await env.teardown();
  }
});
