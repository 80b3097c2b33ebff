// A generated day of traffic through POST /track -> JetStream -> worker -> PostgreSQL, and
// the stored sessions, events and insights numbers compared with an independent reference
// of semantics.md (test/support/sessions-traffic.ts).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TestEnv, get, startApp, waitFor, type Credentials } from './support/harness';
import {
  assertSameSessions, assertSessionEvents, expectedMetrics, expectedSessions, generateTraffic, realEventCount,
  sendTraffic, storedSessions, storedViews, type Expected, type Traffic,
} from './support/sessions-traffic';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectId: string;
let reader: Credentials;
let traffic: Traffic;
let deviceIds: Map<number, string>;
let expected: Expected;

before(async () => {
  env = await new TestEnv('sday').setup();
  app = await startApp(env);
  projectId = await env.project({ timezone: 'UTC' });
  const writer = await env.client(projectId, 'write');
  reader = await env.client(projectId, 'read');
  traffic = generateTraffic(1);
  deviceIds = await sendTraffic(app.url, writer, traffic);
  expected = expectedSessions(traffic, deviceIds);
  await waitFor(async () => (await realEventCount(env.db)) === expected.realEvents, { timeoutMs: 30_000, what: 'every event processed' });
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

test('the sessions table holds exactly the sessions semantics.md gives', async () => {
  const actual = await storedSessions(env.db, deviceIds);
  // Sanity of the generated day itself: the edges are in it.
  assert.ok(expected.sessions.length >= 50);
  assert.ok(expected.sessions.some((s) => s.started_at < traffic.dayStart && s.last_event_at > traffic.dayStart), 'a session crosses midnight');
  assert.ok(expected.sessions.some((s) => s.is_bot));
  assertSameSessions(actual, expected.sessions, 'sessions');
});

test('every screen view has its time on page (ms to the next event of its session), the last none', async () => {
  const views = await storedViews(env.db);
  assert.equal(views.length, expected.views.length);
  assert.deepEqual(views, expected.views);
});

test('one session_start per session; session_end rows exactly for the sessions ended by a following one', async () => {
  await assertSessionEvents(env.db);
  const r = await env.db.query("SELECT name, count(*)::int AS n FROM events WHERE name IN ('session_start', 'session_end') GROUP BY name");
  const counts = Object.fromEntries(r.rows.map((x) => [x.name, x.n]));
  assert.equal(counts.session_start, expected.sessions.length);
  assert.equal(counts.session_end ?? 0, expected.sessions.filter((s) => s.ended_by_next).length);
});

test('the Googlebot sessions and events are flagged as bots', async () => {
  const botId = deviceIds.get(traffic.devices.find((d) => d.ua === 'googlebot')!.index)!;
  const r = await env.db.query('SELECT device_id, bool_and(is_bot) AS all_bot, bool_or(is_bot) AS any_bot FROM events GROUP BY device_id');
  for (const row of r.rows) {
    if (row.device_id === botId) assert.equal(row.all_bot, true, 'every bot row is flagged');
    else assert.equal(row.any_bot, false, `device ${row.device_id} is not a bot`);
  }
});

test('/insights metrics for the day equal the numbers computed from the generated traffic', async () => {
  const from = traffic.dayStart;
  const want = expectedMetrics(expected.sessions, from, from + 86_400_000);
  // The day's sessions only: the one that started the evening before is not in it.
  assert.ok(want.total_sessions < expected.sessions.filter((s) => !s.is_bot).length);
  const res = await get(`${app.url}/insights/${projectId}/metrics?startDate=${traffic.day}&endDate=${traffic.day}`, reader);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(res.body.metrics, want);
  // The hourly series adds up to the totals.
  const series = res.body.series as { total_sessions: number; total_screen_views: number }[];
  assert.equal(series.length, 24);
  assert.equal(series.reduce((n, b) => n + b.total_sessions, 0), want.total_sessions);
  assert.equal(series.reduce((n, b) => n + b.total_screen_views, 0), want.total_screen_views);
});

test('/insights referrer_name rows sum to total_sessions and match the reference counts', async () => {
  const from = traffic.dayStart;
  const day = expected.sessions.filter((s) => !s.is_bot && s.started_at >= from && s.started_at < from + 86_400_000);
  const res = await get(`${app.url}/insights/${projectId}/referrer_name?startDate=${traffic.day}&endDate=${traffic.day}&limit=50`, reader);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const rows = res.body as { name: string; sessions: number }[];
  assert.equal(rows.reduce((n, r) => n + r.sessions, 0), day.length);
  const want = new Map<string, number>();
  for (const s of day) want.set(s.referrer_name, (want.get(s.referrer_name) ?? 0) + 1);
  assert.deepEqual(new Map(rows.map((r) => [r.name, r.sessions])), want);
});
