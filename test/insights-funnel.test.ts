// OpenPanel's funnel route, GET /insights/{projectId}/funnel, over a seeded scenario whose
// answers are worked out by hand below: sessions cut by 30-minute gaps (groupBy session_id),
// identified users across devices (groupBy profile_id, a session's anonymous events included),
// conversions inside and beyond the window, steps out of order, a filtered funnel, bots and
// another project's events left out; the 400s naming the parameter, and the index it reads.
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, startApp, get, type Credentials } from './support/harness';
import { eventRow, insertEvents, insertSessions, sessionRow, type EventRow, type SessionRow } from './support/export-server';
import { funnelSql, parseFunnelParams } from '../internal/insights/funnel';
import { SqlParams } from '../internal/query/filters';
import { readStepsSummary } from '../internal/insights/funnel-steps';
import { fillSessionSteps } from '../internal/store/session-steps';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectA: string;
let projectB: string;
let readA: Credentials;
let writeA: Credentials;
let readB: Credentials;

const P = 'view_pricing';
const S = 'signup';
const B = 'purchase';
const PERIOD = { startDate: '2024-03-01', endDate: '2024-03-07' }; // [03-01 00:00, 03-08 00:00) UTC

interface Ev { name: string; at: string; profile?: string }

/**
 * One device's session: its events (profile_id the device id unless given), and its sessions
 * row as the sessionizer writes it (the profile an event of it identified, else the device).
 */
function session(project: string, device: string, country: string, events: Ev[], o: { bot?: boolean; sessionless?: boolean } = {}): { events: EventRow[]; session?: SessionRow } {
  const id = o.sessionless ? null : randomUUID();
  const rows = events.map((e) => eventRow(project, {
    name: e.name, created_at: e.at, device_id: device, profile_id: e.profile ?? device, session_id: id, country, is_bot: o.bot ?? false,
  }));
  if (id === null) return { events: rows };
  const first = events[0]!.at;
  const last = events[events.length - 1]!.at;
  const identified = events.find((e) => e.profile && e.profile !== device)?.profile;
  return {
    events: rows,
    session: sessionRow(project, {
      id, device_id: device, profile_id: identified ?? device, started_at: first, last_event_at: last, updated_at: last,
      duration_ms: Date.parse(last) - Date.parse(first), event_count: events.length, ended: true, country, is_bot: o.bot ?? false,
    }),
  };
}

before(async () => {
  env = await new TestEnv('funnel').setup();
  app = await startApp(env, { api: true, worker: false });
  projectA = await env.project({ name: 'A' });
  projectB = await env.project({ name: 'B' });
  [readA, writeA, readB] = await Promise.all([env.client(projectA, 'read'), env.client(projectA, 'write'), env.client(projectB, 'read')]);
  const a = (device: string, country: string, events: Ev[], o?: { bot?: boolean; sessionless?: boolean }) => session(projectA, device, country, events, o);
  const all = [
    // S1: the whole funnel in one session (a screen view between steps changes nothing)
    a('d1', 'DE', [{ name: P, at: '2024-03-02T10:00:00Z' }, { name: 'screen_view', at: '2024-03-02T10:02:00Z' }, { name: S, at: '2024-03-02T10:05:00Z' }, { name: B, at: '2024-03-02T10:10:00Z' }]),
    // S2: pricing, signup, pricing again
    a('d2', 'DE', [{ name: P, at: '2024-03-02T10:00:00Z' }, { name: S, at: '2024-03-02T10:20:00Z' }, { name: P, at: '2024-03-02T10:30:00Z' }]),
    // S3: signup BEFORE pricing: only step 1 counts
    a('d3', 'FR', [{ name: S, at: '2024-03-02T10:00:00Z' }, { name: P, at: '2024-03-02T10:05:00Z' }, { name: B, at: '2024-03-02T10:10:00Z' }]),
    // S4: pricing only
    a('d4', 'FR', [{ name: P, at: '2024-03-02T10:00:00Z' }]),
    // S5a and S5b: one device, 45 minutes between signup and purchase: two sessions
    a('d5', 'DE', [{ name: P, at: '2024-03-02T12:00:00Z' }, { name: S, at: '2024-03-02T12:10:00Z' }]),
    a('d5', 'DE', [{ name: B, at: '2024-03-02T12:55:00Z' }]),
    // S6 (laptop): anonymous pricing, then signup as alice: the session is alice's; S7 (phone): alice buys 19 h later
    a('d6', 'DE', [{ name: P, at: '2024-03-02T14:00:00Z' }, { name: S, at: '2024-03-02T14:05:00Z', profile: 'alice' }]),
    a('d7', 'US', [{ name: B, at: '2024-03-03T09:00:00Z', profile: 'alice' }]),
    // S8, S9: bob buys on another device 25 h after his first step: beyond 24 h, inside 48 h
    a('d8', 'DE', [{ name: P, at: '2024-03-04T08:00:00Z', profile: 'bob' }, { name: S, at: '2024-03-04T08:10:00Z', profile: 'bob' }]),
    a('d9', 'DE', [{ name: B, at: '2024-03-05T09:00:00Z', profile: 'bob' }]),
    // S10, S11: carol buys exactly 24 h after her first step (the window's bound is inside)
    a('d10', 'FR', [{ name: P, at: '2024-03-05T00:00:00Z', profile: 'carol' }, { name: S, at: '2024-03-05T00:10:00Z', profile: 'carol' }]),
    a('d10', 'FR', [{ name: B, at: '2024-03-06T00:00:00Z', profile: 'carol' }]),
    // S12: erin's pricing; her signup is a server-side event without a session
    a('d11', 'FR', [{ name: P, at: '2024-03-06T10:00:00Z', profile: 'erin' }]),
    a('d11', 'FR', [{ name: S, at: '2024-03-06T10:30:00Z', profile: 'erin' }], { sessionless: true }),
    // S13: pricing before the period, signup inside it
    a('d12', 'FR', [{ name: P, at: '2024-02-29T23:50:00Z' }, { name: S, at: '2024-03-01T00:05:00Z' }]),
    // S14: pricing and signup at the same instant: not one after the other
    a('d13', 'FR', [{ name: P, at: '2024-03-06T12:00:00Z' }, { name: S, at: '2024-03-06T12:00:00Z' }]),
    // S15: open, open again, save at the same instant as the second open
    a('d14', 'FR', [{ name: 'open', at: '2024-03-06T15:00:00Z' }, { name: 'open', at: '2024-03-06T15:10:00Z' }, { name: 'save', at: '2024-03-06T15:10:00Z' }]),
    // a bot's whole funnel
    a('bot', 'DE', [{ name: P, at: '2024-03-02T10:00:00Z' }, { name: S, at: '2024-03-02T10:01:00Z' }, { name: B, at: '2024-03-02T10:02:00Z' }], { bot: true }),
    // project B's whole funnel
    session(projectB, 'dx', 'DE', [{ name: P, at: '2024-03-02T10:00:00Z' }, { name: S, at: '2024-03-02T10:01:00Z' }, { name: B, at: '2024-03-02T10:02:00Z' }]),
  ];
  await insertEvents(env.db, all.flatMap((x) => x.events));
  await insertSessions(env.db, all.flatMap((x) => (x.session ? [x.session] : [])));
  // Each session's funnel steps, as the sessionizer writes them (a new database: the funnels
  // by session read them).
  assert.ok((await fillSessionSteps(env.db)) >= 15);
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

type Query = Record<string, string | string[]>;
function url(project: string, query: Query): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) for (const x of Array.isArray(v) ? v : [v]) q.append(k, x);
  return `${app.url}/insights/${project}/funnel?${q}`;
}

async function funnel(query: Query, project = projectA, creds = readA) {
  const r = await get(url(project, { ...PERIOD, ...query }), creds);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

/** The expected answer: [users, conversionRateFromStart, dropoffPercent, isHighestDropoff] per step. */
function expected(names: string[], rows: Array<[number, number, number | null, boolean]>, overall: number) {
  return {
    steps: rows.map(([users, conversionRateFromStart, dropoffPercent, isHighestDropoff], i) => ({
      step: i + 1, eventName: names[i], users, conversionRateFromStart, dropoffPercent, isHighestDropoff,
    })),
    totalUsers: rows[0]![0],
    completedUsers: rows[rows.length - 1]![0],
    overallConversionRate: overall,
  };
}

/** The funnels by session and their answers, worked out by hand (read from events, then from the sessions' steps). */
function bySession(): Array<[Query, ReturnType<typeof expected>]> {
  return [
    // step 1: S1 S2 S3 S4 S5a S6 S8 S10 S12 S14 = 10 (S13's pricing is before the period; bot and project B not counted)
    // step 2: S1 S2 S5a S6 S8 S10 = 6 (S3 signed up before pricing, S14 at the same instant, erin's signup has no session)
    // step 3: S1 = 1 (the other purchases are in later sessions)
    // drop-off: 4 of 10 = 40 %, 5 of 6 = 83.33 % (the largest count: step 2)
    [{ steps: [P, S, B] }, expected([P, S, B], [[10, 100, 40, false], [6, 60, 83.33, true], [1, 10, null, false]], 10)],
    // purchase then signup: sessions with a purchase S1 S3 S5b S7 S9 S11 = 6; none signed up after it
    [{ steps: [B, S] }, expected([B, S], [[6, 100, 100, true], [0, 0, null, false]], 0)],
    // pricing twice: only S2 viewed pricing a second time
    [{ steps: [P, P] }, expected([P, P], [[10, 100, 90, true], [1, 10, null, false]], 10)],
    // S15: save follows the first open (not the second, at the same instant): the session converts
    [{ steps: ['open', 'save'] }, expected(['open', 'save'], [[1, 100, 0, false], [1, 100, null, false]], 100)],
  ];
}

test('groupBy session_id (default): sessions that did the steps in order; 30-minute gaps cut sessions', async () => {
  const want = bySession()[0]![1];
  assert.deepEqual(await funnel({ steps: [P, S, B] }), want);
  assert.deepEqual(await funnel({ steps: [P, S, B], groupBy: 'session_id', windowHours: '24' }), want);
  // the same steps as one JSON array
  assert.deepEqual(await funnel({ steps: JSON.stringify([P, S, B]) }), want);
});

test('groupBy profile_id: a profile across its sessions and devices, its sessions\' anonymous events included', async () => {
  // step 1: d1 d2 d3 d4 d5 alice bob carol erin d13 = 10 (alice's pricing was anonymous on d6, in her session)
  // step 2: d1 d2 d5 alice bob carol erin = 7 (erin's server-side signup counts for her profile)
  // step 3 within 24 h: d1, d5 (next session, 55 min), alice (19 h, other device), carol (exactly 24 h) = 4; bob (25 h) not
  // drop-off: 3 of 10 = 30 %, 3 of 7 = 42.86 %: equal counts, the first is the highest
  assert.deepEqual(
    await funnel({ steps: [P, S, B], groupBy: 'profile_id' }),
    expected([P, S, B], [[10, 100, 30, true], [7, 70, 42.86, false], [4, 40, null, false]], 40),
  );
});

test('windowHours: a conversion beyond the window counts once the window covers it', async () => {
  // 48 h: bob's purchase 25 h after his first step counts: 5 of 10; drop-off 3 of 10, 2 of 7 = 28.57 %
  assert.deepEqual(
    await funnel({ steps: [P, S, B], groupBy: 'profile_id', windowHours: '48' }),
    expected([P, S, B], [[10, 100, 30, true], [7, 70, 28.57, false], [5, 50, null, false]], 50),
  );
  // 1 h: alice (19 h) and carol (24 h) no longer convert; d1 (10 min) and d5 (55 min) do
  assert.deepEqual(
    await funnel({ steps: [P, S, B], groupBy: 'profile_id', windowHours: '1' }),
    expected([P, S, B], [[10, 100, 30, false], [7, 70, 71.43, true], [2, 20, null, false]], 20),
  );
});

test('steps out of order are not counted; a repeated step needs a later event of its own; ties', async () => {
  for (const [query, want] of bySession().slice(1)) assert.deepEqual(await funnel(query), want, JSON.stringify(query));
});

test('filters apply to every step (each event\'s own columns): country is DE', async () => {
  const filters = JSON.stringify([{ name: 'country', operator: 'is', value: ['DE'] }]);
  // sessions S1 S2 S5a S6 S8 reach step 2, S1 buys in-session
  assert.deepEqual(
    await funnel({ steps: [P, S, B], filters }),
    expected([P, S, B], [[5, 100, 0, false], [5, 100, 80, true], [1, 20, null, false]], 20),
  );
  // profiles d1 d2 d5 alice bob; alice bought in the US, bob too late: d1 and d5 complete
  assert.deepEqual(
    await funnel({ steps: [P, S, B], filters, groupBy: 'profile_id' }),
    expected([P, S, B], [[5, 100, 0, false], [5, 100, 60, true], [2, 40, null, false]], 40),
  );
});

test('no matching events: every step at 0, as OpenPanel answers; another project sees only its own', async () => {
  assert.deepEqual(await funnel({ steps: ['nope', 'nada'] }), expected(['nope', 'nada'], [[0, 0, 0, false], [0, 0, null, false]], 0));
  // the default range (30d) does not reach the 2024 events
  const r = await get(url(projectA, { steps: [P, S] }), readA);
  assert.deepEqual(r.body, expected([P, S], [[0, 0, 0, false], [0, 0, null, false]], 0));
  // project B: its one session completes
  assert.deepEqual(await funnel({ steps: [P, S, B] }, projectB, readB), expected([P, S, B], [[1, 100, 0, false], [1, 100, 0, false], [1, 100, null, false]], 100));
});

test('bad parameters: 400 naming the parameter', async () => {
  const eleven = Array.from({ length: 11 }, (_, i) => `e${i}`);
  const cases: Array<[Query, string]> = [
    [{}, 'steps'],
    [{ steps: P }, 'steps'], // one step
    [{ steps: JSON.stringify([P]) }, 'steps'],
    [{ steps: eleven }, 'steps'],
    [{ steps: JSON.stringify(eleven) }, 'steps'],
    [{ steps: '[view_pricing' }, 'steps'],
    [{ steps: JSON.stringify([P, 3]) }, 'steps'],
    [{ steps: [P, ''] }, 'steps'],
    [{ steps: [P, 'session_start'] }, 'steps'],
    [{ steps: ['session_end', S] }, 'steps'],
    [{ steps: [P, S], windowHours: '0' }, 'windowHours'],
    [{ steps: [P, S], windowHours: '721' }, 'windowHours'],
    [{ steps: [P, S], windowHours: '1.5' }, 'windowHours'],
    [{ steps: [P, S], windowHours: '' }, 'windowHours'],
    [{ steps: [P, S], groupBy: 'device_id' }, 'groupBy'],
    [{ steps: [P, S], range: '2d' }, 'range'],
    [{ steps: [P, S], filters: '[{"name":"nope","operator":"is","value":["x"]}]' }, 'filters'],
    [{ steps: [P, S], filters: '[{"name":"country","operator":"regex","value":["("]}]' }, 'filters'],
  ];
  for (const [query, param] of cases) {
    const r = await get(url(projectA, query), readA);
    assert.equal(r.status, 400, `${JSON.stringify(query).slice(0, 100)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error, 'Bad Request');
    assert.ok(r.body.message.startsWith(param), `${JSON.stringify(query).slice(0, 100)}: ${r.body.message}`);
    assert.ok(r.body.details.issues.some((i: { path: string[] }) => i.path[0] === param), JSON.stringify(r.body));
  }
});

test('auth: 401 without credentials, 403 for a write client or another project, 404 for an unknown project', async () => {
  const query = { ...PERIOD, steps: [P, S] };
  assert.equal((await get(url(projectA, query), null)).status, 401);
  assert.equal((await get(url(projectA, query), writeA)).status, 403);
  assert.equal((await get(url(projectB, query), readA)).status, 403);
  // auth comes before parameters
  assert.equal((await get(url(projectA, {}), null)).status, 401);
  const root = await env.client(projectA, 'root');
  const unknown = await get(url('no-such-project', query), root);
  assert.equal(unknown.status, 404);
  assert.deepEqual(Object.keys(unknown.body).sort(), ['error', 'message']);
});

test('cost: only the step names in the period, through events_name_time_idx', async () => {
  for (const groupBy of ['session_id', 'profile_id']) {
    const q = new URLSearchParams({ ...PERIOD, groupBy });
    for (const s of [P, S, B]) q.append('steps', s);
    const params = parseFunnelParams(q);
    const p = new SqlParams();
    const sql = funnelSql(projectA, params, new Date('2024-03-01T00:00:00Z'), new Date('2024-03-08T00:00:00Z'), p);
    const client = await env.db.connect();
    try {
      // statistics as autovacuum keeps them; the tables are tiny: no sequential scan, to see the
      // index path the query takes
      await client.query('ANALYZE events, sessions');
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_seqscan = off');
      const { rows } = await client.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${sql}`, p.values);
      await client.query('ROLLBACK');
      const scans: Array<Record<string, string>> = [];
      const walk = (node: Record<string, unknown>) => {
        const relation = node['Relation Name'];
        if (typeof relation === 'string' && relation.startsWith('events')) scans.push(node as Record<string, string>);
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
      };
      walk((rows[0]!['QUERY PLAN'] as Array<{ Plan: Record<string, unknown> }>)[0]!.Plan);
      // one partition (March 2024; February's holds S13's pricing), by name and time
      assert.equal(scans.length, 1, JSON.stringify(scans));
      const scan = scans[0]!;
      // events_name_time_idx (sql/039): the steps' events with their session, profile and bot flag
      assert.match(scan['Node Type']!, /^Index (Only )?Scan$/, JSON.stringify(scan));
      assert.match(scan['Index Name']!, /project_id_name_created_at_session_id/);
      const cond = scan['Index Cond']!;
      assert.match(cond, /name = n\.name/);
      assert.match(cond, /created_at >=/);
      assert.match(cond, /created_at </);
    } finally {
      client.release();
    }
  }
});

test("the funnels by session read the sessions' steps; from the events alone (sessions written before the steps were kept) the answers are the same", async () => {
  const params = parseFunnelParams(new URLSearchParams({ steps: JSON.stringify([P, S, B]), ...PERIOD }));
  const summary = await readStepsSummary(env.db, projectA, params, new Date('2024-03-01T00:00:00Z'), new Date('2024-03-08T00:00:00Z'));
  // every session but S13 (its pricing is before the period) is answered from its steps
  assert.equal(summary!.rawSessionIds.length, 1);
  assert.equal(summary!.reached[0], 10);
  await env.db.query('UPDATE session_steps_since SET since = now()');
  try {
    assert.equal(await readStepsSummary(env.db, projectA, params, new Date('2024-03-01T00:00:00Z'), new Date('2024-03-08T00:00:00Z')), null);
    for (const [query, want] of bySession()) assert.deepEqual(await funnel(query), want, JSON.stringify(query));
  } finally {
    await env.db.query("UPDATE session_steps_since SET since = '1970-01-01T00:00:00Z'");
  }
});
