// Sizes and encodings at every layer, property-based: HTTP → zod → storable rules
// → worker → SQL → rollups → reads. Each run sends, at once and from several devices, normal
// events and hostile ones (strings of thousands of CJK characters in the page URL, title,
// referrer, name, keys and values; %00 and other escapes in UTM and referrer parameters;
// raw NUL and lone surrogate escapes; nesting 60-200 deep; numbers written as text of
// 900-150,000 digits; JSON numbers past double; increments on those properties), so hostile
// and normal operations share queue messages. Properties:
// - every answer is a 202 or a 4xx with the JSON body of its status (never 5xx);
// - every 202 of a tracked event is stored exactly once in PostgreSQL; nothing is
//   dead-lettered (op_failures stays empty);
// - afterwards the rollup refresh succeeds and the read endpoints answer 2xx over the data.
// If the mixed-batch property fails only through a message the worker dead-letters whole
// (its neighbours lost), the worker does not isolate one bad op: the worker half of "what the
// store would refuse" (test/ingest-storable.test.ts holds the API half).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { refreshRollups } from '../internal/store/rollups';
import { TestEnv, startApp, waitFor, type Credentials } from './support/harness';
import { assertSane, CaseCounter, credHeaders, request, runs } from './support/fuzz-kit';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let writer: Credentials;
let reader: Credentials;
let projectId: string;
const cases = new CaseCounter();
const started = Date.now();
const accepted: string[] = [];

before(async () => {
  env = await new TestEnv('fuzzstore').setup();
  app = await startApp(env, { api: true, worker: true });
  projectId = await env.project({ name: 'Fuzz storable' });
  writer = await env.client(projectId, 'write', 0);
  reader = await env.client(projectId, 'read', 0);
});

after(async (t) => {
  (t as unknown as { diagnostic(m: string): void }).diagnostic(`fuzz-storable: ${cases.total} cases (${cases.summary()}); ${accepted.length} accepted events; ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await app?.drain();
  await env?.teardown();
});

let seq = 0;
const marker = () => `fs${process.pid}-${seq++}`;

// ------------------------------------------------------------------- hostile values

// Text that does not compress (PostgreSQL compresses long index entries: a repeated character
// would fit where real text does not).
const scrambled = (n: number, seed: number, from: number, span: number) => {
  let x = seed >>> 0 || 1;
  let out = '';
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    out += String.fromCharCode(from + (x % span));
  }
  return out;
};
const sizes = fc.constantFrom(10, 100, 300, 341, 342, 500, 1000, 3000, 20_000);
const hugeText = fc.oneof(
  fc.tuple(sizes, fc.integer()).map(([n, seed]) => scrambled(n, seed, 0x4e00, 20_000)), // CJK: 3 bytes each
  fc.tuple(sizes, fc.integer()).map(([n, seed]) => scrambled(n * 3, seed, 0x61, 26)),
  fc.tuple(sizes, fc.integer()).map(([n, seed]) => scrambled(n, seed, 0xe0, 30)), // 2 bytes each
  fc.string({ unit: 'binary', maxLength: 40 }).map((s) => s.replace(/\u0000/g, '')),
);
const escapes = fc.constantFrom('%00', '%0', '%ZZ', '%E4%B8%AD', '%ED%A0%80', '%C3%A9'.repeat(600), '%01', '+', '%2500', '%u0000', '');
const urlValue = fc.tuple(fc.string({ maxLength: 8 }), escapes, fc.string({ maxLength: 8 })).map(([a, e, b]) => encodeURIComponent(a) + e + encodeURIComponent(b));
const pageUrl = fc.oneof(
  fc.constantFrom('https://shop.example/', '/pricing', 'app://screen/home', 'https://xn--bcher-kva.example/a b', 'http://[::1]:8080/x'),
  fc.record({ path: hugeText, param: fc.constantFrom('utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content', 'ref', 'utm_referrer', 'q'), value: urlValue })
    .map(({ path, param, value }) => `https://shop.example/${path.slice(0, 6000)}?${param}=${value}`),
  hugeText.map((p) => `/${p}`),
);
const numericText = fc.constantFrom(900, 999, 1000, 1001, 5000, 150_000).map((n) => (n % 2 ? '9' : '1').repeat(n));
const deep = fc.integer({ min: 60, max: 200 }).map((d) => {
  let v: unknown = 'bottom';
  for (let i = 0; i < d; i++) v = i % 2 ? [v] : { k: v };
  return v;
});
const hostileValue = fc.oneof(hugeText, numericText, deep, fc.constantFrom(1e308, -1e308, 5e-324, '1e999', '1e9999', ' 12.5 ', '-0'));
const hostileKey = fc.oneof(hugeText, fc.constantFrom('__proto__', 'constructor', '', ' ', '$.a', 'a.b.c'));

/** A hostile property bag (reserved keys included) and, separately, raw JSON fragments fetch would not produce. */
const hostileProps = fc.record({
  __path: fc.option(pageUrl, { nil: undefined }),
  __title: fc.option(hugeText, { nil: undefined }),
  __referrer: fc.option(fc.oneof(pageUrl, hugeText), { nil: undefined }),
  extra: fc.dictionary(hostileKey, hostileValue, { maxKeys: 3 }),
}).map(({ extra, ...reserved }) => {
  const props: Record<string, unknown> = { ...extra };
  for (const [k, v] of Object.entries(reserved)) if (v !== undefined) props[k] = v;
  return props;
});
const RAW_ESCAPES = ['\\u0000', '\\ud800', '\\udfff', '\\ud83d\\u0041'];

type Op =
  | { kind: 'normal'; device: number }
  | { kind: 'hostile-track'; device: number; name: string; properties: Record<string, unknown>; raw: string | null; via: '/track' | '/event' }
  | { kind: 'identify'; device: number; properties: Record<string, unknown> }
  | { kind: 'increment'; device: number; property: string; value: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('normal' as const), device: fc.integer({ min: 0, max: 7 }) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('hostile-track' as const), device: fc.integer({ min: 0, max: 7 }),
      name: fc.oneof({ weight: 3, arbitrary: fc.constantFrom('page', 'screen_view', 'screen_view') }, { weight: 1, arbitrary: hugeText.filter((s) => s.trim().length > 0 && s.length <= 256) }),
      properties: hostileProps, raw: fc.option(fc.constantFrom(...RAW_ESCAPES), { nil: null }), via: fc.constantFrom('/track' as const, '/event' as const),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('identify' as const), device: fc.integer({ min: 0, max: 7 }), properties: fc.dictionary(fc.constantFrom('score', 'n', 'name'), hostileValue, { maxKeys: 2 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('increment' as const), device: fc.integer({ min: 0, max: 7 }), property: fc.constantFrom('score', 'n'), value: fc.oneof(fc.integer(), fc.constantFrom(1e308, -1e308, 0.1)) }) },
);

// ------------------------------------------------------------------- sending

const UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/124.0.0.0 Safari/537.36';

async function sendRaw(path: string, text: string, device: number): Promise<number> {
  const a = await request(`${app.url}${path}`, {
    method: 'POST',
    headers: { ...credHeaders(writer), 'content-type': 'application/json', 'x-client-ip': `10.40.0.${device + 1}`, 'user-agent': UA },
    body: text,
    timeoutMs: 20_000,
  });
  assertSane(a, { family: 'ingest', what: `${path} ${text.slice(0, 200)}` });
  assert.ok(a.status === 202 || (a.status >= 400 && a.status < 500), `202 or 4xx: ${a.status} ${a.text.slice(0, 200)}`);
  return a.status;
}

async function sendOp(o: Op): Promise<void> {
  if (o.kind === 'normal') {
    const m = marker();
    const status = await sendRaw('/track', JSON.stringify({ type: 'track', payload: { name: 'screen_view', properties: { marker: m, __path: `https://shop.example/p/${o.device}?utm_source=news`, __title: 'Shop' } } }), o.device);
    assert.equal(status, 202, 'a normal event is accepted');
    accepted.push(m);
    cases.add('normal');
    return;
  }
  if (o.kind === 'identify') {
    const status = await sendRaw('/track', JSON.stringify({ type: 'identify', payload: { profileId: `fz-${o.device}`, properties: o.properties } }), o.device);
    cases.add(`identify-${status}`);
    return;
  }
  if (o.kind === 'increment') {
    const status = await sendRaw('/track', JSON.stringify({ type: 'increment', payload: { profileId: `fz-${o.device}`, property: o.property, value: o.value } }), o.device);
    cases.add(`increment-${status}`);
    return;
  }
  const m = marker();
  const properties = { ...o.properties, marker: m };
  let text = o.via === '/track'
    ? JSON.stringify({ type: 'track', payload: { name: o.name, properties } })
    : JSON.stringify({ name: o.name, properties });
  // A raw escape fetch's JSON.stringify would never write, in a string value.
  if (o.raw) text = text.replace(`"marker":"${m}"`, `"marker":"${m}","raw":"x${o.raw}"`);
  const status = await sendRaw(o.via, text, o.device);
  if (status === 202) accepted.push(m);
  cases.add(`hostile-${status}`);
}

// ------------------------------------------------------------------- the properties

async function storedCounts(markers: string[]): Promise<Map<string, number>> {
  const { rows } = await env.db.query<{ m: string; n: string }>(
    "SELECT properties->>'marker' AS m, count(*) AS n FROM events WHERE properties->>'marker' = ANY($1::text[]) GROUP BY 1",
    [markers],
  );
  return new Map(rows.map((r) => [r.m, Number(r.n)]));
}

test('hostile and normal operations in the same batches: 202 or 4xx, every 202 stored exactly once, nothing dead-lettered', { timeout: 600_000 }, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 8, maxLength: 16 }), async (batch) => {
      await Promise.all(batch.map(sendOp));
    }),
    { numRuns: runs(40), includeErrorInReport: true },
  );
  assert.ok(accepted.length > 150, `enough accepted events (${accepted.length})`);
  await waitFor(async () => [...(await storedCounts(accepted)).values()].length === accepted.length, {
    timeoutMs: 60_000, what: `all ${accepted.length} accepted events stored`,
  });
  const counts = await storedCounts(accepted);
  for (const m of accepted) assert.equal(counts.get(m), 1, `${m} stored exactly once`);
  // The one documented failure: an increment of a property that holds no number is left alone
  // and recorded (docs/decisions.md). Anything else here was set aside after its 202.
  const failures = await env.db.query("SELECT kind, reason, left(payload::text, 200) AS payload FROM op_failures WHERE reason NOT LIKE 'property % holds a non-numeric value%'");
  assert.deepEqual(failures.rows, [], 'no operation set aside (a whole message dead-lettered would put its neighbours here)');
});

test('the rollups refresh over the data and every read answers 2xx', { timeout: 300_000 }, async () => {
  // Every logged hour, the current one included.
  for (let i = 0; i < 20; i++) {
    const r = await refreshRollups(env.db, false, { before: new Date(Date.now() + 3_600_000) });
    if (r.buckets === 0) break;
  }
  const series = encodeURIComponent(JSON.stringify([{ name: '*' }, { name: 'screen_view', segment: 'user' }, { name: '*', segment: 'property_sum', property: 'score' }]));
  const paths = [
    `/insights/${projectId}/metrics?range=last24h`, `/insights/${projectId}/pages?range=today`, `/insights/${projectId}/referrer?range=today`,
    `/insights/${projectId}/utm_source?range=today`, `/insights/${projectId}/browser?range=today`,
    `/export/events?projectId=${projectId}&includes=properties,referrer&limit=50`, `/export/events?projectId=${projectId}&format=ndjson&includes=properties`,
    `/export/charts?projectId=${projectId}&range=today&series=${series}&breakdowns=${encodeURIComponent('[{"name":"path"}]')}`,
    `/export/charts?projectId=${projectId}&range=today&series=${encodeURIComponent('[{"name":"*"}]')}&breakdowns=${encodeURIComponent('[{"name":"properties.marker"}]')}&limit=1000`,
  ];
  for (const path of paths) {
    const a = await request(`${app.url}${path}`, { headers: credHeaders(reader), timeoutMs: 30_000 });
    cases.add('read');
    assertSane(a, { family: 'read', what: path });
    assert.equal(a.status, 200, `${path}: ${a.text.slice(0, 300)}`);
  }
});
