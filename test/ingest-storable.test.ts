// What the store would refuse is refused by the API: a 202 is never followed by a lost
// event. The cases: __path of 3,000 CJK characters among 100
// other devices' events, `%00` in a UTM parameter, an increment on a 140,000-digit
// property; and the limits' edges, accepted and stored. API and worker in this process.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KEY_TEXT_MAX_BYTES, NAME_MAX_BYTES, NUMERIC_TEXT_MAX_CHARS } from '../internal/bus/storable';
import { eventId } from '../internal/ingest/ops';
import { shardOf } from '../internal/bus/bus';
import { post, startApp, TestEnv, waitFor, type Credentials } from './support/harness';
import { assertBadRequestShape } from './support/fuzz-kit';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let writer: Credentials;
let seq = 0;
const marker = () => `st${process.pid}-${seq++}`;

before(async () => {
  env = await new TestEnv('storable').setup();
  app = await startApp(env, { api: true, worker: true });
  const projectId = await env.project({ name: 'Storable' });
  writer = await env.client(projectId, 'write', 0);
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

const UA = 'Mozilla/5.0 (X11; Linux x86_64) Firefox/126.0';
const send = (body: unknown, ip = '10.1.0.1') => post(`${app.url}/track`, body, writer, { ip, userAgent: UA });
const trackWith = (properties: Record<string, unknown>, name = 'page') => ({ type: 'track', payload: { name, properties } });

async function storedMarkers(markers: string[]): Promise<number> {
  const { rows } = await env.db.query<{ n: string }>("SELECT count(*) AS n FROM events WHERE properties->>'marker' = ANY($1::text[])", [markers]);
  return Number(rows[0]!.n);
}

function assertRefused(r: { status: number; body: unknown }, path: string[], what: RegExp): void {
  assert.equal(r.status, 400, JSON.stringify(r.body).slice(0, 300));
  assertBadRequestShape(r.body, 'ingest');
  const issue = (r.body as { details: { issues: { path: string[]; message: string }[] } }).details.issues[0]!;
  assert.deepEqual(issue.path, path);
  assert.match(issue.message, what);
}

describe('the API refuses what PostgreSQL could not store or index', () => {
  it('101 concurrent events, one with a __path of 3,000 CJK characters: it gets a 400, the 100 others are stored once', async () => {
    const markers = Array.from({ length: 100 }, marker);
    const results = await Promise.all([
      ...markers.map((m, i) => send(trackWith({ marker: m, __path: `https://shop.example/p/${i}` }), `10.2.${i >> 4}.${i & 15}`)),
      send(trackWith({ marker: marker(), __path: `https://shop.example/${'中'.repeat(3000)}` }), '10.2.9.9'),
    ]);
    assertRefused(results[100]!, ['payload', 'properties', '__path'], /bytes of UTF-8; at most 1024/);
    for (const r of results.slice(0, 100)) assert.equal(r.status, 202);
    await waitFor(async () => (await storedMarkers(markers)) === 100, { timeoutMs: 20_000, what: 'the 100 events stored' });
    const { rows } = await env.db.query<{ n: string }>("SELECT count(*) AS n FROM op_failures");
    assert.equal(Number(rows[0]!.n), 0, 'nothing dead-lettered');
  });

  it('%00 in a UTM parameter (decoded to NUL by the worker) is a 400; %01 is stored', async () => {
    assertRefused(await send(trackWith({ __path: 'https://shop.example/?utm_source=news%00letter' })), ['payload', 'properties', '__path'], /utm_source \(after URL decoding\) must not contain NUL/);
    assertRefused(await send(trackWith({ __path: '/landing?utm_campaign=%00' })), ['payload', 'properties', '__path'], /utm_campaign/);
    const m = marker();
    assert.equal((await send(trackWith({ marker: m, __path: 'https://shop.example/?utm_source=a%01b' }))).status, 202);
    await waitFor(async () => (await storedMarkers([m])) === 1, { what: 'the %01 event' });
    const { rows } = await env.db.query("SELECT utm_source FROM events WHERE properties->>'marker' = $1", [m]);
    assert.equal(rows[0].utm_source, 'a\u0001b');
  });

  it('a property holding a 140,000-digit number is a 400 (an increment on it would overflow numeric); 1000 digits are stored and incremented', async () => {
    assertRefused(await send({ type: 'identify', payload: { profileId: 'p-big', properties: { score: '9'.repeat(140_000) } } }), ['payload', 'properties', 'score'], /at most 1000 characters/);
    assertRefused(await send(trackWith({ amount: '1'.repeat(NUMERIC_TEXT_MAX_CHARS + 1) })), ['payload', 'properties', 'amount'], /number written as text/);
    // At the limit: stored, and the increment applies exactly.
    assert.equal((await send({ type: 'identify', payload: { profileId: 'p-edge', properties: { score: '9'.repeat(NUMERIC_TEXT_MAX_CHARS) } } })).status, 202);
    assert.equal((await send({ type: 'increment', payload: { profileId: 'p-edge', property: 'score', value: 1 } })).status, 202);
    await waitFor(async () => {
      const { rows } = await env.db.query("SELECT properties->>'score' AS s FROM profiles WHERE id = 'p-edge'");
      return rows[0]?.s === `1${'0'.repeat(NUMERIC_TEXT_MAX_CHARS)}`;
    }, { what: 'the incremented 1000-digit score' });
  });

  it('names, titles, referrers, property keys and group ids over their byte limits are 400s; at the limit they are stored', async () => {
    assertRefused(await send(trackWith({}, '名'.repeat(171))), ['payload', 'name'], new RegExp(`at most ${NAME_MAX_BYTES}`));
    assertRefused(await send(trackWith({ __title: 'é'.repeat(513) })), ['payload', 'properties', '__title'], /1026 bytes/);
    assertRefused(await send(trackWith({ __referrer: `https://ref.example/${'x'.repeat(1010)}` })), ['payload', 'properties', '__referrer'], /1030 bytes/);
    const longKey = 'k'.repeat(KEY_TEXT_MAX_BYTES + 1);
    assertRefused(await send(trackWith({ [longKey]: 1 })), ['payload', 'properties', longKey], /a property key is 1025 bytes/);
    assertRefused(await post(`${app.url}/event`, { name: 'x', properties: { __path: `/${'é'.repeat(600)}` } }, writer), ['properties', '__path'], /path/);
    const m = marker();
    const atLimit = {
      marker: m, __title: 'é'.repeat(512), __referrer: `https://ref.example/${'r'.repeat(KEY_TEXT_MAX_BYTES - 20)}`,
      __path: `https://shop.example/${'p'.repeat(KEY_TEXT_MAX_BYTES - 1)}`, ['k'.repeat(KEY_TEXT_MAX_BYTES)]: 1,
    };
    assert.equal((await send(trackWith(atLimit, '名'.repeat(170)))).status, 202);
    await waitFor(async () => (await storedMarkers([m])) === 1, { what: 'the event at the limits' });
    const { rows } = await env.db.query("SELECT octet_length(path) AS p, octet_length(title) AS t, octet_length(referrer) AS r, octet_length(name) AS n FROM events WHERE properties->>'marker' = $1", [m]);
    assert.deepEqual(rows[0], { p: KEY_TEXT_MAX_BYTES, t: 1024, r: KEY_TEXT_MAX_BYTES, n: 510 });
  });
});

describe('the worker sets aside only the op that fails, never its neighbours', () => {
  // Whatever the API lets through by mistake (or a producer that writes to the stream itself):
  // a queue message whose one event PostgreSQL cannot store. The batch fails, the worker's
  // isolating retry asks the storable rules of each enriched event and sets that one aside in
  // op_failures; the events queued with it are stored, each once.
  it('one unstorable event among twenty in one queue message: the nineteen are stored, the one is in op_failures', async () => {
    const projectId = await env.project({ name: 'Set aside' });
    const deviceId = 'e'.repeat(32);
    const now = Date.now();
    const markers = Array.from({ length: 20 }, marker);
    const ops = markers.map((m, i) => ({
      kind: 'track', id: eventId(now + i), projectId, deviceId, receivedAt: new Date(now).toISOString(),
      name: i === 7 ? 'bad\u0000name' : 'neighbour', profileId: deviceId, createdAt: new Date(now + i).toISOString(),
      properties: { marker: m }, groups: [], url: `https://shop.example/${i}`, title: null, referrer: null, ip: '81.2.69.142', userAgent: UA,
    }));
    const subject = app.bus.subjectFor(projectId, shardOf(deviceId, app.bus.shards));
    await app.bus.publishJson(subject, { v: 1, ops }, `set-aside-${markers[0]}`);
    const good = markers.filter((_, i) => i !== 7);
    await waitFor(async () => (await storedMarkers(good)) === 19, { timeoutMs: 30_000, what: 'the 19 neighbours stored' });
    assert.equal(await storedMarkers([markers[7]!]), 0);
    const { rows } = await env.db.query("SELECT op_id, kind, reason FROM op_failures WHERE project_id = $1", [projectId]);
    assert.deepEqual(rows.map((r) => [r.op_id, r.kind]), [[ops[7]!.id, 'track']]);
    assert.match(rows[0].reason, /not storable: name: .*NUL/);
    // One session of the 19 (the set-aside event was never sessionized), and nothing stored twice.
    const s = await env.db.query("SELECT count(*)::int AS n, sum(event_count)::int AS events FROM sessions WHERE project_id = $1", [projectId]);
    assert.deepEqual(s.rows[0], { n: 1, events: 19 });
    const twice = await env.db.query("SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = 'neighbour'", [projectId]);
    assert.equal(twice.rows[0].n, 19);
  });
});
