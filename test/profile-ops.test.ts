// Profile operations against the real PostgreSQL (internal/store/profiles.ts): nested
// increment paths, exact decimals, missing objects created on the way, and every value that
// cannot be incremented recorded in op_failures (the profile left as it was), never a crash.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, startApp, post, track, waitFor } from './support/harness';
import { transaction } from '../internal/store/db';
import { applyProfileOps, propertyPath, type ProfileOp } from '../internal/store/profiles';
import type { QueuedIncrement } from '../internal/model/event';

let env: TestEnv;
let projectId: string;
let seq = 0;

before(async () => {
  env = await new TestEnv('profops').setup();
  projectId = await env.project({ name: 'Profile ops' });
});
after(async () => {
  await env?.teardown();
});

const inc = (profileId: string, property: string, delta: number): QueuedIncrement => ({
  kind: 'increment', id: `inc-${++seq}`, projectId, deviceId: 'd'.repeat(32), receivedAt: new Date().toISOString(), profileId, property, delta,
});

async function apply(...ops: ProfileOp[]) {
  return transaction(env.db, (c) => applyProfileOps(c, ops));
}

async function properties(profileId: string): Promise<Record<string, unknown>> {
  const r = await env.db.query('SELECT properties FROM profiles WHERE project_id = $1 AND id = $2', [projectId, profileId]);
  return r.rows[0]?.properties;
}

async function setProperties(profileId: string, props: Record<string, unknown>) {
  await env.db.query(
    `INSERT INTO profiles (project_id, id, properties) VALUES ($1, $2, $3::jsonb)
     ON CONFLICT (project_id, id) DO UPDATE SET properties = EXCLUDED.properties`,
    [projectId, profileId, JSON.stringify(props)],
  );
}

test('propertyPath splits on dots', () => {
  assert.deepEqual(propertyPath('visits'), ['visits']);
  assert.deepEqual(propertyPath('stats.logins'), ['stats', 'logins']);
  assert.deepEqual(propertyPath('a.b.c'), ['a', 'b', 'c']);
});

test('a dotted property updates the nested path; a missing profile and missing objects are created', async () => {
  assert.deepEqual(await apply(inc('u1', 'stats.logins', 1)), []);
  assert.deepEqual(await properties('u1'), { stats: { logins: 1 } });
  assert.deepEqual(await apply(inc('u1', 'stats.logins', 1), inc('u1', 'stats.logins', 1), inc('u1', 'stats.web.visits', 5), inc('u1', 'total', 2)), []);
  assert.deepEqual(await properties('u1'), { stats: { logins: 3, web: { visits: 5 } }, total: 2 });
  // decrement is a negative delta
  assert.deepEqual(await apply(inc('u1', 'stats.logins', -4)), []);
  assert.deepEqual(await properties('u1'), { stats: { logins: -1, web: { visits: 5 } }, total: 2 });
});

test('other keys are untouched; decimals are exact', async () => {
  await setProperties('u2', { name: 'Ada', stats: { logins: 7, plan: 'pro' }, 'stats.logins': 100 });
  assert.deepEqual(await apply(inc('u2', 'stats.logins', 0.1), inc('u2', 'stats.logins', 0.2)), []);
  // 7 + 0.1 + 0.2 = 7.3 exactly (numeric, not floating point); the flat "stats.logins" key is another key
  assert.deepEqual(await properties('u2'), { name: 'Ada', stats: { logins: 7.3, plan: 'pro' }, 'stats.logins': 100 });
});

test('a numeric string and a JSON null count as numbers (null as 0), as in OpenPanel', async () => {
  await setProperties('u3', { a: { n: '41' }, b: null });
  assert.deepEqual(await apply(inc('u3', 'a.n', 1), inc('u3', 'b', 2)), []);
  assert.deepEqual(await properties('u3'), { a: { n: 42 }, b: 2 });
});

test('a target that is not a number, or a non-object on the path, is a recorded failure; the profile stays as it was', async () => {
  const before = { label: 'gold', stats: 5, list: [1, 2], obj: { x: 1 }, flag: true };
  await setProperties('u4', before);
  const ops = [inc('u4', 'label', 1), inc('u4', 'stats.logins', 1), inc('u4', 'list.0', 1), inc('u4', 'obj', 1), inc('u4', 'flag', 1), inc('u4', 'label.deep', 1)];
  const failures = await apply(...ops);
  assert.deepEqual(failures.map((f) => f.opId), ops.map((o) => o.id));
  for (const f of failures) assert.match(f.reason, /non-numeric/);
  assert.deepEqual(await properties('u4'), before);
  const rows = await env.db.query('SELECT op_id, kind, payload FROM op_failures WHERE project_id = $1 AND op_id = ANY($2::text[]) ORDER BY op_id', [projectId, ops.map((o) => o.id)]);
  assert.equal(rows.rows.length, ops.length);
  assert.ok(rows.rows.every((r) => r.kind === 'increment' && r.payload.profileId === 'u4'));
  // a failure in the middle of a batch does not stop the ops after it
  assert.deepEqual((await apply(inc('u4', 'label', 1), inc('u4', 'counter.n', 3))).length, 1);
  assert.deepEqual((await properties('u4')).counter, { n: 3 });
});

// Ops that PostgreSQL refuses as data, whatever the API checked: what they meet is stored
// state. A profile filled near jsonb's limit (268,435,455 bytes of elements) by 43 identify
// requests of 1 MB, each 202, gets the next identify refused (54000); when that was seen, the
// refusal took the 60 events of its queue message with it. Building such a profile takes
// PostgreSQL ~15 s, so the refusal here is a cheaper one of the same kind (a data error on stored state): a stored
// numeric string longer than numeric holds (22003) met by an increment.
const HUGE_NUMBER = `jsonb_build_object('score', repeat('9', 140000))`;

test('guarded: an op PostgreSQL refuses as data is set aside alone (op_failures); the ops around it apply', async () => {
  await env.db.query(`INSERT INTO profiles (project_id, id, properties) VALUES ($1, 'huge', ${HUGE_NUMBER})`, [projectId]);
  const over = inc('huge', 'score', 1);
  // Unguarded (a batch's first try) the whole transaction fails.
  await assert.rejects(apply(inc('g1', 'n', 1), over), (err: { code?: string }) => err.code === '22003');
  const failures = await transaction(env.db, (c) => applyProfileOps(c, [inc('g1', 'n', 1), over, inc('g1', 'n', 2)], { guarded: true }));
  assert.deepEqual(failures.map((f) => [f.opId, f.kind]), [[over.id, 'increment']]);
  assert.match(failures[0]!.reason, /PostgreSQL refused it: .*overflow/);
  assert.deepEqual(await properties('g1'), { n: 3 });
  const recorded = await env.db.query('SELECT kind, payload FROM op_failures WHERE op_id = $1', [over.id]);
  assert.equal(recorded.rows[0]?.kind, 'increment');
  assert.equal(recorded.rows[0]?.payload.profileId, 'huge');
});

test('through the pipeline: the events that share a refused op\'s queue message are stored, each once; the op is in op_failures', async () => {
  const app = await startApp(env);
  try {
    const writer = await env.client(projectId, 'write', 0);
    await env.db.query(`INSERT INTO profiles (project_id, id, properties) VALUES ($1, 'victim', ${HUGE_NUMBER})`, [projectId]);
    // One device (same user-agent and address): one shard; sent at once, so they are queued together.
    const o = { userAgent: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36', ip: '8.8.4.4' };
    const answers = await Promise.all([
      ...Array.from({ length: 30 }, (_, i) => post(`${app.url}/track`, track('neighbour', { mk: `n-${i}` }), writer, o)),
      post(`${app.url}/track`, { type: 'increment', payload: { profileId: 'victim', property: 'score', value: 1 } }, writer, o),
      ...Array.from({ length: 30 }, (_, i) => post(`${app.url}/track`, track('neighbour', { mk: `n-${30 + i}` }), writer, o)),
    ]);
    assert.deepEqual(answers.map((a) => a.status), Array(61).fill(202));
    const stored = await waitFor(async () => {
      const r = await env.db.query(`SELECT properties->>'mk' AS mk FROM events WHERE project_id = $1 AND name = 'neighbour'`, [projectId]);
      return r.rows.length >= 60 ? r.rows.map((x) => x.mk as string) : undefined;
    }, { timeoutMs: 30_000, what: 'the 60 neighbours' });
    assert.deepEqual(stored!.sort(), Array.from({ length: 60 }, (_, i) => `n-${i}`).sort(), 'each neighbour once');
    const failed = await env.db.query(`SELECT kind FROM op_failures WHERE project_id = $1 AND payload->>'profileId' = 'victim'`, [projectId]);
    assert.deepEqual(failed.rows.map((r) => r.kind), ['increment']);
    const neighbourFailures = await env.db.query(`SELECT count(*)::int AS n FROM op_failures WHERE project_id = $1 AND kind = 'track'`, [projectId]);
    assert.equal(neighbourFailures.rows[0].n, 0, 'no neighbour dead-lettered');
  } finally {
    await app.drain();
  }
});
