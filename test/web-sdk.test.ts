// OpenPanel's own SDKs against Tidemark, unchanged: the JavaScript SDK (@openpanel/sdk, what
// @openpanel/web builds on; re-exported by @openpanel/web as OpenPanelBase) with a client
// secret, as a server would use it, and @openpanel/web's client as a browser page uses it
// (client id only, the page's Origin listed on the project). Every request the SDK makes is
// recorded (the SDK swallows errors: it retries, logs and resolves null), and what it sent
// must land in PostgreSQL.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { OpenPanel as WebOpenPanel, OpenPanelBase } from '@openpanel/web';
import { TestEnv, startApp, waitFor } from './support/harness';

interface Sent {
  url: string;
  headers: Record<string, string>;
  body: any;
  status: number;
}

const sent: Sent[] = [];
const realFetch = globalThis.fetch;

/** Records the SDK's requests and Tidemark's answers (the SDK itself hides non-2xx answers). */
function recordFetch(): void {
  globalThis.fetch = async (input: Parameters<typeof fetch>[0], init?: RequestInit) => {
    const res = await realFetch(input, init);
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((v, k) => (headers[k] = v));
    sent.push({ url: String(input), headers, body: typeof init?.body === 'string' ? JSON.parse(init.body) : init?.body, status: res.status });
    return res;
  };
}

const ORIGIN = 'http://localhost:8080';
let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectId: string;

before(async () => {
  env = await new TestEnv('websdk').setup();
  app = await startApp(env);
  projectId = await env.project({ name: 'SDK', timezone: 'UTC', origins: [ORIGIN] });
  recordFetch();
});

after(async () => {
  globalThis.fetch = realFetch;
  await app?.drain();
  await env?.teardown();
});

test('@openpanel/sdk with a client secret: track, identify, increment, decrement, groups, revenue land in PostgreSQL', async () => {
  const writer = await env.client(projectId, 'write');
  const from = sent.length;
  const op = new OpenPanelBase({ clientId: writer.clientId, clientSecret: writer.clientSecret, apiUrl: app.url });
  op.setGlobalProperties({ app_version: '1.2.3' });

  const first = await op.track('signup_started', { plan: 'pro' });
  assert.match((first as { deviceId: string } | null)?.deviceId ?? '', /^[0-9a-f]{32}$/, 'the SDK reads the device id from the 202 body');
  assert.equal(op.getDeviceId(), (first as { deviceId: string }).deviceId);

  await op.identify({ profileId: 'user-1', firstName: 'Ada', lastName: 'Lovelace', email: 'ada@example.com', properties: { plan: 'pro' } });
  await op.increment({ profileId: 'user-1', property: 'logins', value: 3 });
  await op.decrement({ profileId: 'user-1', property: 'logins', value: 1 });
  await op.increment({ profileId: 'user-1', property: 'visits' }); // value left out: 1
  await op.upsertGroup({ id: 'org-1', type: 'company', name: 'Acme', properties: { seats: 5 } });
  await op.setGroup('org-1');
  await op.track('signup_done', { step: 2 }); // identified: profileId and groups come from the SDK's state
  await op.revenue(4990, { currency: 'EUR' });

  const mine = sent.slice(from);
  assert.deepEqual(
    mine.map((s) => `${s.body.type}:${s.status}`),
    ['track:202', 'identify:202', 'increment:202', 'decrement:202', 'increment:202', 'group:202', 'assign_group:202', 'track:202', 'track:202'],
  );
  for (const s of mine) {
    assert.equal(s.url, `${app.url}/track`);
    assert.equal(s.headers['openpanel-client-id'], writer.clientId);
    assert.equal(s.headers['openpanel-client-secret'], writer.clientSecret);
    assert.equal(s.headers['openpanel-sdk-name'], 'node');
    assert.equal(s.headers['content-type'], 'application/json');
  }

  const events = await waitFor(async () => {
    const r = await env.db.query(
      `SELECT name, profile_id, device_id, properties, groups FROM events WHERE project_id = $1 AND name IN ('signup_started', 'signup_done', 'revenue') ORDER BY created_at, name`,
      [projectId],
    );
    return r.rows.length === 3 ? r.rows : null;
  }, { what: 'three SDK events' });
  const byName = Object.fromEntries(events!.map((e) => [e.name, e]));
  assert.deepEqual(byName.signup_started.properties, { plan: 'pro', app_version: '1.2.3' });
  assert.equal(byName.signup_started.profile_id, byName.signup_started.device_id, 'anonymous: the profile is the device');
  assert.equal(byName.signup_done.profile_id, 'user-1');
  assert.deepEqual(byName.signup_done.groups, ['org-1']);
  assert.deepEqual(byName.signup_done.properties, { step: 2, app_version: '1.2.3' });
  assert.equal(byName.revenue.profile_id, 'user-1');
  // `__revenue` is not one of the reserved keys of the spec: it is kept as a property.
  assert.equal(byName.revenue.properties.__revenue, 4990);
  assert.equal(byName.revenue.properties.currency, 'EUR');

  const profile = await waitFor(async () => {
    const r = await env.db.query('SELECT * FROM profiles WHERE project_id = $1 AND id = $2', [projectId, 'user-1']);
    const p = r.rows[0];
    return p && p.properties.visits === 1 && p.groups.length === 1 ? p : null;
  }, { what: 'profile user-1 with every operation applied' });
  assert.equal(profile.first_name, 'Ada');
  assert.equal(profile.last_name, 'Lovelace');
  assert.equal(profile.email, 'ada@example.com');
  assert.equal(profile.properties.plan, 'pro');
  assert.equal(profile.properties.app_version, '1.2.3', 'identify carries the global properties');
  assert.equal(profile.properties.logins, 2, 'increment 3, decrement 1');
  assert.equal(profile.properties.visits, 1);
  assert.deepEqual(profile.groups, ['org-1']);
  const group = (await env.db.query('SELECT * FROM groups WHERE project_id = $1 AND id = $2', [projectId, 'org-1'])).rows[0];
  assert.equal(group?.type, 'company');
  assert.equal(group?.name, 'Acme');
  assert.deepEqual(group?.properties, { seats: 5 });
});

test('@openpanel/web as a page uses it: client id only, the Origin decides; the CORS preflight allows the SDK headers', async () => {
  const browser = await env.client(projectId, 'write');
  // What the browser asks before the SDK's first POST (custom headers: a preflight).
  const pre = await realFetch(`${app.url}/track`, {
    method: 'OPTIONS',
    headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,openpanel-client-id,openpanel-sdk-name,openpanel-sdk-version' },
  });
  assert.equal(pre.status, 204);
  const allowed = (pre.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
  for (const h of ['content-type', 'openpanel-client-id', 'openpanel-sdk-name', 'openpanel-sdk-version']) assert.ok(allowed.includes(h), `preflight allows ${h}`);
  assert.match(pre.headers.get('access-control-allow-methods') ?? '', /POST/);

  const from = sent.length;
  const op = new WebOpenPanel({ clientId: browser.clientId, apiUrl: app.url, trackScreenViews: true });
  // In a browser, fetch sends the page's Origin; here the SDK's own header hook adds it.
  op.api.addHeader('origin', ORIGIN);
  op.setGlobalProperties({ __referrer: 'https://news.example/item' });
  // The web SDK adds `__path` (the last screen view's URL; "" before the first one).
  const res = await op.track('cta_clicked', { button: 'hero' });
  assert.ok(res && 'deviceId' in res);

  const stranger = new WebOpenPanel({ clientId: browser.clientId, apiUrl: app.url });
  stranger.api.addHeader('origin', 'https://evil.example');
  assert.equal(await stranger.track('cta_clicked', { button: 'forged' }), null, 'the SDK resolves null on 401');

  const mine = sent.slice(from);
  assert.deepEqual(mine.map((s) => s.status), [202, 401]);
  assert.equal(mine[0]!.headers['openpanel-sdk-name'], 'web');
  assert.equal(mine[0]!.headers['openpanel-client-secret'], undefined);
  assert.equal(mine[0]!.body.payload.properties.__path, '');

  const row = await waitFor(async () => (await env.db.query("SELECT * FROM events WHERE project_id = $1 AND name = 'cta_clicked'", [projectId])).rows[0], { what: 'the web event' });
  assert.deepEqual(row.properties, { button: 'hero' });
  assert.equal(row.referrer, 'https://news.example/item');
});
