// The ingest API against the real services: every track type reaches PostgreSQL with the
// right fields, the deviceId rules hold, and every 4xx answer has the shape of
// semantics.md "Responses".
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { TestEnv, startApp, post, get, track, waitFor, type Credentials } from './support/harness';

const CHROME_UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
const FIREFOX_UA = 'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectId: string;
let writer: Credentials;
let uniq = 0;
/** A fresh user-agent per call: its own device, so tests never share a session. */
const freshUa = () => `${CHROME_UA} tmtest/${++uniq}`;

before(async () => {
  env = await new TestEnv('ingapi').setup();
  app = await startApp(env);
  projectId = await env.project({ name: 'Ingest API' });
  writer = await env.client(projectId, 'write', 0);
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

async function eventRow(where: string, params: unknown[]): Promise<any> {
  return waitFor(async () => (await env.db.query(`SELECT * FROM events WHERE ${where}`, params)).rows[0], { what: `event row (${where})` });
}

async function profileRow(id: string, until: (row: any) => boolean = () => true): Promise<any> {
  return waitFor(async () => {
    const row = (await env.db.query('SELECT * FROM profiles WHERE project_id = $1 AND id = $2', [projectId, id])).rows[0];
    return row && until(row) ? row : undefined;
  }, { what: `profile ${id}` });
}

function assertAccepted(r: { status: number; body: any }): string {
  assert.equal(r.status, 202, JSON.stringify(r.body));
  assert.deepEqual(Object.keys(r.body), ['deviceId']);
  assert.match(r.body.deviceId, /^[0-9a-f]{32}$/);
  return r.body.deviceId;
}

describe('each operation reaches PostgreSQL', () => {
  test('track: name, properties without __ keys, groups, profile, __timestamp, page, UTM, referrer, geo and device', async () => {
    const at = new Date(Date.now() - 2 * 3600_000);
    const ua = freshUa();
    const sent = await post(`${app.url}/track`, track('purchase', {
      plan: 'pro', amount: 42, nested: { a: [1, 2] },
      __timestamp: at.toISOString(),
      __path: 'https://shop.example/p/1?utm_source=news&utm_medium=email&utm_campaign=spring&utm_term=shoes&utm_content=banner',
      __title: 'Product 1',
      __referrer: 'https://www.google.com/search?q=shoes',
    }, { profileId: 'user-1', groups: ['g-a', 'g-b'] }), writer, { userAgent: ua, ip: '8.8.8.8' });
    const deviceId = assertAccepted(sent);
    const row = await eventRow("project_id = $1 AND name = 'purchase'", [projectId]);
    assert.equal(row.name, 'purchase');
    assert.deepEqual(row.properties, { plan: 'pro', amount: 42, nested: { a: [1, 2] } });
    assert.deepEqual(row.groups, ['g-a', 'g-b']);
    assert.equal(row.profile_id, 'user-1');
    assert.equal(row.device_id, deviceId);
    assert.equal(row.created_at.toISOString(), at.toISOString());
    assert.ok(row.session_id, 'event is sessionized');
    assert.equal(row.origin, 'https://shop.example');
    assert.equal(row.path, '/p/1');
    assert.equal(row.title, 'Product 1');
    assert.equal(row.referrer, 'https://www.google.com/search?q=shoes');
    assert.equal(row.referrer_name, 'Google');
    assert.equal(row.referrer_type, 'search');
    assert.deepEqual(
      [row.utm_source, row.utm_medium, row.utm_campaign, row.utm_term, row.utm_content],
      ['news', 'email', 'spring', 'shoes', 'banner'],
    );
    // DB-IP City Lite places 8.8.8.8 at Google in Mountain View, California.
    assert.equal(row.country, 'US');
    assert.equal(row.region, 'California');
    assert.equal(row.city, 'Mountain View');
    assert.equal(typeof row.latitude, 'number');
    assert.equal(row.device, 'desktop');
    assert.equal(row.browser, 'Chrome');
    assert.equal(row.browser_version, '120.0.0.0');
    assert.equal(row.os, 'Windows');
    assert.equal(row.is_bot, false);
  });

  test('track without profileId: profile_id is the deviceId', async () => {
    const sent = await post(`${app.url}/track`, track('anon_click', { k: 'v' }), writer, { userAgent: freshUa(), ip: '8.8.4.4' });
    const deviceId = assertAccepted(sent);
    const row = await eventRow("project_id = $1 AND name = 'anon_click'", [projectId]);
    assert.equal(row.profile_id, deviceId);
    assert.equal(row.device_id, deviceId);
    assert.deepEqual(row.properties, { k: 'v' });
    assert.deepEqual(row.groups, []);
  });

  test('/event with timestamp', async () => {
    const at = new Date(Date.now() - 26 * 3600_000);
    const sent = await post(`${app.url}/event`, { name: 'signup', properties: { source: 'ad', __title: 'x' }, timestamp: at.toISOString() }, writer, { userAgent: freshUa(), ip: '8.8.8.8' });
    const deviceId = assertAccepted(sent);
    const row = await eventRow("project_id = $1 AND name = 'signup'", [projectId]);
    assert.equal(row.created_at.toISOString(), at.toISOString());
    assert.deepEqual(row.properties, { source: 'ad' });
    assert.equal(row.title, 'x');
    assert.equal(row.profile_id, deviceId);
  });

  test('identify upserts the profile; a second identify merges properties', async () => {
    const ua = freshUa();
    assertAccepted(await post(`${app.url}/track`, {
      type: 'identify',
      payload: { profileId: 'ident-1', firstName: 'Ada', lastName: 'Lovelace', email: 'ada@example.com', properties: { plan: 'free', lang: 'en' } },
    }, writer, { userAgent: ua }));
    let row = await profileRow('ident-1');
    assert.equal(row.first_name, 'Ada');
    assert.equal(row.last_name, 'Lovelace');
    assert.equal(row.email, 'ada@example.com');
    assert.deepEqual(row.properties, { plan: 'free', lang: 'en' });
    assertAccepted(await post(`${app.url}/track`, {
      type: 'identify', payload: { profileId: 'ident-1', lastName: 'King', properties: { plan: 'pro', seats: 3 } },
    }, writer, { userAgent: ua }));
    row = await profileRow('ident-1', (r) => r.properties.seats === 3);
    assert.deepEqual(row.properties, { plan: 'pro', lang: 'en', seats: 3 });
    assert.equal(row.first_name, 'Ada', 'a field left out keeps its value');
    assert.equal(row.last_name, 'King');
    assert.equal(row.email, 'ada@example.com');
  });

  test('increment and decrement are atomic and create a missing profile', async () => {
    // Different IPs: different devices, so different shards and concurrent transactions.
    const incs = Array.from({ length: 20 }, (_, i) =>
      post(`${app.url}/track`, { type: 'increment', payload: { profileId: 'counter-1', property: 'n', value: 1 } }, writer, { userAgent: CHROME_UA, ip: `9.9.9.${i + 1}` }));
    const decs = Array.from({ length: 5 }, (_, i) =>
      post(`${app.url}/track`, { type: 'decrement', payload: { profileId: 'counter-1', property: 'n', value: 2 } }, writer, { userAgent: CHROME_UA, ip: `9.9.8.${i + 1}` }));
    for (const r of await Promise.all([...incs, ...decs])) assertAccepted(r);
    const row = await profileRow('counter-1', (r) => r.properties.n === 10);
    assert.deepEqual(row.properties, { n: 10 });
    const failures = await env.db.query("SELECT * FROM op_failures WHERE project_id = $1 AND payload->>'profileId' = 'counter-1'", [projectId]);
    assert.equal(failures.rowCount, 0);
  });

  test('increment of a non-numeric value is reported in op_failures and the worker keeps going', async () => {
    const ua = freshUa();
    assertAccepted(await post(`${app.url}/track`, { type: 'identify', payload: { profileId: 'text-1', properties: { visits: 'lots' } } }, writer, { userAgent: ua }));
    const inc = await post(`${app.url}/track`, { type: 'increment', payload: { profileId: 'text-1', property: 'visits', value: 1 } }, writer, { userAgent: ua });
    assertAccepted(inc);
    assertAccepted(await post(`${app.url}/track`, { type: 'increment', payload: { profileId: 'text-1', property: 'score', value: 5 } }, writer, { userAgent: ua }));
    assertAccepted(await post(`${app.url}/track`, track('after_failure'), writer, { userAgent: ua }));
    const failure = await waitFor(async () => (await env.db.query("SELECT * FROM op_failures WHERE project_id = $1 AND kind = 'increment'", [projectId])).rows[0], { what: 'op_failures row' });
    assert.match(failure.reason, /visits/);
    assert.match(failure.reason, /non-numeric/);
    assert.equal(failure.payload.profileId, 'text-1');
    assert.equal(failure.payload.property, 'visits');
    await eventRow("project_id = $1 AND name = 'after_failure'", [projectId]);
    const row = await profileRow('text-1', (r) => r.properties.score === 5);
    assert.deepEqual(row.properties, { visits: 'lots', score: 5 });
  });

  test('group creates and then updates a group', async () => {
    const ua = freshUa();
    assertAccepted(await post(`${app.url}/track`, { type: 'group', payload: { id: 'acme', type: 'company', name: 'Acme', properties: { plan: 'pro' } } }, writer, { userAgent: ua }));
    const first = await waitFor(async () => (await env.db.query('SELECT * FROM groups WHERE project_id = $1 AND id = $2', [projectId, 'acme'])).rows[0], { what: 'group row' });
    assert.equal(first.type, 'company');
    assert.equal(first.name, 'Acme');
    assert.deepEqual(first.properties, { plan: 'pro' });
    assertAccepted(await post(`${app.url}/track`, { type: 'group', payload: { id: 'acme', type: 'customer', name: 'Acme Inc', properties: { seats: 10 } } }, writer, { userAgent: ua }));
    const second = await waitFor(async () => (await env.db.query("SELECT * FROM groups WHERE project_id = $1 AND id = $2 AND name = 'Acme Inc'", [projectId, 'acme'])).rows[0], { what: 'updated group' });
    assert.equal(second.type, 'customer');
    assert.deepEqual(second.properties, { plan: 'pro', seats: 10 });
    assert.equal((await env.db.query('SELECT count(*)::int AS n FROM groups WHERE project_id = $1', [projectId])).rows[0].n, 1);
  });

  test('assign_group sets profile.groups; without profileId the deviceId is the profile', async () => {
    const ua = freshUa();
    assertAccepted(await post(`${app.url}/track`, { type: 'assign_group', payload: { profileId: 'member-1', groupIds: ['g2', 'g1'] } }, writer, { userAgent: ua }));
    assertAccepted(await post(`${app.url}/track`, { type: 'assign_group', payload: { profileId: 'member-1', groupIds: ['g3', 'g1'] } }, writer, { userAgent: ua }));
    const member = await profileRow('member-1', (r) => r.groups.length === 3);
    assert.deepEqual(member.groups, ['g1', 'g2', 'g3']);
    const anon = await post(`${app.url}/track`, { type: 'assign_group', payload: { groupIds: ['g9'] } }, writer, { userAgent: freshUa(), ip: '8.8.8.8' });
    const deviceId = assertAccepted(anon);
    const row = await profileRow(deviceId);
    assert.deepEqual(row.groups, ['g9']);
    // Groups are never attached to later events.
    assertAccepted(await post(`${app.url}/track`, track('after_assign'), writer, { userAgent: ua }));
    const ev = await eventRow("project_id = $1 AND name = 'after_assign'", [projectId]);
    assert.deepEqual(ev.groups, []);
  });
});

describe('deviceId rules', () => {
  test('same user-agent + IP + project gives the same deviceId; IP, user-agent or project change it', async () => {
    const a1 = assertAccepted(await post(`${app.url}/track`, track('dev_a'), writer, { userAgent: FIREFOX_UA, ip: '5.5.5.5' }));
    const a2 = assertAccepted(await post(`${app.url}/event`, { name: 'dev_a' }, writer, { userAgent: FIREFOX_UA, ip: '5.5.5.5' }));
    assert.equal(a1, a2);
    const otherIp = assertAccepted(await post(`${app.url}/track`, track('dev_a'), writer, { userAgent: FIREFOX_UA, ip: '5.5.5.6' }));
    assert.notEqual(otherIp, a1);
    const otherUa = assertAccepted(await post(`${app.url}/track`, track('dev_a'), writer, { userAgent: CHROME_UA, ip: '5.5.5.5' }));
    assert.notEqual(otherUa, a1);
    const otherProject = await env.project({ name: 'Other' });
    const otherWriter = await env.client(otherProject, 'write', 0);
    const p2 = assertAccepted(await post(`${app.url}/track`, track('dev_a'), otherWriter, { userAgent: FIREFOX_UA, ip: '5.5.5.5' }));
    assert.notEqual(p2, a1);
  });

  test('properties.__deviceId overrides the device', async () => {
    const r = await post(`${app.url}/track`, track('dev_override', { __deviceId: 'my-own-device-42', keep: 1 }), writer, { userAgent: FIREFOX_UA, ip: '5.5.5.5' });
    assert.equal(r.status, 202);
    assert.deepEqual(r.body, { deviceId: 'my-own-device-42' });
    const row = await eventRow("project_id = $1 AND name = 'dev_override'", [projectId]);
    assert.equal(row.device_id, 'my-own-device-42');
    assert.equal(row.profile_id, 'my-own-device-42');
    assert.deepEqual(row.properties, { keep: 1 });
  });

  test('properties.__ip overrides x-client-ip (device and geo)', async () => {
    const viaHeader = assertAccepted(await post(`${app.url}/track`, track('dev_ip_plain'), writer, { userAgent: FIREFOX_UA, ip: '8.8.8.8' }));
    const viaOverride = assertAccepted(await post(`${app.url}/track`, track('dev_ip_override', { __ip: '8.8.8.8' }), writer, { userAgent: FIREFOX_UA, ip: '5.5.5.5' }));
    const plainOther = assertAccepted(await post(`${app.url}/track`, track('dev_ip_plain'), writer, { userAgent: FIREFOX_UA, ip: '5.5.5.5' }));
    assert.equal(viaOverride, viaHeader);
    assert.notEqual(viaOverride, plainOther);
    const row = await eventRow("project_id = $1 AND name = 'dev_ip_override'", [projectId]);
    assert.equal(row.city, 'Mountain View');
    assert.deepEqual(row.properties, {});
  });

  test('a time more than 60 s in the future becomes the receipt time; a near-future and a past time are kept', async () => {
    const ua = freshUa();
    const t0 = Date.now();
    assertAccepted(await post(`${app.url}/track`, track('time_far_future', { __timestamp: new Date(t0 + 3600_000).toISOString() }), writer, { userAgent: ua }));
    const t1 = Date.now();
    const far = await eventRow("project_id = $1 AND name = 'time_far_future'", [projectId]);
    assert.ok(far.created_at.getTime() >= t0 - 5 && far.created_at.getTime() <= t1 + 5, `created_at ${far.created_at.toISOString()} not in [${new Date(t0).toISOString()}, ${new Date(t1).toISOString()}]`);
    const near = new Date(Date.now() + 30_000);
    assertAccepted(await post(`${app.url}/event`, { name: 'time_near_future', timestamp: near.toISOString() }, writer, { userAgent: freshUa() }));
    assert.equal((await eventRow("project_id = $1 AND name = 'time_near_future'", [projectId])).created_at.toISOString(), near.toISOString());
    const past = new Date(Date.now() - 3 * 24 * 3600_000);
    assertAccepted(await post(`${app.url}/track`, track('time_past', { __timestamp: past.toISOString() }), writer, { userAgent: freshUa() }));
    assert.equal((await eventRow("project_id = $1 AND name = 'time_past'", [projectId])).created_at.toISOString(), past.toISOString());
    const farEvent = new Date(Date.now() + 2 * 3600_000);
    const t2 = Date.now();
    assertAccepted(await post(`${app.url}/event`, { name: 'time_far_future_event', timestamp: farEvent.toISOString() }, writer, { userAgent: freshUa() }));
    const t3 = Date.now();
    const fe = await eventRow("project_id = $1 AND name = 'time_far_future_event'", [projectId]);
    assert.ok(fe.created_at.getTime() >= t2 - 5 && fe.created_at.getTime() <= t3 + 5);
  });
});

// ---- error answers ----

interface Answer { status: number; body: any; headers: Headers; text: string }

async function send(path: string, init: { method?: string; body?: string | Buffer; headers?: Record<string, string>; creds?: Credentials | null } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(init.headers ?? {}) };
  const creds = init.creds === undefined ? writer : init.creds;
  if (creds) {
    headers['service-client-id'] = creds.clientId;
    headers['service-client-secret'] = creds.clientSecret;
  }
  const res = await fetch(`${app.url}${path}`, { method: init.method ?? 'POST', headers, body: init.body });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, body, headers: res.headers, text };
}

const json = (v: unknown) => ({ body: typeof v === 'string' ? v : JSON.stringify(v), headers: { 'content-type': 'application/json' } });

function assertBadRequest(r: Answer, path: string[]): void {
  assert.equal(r.status, 400, r.text);
  assert.match(r.headers.get('content-type') ?? '', /application\/json/);
  assert.deepEqual(Object.keys(r.body).sort(), ['details', 'error', 'message', 'status']);
  assert.equal(r.body.error, 'Bad Request');
  assert.equal(r.body.status, 400);
  assert.equal(typeof r.body.message, 'string');
  assert.ok(r.body.message.length > 0);
  assert.deepEqual(Object.keys(r.body.details), ['issues']);
  const issues = r.body.details.issues;
  assert.ok(Array.isArray(issues) && issues.length > 0);
  for (const i of issues) {
    assert.deepEqual(Object.keys(i).sort(), ['message', 'path']);
    assert.ok(Array.isArray(i.path) && i.path.every((p: unknown) => typeof p === 'string'), `path of strings: ${JSON.stringify(i.path)}`);
    assert.equal(typeof i.message, 'string');
  }
  assert.ok(issues.some((i: { path: string[] }) => JSON.stringify(i.path) === JSON.stringify(path)), `an issue at ${JSON.stringify(path)}: ${JSON.stringify(issues)}`);
}

function assertIngestError(r: Answer, status: number, error: string): void {
  assert.equal(r.status, status, r.text);
  assert.match(r.headers.get('content-type') ?? '', /application\/json/);
  assert.equal(r.body.error, error);
  assert.equal(r.body.status, status);
  for (const k of Object.keys(r.body)) assert.ok(['error', 'status', 'message'].includes(k), `unexpected key ${k}`);
}

describe('400 Bad Request on ingest', () => {
  const cases: [string, string, { body: string | Buffer; headers: Record<string, string> }, string[]][] = [
    ['invalid JSON', '/track', json('{"type": "track", '), []],
    ['non-UTF-8 bytes', '/track', { body: Buffer.from([0x7b, 0x22, 0x74, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), headers: { 'content-type': 'application/json' } }, []],
    ['empty body', '/track', json(''), []],
    ['a JSON array', '/track', json([]), []],
    ['unknown type', '/track', json({ type: 'screen', payload: { name: 'x' } }), ['type']],
    ['missing type', '/track', json({ payload: { name: 'x' } }), ['type']],
    ['missing payload', '/track', json({ type: 'track' }), ['payload']],
    ['missing name', '/track', json({ type: 'track', payload: { properties: {} } }), ['payload', 'name']],
    ['empty name', '/track', json({ type: 'track', payload: { name: '' } }), ['payload', 'name']],
    ['blank name', '/track', json({ type: 'track', payload: { name: '   ' } }), ['payload', 'name']],
    ['session_start on /track', '/track', json({ type: 'track', payload: { name: 'session_start' } }), ['payload', 'name']],
    ['session_end on /track', '/track', json({ type: 'track', payload: { name: 'session_end' } }), ['payload', 'name']],
    ['session_start on /event', '/event', json({ name: 'session_start' }), ['name']],
    ['session_end on /event', '/event', json({ name: 'session_end' }), ['name']],
    ['missing name on /event', '/event', json({ properties: {} }), ['name']],
    ['empty name on /event', '/event', json({ name: '' }), ['name']],
    ['bad __timestamp', '/track', json(track('x', { __timestamp: 'yesterday' })), ['payload', 'properties', '__timestamp']],
    ['impossible __timestamp', '/track', json(track('x', { __timestamp: '2024-13-45T99:00:00Z' })), ['payload', 'properties', '__timestamp']],
    ['__timestamp on a day that does not exist', '/track', json(track('x', { __timestamp: '2024-02-30T10:00:00Z' })), ['payload', 'properties', '__timestamp']],
    ['bad __timestamp on /event', '/event', json({ name: 'x', properties: { __timestamp: 12 } }), ['properties', '__timestamp']],
    ['bad /event timestamp', '/event', json({ name: 'x', timestamp: 'not a date' }), ['timestamp']],
    ['/event timestamp on a day that does not exist', '/event', json({ name: 'x', timestamp: '2023-04-31' }), ['timestamp']],
    ['numeric /event timestamp', '/event', json({ name: 'x', timestamp: 1700000000000 }), ['timestamp']],
    // Before the accepted range (INGEST_MAX_PAST_DAYS, docs/decisions.md "Ingest").
    ['__timestamp in 1800', '/track', json(track('x', { __timestamp: '1800-01-01T00:00:00Z' })), ['payload', 'properties', '__timestamp']],
    ['__timestamp eleven years ago', '/track', json(track('x', { __timestamp: new Date(Date.now() - 11 * 366 * 86_400_000).toISOString() })), ['payload', 'properties', '__timestamp']],
    ['/event timestamp in 1600', '/event', json({ name: 'x', timestamp: '1600-01-01' }), ['timestamp']],
    ['/event __timestamp in 1000', '/event', json({ name: 'x', properties: { __timestamp: '1000-01-01T00:00:00Z' } }), ['properties', '__timestamp']],
    ['groups not an array', '/track', json({ type: 'track', payload: { name: 'x', groups: 'g1' } }), ['payload', 'groups']],
    ['groups with a number', '/track', json({ type: 'track', payload: { name: 'x', groups: ['g1', 2] } }), ['payload', 'groups', '1']],
    ['properties not an object', '/track', json({ type: 'track', payload: { name: 'x', properties: [1] } }), ['payload', 'properties']],
    ['increment value not a number', '/track', json({ type: 'increment', payload: { profileId: 'p', property: 'n', value: 'five' } }), ['payload', 'value']],
    ['decrement value not a number', '/track', json({ type: 'decrement', payload: { profileId: 'p', property: 'n', value: '1' } }), ['payload', 'value']],
    ['increment without profileId', '/track', json({ type: 'increment', payload: { property: 'n', value: 1 } }), ['payload', 'profileId']],
    ['assign_group without groupIds', '/track', json({ type: 'assign_group', payload: { profileId: 'p' } }), ['payload', 'groupIds']],
    ['assign_group with empty groupIds', '/track', json({ type: 'assign_group', payload: { profileId: 'p', groupIds: [] } }), ['payload', 'groupIds']],
    ['identify without profileId', '/track', json({ type: 'identify', payload: { firstName: 'A' } }), ['payload', 'profileId']],
    ['group without name', '/track', json({ type: 'group', payload: { id: 'g', type: 'company' } }), ['payload', 'name']],
  ];
  for (const [what, path, init, issuePath] of cases) {
    test(`${what} on ${path}`, async () => {
      assertBadRequest(await send(path, init), issuePath);
    });
  }
});

/** Raw HTTP/1.1 POST (for bodies fetch cannot send: huge, chunked). */
function rawPost(path: string, chunks: Buffer[], headers: Record<string, string | number>): Promise<{ status: number; body: any; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const u = new URL(app.url);
    const req = http.request({ host: u.hostname, port: u.port, path, method: 'POST', headers: { ...headers, 'service-client-id': writer.clientId, 'service-client-secret': writer.clientSecret } });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {}
        resolve({ status: res.statusCode ?? 0, body, headers: res.headers });
      });
    });
    // The server may answer and close before the whole body is written: that is the point.
    req.on('error', (err) => setTimeout(() => reject(err), 500));
    (async () => {
      for (const c of chunks) {
        if (req.destroyed) return;
        if (!req.write(c)) await new Promise((r) => req.once('drain', r).once('close', r));
      }
      req.end();
    })().catch(() => {});
  });
}

describe('other ingest errors', () => {
  test('wrong content-type: 415 JSON', async () => {
    const r = await send('/track', { body: JSON.stringify(track('x')), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assertIngestError(r, 415, 'Unsupported Media Type');
  });

  test('413 for a body over 1 MiB with a correct Content-Length', async () => {
    const big = Buffer.from(JSON.stringify(track('big', { blob: 'x'.repeat(1024 * 1024 + 10) })));
    const r = await rawPost('/track', [big], { 'content-type': 'application/json', 'content-length': big.length });
    assert.equal(r.status, 413);
    assert.deepEqual({ error: r.body.error, status: r.body.status }, { error: 'Payload Too Large', status: 413 });
  });

  test('413 for a body over 1 MiB sent chunked (no Content-Length)', async () => {
    const chunks = Array.from({ length: 20 }, () => Buffer.alloc(64 * 1024, 0x61));
    const r = await rawPost('/track', chunks, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    assert.equal(r.status, 413);
    assert.deepEqual({ error: r.body.error, status: r.body.status }, { error: 'Payload Too Large', status: 413 });
  });

  test('a body just under 1 MiB is accepted', async () => {
    const payload = track('almost_big', { blob: '' });
    const base = Buffer.byteLength(JSON.stringify(payload));
    (payload.payload.properties as { blob: string }).blob = 'y'.repeat(1000 * 1000 - base);
    const body = Buffer.from(JSON.stringify(payload));
    assert.ok(body.length < 1024 * 1024);
    const r = await rawPost('/track', [body], { 'content-type': 'application/json', 'content-length': body.length });
    assert.equal(r.status, 202, JSON.stringify(r.body));
  });

  test('a body of exactly 1 MiB is accepted (413 is for bodies over 1 MiB)', async () => {
    const skeleton = Buffer.byteLength(JSON.stringify(track('exactly_1mib', { blob: '' })));
    const body = Buffer.from(JSON.stringify(track('exactly_1mib', { blob: 'z'.repeat(1024 * 1024 - skeleton) })));
    assert.equal(body.length, 1024 * 1024);
    const r = await rawPost('/track', [body], { 'content-type': 'application/json', 'content-length': body.length });
    assert.equal(r.status, 202, JSON.stringify(r.body));
  });

  test('404 JSON for unknown routes', async () => {
    for (const [method, path] of [['GET', '/nope'], ['POST', '/tracks'], ['GET', '/']] as const) {
      const r = await send(path, { method, creds: null, body: method === 'POST' ? '{}' : undefined });
      assert.equal(r.status, 404, `${method} ${path}`);
      assert.match(r.headers.get('content-type') ?? '', /application\/json/);
      assert.equal(r.body.error, 'Not Found');
      assert.equal(typeof r.body.message, 'string');
    }
  });

  test('405 JSON for GET /track and GET /event', async () => {
    for (const path of ['/track', '/event']) {
      const r = await send(path, { method: 'GET' });
      assertIngestError(r, 405, 'Method Not Allowed');
      assert.match(r.headers.get('allow') ?? '', /POST/);
    }
    const viaHarness = await get(`${app.url}/track`, writer);
    assert.equal(viaHarness.status, 405);
  });
});
