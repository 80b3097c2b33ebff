// Bad input that ingest ACCEPTS must also get through the pipeline: every 202 becomes a
// stored row and nothing a client sends can stop a worker shard. Property-based against one
// running app (API + worker): random unicode, odd numbers, big and nested properties on all
// six operations, then a sentinel on every shard. A lone UTF-16 surrogate (valid JSON, refused
// by PostgreSQL's jsonb) has its own test at the end.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { TestEnv, startApp, waitFor, type Credentials } from './support/harness';
import { CaseCounter, credHeaders, request, runs } from './support/fuzz-kit';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let writer: Credentials;
const cases = new CaseCounter();
const started = Date.now();

before(async () => {
  env = await new TestEnv('fuzzpipe').setup();
  app = await startApp(env, { api: true, worker: true });
  const projectId = await env.project({ name: 'Fuzz pipeline' });
  writer = await env.client(projectId, 'write', 0);
});

after(async (t) => {
  (t as unknown as { diagnostic(m: string): void }).diagnostic(`fuzz-pipeline: ${cases.total} cases (${cases.summary()}); ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await app?.drain();
  await env?.teardown();
});

let seq = 0;
const marker = () => `m${process.pid}-${seq++}`;

async function ingest(path: '/track' | '/event', body: unknown, ip: string): Promise<number> {
  const a = await request(`${app.url}${path}`, {
    method: 'POST',
    headers: { ...credHeaders(writer), 'content-type': 'application/json', 'x-client-ip': ip, 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Firefox/126.0' },
    body: JSON.stringify(body),
  });
  assert.ok(a.status < 500, `${a.status} ${a.text}`);
  return a.status;
}

async function storedMarkers(markers: string[]): Promise<number> {
  const { rows } = await env.db.query<{ n: string }>("SELECT count(DISTINCT properties->>'marker') AS n FROM events WHERE properties->>'marker' = ANY($1::text[])", [markers]);
  return Number(rows[0]!.n);
}

// Well-formed Unicode only (fast-check's 'binary' unit never yields a lone surrogate); NUL is a 400.
const text = fc.string({ unit: 'binary', maxLength: 30 }).map((s) => s.replace(/\u0000/g, ''));
const value = fc.oneof(
  text,
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(1e308, -1e308, 5e-324, 2 ** 63, -0, '1e999', '\u30005', 'x'.repeat(50_000)),
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' }).map((v) => JSON.parse(JSON.stringify(v).replace(/\\u0000/g, ''))),
);
const props = fc.dictionary(text, value, { maxKeys: 5 });
const ip = fc.oneof(fc.ipV4(), fc.ipV6(), fc.constantFrom('fe80::1%eth0', '::ffff:8.8.8.8', '::', '0.0.0.0', '255.255.255.255', '64:ff9b::8.8.8.8', 'ff02::1', 'not-an-ip', '1.2.3.4, 5.6.7.8'));

// Event times: mostly inside the accepted range (INGEST_MAX_PAST_DAYS, ten years by default),
// some before it (a 400 naming the field). Drawn from 1971 on alone, four in five were refused
// and too few events were left to say anything of the pipeline.
const DAY = 86_400_000;
const eventTime = fc.oneof(
  { weight: 4, arbitrary: fc.date({ min: new Date(Date.now() - 3600 * DAY), max: new Date(Date.now() + 30_000), noInvalidDate: true }) },
  { weight: 1, arbitrary: fc.date({ min: new Date('1971-01-01T00:00:00Z'), max: new Date(Date.now() - 3700 * DAY), noInvalidDate: true }) },
).map((d) => d.toISOString());

test('random accepted operations all reach the database; no message is dead-lettered', async () => {
  const markers: string[] = [];
  const op = fc.oneof(
    fc.record({ kind: fc.constant('track' as const), name: text.filter((s) => s.trim().length > 0 && !['session_start', 'session_end'].includes(s.trim())), properties: props, profileId: fc.option(text.filter((s) => s.trim().length > 0)), groups: fc.array(text.filter((s) => s.trim().length > 0), { maxLength: 3 }), ip }),
    fc.record({ kind: fc.constant('event' as const), name: fc.constantFrom('signup', 'buy', 'ünïcødé', '😀'), properties: props, timestamp: eventTime, ip }),
    fc.record({ kind: fc.constant('identify' as const), profileId: text.filter((s) => s.trim().length > 0), firstName: text, properties: props, ip }),
    fc.record({ kind: fc.constantFrom('increment' as const, 'decrement' as const), profileId: fc.constantFrom('p1', 'p2', 'ünï'), property: fc.constantFrom('n', 'big', 'ünï'), value: fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(1e308, -1e308, 5e-324)), ip }),
    fc.record({ kind: fc.constant('group' as const), id: text.filter((s) => s.trim().length > 0), type: fc.constantFrom('company', 'team'), name: text.filter((s) => s.trim().length > 0), properties: props, ip }),
    fc.record({ kind: fc.constant('assign_group' as const), profileId: fc.constantFrom('p1', 'p2'), groupIds: fc.array(text.filter((s) => s.trim().length > 0), { minLength: 1, maxLength: 3 }), ip }),
  );
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 6, maxLength: 6 }), async (batch) => {
      await Promise.all(batch.map(async (o) => {
        let status: number;
        if (o.kind === 'track' || o.kind === 'event') {
          const m = marker();
          const properties = { ...o.properties, marker: m };
          status = o.kind === 'track'
            ? await ingest('/track', { type: 'track', payload: { name: o.name, properties, ...(o.profileId ? { profileId: o.profileId } : {}), groups: o.groups } }, o.ip)
            : await ingest('/event', { name: o.name, properties, timestamp: o.timestamp }, o.ip);
          if (status === 202) markers.push(m);
        } else if (o.kind === 'identify') status = await ingest('/track', { type: 'identify', payload: { profileId: o.profileId, firstName: o.firstName, properties: o.properties } }, o.ip);
        else if (o.kind === 'group') status = await ingest('/track', { type: 'group', payload: { id: o.id, type: o.type, name: o.name, properties: o.properties } }, o.ip);
        else if (o.kind === 'assign_group') status = await ingest('/track', { type: 'assign_group', payload: { profileId: o.profileId, groupIds: o.groupIds } }, o.ip);
        else status = await ingest('/track', { type: o.kind, payload: { profileId: o.profileId, property: o.property, value: o.value } }, o.ip);
        cases.add(`op-${status}`);
      }));
    }),
    { numRuns: runs(60), includeErrorInReport: true },
  );
  // A sentinel from many devices, so every shard gets one after the random operations.
  for (let i = 0; i < 32; i++) {
    const m = marker();
    assert.equal(await ingest('/track', { type: 'track', payload: { name: 'sentinel', properties: { marker: m } } }, `10.9.${i}.1`), 202);
    markers.push(m);
  }
  assert.ok(markers.length > 100, `enough accepted events (${markers.length})`);
  await waitFor(async () => (await storedMarkers(markers)) === markers.length, { timeoutMs: 45_000, what: `all ${markers.length} accepted events stored (now ${await storedMarkers(markers)})` });
  const failures = await env.db.query('SELECT kind, reason FROM op_failures');
  const deadLetters = failures.rows.filter((r) => /refused the batch/.test(r.reason));
  assert.deepEqual(deadLetters, [], 'no message was dead-lettered');
});

// A product bug this suite found (fixed): `"\ud800"` (a lone surrogate escape) is valid JSON, so
// the API answered 202, but PostgreSQL's jsonb refuses it (22P02). The worker retried, isolated
// the message and tried to dead-letter it into op_failures — whose payload is jsonb too, so that
// failed the same way and the shard retried forever: every later event on the shard was stuck.
// The API now refuses lone surrogates (internal/bus/storable.ts); either answer (202 stored
// or 400) passes, as long as the shard moves on.
test('a lone surrogate in properties or groups never blocks a shard', async () => {
  const clientIp = '10.77.0.1';
  const before = marker();
  assert.equal(await ingest('/track', { type: 'track', payload: { name: 'before', properties: { marker: before } } }, clientIp), 202);
  const bodies = [
    '{"type":"track","payload":{"name":"lone","properties":{"k":"\\ud800"}}}',
    '{"type":"track","payload":{"name":"lone","properties":{"\\udc00":"v"}}}',
    '{"type":"track","payload":{"name":"lone","groups":["\\ud83d"]}}',
    '{"type":"identify","payload":{"profileId":"p","properties":{"k":"\\udfff"}}}',
  ];
  for (const b of bodies) {
    const a = await request(`${app.url}/track`, { method: 'POST', headers: { ...credHeaders(writer), 'content-type': 'application/json', 'x-client-ip': clientIp, 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) Firefox/126.0' }, body: b });
    cases.add('lone-surrogate');
    assert.ok([202, 400].includes(a.status), `${a.status} ${a.text}`);
  }
  const after = marker();
  assert.equal(await ingest('/track', { type: 'track', payload: { name: 'after', properties: { marker: after } } }, clientIp), 202);
  await waitFor(async () => (await storedMarkers([before, after])) === 2, { timeoutMs: 8_000, what: 'the event sent after the lone surrogates is stored' });
});
