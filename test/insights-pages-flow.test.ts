// OpenPanel's pages/entry_exit, pages/performance and user_flow over seeded sessions and events
// whose answers are worked out by hand below; bots, other projects and other days left out; 400s
// naming the parameter; /pages and the breakdowns beside them unchanged.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { TestEnv, startApp, get, type Credentials } from './support/harness';
import { eventRow, insertEvents, insertSessions, sessionRow, type EventRow, type SessionRow } from './support/export-server';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectA: string;
let projectB: string;
let readers: Credentials[] = [];
let readB: Credentials;
let calls = 0;

const ORIGIN = 'https://a.test';
const PAGES_DAY = '2025-03-10';
const FLOW_DAY = '2025-03-11';

/** One event of a seeded session: its name, time of day, and for screen views the page and time on it. */
interface Ev {
  name: string;
  at: string;
  path?: string;
  title?: string;
  durationMs?: number | null;
  properties?: Record<string, unknown>;
}

/**
 * A session and its events as the sessionizer writes them: session_start / session_end rows
 * around the real events, entry and exit page, counts, bounce, duration.
 */
function seeded(project: string, day: string, evs: Ev[], over: { bot?: boolean; country?: string } = {}): { session: SessionRow; events: EventRow[] } {
  const id = randomUUID();
  const device = `dev-${id.slice(0, 8)}`;
  const at = (e: Ev) => `${day}T${e.at}.000Z`;
  const views = evs.filter((e) => e.name === 'screen_view');
  const first = at(evs[0]!);
  const last = at(evs[evs.length - 1]!);
  const common = { device_id: device, profile_id: device, session_id: id, is_bot: over.bot ?? false, country: over.country ?? '' };
  const events = [
    eventRow(project, { ...common, name: 'session_start', created_at: first }),
    ...evs.map((e) => eventRow(project, {
      ...common, name: e.name, created_at: at(e), properties: e.properties ?? {},
      ...(e.name === 'screen_view' ? { origin: ORIGIN, path: e.path ?? '', title: e.title ?? '', duration_ms: e.durationMs ?? null } : {}),
    })),
    eventRow(project, { ...common, name: 'session_end', created_at: last }),
  ];
  const session = sessionRow(project, {
    id, device_id: device, profile_id: device, started_at: first, last_event_at: last,
    duration_ms: Date.parse(last) - Date.parse(first), ended: true,
    entry_origin: views.length ? ORIGIN : '', entry_path: views[0]?.path ?? '',
    exit_origin: views.length ? ORIGIN : '', exit_path: views[views.length - 1]?.path ?? '',
    screen_view_count: views.length, event_count: evs.length, is_bounce: views.length <= 1, is_bot: over.bot ?? false,
    country: over.country ?? '', updated_at: last,
  });
  return { session, events };
}

const sv = (at: string, path: string, durationMs: number | null, title = ''): Ev => ({ name: 'screen_view', at, path, title, durationMs });
const ev = (name: string, at: string, properties: Record<string, unknown> = {}): Ev => ({ name, at, properties });
const flow = (...names: string[]): Ev[] => names.map((name, i) => ({ name, at: `09:00:${String(i * 5).padStart(2, '0')}` }));

before(async () => {
  env = await new TestEnv('pagesflow').setup();
  app = await startApp(env, { api: true, worker: false });
  projectA = await env.project({ name: 'A' });
  projectB = await env.project({ name: 'B' });
  readers = await Promise.all([env.client(projectA, 'read'), env.client(projectA, 'read'), env.client(projectA, 'root')]);
  readB = await env.client(projectB, 'read');
  const all = [
    // Pages day. S1: /home 30 s, /pricing 60 s, signup, /thanks 150 s, /pricing again (last view).
    seeded(projectA, PAGES_DAY, [
      sv('10:00:00', '/home', 30_000, 'Home'), sv('10:00:30', '/pricing', 60_000, 'Pricing'), ev('signup', '10:01:30'),
      sv('10:02:00', '/thanks', 150_000), sv('10:04:30', '/pricing', null, 'Pricing'),
    ], { country: 'DE' }),
    // S2: /home 10 s, /pricing (last), revenue "10.5".
    seeded(projectA, PAGES_DAY, [sv('11:00:00', '/home', 10_000, 'Home'), sv('11:00:10', '/pricing', 5_000), ev('revenue', '11:00:15', { __revenue: '10.5' })]),
    // S3: one view of /pricing: a bounce.
    seeded(projectA, PAGES_DAY, [sv('12:00:00', '/pricing', null)]),
    // S4: /home 5 s then a click and a revenue of 25: one view, a bounce; the latest title of /home.
    seeded(projectA, PAGES_DAY, [
      sv('13:00:00', '/home', 5_000, 'Home v2'), ev('click', '13:00:05'), ev('revenue', '13:00:06', { __revenue: 25 }), ev('revenue', '13:00:07', { __revenue: 'abc' }),
    ]),
    // S8: no page view at all: the entry / exit row ''.
    seeded(projectA, PAGES_DAY, [ev('signup', '14:00:00'), ev('purchase', '14:01:00')]),
    // never counted: a bot session, project B, another day
    seeded(projectA, PAGES_DAY, [sv('15:00:00', '/home', 1_000, 'Bot'), sv('15:00:01', '/bot-page', null), ev('revenue', '15:00:02', { __revenue: 99 })], { bot: true }),
    seeded(projectB, PAGES_DAY, [sv('16:00:00', '/home', 7_000, 'B home'), sv('16:00:07', '/b-only', null)]),
    seeded(projectA, '2025-03-12', [sv('10:00:00', '/home', 2_000), sv('10:00:02', '/later', null)]),

    // Flow day: the event names of each session (session_start / session_end around them).
    seeded(projectA, FLOW_DAY, flow('screen_view', 'signup', 'screen_view', 'purchase'), { country: 'DE' }), // F1
    seeded(projectA, FLOW_DAY, flow('screen_view', 'screen_view', 'signup', 'purchase')), // F2
    seeded(projectA, FLOW_DAY, flow('signup', 'screen_view')), // F3
    seeded(projectA, FLOW_DAY, flow('screen_view', 'purchase')), // F4
    seeded(projectA, FLOW_DAY, flow('screen_view', 'signup')), // F5
    seeded(projectA, FLOW_DAY, flow('signup')), // F7
    seeded(projectA, FLOW_DAY, flow('screen_view', 'signup', 'logout', 'purchase'), { bot: true }),
    seeded(projectB, FLOW_DAY, flow('signup', 'hack', 'purchase')),
  ];
  await insertEvents(env.db, all.flatMap((s) => s.events));
  await insertSessions(env.db, all.map((s) => s.session));
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

/** GET as one of project A's readers in turn (each has its own 100 requests / 10 s). */
async function askA(route: string, query: Record<string, string | string[]> = {}) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) for (const x of [v].flat()) params.append(k, x);
  const qs = params.toString();
  return get(`${app.url}/insights/${projectA}/${route}${qs ? `?${qs}` : ''}`, readers[calls++ % readers.length]!);
}

const pagesDay = { startDate: PAGES_DAY, endDate: PAGES_DAY };
const flowDay = { startDate: FLOW_DAY, endDate: FLOW_DAY };

test('pages/entry_exit: entry and exit pages by sessions, with their sessions\' views and revenue', async () => {
  const entry = await askA('pages/entry_exit', pagesDay);
  assert.equal(entry.status, 200, JSON.stringify(entry.body));
  // /home: S1 (4 views), S2 (2, revenue 10.5), S4 (1, revenue 25; "abc" is no revenue); then
  // ties of 1 by path: '' (S8) before /pricing (S3).
  assert.deepEqual(entry.body, [
    { origin: ORIGIN, path: '/home', sessions: 3, pageviews: 7, revenue: 35.5 },
    { origin: '', path: '', sessions: 1, pageviews: 0, revenue: 0 },
    { origin: ORIGIN, path: '/pricing', sessions: 1, pageviews: 1, revenue: 0 },
  ]);
  const explicit = await askA('pages/entry_exit', { ...pagesDay, mode: 'entry' });
  assert.deepEqual(explicit.body, entry.body);
  const exit = await askA('pages/entry_exit', { ...pagesDay, mode: 'exit' });
  // /pricing: S1 (4 views), S2 (2), S3 (1); then '' (S8), /home (S4).
  assert.deepEqual(exit.body, [
    { origin: ORIGIN, path: '/pricing', sessions: 3, pageviews: 7, revenue: 10.5 },
    { origin: '', path: '', sessions: 1, pageviews: 0, revenue: 0 },
    { origin: ORIGIN, path: '/home', sessions: 1, pageviews: 1, revenue: 25 },
  ]);
  // A session-level filter: S1 only.
  const de = await askA('pages/entry_exit', { ...pagesDay, mode: 'exit', filters: JSON.stringify([{ name: 'country', operator: 'is', value: ['DE'] }]) });
  assert.deepEqual(de.body, [{ origin: ORIGIN, path: '/pricing', sessions: 1, pageviews: 4, revenue: 0 }]);
  // Project B sees only its own session; the bot's /home and the other day's never appear.
  const b = await get(`${app.url}/insights/${projectB}/pages/entry_exit?startDate=${PAGES_DAY}&endDate=${PAGES_DAY}`, readB);
  assert.deepEqual(b.body, [{ origin: ORIGIN, path: '/home', sessions: 1, pageviews: 2, revenue: 0 }]);
  const later = await askA('pages/entry_exit', { startDate: '2025-03-12', endDate: '2025-03-12', mode: 'exit' });
  assert.deepEqual(later.body, [{ origin: ORIGIN, path: '/later', sessions: 1, pageviews: 2, revenue: 0 }]);
});

test('pages/entry_exit: the default period is the last 30 days', async () => {
  const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
  const recent = seeded(projectB, day(20), [sv('12:00:00', '/recent', null)]);
  const old = seeded(projectB, day(40), [sv('12:00:00', '/old', null)]);
  await insertEvents(env.db, [...recent.events, ...old.events]);
  await insertSessions(env.db, [recent.session, old.session]);
  const r = await get(`${app.url}/insights/${projectB}/pages/entry_exit`, readB);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body, [{ origin: ORIGIN, path: '/recent', sessions: 1, pageviews: 1, revenue: 0 }]);
});

/** The performance row of a page with its hand-computed numbers. */
const perf = (path: string, title: string, sessions: number, pageviews: number, avg: number, bounce: number) => ({
  origin: ORIGIN, path, title, sessions, pageviews, avg_duration: avg, bounce_rate: bounce,
  seo_signals: { high_bounce: bounce > 70, low_engagement: avg < 60, good_landing_page: bounce < 40 && avg > 120 },
});
// /home: S1, S2, S4 viewed it (3 views: 30, 10, 5 s: 15 s), all entered on it, S4 bounced: 33.33.
const HOME = perf('/home', 'Home v2', 3, 3, 15, 33.33);
// /pricing: S1 (twice), S2, S3; timed views 60 s and 5 s: 32.5 s; only S3 entered on it and bounced: 100.
const PRICING = perf('/pricing', 'Pricing', 3, 4, 32.5, 100);
// /thanks: S1 once, 150 s; nobody entered on it: 0.
const THANKS = perf('/thanks', '', 1, 1, 150, 0);

test('pages/performance: per page sessions, views, time on page and bounce rate as /pages counts them', async () => {
  const r = await askA('pages/performance', pagesDay);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body, { total_pages: 3, shown: 3, pages: [HOME, PRICING, THANKS] });
  assert.deepEqual(HOME.seo_signals, { high_bounce: false, low_engagement: true, good_landing_page: false });
  assert.deepEqual(PRICING.seo_signals, { high_bounce: true, low_engagement: true, good_landing_page: false });
  assert.deepEqual(THANKS.seo_signals, { high_bounce: false, low_engagement: false, good_landing_page: true });
  // the same numbers as /pages
  const pages = await askA('pages', pagesDay);
  assert.equal(pages.status, 200);
  assert.deepEqual(
    pages.body.map((p: Record<string, unknown>) => [p.path, p.title, p.sessions, p.pageviews, p.avg_duration, p.bounce_rate]),
    [HOME, PRICING, THANKS].map((p) => [p.path, p.title, p.sessions, p.pageviews, p.avg_duration, p.bounce_rate]),
  );
});

test('pages/performance: sortBy, sortOrder, limit and search', async () => {
  const ask = async (query: Record<string, string>) => {
    const r = await askA('pages/performance', { ...pagesDay, ...query });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body as { total_pages: number; shown: number; pages: Array<{ path: string }> };
  };
  assert.deepEqual((await ask({ sortBy: 'pageviews' })).pages, [PRICING, HOME, THANKS]);
  assert.deepEqual((await ask({ sortBy: 'avg_duration', sortOrder: 'asc' })).pages, [HOME, PRICING, THANKS]);
  assert.deepEqual(await ask({ sortBy: 'bounce_rate', limit: '2' }), { total_pages: 3, shown: 2, pages: [PRICING, HOME] });
  assert.deepEqual((await ask({ sortBy: 'sessions', sortOrder: 'asc' })).pages, [THANKS, HOME, PRICING]);
  // search: case-sensitive, in path, origin or title ('Home v2' is /home's title, its path is lower case)
  assert.deepEqual(await ask({ search: 'Home' }), { total_pages: 1, shown: 1, pages: [HOME] });
  assert.deepEqual(await ask({ search: 'pric' }), { total_pages: 1, shown: 1, pages: [PRICING] });
  assert.deepEqual((await ask({ search: 'a.test', limit: '1' })), { total_pages: 3, shown: 1, pages: [HOME] });
  assert.deepEqual(await ask({ search: '%' }), { total_pages: 0, shown: 0, pages: [] });
  // a session-level filter: S1's views only (it entered on /home and did not bounce)
  const de = await ask({ filters: JSON.stringify([{ name: 'country', operator: 'is', value: ['DE'] }]) });
  assert.deepEqual(de.pages, [perf('/home', 'Home', 1, 1, 30, 0), perf('/pricing', 'Pricing', 1, 2, 60, 0), perf('/thanks', '', 1, 1, 150, 0)]);
  // bots, project B and the other day never count
  const b = await get(`${app.url}/insights/${projectB}/pages/performance?startDate=${PAGES_DAY}&endDate=${PAGES_DAY}`, readB);
  assert.deepEqual(b.body.pages.map((p: { path: string; title: string }) => [p.path, p.title]), [['/b-only', ''], ['/home', 'B home']]);
});

test('user_flow after an event: nodes, links and counts (session_start / session_end are not events)', async () => {
  const r = await askA('user_flow', { ...flowDay, startEvent: 'signup' });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal('endEvent' in r.body, false); // only when asked
  // After signup: F1 signup > screen_view > purchase, F2 signup > purchase, F3 signup > screen_view;
  // F5 and F7 end on signup (no flow). purchase ends two paths: one node at the later step.
  assert.deepEqual(r.body, {
    mode: 'after', startEvent: 'signup', node_count: 3, link_count: 3,
    nodes: [
      { id: 'signup::step1', label: 'signup', nodeColor: '#2563EB', percentage: 100, value: 3, step: 1 },
      { id: 'screen_view::step2', label: 'screen_view', nodeColor: '#2563EB', percentage: 66.67, value: 2, step: 2 },
      { id: 'purchase::final', label: 'purchase', nodeColor: '#2563EB', percentage: 66.67, value: 2, step: 3 },
    ],
    links: [
      { source: 'signup::step1', target: 'screen_view::step2', value: 2 },
      { source: 'signup::step1', target: 'purchase::final', value: 1 },
      { source: 'screen_view::step2', target: 'purchase::final', value: 1 },
    ],
  });
  // steps=2: one step after signup; each last node stays (two different events).
  const two = await askA('user_flow', { ...flowDay, startEvent: 'signup', steps: '2' });
  assert.deepEqual(two.body.nodes.map((n: { id: string; value: number; percentage: number }) => [n.id, n.value, n.percentage]), [
    ['signup::step1', 3, 100], ['screen_view::step2', 2, 66.67], ['purchase::step2', 1, 33.33],
  ]);
  assert.deepEqual(two.body.links, [
    { source: 'signup::step1', target: 'screen_view::step2', value: 2 },
    { source: 'signup::step1', target: 'purchase::step2', value: 1 },
  ]);
  // a session-level filter: F1 only
  const de = await askA('user_flow', { ...flowDay, startEvent: 'signup', filters: JSON.stringify([{ name: 'country', operator: 'is', value: ['DE'] }]) });
  assert.deepEqual(de.body.nodes.map((n: { id: string; value: number }) => [n.id, n.value]), [['signup::step1', 1], ['screen_view::step2', 1], ['purchase::step3', 1]]);
  assert.equal(de.body.link_count, 2);
});

test('user_flow before and between events', async () => {
  const before = await askA('user_flow', { ...flowDay, startEvent: 'purchase', mode: 'before' });
  assert.equal(before.status, 200, JSON.stringify(before.body));
  // Up to purchase: F1 screen_view > signup > screen_view > purchase, F2 screen_view > signup >
  // purchase, F4 screen_view > purchase. From signup (step 2) the ties go by name.
  assert.deepEqual(before.body, {
    mode: 'before', startEvent: 'purchase', node_count: 4, link_count: 5,
    nodes: [
      { id: 'screen_view::step1', label: 'screen_view', nodeColor: '#2563EB', percentage: 100, value: 3, step: 1 },
      { id: 'signup::step2', label: 'signup', nodeColor: '#2563EB', percentage: 66.67, value: 2, step: 2 },
      { id: 'screen_view::step3', label: 'screen_view', nodeColor: '#2563EB', percentage: 33.33, value: 1, step: 3 },
      { id: 'purchase::final', label: 'purchase', nodeColor: '#2563EB', percentage: 100, value: 3, step: 4 },
    ],
    links: [
      { source: 'screen_view::step1', target: 'signup::step2', value: 2 },
      { source: 'screen_view::step1', target: 'purchase::final', value: 1 },
      { source: 'signup::step2', target: 'purchase::final', value: 1 },
      { source: 'signup::step2', target: 'screen_view::step3', value: 1 },
      { source: 'screen_view::step3', target: 'purchase::final', value: 1 },
    ],
  });
  const between = await askA('user_flow', { ...flowDay, startEvent: 'signup', endEvent: 'purchase', mode: 'between' });
  assert.equal(between.status, 200, JSON.stringify(between.body));
  // F1 signup > screen_view > purchase, F2 signup > purchase; F3 never reaches purchase.
  assert.deepEqual(between.body, {
    mode: 'between', startEvent: 'signup', endEvent: 'purchase', node_count: 3, link_count: 3,
    nodes: [
      { id: 'signup::step1', label: 'signup', nodeColor: '#2563EB', percentage: 100, value: 2, step: 1 },
      { id: 'screen_view::step2', label: 'screen_view', nodeColor: '#2563EB', percentage: 50, value: 1, step: 2 },
      { id: 'purchase::final', label: 'purchase', nodeColor: '#2563EB', percentage: 100, value: 2, step: 3 },
    ],
    links: [
      { source: 'signup::step1', target: 'purchase::final', value: 1 },
      { source: 'signup::step1', target: 'screen_view::step2', value: 1 },
      { source: 'screen_view::step2', target: 'purchase::final', value: 1 },
    ],
  });
});

test('user_flow: exclude and include, repeated or as a JSON array; no start event: empty', async () => {
  // Without screen_view: F1 and F2 are signup > purchase; F3 and F5 end on signup.
  const expected = {
    mode: 'after', startEvent: 'signup', node_count: 2, link_count: 1,
    nodes: [
      { id: 'signup::step1', label: 'signup', nodeColor: '#2563EB', percentage: 100, value: 2, step: 1 },
      { id: 'purchase::step2', label: 'purchase', nodeColor: '#2563EB', percentage: 100, value: 2, step: 2 },
    ],
    links: [{ source: 'signup::step1', target: 'purchase::step2', value: 2 }],
  };
  const queries: Array<Record<string, string | string[]>> = [
    { exclude: ['screen_view', 'logout'] },
    { exclude: '["screen_view"]' },
    { include: 'purchase' },
    { include: '["purchase","hack"]', exclude: 'purchase' }, // include wins
  ];
  for (const query of queries) {
    const r = await askA('user_flow', { ...flowDay, startEvent: 'signup', ...query });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body, expected, JSON.stringify(query));
  }
  for (const startEvent of ['nope', 'logout', 'hack', 'session_start']) {
    const r = await askA('user_flow', { ...flowDay, startEvent });
    assert.deepEqual(r.body, { mode: 'after', startEvent, node_count: 0, link_count: 0, nodes: [], links: [] }, startEvent);
  }
});

test('bad parameters: 400 naming the parameter', async () => {
  const cases: Array<[string, Record<string, string | string[]>, string]> = [
    ['user_flow', {}, 'startEvent'],
    ['user_flow', { startEvent: '' }, 'startEvent'],
    ['user_flow', { startEvent: 'a\u0000' }, 'startEvent'],
    ['user_flow', { startEvent: 'signup', mode: 'between' }, 'endEvent'],
    ['user_flow', { startEvent: 'signup', mode: 'sideways' }, 'mode'],
    ['user_flow', { startEvent: 'signup', steps: '1' }, 'steps'],
    ['user_flow', { startEvent: 'signup', steps: '11' }, 'steps'],
    ['user_flow', { startEvent: 'signup', steps: 'five' }, 'steps'],
    ['user_flow', { startEvent: 'signup', exclude: '[1,2]' }, 'exclude'],
    ['user_flow', { startEvent: 'signup', include: Array.from({ length: 101 }, (_, i) => `e${i}`) }, 'include'],
    ['user_flow', { startEvent: 'signup', range: 'forever' }, 'range'],
    ['pages/entry_exit', { mode: 'middle' }, 'mode'],
    ['pages/entry_exit', { startDate: PAGES_DAY }, 'endDate'],
    ['pages/entry_exit', { filters: 'not json' }, 'filters'],
    ['pages/performance', { sortBy: 'title' }, 'sortBy'],
    ['pages/performance', { sortOrder: 'up' }, 'sortOrder'],
    ['pages/performance', { limit: '501' }, 'limit'],
    ['pages/performance', { limit: '0' }, 'limit'],
    ['pages/performance', { search: 'x'.repeat(2001) }, 'search'],
    ['pages/performance', { filters: JSON.stringify([{ name: 'nope', operator: 'is', value: ['x'] }]) }, 'filters'],
  ];
  for (const [route, query, param] of cases) {
    const r = await askA(route, query);
    assert.equal(r.status, 400, `${route} ${JSON.stringify(query).slice(0, 80)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error, 'Bad Request');
    assert.equal(typeof r.body.message, 'string');
    assert.ok(r.body.details.issues.some((i: { path: string[] }) => i.path[0] === param), `${route} ${param}: ${JSON.stringify(r.body)}`);
  }
});

test('the two-segment pages routes leave /pages, the breakdowns and unknown routes as they were', async () => {
  const country = await askA('country', pagesDay);
  assert.equal(country.status, 200);
  // S1 (DE); S2, S3, S4, S8 without a country
  assert.deepEqual(country.body.map((r: { name: string; sessions: number }) => [r.name, r.sessions]), [['', 4], ['DE', 1]]);
  assert.equal((await askA('nonsense')).status, 404);
  assert.equal((await askA('pages/nonsense')).status, 404);
  assert.equal((await askA('pages', { limit: '1', ...pagesDay })).body.length, 1);
  // auth first: 401 without credentials, 403 for another project's client
  assert.equal((await get(`${app.url}/insights/${projectA}/user_flow`, null)).status, 401);
  assert.equal((await get(`${app.url}/insights/${projectA}/pages/entry_exit`, readB)).status, 403);
  assert.equal((await get(`${app.url}/insights/no-such-project/pages/performance`, readers[2]!)).status, 404);
});
