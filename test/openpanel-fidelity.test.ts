// semantics.md "OpenPanel fidelity" through the public API, against the real services:
// the client address from proxy headers (and TRUSTED_IP_HEADERS), device overrides, the
// referrer named by the page URL, the new filter operators in insights and export, nested
// increments, CORS on insights and export, wildcard and bare-host origins, pageviews on
// page and breakdown rows, and `cli project update` seen at once by a running API. Every
// expectation is worked out by hand from the events this file sends.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, startApp, post, get, track, waitFor, type Credentials } from './support/harness';
import { runCli } from '../internal/cli/cli';

const CHROME_UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let narrowApp: Awaited<ReturnType<typeof startApp>>;
let projectId: string;
let writer: Credentials;
let reader: Credentials;
let uniq = 0;
const freshUa = () => `${CHROME_UA} fidelity/${++uniq}`;

before(async () => {
  env = await new TestEnv('opfid').setup();
  app = await startApp(env);
  // A second API on the same namespace (same device salts) that trusts cf-connecting-ip only.
  narrowApp = await startApp(env, { api: true, worker: false }, { TRUSTED_IP_HEADERS: 'cf-connecting-ip' });
  projectId = await env.project({ name: 'Fidelity', origins: ['https://*.example.com', 'shop.test'] });
  writer = await env.client(projectId, 'write', 0);
  reader = await env.client(projectId, 'read');
});

after(async () => {
  await narrowApp?.drain();
  await app?.drain();
  await env?.teardown();
});

const eventRow = (name: string) =>
  waitFor(async () => (await env.db.query('SELECT * FROM events WHERE project_id = $1 AND name = $2', [projectId, name])).rows[0], { what: `event ${name}` });

function accepted(r: { status: number; body: any }): string {
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.deviceId;
}

describe('client address', () => {
  test('x-forwarded-for: the first public entry names the client (geo and device id)', async () => {
    const ua = freshUa();
    const viaClientIp = accepted(await post(`${app.url}/track`, track('ip_plain'), writer, { userAgent: ua, ip: '8.8.8.8' }));
    const viaForwarded = accepted(await post(`${app.url}/track`, track('ip_xff'), writer, {
      userAgent: ua, headers: { 'x-forwarded-for': '10.1.2.3, 192.168.0.9, 8.8.8.8, 1.1.1.1' },
    }));
    assert.equal(viaForwarded, viaClientIp, 'same device as x-client-ip 8.8.8.8');
    const row = await eventRow('ip_xff');
    // DB-IP City Lite places 8.8.8.8 at Google in Mountain View, California.
    assert.deepEqual([row.country, row.city], ['US', 'Mountain View']);
  });

  test('cf-connecting-ip, true-client-ip and x-real-ip in order; x-client-ip first of all', async () => {
    const ua = freshUa();
    const device = (headers: Record<string, string>) => post(`${app.url}/track`, track('ip_order'), writer, { userAgent: ua, headers }).then(accepted);
    const of8 = await device({ 'x-client-ip': '8.8.8.8' });
    const of9 = await device({ 'x-client-ip': '9.9.9.9' });
    assert.notEqual(of8, of9);
    assert.equal(await device({ 'cf-connecting-ip': '8.8.8.8', 'true-client-ip': '9.9.9.9', 'x-real-ip': '9.9.9.9', 'x-forwarded-for': '9.9.9.9' }), of8);
    assert.equal(await device({ 'true-client-ip': '8.8.8.8', 'x-real-ip': '9.9.9.9' }), of8);
    assert.equal(await device({ 'x-real-ip': '8.8.8.8', 'x-forwarded-for': '9.9.9.9' }), of8);
    assert.equal(await device({ 'x-client-ip': '9.9.9.9', 'openpanel-client-ip': '8.8.8.8' }), of9);
    assert.equal(await device({ 'openpanel-client-ip': '8.8.8.8', 'cf-connecting-ip': '9.9.9.9' }), of8);
  });

  test('TRUSTED_IP_HEADERS=cf-connecting-ip: other headers are not read', async () => {
    const ua = freshUa();
    const of8 = accepted(await post(`${app.url}/track`, track('ip_trusted'), writer, { userAgent: ua, ip: '8.8.8.8' }));
    const narrow = accepted(await post(`${narrowApp.url}/track`, track('ip_trusted'), writer, {
      userAgent: ua, headers: { 'x-client-ip': '9.9.9.9', 'x-forwarded-for': '9.9.9.9', 'cf-connecting-ip': '8.8.8.8' },
    }));
    assert.equal(narrow, of8);
    // x-client-ip alone is ignored there: the socket address (loopback) decides
    const ofLoopback = accepted(await post(`${app.url}/track`, track('ip_trusted'), writer, { userAgent: ua, ip: '127.0.0.1' }));
    const untrusted = accepted(await post(`${narrowApp.url}/track`, track('ip_trusted'), writer, { userAgent: ua, ip: '8.8.8.8' }));
    assert.equal(untrusted, ofLoopback);
  });
});

describe('device overrides and server-side user-agents', () => {
  test('an app behind okhttp: __os .. __model are the device, and are no custom properties', async () => {
    accepted(await post(`${app.url}/track`, track('app_open', {
      __os: 'Android', __osVersion: '14', __device: 'mobile', __brand: 'Samsung', __model: 'SM-S918B', screen: 'home',
    }), writer, { userAgent: 'okhttp/4.12.0', ip: '8.8.8.8' }));
    const row = await eventRow('app_open');
    assert.deepEqual(
      [row.device, row.os, row.os_version, row.brand, row.model, row.browser, row.browser_version],
      ['mobile', 'Android', '14', 'Samsung', 'SM-S918B', '', ''],
    );
    assert.deepEqual(row.properties, { screen: 'home' });
  });

  test('a browser keeps what is not overridden', async () => {
    accepted(await post(`${app.url}/event`, { name: 'shell_open', properties: { __browser: 'MyShell', __browserVersion: '2.1' } }, writer, { userAgent: CHROME_UA, ip: '8.8.8.8' }));
    const row = await eventRow('shell_open');
    assert.deepEqual([row.device, row.os, row.browser, row.browser_version], ['desktop', 'Windows', 'MyShell', '2.1']);
    assert.deepEqual(row.properties, {});
  });

  test('an over-long override is a 400 naming it', async () => {
    const r = await post(`${app.url}/track`, track('too_long', { __model: 'm'.repeat(300) }), writer, { userAgent: 'okhttp/4.12.0' });
    assert.equal(r.status, 400);
    assert.deepEqual(r.body.details.issues[0].path, ['payload', 'properties', '__model']);
  });
});

describe('referrer from the page URL', () => {
  test('utm_source=twitter with no referrer: Twitter, social; ref=producthunt: itself, unknown; an external referrer wins', async () => {
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://shop.example.com/?utm_source=twitter', __title: 'A' }), writer, { userAgent: freshUa(), ip: '8.8.8.8' }));
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://shop.example.com/launch?ref=producthunt', __title: 'B' }), writer, { userAgent: freshUa(), ip: '8.8.8.8' }));
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://shop.example.com/?utm_source=twitter', __referrer: 'https://www.google.com/' }), writer, { userAgent: freshUa(), ip: '8.8.8.8' }));
    const rows = await waitFor(async () => {
      const r = await env.db.query(`SELECT path, referrer, referrer_name, referrer_type FROM events WHERE project_id = $1 AND name = 'screen_view' AND origin = 'https://shop.example.com' ORDER BY referrer_name`, [projectId]);
      return r.rows.length === 3 ? r.rows : undefined;
    }, { what: 'three page views' });
    assert.deepEqual(rows!.map((r) => [r.referrer, r.referrer_name, r.referrer_type]), [
      ['https://www.google.com', 'Google', 'search'],
      ['', 'Twitter', 'social'],
      ['', 'producthunt', 'unknown'],
    ]);
  });
});

describe('filters gt/gte/lt/lte and isNull/isNotNull through insights and export', () => {
  // Four visitors on day D, one session each: a page view, then a purchase whose amount is
  // 5, 20, "abc" or missing. Visitor 1 came from Google; the others had no referrer.
  const day = new Date(Date.now() - 5 * 86_400_000).toISOString().slice(0, 10);
  const at = (h: number, m = 0) => `${day}T${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00.000Z`;
  const amounts: (number | string | undefined)[] = [5, 20, 'abc', undefined];
  let filterProject: string;
  let filterReader: Credentials;

  before(async () => {
    filterProject = await env.project({ name: 'Filters' });
    const w = await env.client(filterProject, 'write', 0);
    filterReader = await env.client(filterProject, 'read');
    for (let i = 0; i < amounts.length; i++) {
      const ua = freshUa();
      const view = { __path: `https://f.example/p${i}`, __timestamp: at(10 + i), ...(i === 0 ? { __referrer: 'https://www.google.com/' } : {}) };
      accepted(await post(`${app.url}/track`, track('screen_view', view), w, { userAgent: ua, ip: '8.8.8.8' }));
      const props = { __timestamp: at(10 + i, 1), __path: `https://f.example/p${i}`, ...(amounts[i] === undefined ? {} : { amount: amounts[i] }) };
      accepted(await post(`${app.url}/track`, track('purchase', props), w, { userAgent: ua, ip: '8.8.8.8' }));
    }
    await waitFor(async () => Number((await env.db.query("SELECT count(*) AS n FROM events WHERE project_id = $1 AND name IN ('screen_view', 'purchase')", [filterProject])).rows[0].n) === 8, { what: '8 events' });
  });

  const sessionsWith = async (filters: unknown[]) => {
    const r = await get(`${app.url}/insights/${filterProject}/metrics?startDate=${day}&endDate=${day}&filters=${encodeURIComponent(JSON.stringify(filters))}`, filterReader);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.metrics.total_sessions as number;
  };
  const exported = async (filters: unknown[]) => {
    const r = await get(`${app.url}/export/events?event=purchase&includes=properties&filters=${encodeURIComponent(JSON.stringify(filters))}`, filterReader);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return (r.body.data as { properties: { amount?: unknown } }[]).map((e) => e.properties.amount ?? null).sort((a, b) => String(a).localeCompare(String(b)));
  };

  test('insights: a session counts when one of its events compares so; "abc" and a missing amount never do', async () => {
    assert.equal(await sessionsWith([]), 4);
    assert.equal(await sessionsWith([{ name: 'properties.amount', operator: 'gt', value: ['10'] }]), 1); // 20
    assert.equal(await sessionsWith([{ name: 'properties.amount', operator: 'gte', value: [5] }]), 2); // 5, 20
    assert.equal(await sessionsWith([{ name: 'properties.amount', operator: 'lt', value: ['20'] }]), 1); // 5
    assert.equal(await sessionsWith([{ name: 'properties.amount', operator: 'lte', value: ['20', '1'] }]), 2); // 5, 20 (any value)
    assert.equal(await sessionsWith([{ name: 'properties.amount', operator: 'isNotNull', value: [] }]), 3); // 5, 20, "abc"
    // session level: only visitor 1 has a referrer
    assert.equal(await sessionsWith([{ name: 'referrer_name', operator: 'isNull', value: [] }]), 3);
    assert.equal(await sessionsWith([{ name: 'referrer_name', operator: 'isNotNull' }]), 1);
  });

  test('export: the same operators on each event', async () => {
    assert.deepEqual(await exported([{ name: 'properties.amount', operator: 'gt', value: ['10'] }]), [20]);
    assert.deepEqual(await exported([{ name: 'properties.amount', operator: 'lte', value: ['5.0'] }]), [5]);
    assert.deepEqual(await exported([{ name: 'properties.amount', operator: 'gte', value: ['-1e3'] }]), [20, 5]);
    assert.deepEqual(await exported([{ name: 'properties.amount', operator: 'isNull', value: [] }]), [null]);
    assert.deepEqual(await exported([{ name: 'properties.amount', operator: 'isNotNull', value: [] }]), [20, 5, 'abc']);
  });

  test('a value that is not a number for gt, or an empty value for is, is a 400 naming it', async () => {
    const bad = await get(`${app.url}/export/events?filters=${encodeURIComponent(JSON.stringify([{ name: 'properties.amount', operator: 'gt', value: ['ten'] }]))}`, filterReader);
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.body.details.issues[0].path, ['filters', '0', 'value', '0']);
    const empty = await get(`${app.url}/insights/${filterProject}/metrics?filters=${encodeURIComponent(JSON.stringify([{ name: 'path', operator: 'is', value: [] }]))}`, filterReader);
    assert.equal(empty.status, 400);
  });
});

describe('pageviews on page and breakdown rows', () => {
  // Day D: a Chrome visitor views /a, /a (a click between) and /b; a Firefox visitor views /a.
  const day = new Date(Date.now() - 4 * 86_400_000).toISOString().slice(0, 10);
  const at = (h: number, m = 0) => `${day}T${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00.000Z`;
  const FIREFOX_UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0';
  let pvProject: string;
  let pvReader: Credentials;
  const read = async (what: string) => {
    const r = await get(`${app.url}/insights/${pvProject}/${what}?startDate=${day}&endDate=${day}&limit=50`, pvReader);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body;
  };

  before(async () => {
    pvProject = await env.project({ name: 'Pageviews' });
    const w = await env.client(pvProject, 'write', 0);
    pvReader = await env.client(pvProject, 'read');
    const chrome = freshUa();
    const firefox = `${FIREFOX_UA} fidelity/${++uniq}`;
    const sends: [string, string, string, string][] = [
      [chrome, 'screen_view', '/a', at(10, 0)], [chrome, 'screen_view', '/a', at(10, 1)], [chrome, 'click', '/a', at(10, 2)],
      [chrome, 'screen_view', '/b', at(10, 3)], [firefox, 'screen_view', '/a', at(11, 0)],
    ];
    for (const [ua, name, path, ts] of sends) {
      accepted(await post(`${app.url}/track`, track(name, { __path: `https://pv.example${path}`, __timestamp: ts }), w, { userAgent: ua, ip: '8.8.8.8' }));
    }
    await waitFor(async () => (await read('metrics')).metrics.total_screen_views === 4, { what: '4 screen views' });
  });

  test('pages: views of the page (/a 3 in 2 sessions, /b 1); browser: the screen views of its sessions', async () => {
    const pages = (await read('pages')) as { path: string; sessions: number; pageviews: number }[];
    assert.deepEqual(pages.map((p) => [p.path, p.sessions, p.pageviews]), [['/a', 2, 3], ['/b', 1, 1]]);
    const browsers = (await read('browser')) as { name: string; sessions: number; pageviews: number }[];
    assert.deepEqual(browsers.map((b) => [b.name, b.sessions, b.pageviews]), [['Chrome', 1, 3], ['Firefox', 1, 1]]);
    const countries = (await read('country')) as { name: string; pageviews: number }[];
    assert.deepEqual(countries.map((c) => [c.name, c.pageviews]), [['US', 4]]);
  });
});

describe('nested increments', () => {
  test('increment stats.logins twice and decrement once: {stats: {logins: 1}}; a non-numeric target is a recorded failure', async () => {
    const inc = (type: string, property: string, value: number) =>
      post(`${app.url}/track`, { type, payload: { profileId: 'nested-1', property, value } }, writer, { userAgent: freshUa() }).then(accepted);
    await inc('increment', 'stats.logins', 1);
    await inc('increment', 'stats.logins', 1);
    await inc('decrement', 'stats.logins', 1);
    accepted(await post(`${app.url}/track`, { type: 'identify', payload: { profileId: 'nested-1', properties: { plan: 'pro' } } }, writer));
    // Each request comes from its own device (its own shard): ops of different shards have no
    // order between them, so the string must be stored before the increment that hits it.
    await waitFor(async () => (await env.db.query('SELECT properties->>\'plan\' AS plan FROM profiles WHERE project_id = $1 AND id = $2', [projectId, 'nested-1'])).rows[0]?.plan === 'pro', { what: 'the identify' });
    await inc('increment', 'plan.count', 1); // plan is a string: no object to go into
    const failure = await waitFor(async () => (await env.db.query("SELECT * FROM op_failures WHERE project_id = $1 AND payload->>'profileId' = 'nested-1'", [projectId])).rows[0], { what: 'the failure' });
    assert.match(failure.reason, /plan\.count/);
    const props = (await env.db.query('SELECT properties FROM profiles WHERE project_id = $1 AND id = $2', [projectId, 'nested-1'])).rows[0].properties;
    assert.deepEqual(props, { stats: { logins: 1 }, plan: 'pro' });
  });
});

describe('CORS', () => {
  const readPaths = () => [`/insights/${projectId}/metrics`, `/insights/${projectId}/live`, `/insights/${projectId}/country`, '/export/events', '/export/charts'];

  test('insights and export answer a preflight from any origin', async () => {
    for (const path of readPaths()) {
      const r = await fetch(`${app.url}${path}`, {
        method: 'OPTIONS',
        headers: { origin: 'https://dash.anywhere.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'service-client-id, service-client-secret' },
      });
      assert.equal(r.status, 204, path);
      assert.equal(r.headers.get('access-control-allow-origin'), '*', path);
      assert.match(r.headers.get('access-control-allow-methods') ?? '', /GET/);
      const allowed = (r.headers.get('access-control-allow-headers') ?? '').split(',').map((h) => h.trim());
      for (const h of ['service-client-id', 'service-client-secret', 'openpanel-client-id', 'openpanel-client-secret']) assert.ok(allowed.includes(h), `${path} allows ${h}`);
    }
  });

  test('their answers carry Access-Control-Allow-Origin: * (errors too) and expose the rate-limit headers', async () => {
    const ok = await get(`${app.url}/insights/${projectId}/metrics`, reader, { origin: 'https://dash.anywhere.example' });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('access-control-allow-origin'), '*');
    assert.match(ok.headers.get('access-control-expose-headers') ?? '', /X-RateLimit-Remaining/);
    const denied = await get(`${app.url}/export/events?projectId=${projectId}`, null, { origin: 'https://dash.anywhere.example' });
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get('access-control-allow-origin'), '*');
  });

  test('ingest keeps the project origins: its preflight and answers name the origin, not *', async () => {
    const r = await fetch(`${app.url}/track`, { method: 'OPTIONS', headers: { origin: 'https://a.example.com', 'access-control-request-method': 'POST' } });
    assert.equal(r.status, 204);
    assert.equal(r.headers.get('access-control-allow-origin'), 'https://a.example.com');
  });
});

describe('allowed origins', () => {
  const browser = (origin: string) => post(`${app.url}/track`, track('browser_probe'), null, { headers: { 'openpanel-client-id': writer.clientId, origin }, userAgent: CHROME_UA });

  test('https://*.example.com: any subdomain over https, never the apex, never a suffix trick', async () => {
    for (const origin of ['https://a.example.com', 'https://deep.sub.example.com']) assert.equal((await browser(origin)).status, 202, origin);
    for (const origin of ['https://example.com', 'http://a.example.com', 'https://example.com.evil.net', 'https://evilexample.com']) assert.equal((await browser(origin)).status, 401, origin);
  });

  test('a bare host: over https or http, that host only', async () => {
    assert.equal((await browser('https://shop.test')).status, 202);
    assert.equal((await browser('http://shop.test')).status, 202);
    assert.equal((await browser('https://www.shop.test')).status, 401);
    assert.equal((await browser('https://shop.test.evil.net')).status, 401);
  });
});

describe('cli project update, seen at once by the running API', () => {
  test('origins: a new one is allowed and a removed one refused at once', async () => {
    const p = await env.project({ name: 'Live update', origins: ['https://before.example'] });
    const w = await env.client(p, 'write', 0);
    const browser = (origin: string) => post(`${app.url}/track`, track('origin_probe'), null, { headers: { 'openpanel-client-id': w.clientId, origin } });
    assert.equal((await browser('https://before.example')).status, 202); // the row is cached now
    assert.equal((await browser('https://after.example')).status, 401);
    const out = await runCli(['project', 'update', '--project', p, '--origins', 'https://after.example'], env.config());
    assert.deepEqual(out, { id: p, name: 'Live update', timezone: 'UTC' });
    await waitFor(async () => (await browser('https://after.example')).status === 202, { timeoutMs: 1000, intervalMs: 20, what: 'the new origin' });
    assert.equal((await browser('https://before.example')).status, 401);
  });

  test('timezone: the next read buckets days in the new timezone', async () => {
    const p = await env.project({ name: 'TZ update', timezone: 'UTC' });
    const w = await env.client(p, 'write', 0);
    const r = await env.client(p, 'read');
    // One page view at 02:00 UTC on day D: day D in UTC, day D-1 (22:00) in New York (UTC-4/-5).
    const d = new Date(Date.now() - 4 * 86_400_000);
    const dayD = d.toISOString().slice(0, 10);
    const dayBefore = new Date(Date.parse(`${dayD}T00:00:00Z`) - 86_400_000).toISOString().slice(0, 10);
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://tz.example/', __timestamp: `${dayD}T02:00:00.000Z` }), w, { userAgent: freshUa(), ip: '8.8.8.8' }));
    const perDay = async () => {
      const res = await get(`${app.url}/insights/${p}/metrics?startDate=${dayBefore}&endDate=${dayD}`, r);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return (res.body.series as { total_sessions: number }[]).map((b) => b.total_sessions);
    };
    await waitFor(async () => (await perDay()).reduce((a, b) => a + b, 0) === 1, { what: 'the session' });
    // Two days: hourly buckets (48) in UTC; the session is in hour 24 + 2 = 26 (D 02:00).
    const utc = await perDay();
    assert.equal(utc.length, 48);
    assert.equal(utc.indexOf(1), 26);
    await runCli(['project', 'update', '--project', p, '--timezone', 'America/New_York'], env.config());
    const ny = await perDay();
    // New York: D-1 at 22:00 (EDT) or 21:00 (EST) local: that hour of the first local day.
    const localHour = Number(new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', hour: 'numeric', hourCycle: 'h23' }).format(new Date(`${dayD}T02:00:00Z`)));
    assert.ok(localHour === 21 || localHour === 22);
    assert.equal(ny.length, 48);
    assert.equal(ny.indexOf(1), localHour);
  });
});

describe('server-side events', () => {
  // Day D (UTC project): u1 views a page in Chrome at 10:00; its backend sends `purchase` for u1
  // at 10:05 (user-agent node): it joins u1's open session. okhttp with profileId u2 (no browser
  // session of u2), python-requests and curl without a profile: stored without a session. An app
  // behind okhttp with __os .. __model overrides at 10:20 (profileId u3): a device, so a session.
  // Expected on D: 2 sessions (u1's, u3's), 2 visitors, 1 screen view, both sessions bounced
  // (at most one screen view), durations 0 (the joined purchase does not lengthen u1's session).
  const day = new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10);
  const at = (h: number, m = 0) => `${day}T${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00.000Z`;
  let sp: string;
  let w: Credentials;
  let r: Credentials;
  const rowsOf = (name: string) => env.db.query('SELECT id, session_id, profile_id, device FROM events WHERE project_id = $1 AND name = $2 ORDER BY created_at', [sp, name]);

  before(async () => {
    sp = await env.project({ name: 'Server side' });
    w = await env.client(sp, 'write', 0);
    r = await env.client(sp, 'read');
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://s.example/a', __timestamp: at(10) }, { profileId: 'u1' }), w, { userAgent: freshUa(), ip: '8.8.8.8' }));
    accepted(await post(`${app.url}/track`, track('purchase', { __timestamp: at(10, 5), amount: 3 }, { profileId: 'u1' }), w, { userAgent: 'node', ip: '9.9.9.9' }));
    accepted(await post(`${app.url}/track`, track('srv', { __timestamp: at(10, 10) }, { profileId: 'u2' }), w, { userAgent: 'okhttp/4.12.0', ip: '9.9.9.9' }));
    accepted(await post(`${app.url}/track`, track('srv', { __timestamp: at(10, 11) }), w, { userAgent: 'python-requests/2.31.0', ip: '9.9.9.9' }));
    accepted(await post(`${app.url}/track`, track('srv', { __timestamp: at(10, 12) }), w, { userAgent: 'curl/8.4.0', ip: '9.9.9.9' }));
    accepted(await post(`${app.url}/track`, track('app_open', { __timestamp: at(10, 20), __os: 'Android', __device: 'mobile', __brand: 'Samsung', __model: 'SM-S918B' }, { profileId: 'u3' }), w, { userAgent: 'okhttp/4.12.0', ip: '9.9.9.9' }));
    await waitFor(async () => Number((await env.db.query("SELECT count(*) AS n FROM events WHERE project_id = $1 AND name IN ('screen_view', 'purchase', 'srv', 'app_open')", [sp])).rows[0].n) === 6, { what: '6 events' });
  });

  test('a server event of a profile whose session is open joins it; the others are stored without a session and open none', async () => {
    const [view] = (await rowsOf('screen_view')).rows;
    const [purchase] = (await rowsOf('purchase')).rows;
    assert.ok(view.session_id);
    assert.equal(purchase.session_id, view.session_id, 'u1\'s purchase joins u1\'s session');
    assert.deepEqual((await rowsOf('srv')).rows.map((x) => x.session_id), [null, null, null]);
    assert.ok((await rowsOf('app_open')).rows[0].session_id, 'an app with device overrides is a device: its session');
    const starts = await env.db.query("SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = 'session_start'", [sp]);
    assert.equal(starts.rows[0].n, 2, 'two sessions started: u1 in Chrome, u3 in the app');
    const ex = await get(`${app.url}/export/events?event=purchase&start=${day}&end=${day}`, r);
    assert.equal(ex.status, 200);
    assert.equal(ex.body.data[0].sessionId, view.session_id);
  });

  test('insights: never in sessions, bounce, duration or visitors', async () => {
    const m = await get(`${app.url}/insights/${sp}/metrics?startDate=${day}&endDate=${day}`, r);
    assert.equal(m.status, 200, JSON.stringify(m.body));
    assert.deepEqual(m.body.metrics, {
      bounce_rate: 100, unique_visitors: 2, total_sessions: 2, avg_session_duration: 0, total_screen_views: 1, views_per_session: 0.5,
    });
    const device = await get(`${app.url}/insights/${sp}/device?startDate=${day}&endDate=${day}`, r);
    assert.deepEqual(device.body.map((x: { name: string; sessions: number }) => [x.name, x.sessions]).sort(), [['desktop', 1], ['mobile', 1]]);
  });

  test('export and event charts count them', async () => {
    const ex = await get(`${app.url}/export/events?event=srv&start=${day}&end=${day}`, r);
    assert.equal(ex.body.meta.totalCount, 3);
    const series = encodeURIComponent(JSON.stringify([{ name: 'srv' }, { name: 'purchase' }]));
    const chart = await get(`${app.url}/export/charts?series=${series}&startDate=${day}&endDate=${day}&interval=day`, r);
    assert.equal(chart.status, 200, JSON.stringify(chart.body));
    assert.deepEqual(chart.body.series.map((s: { metrics: { count: number } }) => s.metrics.count), [3, 1]);
  });

  test('the profile\'s session open at the event\'s time is found: after a backfill sent late, with __deviceId, for an anonymous visitor\'s deviceId', async () => {
    const jp = await env.project({ name: 'Server join' });
    const jw = await env.client(jp, 'write', 0);
    const ago = (min: number) => new Date(Date.now() - min * 60_000).toISOString();
    // bf: a visit 10 minutes ago on device 1, then a backfilled one of 50 minutes ago on device 2, sent after it
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://s.example/1', __timestamp: ago(10) }, { profileId: 'bf' }), jw, { userAgent: freshUa(), ip: '21.0.0.1' }));
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://s.example/2', __timestamp: ago(50) }, { profileId: 'bf' }), jw, { userAgent: freshUa(), ip: '21.0.0.2' }));
    accepted(await post(`${app.url}/track`, track('srv_bf', {}, { profileId: 'bf' }), jw, { userAgent: 'node', ip: '9.9.9.9' }));
    // dy: the backend names a device of its own (__deviceId) and the profile
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://s.example/3', __timestamp: ago(6) }, { profileId: 'dy' }), jw, { userAgent: freshUa(), ip: '21.0.0.6' }));
    accepted(await post(`${app.url}/track`, track('srv_dy', { __deviceId: 'backend-1', __timestamp: ago(5) }, { profileId: 'dy' }), jw, { userAgent: 'node', ip: '9.9.9.9' }));
    // an anonymous visitor: its profileId is its deviceId D; the backend sends D as the profileId
    const d = accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://s.example/4', __timestamp: ago(7) }), jw, { userAgent: freshUa(), ip: '21.0.0.7' }));
    accepted(await post(`${app.url}/track`, track('srv_anon', { __timestamp: ago(6) }, { profileId: d }), jw, { userAgent: 'node', ip: '9.9.9.9' }));
    const rows = await waitFor(async () => {
      const r = await env.db.query(`SELECT e.name, e.session_id, s.profile_id FROM events e LEFT JOIN sessions s ON s.id = e.session_id
        WHERE e.project_id = $1 AND e.name LIKE 'srv_%' ORDER BY e.name`, [jp]);
      return r.rows.length === 3 ? r.rows : undefined;
    }, { what: 'three server events' });
    assert.deepEqual(rows!.map((x) => [x.name, x.session_id !== null, x.profile_id]), [['srv_anon', true, d], ['srv_bf', true, 'bf'], ['srv_dy', true, 'dy']]);
    const bfSession = await env.db.query(`SELECT s.started_at FROM events e JOIN sessions s ON s.id = e.session_id WHERE e.project_id = $1 AND e.name = 'srv_bf'`, [jp]);
    assert.ok(Date.now() - new Date(bfSession.rows[0].started_at).getTime() < 11 * 60_000, 'the visit of 10 minutes ago, open now, not the backfilled one');
  });

  test('a server event that joins no session keeps its own device (user-agent + IP, or __deviceId); one that joins takes the session\'s', async () => {
    const op = await env.project({ name: 'Server own device' });
    const ow = await env.client(op, 'write', 0);
    const ago = (min: number) => new Date(Date.now() - min * 60_000).toISOString();
    const browser = accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://s.example/o', __timestamp: ago(50) }, { profileId: 'gone' }), ow, { userAgent: freshUa(), ip: '22.0.0.1' }));
    const open = accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://s.example/p', __timestamp: ago(3) }, { profileId: 'here' }), ow, { userAgent: freshUa(), ip: '22.0.0.2' }));
    // Its own device: what an anonymous `node` event from the same address gets.
    const nodeDevice = accepted(await post(`${app.url}/track`, track('srv_anon_probe'), ow, { userAgent: 'node', ip: '9.9.9.8' }));
    // gone's session ended 20 minutes ago: queued on gone's browser device, it joins nothing.
    assert.equal(accepted(await post(`${app.url}/track`, track('srv_late', {}, { profileId: 'gone' }), ow, { userAgent: 'node', ip: '9.9.9.8' })), nodeDevice, 'the 202 names its own device');
    accepted(await post(`${app.url}/track`, track('srv_late_own', { __deviceId: 'backend-7' }, { profileId: 'gone' }), ow, { userAgent: 'node', ip: '9.9.9.8' }));
    // here's session is open: the event joins it and takes its device; the 202 still names its own.
    assert.equal(accepted(await post(`${app.url}/track`, track('srv_join', {}, { profileId: 'here' }), ow, { userAgent: 'node', ip: '9.9.9.8' })), nodeDevice);
    const rows = await waitFor(async () => {
      const r = await env.db.query(`SELECT name, device_id, session_id FROM events WHERE project_id = $1 AND name IN ('srv_late', 'srv_late_own', 'srv_join') ORDER BY name`, [op]);
      return r.rows.length === 3 ? r.rows : undefined;
    }, { what: 'three server events' });
    assert.deepEqual(rows!.map((x) => [x.name, x.device_id, x.session_id !== null]), [
      ['srv_join', open, true], ['srv_late', nodeDevice, false], ['srv_late_own', 'backend-7', false],
    ]);
    assert.notEqual(browser, nodeDevice);
  });

  test('live visitors: server-only events count no one; a browser event does', async () => {
    const lp = await env.project({ name: 'Server live' });
    const lw = await env.client(lp, 'write', 0);
    const lr = await env.client(lp, 'read');
    for (const ua of ['node', 'python-requests/2.31.0', 'okhttp/4.12.0']) accepted(await post(`${app.url}/track`, track('srv'), lw, { userAgent: ua, ip: '9.9.9.9' }));
    assert.deepEqual((await get(`${app.url}/insights/${lp}/live`, lr)).body, { visitors: 0 });
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://s.example/' }), lw, { userAgent: freshUa(), ip: '8.8.8.8' }));
    assert.deepEqual((await get(`${app.url}/insights/${lp}/live`, lr)).body, { visitors: 1 });
  });
});

describe('identify within a session', () => {
  // Day D: device A (Chrome) views /a anonymously at 10:00, then /b as alice at 10:01; device B
  // (Firefox, another address) views /c as alice at 10:20; device C views /d anonymously at
  // 10:30. The whole of A's session is alice's: 3 sessions, 2 visitors (alice, C's device).
  const day = new Date(Date.now() - 2 * 86_400_000).toISOString().slice(0, 10);
  const at = (h: number, m = 0) => `${day}T${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00.000Z`;
  const FIREFOX_UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0';

  test('unique visitors count the profile once across its sessions and devices', async () => {
    const ip = await env.project({ name: 'Identify' });
    const w = await env.client(ip, 'write', 0);
    const r = await env.client(ip, 'read');
    const a = freshUa();
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://i.example/a', __timestamp: at(10) }), w, { userAgent: a, ip: '2.2.2.2' }));
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://i.example/b', __timestamp: at(10, 1) }, { profileId: 'alice' }), w, { userAgent: a, ip: '2.2.2.2' }));
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://i.example/c', __timestamp: at(10, 20) }, { profileId: 'alice' }), w, { userAgent: FIREFOX_UA, ip: '3.3.3.3' }));
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://i.example/d', __timestamp: at(10, 30) }), w, { userAgent: freshUa(), ip: '4.4.4.4' }));
    await waitFor(async () => Number((await env.db.query("SELECT count(*) AS n FROM events WHERE project_id = $1 AND name = 'screen_view'", [ip])).rows[0].n) === 4, { what: '4 views' });
    const m = await get(`${app.url}/insights/${ip}/metrics?startDate=${day}&endDate=${day}`, r);
    assert.equal(m.status, 200, JSON.stringify(m.body));
    assert.equal(m.body.metrics.total_sessions, 3);
    assert.equal(m.body.metrics.unique_visitors, 2);
    const profiles = await env.db.query('SELECT profile_id FROM sessions WHERE project_id = $1 ORDER BY started_at', [ip]);
    assert.deepEqual(profiles.rows.map((x) => x.profile_id).slice(0, 2), ['alice', 'alice']);
  });

  test('live visitors: a device identified after anonymous events is its profile, counted once, also for its later anonymous events', async () => {
    const lp = await env.project({ name: 'Identify live' });
    const w = await env.client(lp, 'write', 0);
    const r = await env.client(lp, 'read');
    const a = freshUa();
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://i.example/a' }), w, { userAgent: a, ip: '2.2.2.2' }));
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://i.example/x' }), w, { userAgent: freshUa(), ip: '5.5.5.5' }));
    const live = async () => waitFor(async () => {
      const v = (await get(`${app.url}/insights/${lp}/live`, r)).body.visitors as number;
      return v;
    }, { what: 'the live count' });
    assert.equal(await live(), 2, 'two anonymous devices');
    // Without the rule the count would reach 3 (A's anonymous id, X's, bob) within a second.
    const readings = async () => {
      const seen: number[] = [];
      for (let i = 0; i < 12; i++) {
        seen.push((await get(`${app.url}/insights/${lp}/live`, r)).body.visitors);
        await new Promise((res) => setTimeout(res, 125));
      }
      return seen;
    };
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://i.example/b' }, { profileId: 'bob' }), w, { userAgent: a, ip: '2.2.2.2' }));
    assert.deepEqual(await readings(), Array(12).fill(2), 'still two: device A is bob now');
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://i.example/c' }, { profileId: 'bob' }), w, { userAgent: FIREFOX_UA, ip: '3.3.3.3' }));
    assert.deepEqual(await readings(), Array(12).fill(2), 'bob on a second device is still bob');
    // A reload on device A sends an anonymous event before the page identifies again: the
    // session is bob's (insights count it as bob), so live does too.
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://i.example/e' }), w, { userAgent: a, ip: '2.2.2.2' }));
    assert.deepEqual(await readings(), Array(12).fill(2), 'an anonymous event of the identified device is still bob');
    // A third visitor shows at once: the readings above were not stale.
    accepted(await post(`${app.url}/track`, track('screen_view', { __path: 'https://i.example/d' }), w, { userAgent: freshUa(), ip: '6.6.6.6' }));
    await waitFor(async () => (await live()) === 3 || undefined, { timeoutMs: 2000, what: 'three visitors' });
  });
});
