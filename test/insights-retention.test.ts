// OpenPanel's overview, active_users, retention, retention/cohort and engagement routes over
// seeded sessions and events whose answers are worked out by hand below (semantics.md, "Product
// analytics"): activity is events (a server-side event without a session counts; bots and
// session_start / session_end never do); retention, cohorts and engagement count identified
// profiles only (profile id other than the device id), active_users anonymous visitors too (by
// device id); weeks start on Monday in the project's timezone; only weeks with activity are
// listed; cohort percentages are fractions; overview equals /metrics; bad parameters are 400s
// naming the parameter.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, startApp, get, type Credentials } from './support/harness';
import { eventRow, insertEvents, insertSessions, sessionRow, type EventRow, type SessionRow } from './support/export-server';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectA: string; // America/New_York: UTC-5 in January
let projectB: string;
let projectD: string; // UTC, seeded relative to now (the default windows)
let readA: Credentials;
let rootA: Credentials;
let readB: Credentials;
let readD: Credentials;

const DAY = 86_400_000;
/** The Monday (00:00 UTC) of the current UTC week. */
const thisMonday = (): number => {
  const today = Math.floor(Date.now() / DAY) * DAY;
  return today - ((new Date(today).getUTCDay() + 6) % 7) * DAY;
};
const ymd = (ms: number) => new Date(ms).toISOString().slice(0, 10);

before(async () => {
  env = await new TestEnv('retention').setup();
  app = await startApp(env, { api: true, worker: false });
  projectA = await env.project({ name: 'A', timezone: 'America/New_York' });
  projectB = await env.project({ name: 'B' });
  projectD = await env.project({ name: 'D' });
  [readA, rootA, readB, readD] = await Promise.all([
    env.client(projectA, 'read'), env.client(projectA, 'root'), env.client(projectB, 'read'), env.client(projectD, 'read'),
  ]);
  const sessions: SessionRow[] = [];
  const events: EventRow[] = [];
  // One session with its screen views (`views`, 1 by default, on `path`), as the sessionizer writes them.
  const visit = (project: string, profile: string, device: string, at: string, o: { views?: number; durationMs?: number; bot?: boolean; country?: string } = {}) => {
    const views = o.views ?? 1;
    const start = Date.parse(at);
    const end = new Date(start + (o.durationMs ?? 0)).toISOString();
    const s = sessionRow(project, {
      profile_id: profile, device_id: device, started_at: at, last_event_at: end, duration_ms: o.durationMs ?? 0, ended: true,
      entry_path: '/a', exit_path: '/a', screen_view_count: views, event_count: views, is_bounce: views <= 1, is_bot: o.bot ?? false,
      country: o.country ?? '', updated_at: end,
    });
    sessions.push(s);
    for (let i = 0; i < views; i++) {
      const t = views === 1 ? at : new Date(start + ((o.durationMs ?? 0) * i) / (views - 1)).toISOString();
      events.push(eventRow(project, { profile_id: profile, device_id: device, session_id: s.id, created_at: t, path: '/a', is_bot: o.bot ?? false, country: o.country ?? '' }));
    }
  };
  // Project A, New York time. Weeks (Monday..Sunday, local): W1 Jan 6, W2 Jan 13, W3 Jan 20, W4 Jan 27 2025.
  visit(projectA, 'u1', 'dA', '2025-01-07T15:00:00Z'); // W1, Tue Jan 7
  visit(projectA, 'u5', 'd5', '2025-01-10T12:00:00Z'); // W1, Fri Jan 10
  visit(projectA, 'd2', 'd2', '2025-01-13T04:30:00Z'); // W1: Sun Jan 12 23:30 local (Monday Jan 13 in UTC); anonymous
  visit(projectA, 'u3', 'd3', '2025-01-14T12:00:00Z'); // W2, Tue Jan 14
  visit(projectA, 'u1', 'dB', '2025-01-15T15:00:00Z', { views: 3, durationMs: 120_000, country: 'US' }); // W2, u1's second device
  visit(projectA, 'u1', 'dA', '2025-01-16T15:00:00Z'); // W2, Thu Jan 16, first device again
  visit(projectA, 'd2', 'd2', '2025-01-20T04:59:00Z'); // W2: Sun Jan 19 23:59 local
  visit(projectA, 'u4', 'd4', '2025-01-21T12:00:00Z'); // W3
  visit(projectA, 'u5', 'd5', '2025-01-22T12:00:00Z'); // W3
  visit(projectA, 'u3', 'd3', '2025-01-28T12:00:00Z'); // W4
  visit(projectA, 'u4', 'd4', '2025-01-29T12:00:00Z'); // W4
  visit(projectA, 'u6', 'd6', '2024-11-20T12:00:00Z');
  visit(projectA, 'u7', 'd7', '2024-12-20T12:00:00Z');
  visit(projectA, 'u8', 'd8', '2025-01-01T12:00:00Z');
  // Bots never count (identified, in W1 and W2).
  visit(projectA, 'botp', 'dbot', '2025-01-08T12:00:00Z', { bot: true });
  visit(projectA, 'botp', 'dbot', '2025-01-15T12:00:00Z', { bot: true });
  // Server-side events (no session) count: u9's in W2; u4's on Sunday Jan 19 23:00 local, W2
  // (Monday Jan 20 in UTC, which would be W3).
  events.push(eventRow(projectA, { name: 'purchase', profile_id: 'u9', device_id: 'd9', created_at: '2025-01-15T12:00:00Z' }));
  events.push(eventRow(projectA, { name: 'purchase', profile_id: 'u4', device_id: 'd4', created_at: '2025-01-20T04:00:00Z' }));
  // u8 returns (server-side) on Wed Mar 5, 9 weeks after its Jan 1 visit.
  events.push(eventRow(projectA, { name: 'purchase', profile_id: 'u8', device_id: 'd8', created_at: '2025-03-05T15:00:00Z' }));
  // The service's own rows never count: u5's session_end on Monday Jan 13 (W2), a profile
  // (ghost) with only a session_start and session_end on Jan 14.
  events.push(eventRow(projectA, { name: 'session_end', profile_id: 'u5', device_id: 'd5', created_at: '2025-01-13T12:00:00Z' }));
  events.push(eventRow(projectA, { name: 'session_start', profile_id: 'ghost', device_id: 'dg', created_at: '2025-01-14T15:00:00Z' }));
  events.push(eventRow(projectA, { name: 'session_end', profile_id: 'ghost', device_id: 'dg', created_at: '2025-01-14T15:30:00Z' }));
  visit(projectB, 'u1', 'dA', '2025-01-07T15:00:00Z');
  visit(projectB, 'u1', 'dA', '2025-01-14T15:00:00Z');
  visit(projectB, 'x', 'dx', '2025-01-21T15:00:00Z');
  // Project D, UTC: x and w in the first week of the default window (12 weeks before this one),
  // x again this week, y (identified) and dz (anonymous) this week only (times between this
  // Monday and now).
  const monday = thisMonday();
  const thisWeek = (f: number) => new Date(monday + (Date.now() - monday) * f).toISOString();
  visit(projectD, 'x', 'dx', new Date(monday - 84 * DAY + 3_600_000).toISOString());
  visit(projectD, 'w', 'dw', new Date(monday - 84 * DAY + 7_200_000).toISOString());
  visit(projectD, 'x', 'dx', thisWeek(0.5));
  visit(projectD, 'y', 'dy', thisWeek(0.25));
  visit(projectD, 'dz', 'dz', thisWeek(0.75));
  await insertSessions(env.db, sessions);
  await insertEvents(env.db, events);
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

const url = (project: string, route: string, query: Record<string, string> = {}) =>
  `${app.url}/insights/${project}/${route}${Object.keys(query).length ? `?${new URLSearchParams(query)}` : ''}`;

async function ok(project: string, route: string, query: Record<string, string> = {}, creds = readA) {
  const r = await get(url(project, route, query), creds);
  assert.equal(r.status, 200, `${route} ${JSON.stringify(r.body)}`);
  return r.body;
}

const JAN_W1_W3 = { startDate: '2025-01-06', endDate: '2025-01-26' };

test('retention: identified profiles per Monday-start local week, those active the next week too, weeks with activity only', async () => {
  // Identified profiles' weeks: W1 u1, u5; W2 u1 (two devices: one profile), u3, u9 (server-side
  // event), u4 (its Sunday-night event); W3 u4, u5; W4 u3, u4. Not counted: d2 (anonymous), botp
  // (bot), u5's session_end in W2 (else W1 would retain 2), ghost (session_start/end only).
  const expected = [
    { date: '2025-01-06', active_users: 2, retained_users: 1, retention: 50 }, // u1 again in W2
    { date: '2025-01-13', active_users: 4, retained_users: 1, retention: 25 }, // u4 again in W3
    { date: '2025-01-20', active_users: 2, retained_users: 1, retention: 50 }, // W4 (after the period, read for this row): u4
  ];
  assert.deepEqual(await ok(projectA, 'retention', JAN_W1_W3), expected);
  // A period is the whole weeks it touches.
  assert.deepEqual(await ok(projectA, 'retention', { startDate: '2025-01-08', endDate: '2025-01-21' }, rootA), expected);
  // Weeks without activity have no row: Dec 23 here; u7 (Dec 20), u8 (Jan 1, week of Dec 30) are
  // not active the week after; W1 as above.
  assert.deepEqual(await ok(projectA, 'retention', { startDate: '2024-12-16', endDate: '2025-01-12' }), [
    { date: '2024-12-16', active_users: 1, retained_users: 0, retention: 0 },
    { date: '2024-12-30', active_users: 1, retained_users: 0, retention: 0 },
    { date: '2025-01-06', active_users: 2, retained_users: 1, retention: 50 },
  ]);
  assert.deepEqual(await ok(projectA, 'retention', { startDate: '2025-02-03', endDate: '2025-02-03' }), []);
  // Project B (UTC) sees only its own profiles: u1 in W1 and W2, x in W3.
  assert.deepEqual(await ok(projectB, 'retention', JAN_W1_W3, readB), [
    { date: '2025-01-06', active_users: 1, retained_users: 1, retention: 100 },
    { date: '2025-01-13', active_users: 1, retained_users: 0, retention: 0 },
    { date: '2025-01-20', active_users: 1, retained_users: 0, retention: 0 },
  ]);
});

test('retention/cohort: identified profiles by first week, active k or more weeks later (13 columns), fractions, weighted average first', async () => {
  const zeros = (n: number) => new Array<number>(n).fill(0);
  assert.deepEqual(await ok(projectA, 'retention/cohort', JAN_W1_W3), [
    // Both cohorts have reached every column by now: pooled 5 profiles; size round(5 / 2) = 3;
    // rates 5/5, 4/5, 3/5; values round(rate x 3): 3, 2.4 -> 2, 1.8 -> 2.
    { cohort_interval: 'Weighted Average', sum: 3, values: [3, 2, 2, ...zeros(10)], percentages: [1, 0.8, 0.6, ...zeros(10)] },
    // W1: u1 (W1, W2), u5 (W1, W3; its W2 session_end does not count)
    { cohort_interval: '2025-01-06', sum: 2, values: [2, 2, 1, ...zeros(10)], percentages: [1, 1, 0.5, ...zeros(10)] },
    // W2: u3 (W2, W4: read after the period), u4 (W2 by its Sunday-night event, W3, W4), u9 (W2);
    // W3 holds no first week (u4, u5 are in earlier cohorts); d2, botp, ghost are in none.
    { cohort_interval: '2025-01-13', sum: 3, values: [3, 2, 2, ...zeros(10)], percentages: [1, 0.67, 0.67, ...zeros(10)] },
  ]);
  // A long window (57 weeks; its later columns read up to 69 weeks from its first): u6 (week of
  // Nov 18), u7 (Dec 16), u8 (Dec 30, back 9 weeks later, on Mar 5, after the window); the profiles
  // first active after the window are in no cohort. size round(3 / 3) = 1; columns 1..9: 1 of 3.
  const long = [1, ...zeros(12)];
  assert.deepEqual(await ok(projectA, 'retention/cohort', { startDate: '2023-12-04', endDate: '2025-01-05' }), [
    { cohort_interval: 'Weighted Average', sum: 1, values: long, percentages: [1, ...new Array(9).fill(0.33), ...zeros(3)] },
    { cohort_interval: '2024-11-18', sum: 1, values: long, percentages: long },
    { cohort_interval: '2024-12-16', sum: 1, values: long, percentages: long },
    { cohort_interval: '2024-12-30', sum: 1, values: [...new Array(10).fill(1), ...zeros(3)], percentages: [...new Array(10).fill(1), ...zeros(3)] },
  ]);
  assert.deepEqual(await ok(projectA, 'retention/cohort', { startDate: '2025-02-03', endDate: '2025-02-09' }), []);
});

test('retention and cohort by default: this week and the 12 before it, empty weeks absent, young cohorts out of the average', async () => {
  const monday = thisMonday();
  const weeks = Array.from({ length: 13 }, (_, i) => ymd(monday - (12 - i) * 7 * DAY));
  // x, w in the first week (x again this week); x, y this week; dz is anonymous.
  assert.deepEqual(await ok(projectD, 'retention', {}, readD), [
    { date: weeks[0], active_users: 2, retained_users: 0, retention: 0 },
    { date: weeks[12], active_users: 2, retained_users: 0, retention: 0 },
  ]);
  assert.deepEqual(await ok(projectD, 'retention/cohort', {}, readD), [
    // size round(3 / 2) = 2. Column 0 pools both cohorts (3 of 3); this week's cohort (y) has
    // reached only column 0, so columns 1..12 pool the first alone: 1 of 2, 0.5, round(0.5 x 2) = 1.
    { cohort_interval: 'Weighted Average', sum: 2, values: [2, ...new Array(12).fill(1)], percentages: [1, ...new Array(12).fill(0.5)] },
    { cohort_interval: weeks[0], sum: 2, values: [2, ...new Array(12).fill(1)], percentages: [1, ...new Array(12).fill(0.5)] }, // x active again 12 weeks later
    { cohort_interval: weeks[12], sum: 1, values: [1, ...new Array(12).fill(0)], percentages: [1, ...new Array(12).fill(0)] },
  ]);
});

test('active_users: DAU, WAU and MAU of profiles with an event, on chosen local days (anonymous by device, server-side events in, bots and session rows out)', async () => {
  const days = (body: { series: Array<{ date: string; users: number }> }) => body.series.map((r) => [r.date, r.users]);
  const dau = await ok(projectA, 'active_users', { days: '1', startDate: '2025-01-12', endDate: '2025-01-16' });
  assert.equal(dau.window_days, 1);
  assert.equal(dau.label, 'DAU');
  // Jan 12: d2's Sunday-night event (Jan 13 in UTC); Jan 13: only u5's session_end, 0; Jan 14:
  // u3 (ghost's session rows out); Jan 15: u1 and u9's server-side event (the bot out); Jan 16: u1.
  assert.deepEqual(days(dau), [['2025-01-12', 1], ['2025-01-13', 0], ['2025-01-14', 1], ['2025-01-15', 2], ['2025-01-16', 1]]);
  const wau = await ok(projectA, 'active_users', { days: '7', startDate: '2025-01-12', endDate: '2025-01-16' });
  assert.equal(wau.label, 'WAU');
  // Jan 6-12: u1, u5, d2; Jan 7-13: the same; Jan 8-14: u5, d2, u3; Jan 9-15 and 10-16: u5, d2,
  // u3, u1 (both devices: once), u9
  assert.deepEqual(days(wau), [['2025-01-12', 3], ['2025-01-13', 3], ['2025-01-14', 3], ['2025-01-15', 5], ['2025-01-16', 5]]);
  const mau = await ok(projectA, 'active_users', { days: '30', startDate: '2025-01-31', endDate: '2025-01-31' });
  assert.equal(mau.label, 'MAU');
  // Jan 2-31: u1, u5, d2, u3, u9, u4 (u8 on Jan 1 is just outside)
  assert.deepEqual(days(mau), [['2025-01-31', 6]]);
  const d14 = await ok(projectA, 'active_users', { days: '14', startDate: '2025-01-31', endDate: '2025-01-31' });
  assert.equal(d14.label, '14d active');
  assert.deepEqual(days(d14), [['2025-01-31', 4]]); // Jan 18-31: d2 (Jan 19), u4, u5, u3
  // Longer periods, the same numbers: 58 days listed (64 read: past one 63-day word of a
  // profile's days) and 138 (144 read: three words). Profiles count for 7 days from each event:
  // u6 Nov 20-26, u7 Dec 20-26, u8 Jan 1-7, then as above.
  const run = (from: string, n: number) => Array.from({ length: n }, (_, i) => [ymd(Date.parse(from) + i * DAY), 1]);
  const nonZero = [
    ...run('2024-11-20', 7), ...run('2024-12-20', 7), ...run('2025-01-01', 6),
    ['2025-01-07', 2], ['2025-01-08', 1], ['2025-01-09', 1], ['2025-01-10', 2], ['2025-01-11', 2], // u8, u1; u1; u1, u5
    ...days(wau),
  ];
  for (const [startDate, listed] of [['2024-11-20', 58], ['2024-09-01', 138]] as const) {
    const long = await ok(projectA, 'active_users', { days: '7', startDate, endDate: '2025-01-16' });
    assert.equal(long.series.length, listed);
    assert.equal(long.series[0].date, startDate);
    assert.deepEqual(days(long).filter(([, users]) => users !== 0), nonZero, startDate);
  }
  // The widest ask: 400 days of 90-day windows (489 days read). Nov 20 brings u6; by Jan 31 and
  // Feb 9 the 90 days hold every profile but the bot and ghost: u6, u7, u8, u1, u5, d2, u3, u9, u4.
  const widest = await ok(projectA, 'active_users', { days: '90', startDate: '2024-01-07', endDate: '2025-02-09' });
  assert.equal(widest.series.length, 400);
  const on = new Map(days(widest) as Array<[string, number]>);
  assert.deepEqual(['2024-11-19', '2024-11-20', '2025-01-31', '2025-02-09'].map((d) => on.get(d)), [0, 1, 9, 9]);
  // Defaults: days 7, the last 30 days; today's 7 days hold x, y and dz (anonymous).
  const byDefault = await ok(projectD, 'active_users', {}, readD);
  assert.equal(byDefault.window_days, 7);
  assert.equal(byDefault.series.length, 30);
  assert.deepEqual(byDefault.series[29], { date: ymd(Date.now()), users: 3 });
  assert.deepEqual(days(await ok(projectB, 'active_users', { days: '1', startDate: '2025-01-07', endDate: '2025-01-07' }, readB)), [['2025-01-07', 1]]);
});

test('engagement: identified profiles by days since their last event, counted back from the period\'s last day', async () => {
  assert.deepEqual(await ok(projectA, 'engagement', { startDate: '2024-11-01', endDate: '2025-01-31' }), {
    // u4 Jan 29, u3 Jan 28, u5 Jan 22, u1 Jan 16, u9 Jan 15 (server-side), u8 Jan 1, u7 Dec 20,
    // u6 Nov 20; d2 is anonymous, botp a bot, ghost has only session rows
    summary: {
      total_identified_users: 8, active_last_7_days: 2, active_8_to_14_days: 1, active_15_to_30_days: 3,
      inactive_31_to_60_days: 1, churned_60_plus_days: 1,
    },
    distribution: [
      { days: 2, users: 1 }, { days: 3, users: 1 }, { days: 9, users: 1 }, { days: 15, users: 1 }, { days: 16, users: 1 },
      { days: 30, users: 1 }, { days: 42, users: 1 }, { days: 72, users: 1 },
    ],
  });
  // As of Jan 16 (nothing after it read): u1 0, u9 1, u3 2, u5 6 (its Jan 13 session_end does
  // not count), u8 15, u7 27, u6 57 days.
  assert.deepEqual(await ok(projectA, 'engagement', { startDate: '2024-11-01', endDate: '2025-01-16' }), {
    summary: {
      total_identified_users: 7, active_last_7_days: 4, active_8_to_14_days: 0, active_15_to_30_days: 2,
      inactive_31_to_60_days: 1, churned_60_plus_days: 0,
    },
    distribution: [
      { days: 0, users: 1 }, { days: 1, users: 1 }, { days: 2, users: 1 }, { days: 6, users: 1 }, { days: 15, users: 1 }, { days: 27, users: 1 }, { days: 57, users: 1 },
    ],
  });
});

test('overview: /metrics\' totals and series for the same parameters, at a chosen interval', async () => {
  const metrics = await ok(projectA, 'metrics', JAN_W1_W3);
  const overview = await ok(projectA, 'overview', JAN_W1_W3);
  assert.deepEqual(overview.summary, metrics.metrics);
  assert.deepEqual(overview.series, metrics.series);
  assert.equal(overview.interval, 'day');
  assert.equal(overview.startDate, '2025-01-06T05:00:00.000Z');
  assert.equal(overview.endDate, '2025-01-27T05:00:00.000Z');
  // 9 sessions of u1 x3, u5 x2, d2 x2, u3, u4 (5 users); 11 views; u1's on dB bounced not and lasted 120 s.
  const summary = { bounce_rate: 88.89, unique_visitors: 5, total_sessions: 9, avg_session_duration: 120, total_screen_views: 11, views_per_session: 1.22 };
  assert.deepEqual(overview.summary, summary);
  const week = await ok(projectA, 'overview', { ...JAN_W1_W3, interval: 'week' });
  assert.deepEqual(week.summary, summary);
  assert.equal(week.interval, 'week');
  assert.deepEqual(
    week.series.map((r: { date: string; total_sessions: number; unique_visitors: number }) => [r.date, r.total_sessions, r.unique_visitors]),
    [['2025-01-06T05:00:00.000Z', 3, 3], ['2025-01-13T05:00:00.000Z', 4, 3], ['2025-01-20T05:00:00.000Z', 2, 2]],
  );
  const month = await ok(projectA, 'overview', { ...JAN_W1_W3, interval: 'month' });
  assert.deepEqual(month.series, [{ date: '2025-01-01T05:00:00.000Z', ...summary }]);
  assert.equal((await ok(projectA, 'overview', { ...JAN_W1_W3, interval: 'hour' })).series.length, 21 * 24);
  const filters = JSON.stringify([{ name: 'country', operator: 'is', value: ['US'] }]);
  const filtered = await ok(projectA, 'overview', { ...JAN_W1_W3, filters });
  assert.deepEqual(filtered.summary, (await ok(projectA, 'metrics', { ...JAN_W1_W3, filters })).metrics);
  assert.equal(filtered.summary.total_sessions, 1);
  // Default: the last 30 days, /metrics' own bucket size for them.
  const byDefault = await ok(projectD, 'overview', {}, readD);
  const metrics30 = await ok(projectD, 'metrics', { range: '30d' }, readD);
  assert.equal(byDefault.interval, 'day');
  assert.deepEqual(byDefault.series, metrics30.series);
  assert.deepEqual(byDefault.summary, metrics30.metrics);
  assert.equal(byDefault.summary.unique_visitors, 3); // x, y, dz (w's visit is 12 weeks old)
});

test('bad parameters: 400 naming the parameter', async () => {
  const cases: Array<[string, Record<string, string>, string]> = [
    ['active_users', { days: '0' }, 'days'],
    ['active_users', { days: '91' }, 'days'],
    ['active_users', { days: 'seven' }, 'days'],
    ['active_users', { days: '7.5' }, 'days'],
    ['active_users', { startDate: '2020-01-01', endDate: '2025-01-01' }, 'endDate'],
    ['overview', { interval: 'minute' }, 'interval'],
    ['overview', { interval: 'year' }, 'interval'],
    ['overview', { startDate: '2000-01-01', endDate: '2019-12-31', interval: 'hour' }, 'interval'],
    ['overview', { range: '14d' }, 'range'],
    ['overview', { filters: '[{"name":"nope","operator":"is","value":["x"]}]' }, 'filters'],
    ['retention', { startDate: '2025-01-06' }, 'endDate'],
    ['retention', { startDate: '2020-01-01', endDate: '2025-01-01' }, 'endDate'],
    ['retention/cohort', { startDate: '2025-01-06', endDate: '2025-13-01' }, 'endDate'],
    ['retention/cohort', { range: 'forever' }, 'range'],
    ['engagement', { range: '365d' }, 'range'],
    ['engagement', { startDate: '2025-02-01', endDate: '2025-01-01' }, 'endDate'],
  ];
  for (const [route, query, param] of cases) {
    const r = await get(url(projectA, route, query), readA);
    assert.equal(r.status, 400, `${route} ${JSON.stringify(query)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error, 'Bad Request');
    assert.ok(r.body.details.issues.some((i: { path: string[] }) => i.path[0] === param), `${route} ${JSON.stringify(r.body)}`);
  }
});

test('auth: 401 without credentials, 403 for another project\'s client, 404 for an unknown project', async () => {
  for (const route of ['overview', 'active_users', 'retention', 'retention/cohort', 'engagement']) {
    assert.equal((await get(url(projectA, route), null)).status, 401, route);
    const other = await get(url(projectA, route), readB);
    assert.equal(other.status, 403, route);
    assert.equal(typeof other.body.message, 'string');
    const unknown = await get(url('no-such-project', route), rootA);
    assert.equal(unknown.status, 404, route);
    assert.equal(typeof unknown.body.message, 'string');
  }
});
