// The worker's event write (internal/store/writes.ts): COPY into events, exactly once by
// event id. Text that COPY's text format must escape round-trips unchanged; a batch holding
// an event that is stored already (a redelivery) is redone with the insert that skips it;
// the shard position and the idempotency keys still commit with it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { blankEventRecord } from '../internal/enrich';
import type { EventRecord } from '../internal/model/event';
import { commitShardBatch, committedSeq, PartitionKeeper, ShardFencedError, type ShardBatch } from '../internal/store/writes';
import { TestEnv } from './support/harness';

let env: TestEnv;
let projectId: string;
let partitions: PartitionKeeper;

before(async () => {
  env = await new TestEnv('wpath').setup();
  projectId = await env.project();
  const timescale = (await env.db.query<{ ts: boolean }>('SELECT tm_timescale() AS ts')).rows[0]!.ts;
  partitions = new PartitionKeeper(env.db, timescale);
});

after(async () => {
  await env?.teardown();
});

let n = 0;
const event = (over: Partial<EventRecord> = {}): EventRecord =>
  blankEventRecord({
    id: `0190c0de-0000-7000-8000-${String(++n).padStart(12, '0')}`, projectId, name: 'screen_view',
    deviceId: 'd'.repeat(32), profileId: 'p1', createdAt: new Date(Date.parse('2024-05-01T10:00:00Z') + n * 1000), ...over,
  });

const batch = (stream: string, fromSeq: number, events: EventRecord[], extra: Partial<ShardBatch> = {}): ShardBatch => ({
  stream, shard: 0, fromSeq, toSeq: fromSeq + 1, events, viewDurations: [], sessions: [], reopenedSessionIds: [], profileOps: [], ...extra,
});

test('text COPY must escape (tab, newline, CR, backslash, \\N, quotes, commas and braces in groups, NULLs) round-trips', async () => {
  const stream = `s1-${env.namespace}`;
  const odd = 'a\tb\nc\rd\\e \\N "q" {x,y} ünï 😀';
  const e = event({
    title: odd, path: '/p\\n', referrer: '\\', properties: { k: odd, nested: { v: 'x\ty' }, n: 1.5 },
    groups: ['g,1', 'g"2', 'g\\3', '{g4}', 'NULL', ''], botReason: null, latitude: null, durationMs: 1234, isBot: true,
  });
  const plain = event({ title: '', groups: [] });
  await partitions.ensureFor([e, plain]);
  const seq = await committedSeq(env.db, stream, 0);
  await commitShardBatch(env.db, batch(stream, seq, [e, plain]));
  const r = await env.db.query(
    'SELECT title, path, referrer, properties, groups, bot_reason, latitude, duration_ms, is_bot FROM events WHERE id = $1',
    [e.id],
  );
  assert.deepEqual(r.rows[0], {
    title: odd, path: '/p\\n', referrer: '\\', properties: { k: odd, nested: { v: 'x\ty' }, n: 1.5 },
    groups: ['g,1', 'g"2', 'g\\3', '{g4}', 'NULL', ''], bot_reason: null, latitude: null, duration_ms: 1234, is_bot: true,
  });
  const p = await env.db.query('SELECT groups, title FROM events WHERE id = $1', [plain.id]);
  assert.deepEqual(p.rows[0], { groups: [], title: '' });
});

test('an event stored already is not stored again; the rest of its batch, the position and the keys commit', async () => {
  const stream = `s2-${env.namespace}`;
  const first = event();
  await partitions.ensureFor([first]);
  let seq = await committedSeq(env.db, stream, 0);
  await commitShardBatch(env.db, batch(stream, seq, [first]));
  seq++;
  // Redelivered with a new one, and twice within the batch itself.
  const fresh = event();
  await partitions.ensureFor([fresh]);
  await commitShardBatch(env.db, batch(stream, seq, [first, fresh, fresh], { opKeys: [{ projectId, key: 'k-redelivered', opId: fresh.id }] }));
  seq++;
  const count = async (id: string) => (await env.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE id = $1', [id])).rows[0]!.n;
  assert.equal(await count(first.id), 1);
  assert.equal(await count(fresh.id), 1);
  assert.equal(await committedSeq(env.db, stream, 0), seq);
  const keys = await env.db.query('SELECT op_id FROM op_keys WHERE project_id = $1 AND key = $2', [projectId, 'k-redelivered']);
  assert.deepEqual(keys.rows, [{ op_id: fresh.id }]);
  // The fence still holds on the redone transaction: a stale position writes nothing.
  const late = event();
  await assert.rejects(commitShardBatch(env.db, batch(stream, seq - 1, [first, late])), ShardFencedError);
  assert.equal(await count(late.id), 0);
});
