// OpenPanel's raw-row insights routes: GET /insights/{projectId}/events, /sessions, /profiles,
// /profiles/{profileId}, .../sessions and .../metrics, over a seeded scenario whose answers are
// worked out by hand below: a profile identified on two devices (its sessions from both, the
// events before identification left to the device), an anonymous visitor, bots and the
// service's session_start / session_end rows left out, another project's rows invisible; the
// search by name, email, performedEvent, minSessions, inactiveDays and the latest event's
// country / browser; 404 for an unknown profile and 400s naming the parameter.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, startApp, get, type Credentials } from './support/harness';
import { eventRow, insertEvents, insertProfiles, insertSessions, sessionRow, type EventRow, type SessionRow } from './support/export-server';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectA: string;
let projectB: string;
let readA: Credentials;
let writeA: Credentials;
let readB: Credentials;

const DAY = 86_400_000;
const midnight = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
/** UTC midnight `days` days ago, plus h:m:s. */
const at = (days: number, h: number, m = 0, s = 0) => new Date(midnight - days * DAY + ((h * 60 + m) * 60 + s) * 1000).toISOString();
const dateOf = (days: number) => at(days, 0).slice(0, 10);

// Devices and their session dimensions (as the sessionizer copies them onto events and sessions).
const A1 = { device_id: 'dev-a1', country: 'DE', city: 'Berlin', device: 'desktop', browser: 'Chrome', os: 'Windows' };
const A2 = { device_id: 'dev-a2', country: 'FR', city: 'Paris', device: 'mobile', browser: 'Safari', os: 'iOS' };
const BOB = { device_id: 'dev-b', country: 'US', city: 'Boston', device: 'desktop', browser: 'Firefox', os: 'Linux' };
const X = { device_id: 'dev-x', country: 'US', city: 'Austin', device: 'desktop', browser: 'Chrome', os: 'macOS' };
const DAVE = { device_id: 'dev-d', country: 'GB', city: 'London', device: 'tablet', browser: 'Chrome', os: 'Android' };

interface Ev { name?: string; at: string; profile?: string; path?: string; durationMs?: number; properties?: Record<string, unknown>; bot?: boolean }

/** A device id's form (32 hex characters): a stored profile `assign_group` or `increment` made without a profileId. */
const HEX_ID = '9910fa0948431d543b4f2298ff31c6a8';
const ids: Record<string, string> = {};
const rows: Record<string, EventRow> = {};

/** One session: its events (profile_id the device's unless given) and its row (profile `profile`). */
function session(project: string, key: string, dev: typeof A1, profile: string, evs: Ev[], o: Partial<SessionRow> = {}) {
  const s = sessionRow(project, {
    device_id: dev.device_id, profile_id: profile, started_at: evs[0]!.at, last_event_at: evs[evs.length - 1]!.at,
    updated_at: evs[evs.length - 1]!.at, duration_ms: Date.parse(evs[evs.length - 1]!.at) - Date.parse(evs[0]!.at), ended: true,
    event_count: evs.length, screen_view_count: evs.filter((e) => (e.name ?? 'screen_view') === 'screen_view').length,
    country: dev.country, city: dev.city, device: dev.device, browser: dev.browser, os: dev.os,
    entry_origin: 'https://shop.example', entry_path: evs[0]!.path ?? '/', ...o,
  });
  s.is_bounce = s.screen_view_count <= 1;
  ids[key] = s.id;
  const events = evs.map((e, i) => {
    const r = eventRow(project, {
      name: e.name ?? 'screen_view', created_at: e.at, device_id: dev.device_id, profile_id: e.profile ?? dev.device_id,
      session_id: s.id, country: dev.country, city: dev.city, device: dev.device, browser: dev.browser, os: dev.os,
      origin: 'https://shop.example', path: e.path ?? '', duration_ms: e.durationMs ?? null, properties: e.properties ?? {}, is_bot: o.is_bot ?? false,
    });
    rows[`${key}.${i}`] = r;
    return r;
  });
  return { s, events };
}

before(async () => {
  env = await new TestEnv('insprofiles').setup();
  app = await startApp(env, { api: true, worker: false });
  projectA = await env.project({ name: 'A' });
  projectB = await env.project({ name: 'B' });
  [readA, writeA, readB] = await Promise.all([env.client(projectA, 'read'), env.client(projectA, 'write'), env.client(projectB, 'read')]);
  const A = projectA;
  const parts = [
    // Alice on her desktop: two anonymous screen views, then the signup that identifies the session.
    session(A, 'S1', A1, 'u-alice', [
      { at: at(5, 10), path: '/home', durationMs: 60_000 },
      { at: at(5, 10, 1), path: '/pricing', durationMs: 120_000 },
      { name: 'signup', at: at(5, 10, 3), profile: 'u-alice' },
    ], { exit_path: '/pricing', referrer: 'https://google.com', referrer_name: 'Google', referrer_type: 'search' }),
    // Alice on her phone, identified from the start: a purchase and 49.5 of revenue.
    session(A, 'S2', A2, 'u-alice', [
      { at: at(4, 9), path: '/app', durationMs: 300_000, profile: 'u-alice' },
      { name: 'purchase', at: at(4, 9, 5), profile: 'u-alice', properties: { plan: 'pro' } },
      { name: 'revenue', at: at(4, 9, 5, 30), profile: 'u-alice', properties: { __revenue: 49.5 } },
    ], { exit_path: '/app' }),
    // Alice back on her desktop: one view (a bounce of 0 s).
    session(A, 'S3', A1, 'u-alice', [{ at: at(2, 14), path: '/home', profile: 'u-alice' }], { exit_path: '/home' }),
    // A bot session under Alice's id: never listed or counted.
    session(A, 'SBOT', A1, 'u-alice', [{ at: at(2, 15), path: '/admin', profile: 'u-alice' }], { is_bot: true }),
    // Bob: two sessions on one device; revenue as a decimal text.
    session(A, 'S4', BOB, 'u-bob', [
      { at: at(2, 8), path: '/home', durationMs: 120_000, profile: 'u-bob' },
      { at: at(2, 8, 2), path: '/docs', durationMs: 180_000, profile: 'u-bob' },
      { name: 'download', at: at(2, 8, 5), profile: 'u-bob', properties: { file: 'a.pdf' } },
      { name: 'revenue', at: at(2, 8, 6), profile: 'u-bob', properties: { __revenue: '10.25' } },
    ], { exit_path: '/docs' }),
    session(A, 'S5', BOB, 'u-bob', [{ at: at(2, 11), path: '/home', profile: 'u-bob' }]),
    // An anonymous visitor (no profile row).
    session(A, 'S7', X, 'dev-x', [{ at: at(4, 12), path: '/landing' }]),
    // Dave, last seen 20 days ago.
    session(A, 'S6', DAVE, 'u-dave', [{ at: at(20, 10), path: '/home', profile: 'u-dave' }]),
    // Project B: its own u-alice, and a visitor whose device id is a stored profile (increment).
    session(projectB, 'SB', A1, 'u-alice', [{ at: at(3, 10), path: '/b', profile: 'u-alice' }]),
    session(projectB, 'SB2', { ...X, device_id: 'devb-anon' }, 'devb-anon', [{ at: at(3, 12), path: '/b2' }]),
  ];
  const events = parts.flatMap((p) => p.events);
  // The service's own session_start / session_end rows (never listed nor counted).
  for (const key of ['S1', 'S2']) {
    const s = parts.find((p) => p.s.id === ids[key])!.s;
    events.push(eventRow(A, { name: 'session_start', created_at: s.started_at, device_id: s.device_id, profile_id: s.device_id, session_id: s.id, country: s.country }));
    events.push(eventRow(A, { name: 'session_end', created_at: s.last_event_at, device_id: s.device_id, profile_id: s.profile_id, session_id: s.id, country: s.country }));
  }
  await insertEvents(env.db, events);
  await insertSessions(env.db, parts.map((p) => p.s));
  const profile = (project: string, id: string, first: string | null, last: string | null, email: string | null, properties: Record<string, unknown> = {}, groups: string[] = []) =>
    ({ project_id: project, id, first_name: first, last_name: last, email, properties, groups });
  await insertProfiles(env.db, [
    profile(A, 'u-alice', 'Alice', 'Smith', 'alice@example.com', { plan: 'pro', avatar: 'https://img.example/a.png' }, ['g1']),
    profile(A, 'u-bob', 'Bob', 'Jones', 'bob@corp.io', { plan: 'free' }),
    profile(A, 'u-carol', 'Carol', 'Smithers', 'carol@example.com'),
    profile(A, 'u-dave', 'Dave', null, null),
    profile(projectB, 'u-alice', 'Alicia', 'B', 'alicia@b.example'),
    profile(projectB, 'devb-anon', null, null, null, { visits: 2 }),
    profile(projectB, HEX_ID, null, null, null, { visits: 1 }),
  ]);
  // created_at order, newest first: bob, alice, carol, dave.
  const times: Array<[string, string, string]> = [
    ['u-bob', at(2, 7), at(2, 7)], ['u-alice', at(5, 12), at(4, 0)], ['u-carol', at(10, 0), at(10, 0)], ['u-dave', at(25, 0), at(25, 0)],
  ];
  for (const [id, created, updated] of times) {
    await env.db.query('UPDATE profiles SET created_at = $3, updated_at = $4 WHERE project_id = $1 AND id = $2', [A, id, created, updated]);
  }
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

const url = (project: string, route: string, query: Record<string, string | string[]> = {}) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) for (const x of Array.isArray(v) ? v : [v]) q.append(k, x);
  return `${app.url}/insights/${project}/${route}${q.size ? `?${q}` : ''}`;
};
const ok = async (route: string, query: Record<string, string | string[]> = {}, creds = readA, project = projectA) => {
  const r = await get(url(project, route, query), creds);
  assert.equal(r.status, 200, `${route} ${JSON.stringify(query)}: ${JSON.stringify(r.body)}`);
  return r.body;
};
const sessionKeys = (list: Array<{ id: string }>) => list.map((s) => Object.keys(ids).find((k) => ids[k] === s.id) ?? s.id);
const profileIds = (list: Array<{ id: string }>) => list.map((p) => p.id);

test('events: newest first, no bots, no session_start / session_end; limits', async () => {
  const all = await ok('events');
  // 14 real events in 30 days (the bot's screen view and the four session rows left out)
  assert.deepEqual(all.map((e: { name: string; created_at: string }) => `${e.name}@${e.created_at}`), [
    `screen_view@${at(2, 14)}`, `screen_view@${at(2, 11)}`, `revenue@${at(2, 8, 6)}`, `download@${at(2, 8, 5)}`,
    `screen_view@${at(2, 8, 2)}`, `screen_view@${at(2, 8)}`, `screen_view@${at(4, 12)}`, `revenue@${at(4, 9, 5, 30)}`,
    `purchase@${at(4, 9, 5)}`, `screen_view@${at(4, 9)}`, `signup@${at(5, 10, 3)}`, `screen_view@${at(5, 10, 1)}`,
    `screen_view@${at(5, 10)}`, `screen_view@${at(20, 10)}`,
  ]);
  assert.equal((await ok('events', { limit: '3' })).length, 3);
  assert.deepEqual(await ok('events', { eventNames: 'session_start' }), []);
  // a 7-day range leaves Dave's view (20 days ago) out
  assert.equal((await ok('events', { range: '7d' })).length, 13);
  // one day: startDate..endDate inclusive
  const day = await ok('events', { startDate: dateOf(4), endDate: dateOf(4) });
  assert.deepEqual(day.map((e: { name: string }) => e.name), ['screen_view', 'revenue', 'purchase', 'screen_view']);
});

test('events: the row (OpenPanel\'s event columns, durations in seconds, revenue)', async () => {
  const [revenue, purchase, view] = await ok('events', { profileId: 'u-alice', startDate: dateOf(4), endDate: dateOf(4) });
  assert.deepEqual(revenue, {
    id: rows['S2.2']!.id, name: 'revenue', sdk_name: '', sdk_version: '', device_id: 'dev-a2', profile_id: 'u-alice',
    project_id: projectA, session_id: ids.S2, path: '', origin: 'https://shop.example', referrer: '', referrer_name: '',
    referrer_type: '', duration: 0, properties: { __revenue: 49.5 }, created_at: at(4, 9, 5, 30), country: 'FR', city: 'Paris',
    region: '', longitude: null, latitude: null, os: 'iOS', os_version: '', browser: 'Safari', browser_version: '', device: 'mobile',
    brand: '', model: '', imported_at: null, revenue: 49.5, groups: [], title: '', utm_source: '', utm_medium: '', utm_campaign: '',
    utm_term: '', utm_content: '',
  });
  assert.equal(purchase.revenue, 0);
  assert.equal(view.duration, 300); // 300,000 ms to the next event
});

test('events: filtered by names (repeated or JSON), profile, columns, properties and filters', async () => {
  const names = (list: Array<{ name: string }>) => list.map((e) => e.name);
  assert.deepEqual(names(await ok('events', { eventNames: ['purchase', 'download'] })), ['download', 'purchase']);
  assert.deepEqual(names(await ok('events', { eventNames: '["purchase","download"]' })), ['download', 'purchase']);
  assert.deepEqual(names(await ok('events', { eventNames: 'signup' })), ['signup']);
  // alice's own events only (not her desktop's anonymous views), newest first, limited
  const alice = await ok('events', { profileId: 'u-alice', limit: '2' });
  assert.deepEqual(alice.map((e: { created_at: string }) => e.created_at), [at(2, 14), at(4, 9, 5, 30)]);
  assert.equal((await ok('events', { profileId: 'u-alice' })).length, 5);
  assert.deepEqual(names(await ok('events', { country: 'FR' })), ['revenue', 'purchase', 'screen_view']);
  assert.deepEqual(names(await ok('events', { browser: 'Firefox', path: '/docs' })), ['screen_view']);
  assert.deepEqual(names(await ok('events', { country: '' })).length, 14); // empty: no condition (OpenPanel)
  assert.deepEqual(names(await ok('events', { properties: '{"file":"a.pdf"}' })), ['download']);
  assert.deepEqual(names(await ok('events', { properties: '{"__revenue":"49.5"}' })), ['revenue']);
  const F = JSON.stringify([{ name: 'city', operator: 'is', value: ['Berlin'] }, { name: 'path', operator: 'startsWith', value: ['/p'] }]);
  assert.deepEqual((await ok('events', { filters: F })).map((e: { path: string }) => e.path), ['/pricing']);
  // project B sees only its own
  const b = await ok('events', {}, readB, projectB);
  assert.deepEqual(b.map((e: { path: string; project_id: string }) => [e.path, e.project_id]), [['/b2', projectB], ['/b', projectB]]);
});

test('sessions: newest start first, filtered by country / browser / profile, bots left out', async () => {
  assert.deepEqual(sessionKeys(await ok('sessions')), ['S3', 'S5', 'S4', 'S7', 'S2', 'S1', 'S6']);
  assert.deepEqual(sessionKeys(await ok('sessions', { country: 'DE' })), ['S3', 'S1']);
  assert.deepEqual(sessionKeys(await ok('sessions', { browser: 'Safari' })), ['S2']);
  assert.deepEqual(sessionKeys(await ok('sessions', { referrerName: 'Google', referrerType: 'search' })), ['S1']);
  // a profile identified on two devices: its sessions from both
  assert.deepEqual(sessionKeys(await ok('sessions', { profileId: 'u-alice' })), ['S3', 'S2', 'S1']);
  assert.deepEqual(sessionKeys(await ok('sessions', { profileId: 'u-alice', country: 'DE' })), ['S3', 'S1']);
  assert.deepEqual(sessionKeys(await ok('sessions', { profileId: 'u-alice', limit: '1', startDate: dateOf(5), endDate: dateOf(4) })), ['S2']);
  assert.deepEqual(sessionKeys(await ok('sessions', { limit: '2', filters: JSON.stringify([{ name: 'country', operator: 'isNot', value: ['DE'] }]) })), ['S5', 'S4']);
  // an event-level filter keeps the sessions with such an event
  assert.deepEqual(sessionKeys(await ok('sessions', { filters: JSON.stringify([{ name: 'name', operator: 'is', value: ['purchase', 'download'] }]) })), ['S4', 'S2']);
  assert.deepEqual(sessionKeys(await ok('sessions', { startDate: dateOf(4), endDate: dateOf(4) })), ['S7', 'S2']);
  assert.deepEqual(sessionKeys(await ok('sessions', { range: '7d' })), ['S3', 'S5', 'S4', 'S7', 'S2', 'S1']);
  assert.deepEqual(sessionKeys(await ok('sessions', { profileId: 'u-alice' }, readB, projectB)), ['SB']);
});

test('sessions: the row (OpenPanel\'s session columns, duration in seconds, revenue)', async () => {
  const [s2] = await ok('sessions', { browser: 'Safari' });
  assert.deepEqual(s2, {
    id: ids.S2, project_id: projectA, profile_id: 'u-alice', device_id: 'dev-a2', created_at: at(4, 9), ended_at: at(4, 9, 5, 30),
    is_bounce: true, entry_origin: 'https://shop.example', entry_path: '/app', exit_origin: '', exit_path: '/app', screen_view_count: 1,
    revenue: 49.5, event_count: 3, duration: 330, country: 'FR', region: '', city: 'Paris', longitude: null, latitude: null,
    device: 'mobile', brand: '', model: '', browser: 'Safari', browser_version: '', os: 'iOS', os_version: '', utm_medium: '',
    utm_source: '', utm_campaign: '', utm_content: '', utm_term: '', referrer: '', referrer_name: '', referrer_type: '',
    properties: {}, groups: [],
  });
  const [s4] = await ok('sessions', { browser: 'Firefox', limit: '1', startDate: dateOf(2), endDate: dateOf(2), filters: JSON.stringify([{ name: 'name', operator: 'is', value: ['download'] }]) });
  assert.equal(s4.revenue, 10.25); // '10.25' as text counts too
  assert.equal(s4.duration, 360);
});

test('profiles/{id}: the stored profile and its recent events; an anonymous one; 404', async () => {
  const r = await ok('profiles/u-alice');
  assert.deepEqual(r.profile, {
    id: 'u-alice', first_name: 'Alice', last_name: 'Smith', email: 'alice@example.com', avatar: 'https://img.example/a.png',
    properties: { plan: 'pro', avatar: 'https://img.example/a.png' }, project_id: projectA, is_external: true,
    created_at: at(5, 12), last_seen_at: at(2, 14), groups: ['g1'],
  });
  // her 5 real events (not the bot's, not the session rows), newest first
  assert.deepEqual(r.recentEvents.map((e: { name: string }) => e.name), ['screen_view', 'revenue', 'purchase', 'screen_view', 'signup']);
  assert.deepEqual((await ok('profiles/u-alice', { eventLimit: '2' })).recentEvents.map((e: { created_at: string }) => e.created_at), [at(2, 14), at(4, 9, 5, 30)]);
  const anon = await ok('profiles/dev-x');
  assert.deepEqual(anon.profile, {
    id: 'dev-x', first_name: '', last_name: '', email: '', avatar: '', properties: {}, project_id: projectA, is_external: false,
    created_at: at(4, 12), last_seen_at: at(4, 12), groups: [],
  });
  assert.equal(anon.recentEvents.length, 1);
  // project B's u-alice is another profile
  const b = await ok('profiles/u-alice', {}, readB, projectB);
  assert.equal(b.profile.first_name, 'Alicia');
  assert.deepEqual(b.recentEvents.map((e: { path: string }) => e.path), ['/b']);
  for (const route of ['profiles/nobody', 'profiles/nobody/sessions', 'profiles/nobody/metrics', 'profiles/u-carol%2Fx']) {
    const miss = await get(url(projectA, route), readA);
    assert.equal(miss.status, 404, route);
    assert.equal(miss.body.error, 'Profile not found');
    assert.equal(typeof miss.body.message, 'string');
    assert.equal(miss.body.profileId, route.startsWith('profiles/nobody') ? 'nobody' : 'u-carol/x');
  }
  // another project's profile is unknown here
  assert.equal((await get(url(projectB, 'profiles/u-bob'), readB)).status, 404);
});

test('profiles/{id}/sessions: its sessions on both devices, newest first, limited', async () => {
  const list = await ok('profiles/u-alice/sessions');
  assert.deepEqual(sessionKeys(list), ['S3', 'S2', 'S1']);
  assert.deepEqual(new Set(list.map((s: { device_id: string }) => s.device_id)), new Set(['dev-a1', 'dev-a2']));
  assert.deepEqual(sessionKeys(await ok('profiles/u-alice/sessions', { limit: '2' })), ['S3', 'S2']);
  assert.deepEqual(sessionKeys(await ok('profiles/u-bob/sessions')), ['S5', 'S4']);
  // the desktop's anonymous views made a session that now belongs to Alice
  assert.deepEqual(await ok('profiles/dev-a1/sessions'), []);
  assert.deepEqual(await ok('profiles/u-carol/sessions'), []); // stored, no events
});

test('profiles/{id}/metrics: worked out by hand', async () => {
  assert.deepEqual(await ok('profiles/u-alice/metrics'), {
    profileId: 'u-alice',
    firstSeen: at(5, 10, 3), // her first event, before the row was written
    lastSeen: at(2, 14),
    sessions: 3, // S1, S2, S3 (not the bot's)
    screenViews: 2, // /app, /home (the desktop's first two views are the device's)
    totalEvents: 5,
    conversionEvents: 3, // signup, purchase, revenue
    uniqueDaysActive: 3,
    avgSessionDurationMin: 4.25, // (180 s + 330 s) / 2 = 255 s; S3 lasted 0 s
    p90SessionDurationMin: 5.25, // 180 + 0.9 x 150 = 315 s
    avgEventsPerSession: 1.67, // 5 / 3
    avgTimeBetweenSessionsSec: 136_800, // starts 76 h apart (5 days ago 10:00, 2 days ago 14:00) over 2 gaps
    bounceRate: 66.67, // S2 and S3 of 3
    revenue: 49.5,
  });
  const carol = await ok('profiles/u-carol/metrics');
  assert.deepEqual({ ...carol, firstSeen: null, lastSeen: null }, {
    profileId: 'u-carol', firstSeen: null, lastSeen: null, sessions: 0, screenViews: 0, totalEvents: 0, conversionEvents: 0,
    uniqueDaysActive: 0, avgSessionDurationMin: 0, p90SessionDurationMin: 0, avgEventsPerSession: 0, avgTimeBetweenSessionsSec: 0,
    bounceRate: 0, revenue: 0,
  });
  assert.equal(carol.firstSeen, at(10, 0)); // the row's creation
  const bob = await ok('profiles/u-bob/metrics');
  assert.deepEqual([bob.sessions, bob.totalEvents, bob.revenue, bob.avgSessionDurationMin, bob.bounceRate], [2, 5, 10.25, 6, 50]);
});

test('profiles: search by name, email, performedEvent, minSessions, inactiveDays, latest event; order; limit', async () => {
  const search = async (query: Record<string, string>) => profileIds(await ok('profiles', query));
  assert.deepEqual(await search({}), ['u-bob', 'u-alice', 'u-carol', 'u-dave']);
  assert.deepEqual(await search({ sortOrder: 'asc' }), ['u-dave', 'u-carol', 'u-alice', 'u-bob']);
  assert.deepEqual(await search({ limit: '1' }), ['u-bob']);
  assert.deepEqual(await search({ name: 'smith' }), ['u-alice', 'u-carol']);
  assert.deepEqual(await search({ name: 'Alice Smith' }), ['u-alice']);
  assert.deepEqual(await search({ name: 'u-da' }), ['u-dave']);
  assert.deepEqual(await search({ email: 'EXAMPLE.com' }), ['u-alice', 'u-carol']);
  assert.deepEqual(await search({ email: '%' }), []); // literal, not a wildcard
  assert.deepEqual(await search({ performedEvent: 'purchase' }), ['u-alice']);
  assert.deepEqual(await search({ performedEvent: 'screen_view' }), ['u-bob', 'u-alice', 'u-dave']);
  assert.deepEqual(await search({ performedEvent: 'session_start' }), []);
  assert.deepEqual(await search({ minSessions: '2' }), ['u-bob', 'u-alice']);
  assert.deepEqual(await search({ minSessions: '3' }), ['u-alice']);
  assert.deepEqual(await search({ minSessions: '4' }), []);
  assert.deepEqual(await search({ inactiveDays: '7' }), ['u-carol', 'u-dave']);
  assert.deepEqual(await search({ inactiveDays: '3' }), ['u-carol', 'u-dave']);
  assert.deepEqual(await search({ inactiveDays: '1' }), ['u-bob', 'u-alice', 'u-carol', 'u-dave']);
  assert.deepEqual(await search({ country: 'DE' }), ['u-alice']); // her latest event is on the desktop
  assert.deepEqual(await search({ browser: 'Firefox' }), ['u-bob']);
  assert.deepEqual(await search({ minSessions: '1', inactiveDays: '10' }), ['u-dave']);
  assert.deepEqual(await search({ filters: JSON.stringify([{ name: 'properties.plan', operator: 'is', value: ['pro'] }]) }), ['u-alice']);
  assert.deepEqual(await search({ filters: JSON.stringify([{ name: 'profile_id', operator: 'is', value: ['u-bob'] }]) }), ['u-bob']);
  const [bob] = await ok('profiles', { limit: '1' });
  assert.deepEqual(bob, {
    id: 'u-bob', first_name: 'Bob', last_name: 'Jones', email: 'bob@corp.io', avatar: '', properties: { plan: 'free' },
    project_id: projectA, is_external: true, created_at: at(2, 7), last_seen_at: at(2, 11), groups: [],
  });
  // project B's: stored at the same instant, so by id (descending); is_external false for the
  // ids that are device ids (the device of the latest event; with no event, a device id's form)
  const b = await ok('profiles', {}, readB, projectB);
  assert.deepEqual(b.map((p: { id: string; is_external: boolean }) => [p.id, p.is_external]), [['u-alice', true], ['devb-anon', false], [HEX_ID, false]]);
  assert.equal((await ok(`profiles/${HEX_ID}`, {}, readB, projectB)).profile.is_external, false);
  assert.equal((await ok('profiles/devb-anon', {}, readB, projectB)).profile.is_external, false);
});

test('bad parameters: 400 naming the parameter', async () => {
  const cases: Array<[string, Record<string, string | string[]>, string]> = [
    ['events', { limit: '0' }, 'limit'],
    ['events', { limit: '101' }, 'limit'],
    ['events', { limit: 'ten' }, 'limit'],
    ['events', { range: 'forever' }, 'range'],
    ['events', { startDate: '2026-01-01' }, 'endDate'],
    ['events', { properties: 'plan=pro' }, 'properties'],
    ['events', { eventNames: Array.from({ length: 101 }, (_, i) => `e${i}`) }, 'eventNames'],
    ['events', { filters: '[{"name":"nope","operator":"is","value":["x"]}]' }, 'filters'],
    ['events', { filters: '[{"name":"path","operator":"regex","value":["("]}]' }, 'filters'],
    ['events', { path: 'a\u0000b' }, 'path'],
    ['sessions', { limit: '500' }, 'limit'],
    ['sessions', { endDate: '2026-13-01', startDate: '2026-01-01' }, 'endDate'],
    ['profiles', { limit: '-1' }, 'limit'],
    ['profiles', { minSessions: '0' }, 'minSessions'],
    ['profiles', { minSessions: '1001' }, 'minSessions'],
    ['profiles', { inactiveDays: '1.5' }, 'inactiveDays'],
    ['profiles', { sortOrder: 'up' }, 'sortOrder'],
    ['profiles', { filters: '[{"name":"country","operator":"is","value":["DE"]}]' }, 'filters'],
    ['profiles/u-alice', { eventLimit: '101' }, 'eventLimit'],
    ['profiles/u-alice/sessions', { limit: '0' }, 'limit'],
    ['profiles/a%00b', {}, 'profileId'],
    ['profiles/a%00b/metrics', {}, 'profileId'],
  ];
  for (const [route, query, param] of cases) {
    const r = await get(url(projectA, route, query), readA);
    assert.equal(r.status, 400, `${route} ${JSON.stringify(query).slice(0, 80)}: ${r.status} ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error, 'Bad Request');
    assert.equal(typeof r.body.message, 'string');
    assert.ok(r.body.details.issues.some((i: { path: string[] }) => i.path[0] === param), `${route}: ${JSON.stringify(r.body)}`);
  }
});

test('auth: 401 without credentials, 403 for a write client or another project', async () => {
  for (const route of ['events', 'sessions', 'profiles', 'profiles/u-alice', 'profiles/u-alice/sessions', 'profiles/u-alice/metrics']) {
    assert.equal((await get(url(projectA, route), null)).status, 401, route);
    assert.equal((await get(url(projectA, route), writeA)).status, 403, route);
    assert.equal((await get(url(projectA, route), readB)).status, 403, route);
  }
});
