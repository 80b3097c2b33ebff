// Profile operations against the real PostgreSQL (internal/store/profiles.ts): nested
// increment paths, exact decimals, missing objects created on the way, and every value that
// cannot be incremented recorded in op_failures (the profile left as it was), never a crash.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv } from './support/harness';
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
