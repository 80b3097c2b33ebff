// OpenPanel's event catalogue routes: /insights/{projectId}/events/names, events/properties and
// events/property_values, over seeded events whose answers are worked out by hand below; the
// read guard's refusals, 400s naming the parameter, and no other project's events.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, startApp, get, type Credentials } from './support/harness';
import { eventRow, insertEvents } from './support/export-server';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectA: string;
let projectB: string;
let readA: Credentials;
let rootA: Credentials;
let writeA: Credentials;
let readB: Credentials;

const ago = (min: number) => new Date(Date.now() - min * 60_000).toISOString();

before(async () => {
  env = await new TestEnv('evcatalog').setup();
  app = await startApp(env, { api: true, worker: false });
  projectA = await env.project({ name: 'A' });
  projectB = await env.project({ name: 'B' });
  [readA, rootA, writeA, readB] = await Promise.all([
    env.client(projectA, 'read'), env.client(projectA, 'root'), env.client(projectA, 'write'), env.client(projectB, 'read'),
  ]);
  const a = (name: string, min: number, properties: Record<string, unknown>, over: { is_bot?: boolean } = {}) =>
    eventRow(projectA, { name, created_at: ago(min), properties, ...over });
  await insertEvents(env.db, [
    a('signup', 20, { plan: 'pro', source: 'ads' }),
    a('signup', 19, { plan: 'free', source: '' }),
    a('signup', 18, { plan: 'pro' }),
    a('purchase', 17, { amount: 42, currency: 'EUR', nested: { a: 1 } }),
    a('purchase', 16, { amount: 7.5, currency: 'USD', flag: true, Ref: 'x' }),
    a('purchase', 15, { __duration_from: 'x' }),
    a('screen_view', 14, {}),
    a('screen_view', 13, {}),
    a('screen_view', 12, {}),
    a('screen_view', 11, {}),
    a('zeta', 10, { plan: 'team', z: null }),
    // never counted: the service's own session events, and bots
    a('session_start', 9, { x: '1' }),
    a('session_end', 9, { x: '1' }),
    a('botty', 8, { b: '1' }, { is_bot: true }),
    a('signup', 7, { plan: 'bot', botkey: 'y' }, { is_bot: true }),
    eventRow(projectB, { name: 'other_event', created_at: ago(6), properties: { secret: 'b' } }),
    eventRow(projectB, { name: 'signup', created_at: ago(5), properties: { plan: 'enterprise', bkey: 'z' } }),
  ]);
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

const url = (project: string, route: string, query: Record<string, string> = {}) =>
  `${app.url}/insights/${project}/events/${route}${Object.keys(query).length ? `?${new URLSearchParams(query)}` : ''}`;

test('events/names: the names, most frequent first, then by name (no bots, no session events)', async () => {
  for (const creds of [readA, rootA]) {
    const r = await get(url(projectA, 'names'), creds);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    // screen_view 4, purchase 3 and signup 3 (bots not counted; tie by name), zeta 1
    assert.deepEqual(r.body, ['screen_view', 'purchase', 'signup', 'zeta']);
    assert.ok(r.headers.get('x-ratelimit-limit'), 'rate-limit headers');
  }
  const b = await get(url(projectB, 'names'), readB);
  assert.deepEqual(b.body, ['other_event', 'signup']);
});

const ALL_PAIRS = [
  // byte order: upper case first
  { property_key: 'Ref', event_name: 'purchase' },
  { property_key: 'amount', event_name: 'purchase' },
  { property_key: 'currency', event_name: 'purchase' },
  { property_key: 'flag', event_name: 'purchase' },
  { property_key: 'nested', event_name: 'purchase' },
  { property_key: 'plan', event_name: 'signup' },
  { property_key: 'plan', event_name: 'zeta' },
  { property_key: 'source', event_name: 'signup' },
];

test('events/properties: (key, event name) pairs with a value, by key then name; columns', async () => {
  const r = await get(url(projectA, 'properties'), readA);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.properties, ALL_PAIRS);
  assert.deepEqual(r.body.columns, [
    'path', 'origin', 'referrer', 'referrer_name', 'referrer_type', 'country', 'city', 'region', 'os', 'os_version',
    'browser', 'browser_version', 'device', 'brand', 'model', 'profile_id',
  ]);
  assert.deepEqual((await get(url(projectA, 'properties', { eventName: '' }), readA)).body.properties, ALL_PAIRS);
  const signup = await get(url(projectA, 'properties', { eventName: 'signup' }), readA);
  assert.deepEqual(signup.body.properties, [
    { property_key: 'plan', event_name: 'signup' },
    { property_key: 'source', event_name: 'signup' },
  ]);
  for (const eventName of ['nope', 'session_start', 'botty', 'other_event']) {
    assert.deepEqual((await get(url(projectA, 'properties', { eventName }), readA)).body.properties, [], eventName);
  }
  const b = await get(url(projectB, 'properties'), readB);
  assert.deepEqual(b.body.properties, [
    { property_key: 'bkey', event_name: 'signup' },
    { property_key: 'plan', event_name: 'signup' },
    { property_key: 'secret', event_name: 'other_event' },
  ]);
});

test('events/property_values: distinct non-empty values, most recently seen first', async () => {
  const values = async (eventName: string, propertyKey: string, project = projectA, creds = readA) => {
    const r = await get(url(project, 'property_values', { eventName, propertyKey }), creds);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.event, eventName);
    assert.equal(r.body.property, propertyKey);
    return r.body.values as string[];
  };
  assert.deepEqual(await values('signup', 'plan'), ['pro', 'free']); // last seen 18 and 19 min ago; the bot's 'bot' not
  assert.deepEqual(await values('signup', 'source'), ['ads']);
  assert.deepEqual(await values('purchase', 'amount'), ['7.5', '42']);
  assert.deepEqual(await values('purchase', 'flag'), ['true']);
  assert.deepEqual(await values('purchase', 'nested'), ['{"a": 1}']);
  assert.deepEqual(await values('purchase', '__duration_from'), []);
  assert.deepEqual(await values('zeta', 'z'), []);
  assert.deepEqual(await values('session_start', 'x'), []);
  assert.deepEqual(await values('botty', 'b'), []);
  assert.deepEqual(await values('signup', 'botkey'), []);
  assert.deepEqual(await values('other_event', 'secret'), []); // project B's
  assert.deepEqual(await values('signup', 'plan', projectB, readB), ['enterprise']);
  assert.deepEqual(await values('signup', 'plan', projectB, rootA), ['enterprise']);
});

test('bad parameters: 400 naming the parameter', async () => {
  const cases: Array<[string, Record<string, string>, string]> = [
    ['property_values', { propertyKey: 'plan' }, 'eventName'],
    ['property_values', { eventName: 'signup' }, 'propertyKey'],
    ['property_values', { eventName: 'sig\u0000nup', propertyKey: 'plan' }, 'eventName'],
    ['property_values', { eventName: 'signup', propertyKey: 'p'.repeat(2001) }, 'propertyKey'],
    ['properties', { eventName: 'x'.repeat(2001) }, 'eventName'],
    ['properties', { eventName: '\u0000' }, 'eventName'],
  ];
  for (const [route, query, param] of cases) {
    const r = await get(url(projectA, route, query), readA);
    assert.equal(r.status, 400, `${route} ${JSON.stringify(query).slice(0, 80)}`);
    assert.equal(r.body.error, 'Bad Request');
    assert.equal(typeof r.body.message, 'string');
    assert.ok(r.body.details.issues.some((i: { path: string[] }) => i.path[0] === param), JSON.stringify(r.body));
  }
});

test('auth: 401 without or with wrong credentials, 403 for a write client or another project, 404 unknown project', async () => {
  for (const route of ['names', 'properties', 'property_values']) {
    const query: Record<string, string> = route === 'property_values' ? { eventName: 'signup', propertyKey: 'plan' } : {};
    const none = await get(url(projectA, route, query), null);
    assert.equal(none.status, 401);
    assert.equal(none.body.error, 'Unauthorized');
    assert.equal(typeof none.body.message, 'string');
    assert.equal((await get(url(projectA, route, query), { ...readA, clientSecret: 'wrong' })).status, 401);
    const write = await get(url(projectA, route, query), writeA);
    assert.equal(write.status, 403);
    assert.equal(typeof write.body.message, 'string');
    assert.equal((await get(url(projectB, route, query), readA)).status, 403);
    // an unknown project answers as the other insights routes do
    const pages = await get(`${app.url}/insights/no-such-project/pages`, rootA);
    const mine = await get(url('no-such-project', route, query), rootA);
    assert.equal(mine.status, pages.status);
    assert.equal(mine.status, 404);
    assert.deepEqual(Object.keys(mine.body).sort(), ['error', 'message']);
    // auth comes before parameters
    assert.equal((await get(url(projectA, 'property_values'), null)).status, 401);
  }
});
