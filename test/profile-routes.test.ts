// OpenPanel's older ingest routes (docs/api.md, "OpenPanel's older routes"): POST /profile,
// /profile/increment and /profile/decrement (the /track identify, increment and decrement
// payloads without the envelope, answered 202 with the profile id as text), and
// GET /track/device-id (the device id /track gives the caller, and its live session).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { TestEnv, startApp, post, track, waitFor, BROWSER_UA, type Credentials } from './support/harness';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectId: string;
let writer: Credentials;
let reader: Credentials;

before(async () => {
  env = await new TestEnv('profroutes').setup();
  app = await startApp(env);
  projectId = await env.project({ name: 'Profiles', origins: ['https://shop.example'] });
  writer = await env.client(projectId, 'write', 0);
  reader = await env.client(projectId, 'read', 0);
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

type Answer = { status: number; text: string; body: any; headers: Headers };

const credHeaders = (c: Credentials | null): Record<string, string> =>
  c ? { 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret } : {};

/** A request with the raw text kept (the /profile routes answer text, not JSON). */
async function send(method: 'GET' | 'POST', path: string, creds: Credentials | null, o: { body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
  const headers: Record<string, string> = { 'user-agent': BROWSER_UA, ...credHeaders(creds), ...(o.headers ?? {}) };
  if (o.body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(`${app.url}${path}`, {
    method, headers, body: o.body === undefined ? undefined : typeof o.body === 'string' ? o.body : JSON.stringify(o.body),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, text, body, headers: res.headers };
}

const deviceIdOf = (creds: Credentials | null, headers: Record<string, string> = {}) => send('GET', '/track/device-id', creds, { headers });

async function profile(id: string): Promise<{ first_name: string | null; last_name: string | null; email: string | null; properties: Record<string, any> } | undefined> {
  const r = await env.db.query('SELECT first_name, last_name, email, properties FROM profiles WHERE project_id = $1 AND id = $2', [projectId, id]);
  return r.rows[0];
}

/** 202 with the profile id as the text body, as OpenPanel's `reply.status(202).send(profileId)`. */
function assertAccepted(r: Answer, profileId: string): void {
  assert.equal(r.status, 202, r.text);
  assert.equal(r.text, profileId);
  assert.match(r.headers.get('content-type') ?? '', /^text\/plain/);
}

function assertDenied(r: Answer, status: 401 | 403): void {
  assert.equal(r.status, status, r.text);
  assert.match(r.headers.get('content-type') ?? '', /application\/json/);
  assert.deepEqual(r.body, { error: status === 401 ? 'Unauthorized' : 'Forbidden', status });
  assert.ok((r.headers.get('x-error-reason') ?? '').length > 0);
}

/** Tidemark's ingest 400: `{error, message, details: {issues}, status}`, the first issue at `path`. */
function assertBadRequest(r: Answer, path: string[]): void {
  assert.equal(r.status, 400, r.text);
  assert.match(r.headers.get('content-type') ?? '', /application\/json/);
  assert.equal(r.body.error, 'Bad Request');
  assert.equal(r.body.status, 400);
  assert.equal(typeof r.body.message, 'string');
  assert.ok(r.body.message.length > 0);
  assert.deepEqual(r.body.details.issues[0].path, path, JSON.stringify(r.body));
}

describe('POST /profile', () => {
  test('identifies: 202 with the profile id as text; names, email and properties stored (reserved keys consumed)', async () => {
    const r = await send('POST', '/profile', writer, {
      body: { profileId: 'alice', firstName: 'Alice', lastName: 'Liddell', email: 'alice@example.com', avatar: 'https://img.example/a.png', properties: { plan: 'pro', __ip: '8.8.8.8' } },
    });
    assertAccepted(r, 'alice');
    const row = await waitFor(() => profile('alice'), { what: 'the profile of alice' });
    assert.equal(row!.first_name, 'Alice');
    assert.equal(row!.last_name, 'Liddell');
    assert.equal(row!.email, 'alice@example.com');
    assert.deepEqual(row!.properties, { plan: 'pro', avatar: 'https://img.example/a.png' });
    // A second identify merges properties and keeps names not sent, as /track's identify does.
    assertAccepted(await send('POST', '/profile', writer, { body: { profileId: 'alice', properties: { seats: 3 } } }), 'alice');
    const merged = await waitFor(async () => {
      const p = await profile('alice');
      return p?.properties.seats === 3 ? p : undefined;
    }, { what: 'the merged properties' });
    assert.equal(merged!.first_name, 'Alice');
    assert.deepEqual(merged!.properties, { plan: 'pro', avatar: 'https://img.example/a.png', seats: 3 });
  });

  test('a numeric profileId is the profile of its decimal text', async () => {
    assertAccepted(await send('POST', '/profile', writer, { body: { profileId: 42, firstName: 'Num' } }), '42');
    const row = await waitFor(() => profile('42'), { what: 'profile 42' });
    assert.equal(row!.first_name, 'Num');
  });

  test('malformed bodies: 400 with a JSON body naming the problem', async () => {
    assertBadRequest(await send('POST', '/profile', writer, { body: { firstName: 'Nobody' } }), ['profileId']);
    assertBadRequest(await send('POST', '/profile', writer, { body: { profileId: '' } }), ['profileId']);
    assertBadRequest(await send('POST', '/profile', writer, { body: { profileId: 'p', properties: 'not an object' } }), ['properties']);
    assertBadRequest(await send('POST', '/profile', writer, { body: { profileId: 'p', properties: { __timestamp: 'yesterday' } } }), ['properties', '__timestamp']);
    assertBadRequest(await send('POST', '/profile', writer, { body: '{"profileId": "p",' }), []);
    assertBadRequest(await send('POST', '/profile', writer, { body: '[1, 2]' }), []);
  });
});

describe('POST /profile/increment and /profile/decrement', () => {
  test('change the property through the same op as /track: nested paths, default 1, exact decimals', async () => {
    assertAccepted(await send('POST', '/profile/increment', writer, { body: { profileId: 'bob', property: 'visits', value: 5 } }), 'bob');
    assertAccepted(await send('POST', '/profile/increment', writer, { body: { profileId: 'bob', property: 'stats.logins', value: 2 } }), 'bob');
    assertAccepted(await send('POST', '/profile/increment', writer, { body: { profileId: 'bob', property: 'stats.logins' } }), 'bob');
    assertAccepted(await send('POST', '/profile/decrement', writer, { body: { profileId: 'bob', property: 'visits', value: 2 } }), 'bob');
    assertAccepted(await send('POST', '/profile/decrement', writer, { body: { profileId: 'bob', property: 'credit', value: 0.5 } }), 'bob');
    const row = await waitFor(async () => {
      const p = await profile('bob');
      return p && p.properties.visits === 3 && p.properties.stats?.logins === 3 && p.properties.credit === -0.5 ? p : undefined;
    }, { what: "bob's properties" });
    assert.deepEqual(row!.properties, { visits: 3, stats: { logins: 3 }, credit: -0.5 });
  });

  test('/track and /profile change one profile alike', async () => {
    assert.equal((await post(`${app.url}/track`, { type: 'increment', payload: { profileId: 'carol', property: 'n', value: 10 } }, writer)).status, 202);
    assertAccepted(await send('POST', '/profile/increment', writer, { body: { profileId: 'carol', property: 'n', value: 1 } }), 'carol');
    assertAccepted(await send('POST', '/profile/decrement', writer, { body: { profileId: 'carol', property: 'n', value: 4 } }), 'carol');
    await waitFor(async () => (await profile('carol'))?.properties.n === 7, { what: 'carol n = 7' });
  });

  test('malformed bodies: 400 with a JSON body naming the problem', async () => {
    for (const path of ['/profile/increment', '/profile/decrement']) {
      assertBadRequest(await send('POST', path, writer, { body: { property: 'visits', value: 1 } }), ['profileId']);
      assertBadRequest(await send('POST', path, writer, { body: { profileId: 'p', value: 1 } }), ['property']);
      assertBadRequest(await send('POST', path, writer, { body: { profileId: 'p', property: 'visits', value: 'abc' } }), ['value']);
      assertBadRequest(await send('POST', path, writer, { body: 'not json' }), []);
    }
  });
});

describe('who may call them', () => {
  const routes: [('GET' | 'POST'), string, unknown][] = [
    ['POST', '/profile', { profileId: 'denied', firstName: 'X' }],
    ['POST', '/profile/increment', { profileId: 'denied', property: 'n', value: 1 }],
    ['POST', '/profile/decrement', { profileId: 'denied', property: 'n', value: 1 }],
    ['GET', '/track/device-id', undefined],
  ];

  test('bad credentials: 401 on every route, nothing stored', async () => {
    for (const [method, path, body] of routes) {
      assertDenied(await send(method, path, null, { body }), 401);
      assertDenied(await send(method, path, { clientId: writer.clientId, clientSecret: 'sec_wrong' }, { body }), 401);
      assertDenied(await send(method, path, { clientId: '00000000-0000-4000-8000-000000000000', clientSecret: writer.clientSecret }, { body }), 401);
      // no secret and no allowed Origin: a browser client must come from the project's origins
      assertDenied(await send(method, path, null, { body, headers: { 'service-client-id': writer.clientId } }), 401);
    }
  });

  test('a read client is refused (403) as on /track', async () => {
    assertDenied(await send('POST', '/track', reader, { body: track('x') }), 403);
    for (const [method, path, body] of routes) assertDenied(await send(method, path, reader, { body }), 403);
  });

  test('bad input from bad credentials is a 401, not a 400', async () => {
    assertDenied(await send('POST', '/profile', null, { body: { nope: true } }), 401);
  });

  test('a browser client without a secret from an allowed Origin is accepted, with CORS', async () => {
    const origin = 'https://shop.example';
    const browser = { 'openpanel-client-id': writer.clientId, origin };
    const r = await send('POST', '/profile', null, { body: { profileId: 'from-browser' }, headers: browser });
    assertAccepted(r, 'from-browser');
    assert.equal(r.headers.get('access-control-allow-origin'), origin);
    const d = await deviceIdOf(null, browser);
    assert.equal(d.status, 200, d.text);
    assert.equal(d.headers.get('access-control-allow-origin'), origin);
    for (const path of ['/track/device-id', '/profile', '/profile/increment', '/profile/decrement']) {
      const pre = await fetch(`${app.url}${path}`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': path === '/track/device-id' ? 'GET' : 'POST' } });
      assert.equal(pre.status, 204, path);
      assert.match(pre.headers.get('access-control-allow-methods') ?? '', path === '/track/device-id' ? /\bGET\b/ : /\bPOST\b/, path);
    }
    await waitFor(() => profile('from-browser'), { what: 'the browser identify' });
    assert.equal(await profile('denied'), undefined, 'no refused request stored anything');
  });

  test('the client\'s ingest rate limit applies to them', async () => {
    const slow = await env.client(projectId, 'write', 1);
    const first = await send('POST', '/profile', slow, { body: { profileId: 'limited' } });
    assertAccepted(first, 'limited');
    assert.equal(first.headers.get('x-ratelimit-limit'), '1');
    const second = await send('POST', '/profile/increment', slow, { body: { profileId: 'limited', property: 'n' } });
    assert.equal(second.status, 429, second.text);
    assert.ok(second.headers.get('retry-after'));
  });
});

describe('GET /track/device-id', () => {
  const ua = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15';
  const ip = '81.2.69.160';

  test('the device id /track gives the same user-agent and address; then the live session its events joined', async () => {
    const before = await deviceIdOf(writer, { 'user-agent': ua, 'x-client-ip': ip });
    assert.equal(before.status, 200, before.text);
    assert.match(before.headers.get('content-type') ?? '', /application\/json/);
    assert.deepEqual(Object.keys(before.body).sort(), ['deviceId', 'message', 'sessionId']);
    assert.match(before.body.deviceId, /^[0-9a-f]{32}$/);
    assert.equal(before.body.sessionId, '');
    assert.equal(before.body.message, 'No session exists for this device id');

    const tracked = await post(`${app.url}/track`, track('screen_view', { __path: 'https://shop.example/', mk: 'device-probe' }), writer, { userAgent: ua, ip });
    assert.equal(tracked.status, 202);
    assert.equal(tracked.body.deviceId, before.body.deviceId, '/track answers the same device id');
    const stored = await waitFor(async () => {
      const r = await env.db.query(`SELECT device_id, session_id::text AS session_id FROM events WHERE project_id = $1 AND properties->>'mk' = 'device-probe'`, [projectId]);
      return r.rows[0] as { device_id: string; session_id: string } | undefined;
    }, { what: 'the tracked event' });
    assert.equal(stored!.device_id, before.body.deviceId, 'the stored event has the device id /track/device-id named');
    assert.ok(stored!.session_id);

    const after = await deviceIdOf(writer, { 'user-agent': ua, 'x-client-ip': ip });
    assert.equal(after.status, 200, after.text);
    assert.deepEqual(after.body, { deviceId: before.body.deviceId, sessionId: stored!.session_id, message: 'current session exists for this device id' });
  });

  test('another address, user-agent or project is another device', async () => {
    const base = (await deviceIdOf(writer, { 'user-agent': ua, 'x-client-ip': ip })).body.deviceId;
    const otherIp = (await deviceIdOf(writer, { 'user-agent': ua, 'x-client-ip': '81.2.69.161' })).body.deviceId;
    const otherUa = (await deviceIdOf(writer, { 'user-agent': BROWSER_UA, 'x-client-ip': ip })).body.deviceId;
    const otherProject = await env.project({ name: 'Other' });
    const otherWriter = await env.client(otherProject, 'write', 0);
    const otherP = (await deviceIdOf(otherWriter, { 'user-agent': ua, 'x-client-ip': ip })).body.deviceId;
    assert.equal(new Set([base, otherIp, otherUa, otherP]).size, 4);
    // the address headers /track reads, in its order (x-forwarded-for's first public address)
    const forwarded = await deviceIdOf(writer, { 'user-agent': ua, 'x-forwarded-for': `10.0.0.1, ${ip}` });
    assert.equal(forwarded.body.deviceId, base);
  });

  test('no user-agent: 400 with a JSON body naming the header', async () => {
    // fetch always sends a user-agent; node:http sends none unless told.
    const r = await new Promise<Answer>((resolve, reject) => {
      const req = httpRequest(`${app.url}/track/device-id`, { method: 'GET', headers: { ...credHeaders(writer), 'x-client-ip': ip } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {}
          resolve({ status: res.statusCode ?? 0, text, body, headers });
        });
      });
      req.on('error', reject);
      req.end();
    });
    assertBadRequest(r, ['headers', 'user-agent']);
  });

  test('POST is not the method: 405', async () => {
    const r = await send('POST', '/track/device-id', writer, { body: {} });
    assert.equal(r.status, 405);
    assert.equal(r.headers.get('allow'), 'GET');
  });
});
