// Who may ingest and read (semantics.md "Access"), browser clients by Origin with CORS,
// and the per-client ingest rate limit with its headers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, startApp, post, get, track, sleep, type Credentials } from './support/harness';
import { runCli } from '../internal/cli/cli';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectId: string;
let otherProjectId: string;
let writer: Credentials;

before(async () => {
  env = await new TestEnv('ingauth').setup();
  app = await startApp(env, { api: true, worker: false });
  projectId = await env.project({ name: 'Shop', origins: ['https://shop.example'] });
  otherProjectId = await env.project({ name: 'Other' });
  writer = await env.client(projectId, 'write', 0);
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

type Answer = { status: number; body: any; headers: Headers };

async function trackWith(headers: Record<string, string>, body: unknown = track('auth_probe')): Promise<Answer> {
  return post(`${app.url}/track`, body, null, { headers });
}

const credHeaders = (c: Credentials) => ({ 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret });

/** Ingest 401/403: exactly `{error, status}` (semantics.md). */
function assertIngestDenied(r: Answer, status: 401 | 403): void {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.match(r.headers.get('content-type') ?? '', /application\/json/);
  assert.deepEqual(r.body, { error: status === 401 ? 'Unauthorized' : 'Forbidden', status });
  assert.ok((r.headers.get('x-error-reason') ?? '').length > 0, 'the reason is in X-Error-Reason');
}

/** Insights 401/403: `{error, message}`. */
function assertReadDenied(r: Answer, status: 401 | 403): void {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.match(r.headers.get('content-type') ?? '', /application\/json/);
  assert.deepEqual(Object.keys(r.body).sort(), ['error', 'message']);
  assert.equal(r.body.error, status === 401 ? 'Unauthorized' : 'Forbidden');
  assert.equal(typeof r.body.message, 'string');
}

describe('credentials on ingest', () => {
  test('a write client with its secret is accepted', async () => {
    const r = await trackWith(credHeaders(writer));
    assert.equal(r.status, 202);
    assert.match(r.body.deviceId, /^[0-9a-f]{32}$/);
  });

  test('missing client id: 401', async () => {
    assertIngestDenied(await trackWith({ 'service-client-secret': writer.clientSecret }), 401);
    assertIngestDenied(await trackWith({}), 401);
    assertIngestDenied(await post(`${app.url}/event`, { name: 'x' }, null), 401);
  });

  test('missing secret (no Origin, not a browser): 401', async () => {
    assertIngestDenied(await trackWith({ 'service-client-id': writer.clientId }), 401);
    assertIngestDenied(await trackWith({ 'service-client-id': writer.clientId, 'service-client-secret': '' }), 401);
  });

  test('wrong secret: 401 (also after the right one was cached)', async () => {
    assertIngestDenied(await trackWith({ 'service-client-id': writer.clientId, 'service-client-secret': 'sec_wrong' }), 401);
    assert.equal((await trackWith(credHeaders(writer))).status, 202);
    assertIngestDenied(await trackWith({ 'service-client-id': writer.clientId, 'service-client-secret': `${writer.clientSecret}x` }), 401);
  });

  test('unknown client id: 401', async () => {
    assertIngestDenied(await trackWith({ 'service-client-id': '00000000-0000-4000-8000-000000000000', 'service-client-secret': writer.clientSecret }), 401);
  });

  test('a revoked client is refused at once by an API that had cached it', async () => {
    const doomed = await env.client(projectId, 'write', 0);
    assert.equal((await trackWith(credHeaders(doomed))).status, 202, 'cached as valid');
    assert.equal((await post(`${app.url}/event`, { name: 'cached' }, doomed)).status, 202);
    const out = await runCli(['client', 'revoke', '--id', doomed.clientId], env.config());
    assert.deepEqual(out, { clientId: doomed.clientId, revoked: true });
    assertIngestDenied(await trackWith(credHeaders(doomed)), 401);
    assertIngestDenied(await post(`${app.url}/event`, { name: 'after_revoke' }, doomed), 401);
    // Also on a fresh API process (nothing cached).
    const fresh = await startApp(env, { api: true, worker: false });
    try {
      assertIngestDenied(await post(`${fresh.url}/track`, track('x'), doomed), 401);
    } finally {
      await fresh.drain();
    }
  });

  test('a revoked read client is refused on insights at once', async () => {
    const reader = await env.client(projectId, 'read');
    assert.equal((await get(`${app.url}/insights/${projectId}/metrics?range=today`, reader)).status, 200);
    await runCli(['client', 'revoke', '--id', reader.clientId], env.config());
    assertReadDenied(await get(`${app.url}/insights/${projectId}/metrics?range=today`, reader), 401);
  });

  test('OpenPanel header aliases work', async () => {
    const r = await trackWith({ 'openpanel-client-id': writer.clientId, 'openpanel-client-secret': writer.clientSecret });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const e = await post(`${app.url}/event`, { name: 'op' }, null, { headers: { 'openpanel-client-id': writer.clientId, 'openpanel-client-secret': writer.clientSecret } });
    assert.equal(e.status, 202);
    assertIngestDenied(await trackWith({ 'openpanel-client-id': writer.clientId, 'openpanel-client-secret': 'nope' }), 401);
  });
});

describe('modes and projects', () => {
  test('a read client on /track and /event: 403', async () => {
    const reader = await env.client(projectId, 'read');
    assertIngestDenied(await trackWith(credHeaders(reader)), 403);
    assertIngestDenied(await post(`${app.url}/event`, { name: 'x' }, reader), 403);
  });

  test('a write client on insights: 403 {error, message}', async () => {
    assertReadDenied(await get(`${app.url}/insights/${projectId}/metrics?range=today`, writer), 403);
    assertReadDenied(await get(`${app.url}/insights/${projectId}/live`, writer), 403);
  });

  test('insights without or with wrong credentials: 401 {error, message}', async () => {
    assertReadDenied(await get(`${app.url}/insights/${projectId}/metrics`, null), 401);
    const reader = await env.client(projectId, 'read');
    assertReadDenied(await get(`${app.url}/insights/${projectId}/metrics`, { clientId: reader.clientId, clientSecret: 'sec_bad' }), 401);
  });

  test("a read client on another project's insights: 403; on its own: 200", async () => {
    const reader = await env.client(projectId, 'read');
    assertReadDenied(await get(`${app.url}/insights/${otherProjectId}/metrics?range=today`, reader), 403);
    assertReadDenied(await get(`${app.url}/insights/${otherProjectId}/live`, reader), 403);
    const own = await get(`${app.url}/insights/${projectId}/metrics?range=today`, reader);
    assert.equal(own.status, 200);
  });

  test('a root client ingests and reads every project', async () => {
    const root = await env.client(projectId, 'root', 0);
    const r = await post(`${app.url}/track`, track('root_event'), root);
    assert.equal(r.status, 202);
    for (const p of [projectId, otherProjectId]) {
      const m = await get(`${app.url}/insights/${p}/metrics?range=today`, root);
      assert.equal(m.status, 200, `metrics of ${p}`);
      assert.equal(typeof m.body.metrics.total_sessions, 'number');
      const live = await get(`${app.url}/insights/${p}/live`, root);
      assert.equal(live.status, 200);
    }
  });
});

describe('browser clients (no secret) and CORS', () => {
  test('an allowed Origin without secret: 202 with Access-Control-Allow-Origin', async () => {
    const r = await trackWith({ 'service-client-id': writer.clientId, origin: 'https://shop.example' });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.match(r.body.deviceId, /^[0-9a-f]{32}$/);
    assert.equal(r.headers.get('access-control-allow-origin'), 'https://shop.example');
    const ev = await post(`${app.url}/event`, { name: 'browser' }, null, { headers: { 'openpanel-client-id': writer.clientId, origin: 'https://shop.example' } });
    assert.equal(ev.status, 202);
  });

  test('a disallowed or missing Origin without secret: 401', async () => {
    assertIngestDenied(await trackWith({ 'service-client-id': writer.clientId, origin: 'https://evil.example' }), 401);
    assertIngestDenied(await trackWith({ 'service-client-id': writer.clientId, origin: 'https://shop.example.evil.example' }), 401);
    assertIngestDenied(await trackWith({ 'service-client-id': writer.clientId, origin: 'http://shop.example' }), 401);
    assertIngestDenied(await trackWith({ 'service-client-id': writer.clientId }), 401);
  });

  test('a project without allowed origins refuses secret-less clients', async () => {
    const w = await env.client(otherProjectId, 'write', 0);
    assertIngestDenied(await trackWith({ 'service-client-id': w.clientId, origin: 'https://shop.example' }), 401);
  });

  test('a secret-less read client from an allowed Origin: 403', async () => {
    const reader = await env.client(projectId, 'read');
    assertIngestDenied(await trackWith({ 'service-client-id': reader.clientId, origin: 'https://shop.example' }), 403);
  });

  test('CORS preflight OPTIONS /track and /event: 204 with the Access-Control-Allow-* headers', async () => {
    for (const path of ['/track', '/event']) {
      const res = await fetch(`${app.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://shop.example',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type, service-client-id, openpanel-client-id',
        },
      });
      assert.equal(res.status, 204);
      assert.equal(await res.text(), '');
      assert.equal(res.headers.get('access-control-allow-origin'), 'https://shop.example');
      assert.match(res.headers.get('access-control-allow-methods') ?? '', /\bPOST\b/);
      const allowed = (res.headers.get('access-control-allow-headers') ?? '').toLowerCase();
      for (const h of ['content-type', 'service-client-id', 'service-client-secret', 'openpanel-client-id', 'openpanel-client-secret']) {
        assert.ok(allowed.includes(h), `allows ${h}: ${allowed}`);
      }
    }
  });
});

describe('ingest rate limit', () => {
  test('N+k requests within one second: some 429 with X-RateLimit-* and Retry-After; 202s carry X-RateLimit-*', async () => {
    const limit = 5;
    const limited = await env.client(projectId, 'write', limit);
    // Verify the secret once (the auth cache); a second later that request has left the window.
    assert.equal((await post(`${app.url}/track`, track('rl_warm'), limited)).status, 202);
    await sleep(1100);
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: 3 * limit }, (_, i) => post(`${app.url}/track`, track('rl', { i }), limited)));
    const ok = answers.filter((a) => a.status === 202);
    const tooMany = answers.filter((a) => a.status === 429);
    assert.equal(ok.length + tooMany.length, answers.length, `statuses ${answers.map((a) => a.status)}`);
    // A sliding window: exactly N of a burst shorter than the window, wherever the clock's
    // second boundaries fall.
    if (Date.now() - started < 900) {
      assert.equal(ok.length, limit, `${ok.length} accepted`);
      assert.equal(tooMany.length, 2 * limit, `${tooMany.length} refused`);
    }
    for (const a of ok) {
      assert.equal(a.headers.get('x-ratelimit-limit'), String(limit));
      const remaining = Number(a.headers.get('x-ratelimit-remaining'));
      assert.ok(Number.isInteger(remaining) && remaining >= 0 && remaining < limit, `remaining ${remaining}`);
      const reset = Number(a.headers.get('x-ratelimit-reset'));
      assert.ok(Number.isInteger(reset) && reset >= 1 && reset <= 1, `reset ${reset}`);
      assert.equal(a.headers.get('retry-after'), null);
    }
    for (const a of tooMany) {
      assert.match(a.headers.get('content-type') ?? '', /application\/json/);
      assert.equal(a.body.error, 'Too Many Requests');
      assert.equal(a.body.status, 429);
      assert.equal(a.headers.get('x-ratelimit-limit'), String(limit));
      assert.equal(a.headers.get('x-ratelimit-remaining'), '0');
      assert.ok(Number(a.headers.get('x-ratelimit-reset')) >= 1);
      assert.ok(Number(a.headers.get('retry-after')) >= 1);
    }
    // The window passes: accepted again.
    await sleep(1100);
    assert.equal((await post(`${app.url}/track`, track('rl_again'), limited)).status, 202);
  });

  test('the limit is per client: another client of the project is not limited by it', async () => {
    const a = await env.client(projectId, 'write', 2);
    const b = await env.client(projectId, 'write', 2);
    await Promise.all(Array.from({ length: 6 }, () => post(`${app.url}/track`, track('rl_a'), a)));
    assert.equal((await post(`${app.url}/track`, track('rl_b'), b)).status, 202);
  });

  test('rate 0 means unlimited', async () => {
    const unlimited = await env.client(projectId, 'write', 0);
    const statuses: number[] = [(await post(`${app.url}/track`, track('unlimited_warm'), unlimited)).status];
    for (let round = 0; round < 4; round++) {
      const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => post(`${app.url}/track`, track('unlimited', { i }), unlimited)));
      statuses.push(...answers.map((a) => a.status));
    }
    assert.deepEqual([...new Set(statuses)], [202]);
  });
});
