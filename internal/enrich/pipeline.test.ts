import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { blankEventRecord, createEnricher, EnrichStepError, GeoDatabaseError, runSteps, type DropReason, type Enricher, type Step } from './index';
import { keep } from './step';

const IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1';
const GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';

const pageView = (over: Parameters<typeof blankEventRecord>[0] = {}) =>
  blankEventRecord({
    id: '0190c0de-0000-7000-8000-000000000001',
    projectId: 'proj_1',
    name: 'screen_view',
    deviceId: '0123456789abcdef0123456789abcdef',
    profileId: 'user_42',
    createdAt: new Date('2024-05-01T12:00:00Z'),
    properties: { plan: 'pro' },
    ip: '81.2.69.142',
    userAgent: IPHONE,
    url: 'https://shop.example.com/pricing?utm_source=newsletter&utm_medium=email&utm_campaign=spring#plans',
    title: 'Pricing',
    referrer: 'https://l.facebook.com/',
    ...over,
  });

const stepCalls: [string, number][] = [];
const drops: DropReason[] = [];
let enricher: Enricher;
before(async () => {
  enricher = await createEnricher({ onStep: (s, ms) => stepCalls.push([s, ms]), onDrop: (r) => drops.push(r), stepSampleEvery: 1 });
});
after(() => enricher.close());

test('the steps run in this order', () => {
  assert.deepEqual(enricher.steps, ['checkRecord', 'putUrl', 'putUtm', 'putReferrer', 'putUserAgent', 'putBot', 'putGeo']);
  assert.match(enricher.geoSource, /dbip-city/);
});

test('a page view comes out fully enriched; the input is not mutated', () => {
  const input = pageView();
  const before = structuredClone(input);
  const result = enricher.enrich(input);
  assert.ok(result.ok);
  assert.deepEqual(input, before);
  assert.deepEqual(result.event, {
    ...before,
    origin: 'https://shop.example.com',
    path: '/pricing',
    referrer: 'https://l.facebook.com',
    referrer_name: 'Facebook',
    referrer_type: 'social',
    utm_source: 'newsletter',
    utm_medium: 'email',
    utm_campaign: 'spring',
    utm_term: '',
    utm_content: '',
    device: 'mobile',
    brand: 'Apple',
    model: 'iPhone',
    browser: 'Mobile Safari',
    browser_version: '17.4.1',
    os: 'iOS',
    os_version: '17.4.1',
    country: 'GB',
    region: 'England',
    city: 'London',
    latitude: result.event.latitude,
    longitude: result.event.longitude,
    isBot: false,
    botReason: null,
  });
  assert.equal(typeof result.event.latitude, 'number');
});

test('every step is timed through onStep, in order', () => {
  stepCalls.length = 0;
  enricher.enrich(pageView());
  assert.deepEqual(
    stepCalls.map(([s]) => s),
    enricher.steps,
  );
  for (const [, ms] of stepCalls) assert.ok(Number.isFinite(ms) && ms >= 0);
});

test('steps are timed for one event in stepSampleEvery (default 16); drops are counted for every event', async () => {
  const calls: string[] = [];
  const dropped: DropReason[] = [];
  const sampled = await createEnricher({ onStep: (s) => calls.push(s), onDrop: (r) => dropped.push(r), stepSampleEvery: 4 });
  try {
    for (let i = 0; i < 8; i++) sampled.enrich(pageView());
    assert.deepEqual(calls, [...sampled.steps, ...sampled.steps], 'events 1 and 5 of 8 timed, every step of each');
    for (let i = 0; i < 4; i++) sampled.enrich({ ...pageView(), name: '' });
    assert.equal(dropped.length, 4);
  } finally {
    sampled.close();
  }
  const byDefault = await createEnricher({ onStep: (s) => calls.push(s) });
  try {
    calls.length = 0;
    for (let i = 0; i < 32; i++) byDefault.enrich(pageView());
    assert.equal(calls.length, 2 * byDefault.steps.length, 'one event in 16');
  } finally {
    byDefault.close();
  }
});

test('a drop stops the run and is counted by reason', () => {
  stepCalls.length = 0;
  drops.length = 0;
  assert.deepEqual(enricher.enrich(pageView({ name: 'session_start' })), { ok: false, reason: 'invalid_name' });
  assert.deepEqual(enricher.enrich(pageView({ profileId: '' })), { ok: false, reason: 'missing_identity' });
  assert.deepEqual(drops, ['invalid_name', 'missing_identity']);
  assert.deepEqual(
    stepCalls.map(([s]) => s),
    ['checkRecord', 'checkRecord'],
  );
});

test('a bot is flagged, not dropped, and still enriched', () => {
  drops.length = 0;
  const result = enricher.enrich(pageView({ userAgent: GOOGLEBOT, ip: '8.8.8.8', referrer: '' }));
  assert.ok(result.ok);
  assert.equal(result.event.isBot, true);
  assert.equal(result.event.botReason, 'Googlebot');
  assert.equal(result.event.device, 'server');
  assert.equal(result.event.country, 'US');
  // No external referrer: the page URL's utm_source=newsletter names the source (unlisted: unknown).
  assert.deepEqual([result.event.referrer, result.event.referrer_name, result.event.referrer_type], ['', 'newsletter', 'unknown']);
  assert.deepEqual(drops, []);
});

test('a custom event with a bare path, own-host referrer, IPv6 and no user-agent', () => {
  const result = enricher.enrich(
    pageView({ name: 'signup', url: '/signup?utm_source=x', referrer: '/pricing', ip: '2001:4860:4860::8888', userAgent: null }),
  );
  assert.ok(result.ok);
  const e = result.event;
  assert.deepEqual([e.origin, e.path, e.utm_source], ['', '/signup', 'x']);
  // The own-host referrer is no referrer; utm_source=x then names the source: x.com is Twitter's.
  assert.deepEqual([e.referrer, e.referrer_name, e.referrer_type], ['', 'Twitter', 'social']);
  assert.equal(e.device, 'server');
  assert.equal(e.serverSide, true);
  assert.equal(e.isBot, false);
  assert.equal(e.country, 'CA');
});

test('malformed input never throws', () => {
  const result = enricher.enrich(
    pageView({ url: 'https://exa mple.com:99999/x?utm_source=%E0%A4%A', referrer: '::::', ip: 'garbage', userAgent: '\u0000\u0001' }),
  );
  assert.ok(result.ok);
  assert.equal(result.event.path, '/x');
  assert.equal(result.event.country, '');
});

test('runSteps reports a throwing step by name and still times it', () => {
  const timed: string[] = [];
  const broken: Step = {
    name: 'putBroken',
    run() {
      throw new Error('boom');
    },
  };
  const ok: Step = { name: 'putOk', run: (e) => keep(e) };
  assert.throws(
    () => runSteps([ok, broken, ok], pageView(), { onStep: (s) => timed.push(s) }),
    (err: unknown) => err instanceof EnrichStepError && err.step === 'putBroken' && /boom/.test(err.message),
  );
  assert.deepEqual(timed, ['putOk', 'putBroken']);
});

test('blankEventRecord: enrichment fields empty, given fields kept, undefined ignored', () => {
  const r = blankEventRecord({ name: 'screen_view', ip: '1.1.1.1', url: undefined });
  assert.equal(r.name, 'screen_view');
  assert.equal(r.ip, '1.1.1.1');
  assert.equal(r.url, null);
  assert.equal(r.referrer_name, '');
  assert.equal(r.country, '');
  assert.equal(r.latitude, null);
  assert.equal(r.isBot, false);
  assert.equal(r.botReason, null);
  assert.equal(r.sessionId, null);
  assert.ok(r.createdAt instanceof Date);
});

test('createEnricher with a missing geoipCityPath fails at create time with a clear error', async () => {
  await assert.rejects(createEnricher({ geoipCityPath: '/data/missing/GeoLite2-City.mmdb' }), (err: unknown) => {
    assert.ok(err instanceof GeoDatabaseError);
    assert.match(err.message, /GeoIP city database not found: \/data\/missing\/GeoLite2-City\.mmdb/);
    return true;
  });
});

test('enrich after close throws', async () => {
  const e = await createEnricher({ geoipCityPath: undefined });
  e.close();
  assert.throws(() => e.enrich(pageView()), /closed/);
});
