// The worker's event write (internal/store/writes.ts): COPY into events, exactly once by
// event id. Text that COPY's text format must escape round-trips unchanged; a batch holding
// an event that is stored already (a redelivery) is redone with the insert that skips it;
// the shard position and the idempotency keys still commit with it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { blankEventRecord } from '../internal/enrich';
import { SESSION_DIMENSIONS, type EventRecord } from '../internal/model/event';
import type { SessionState } from '../internal/sessionize/session';
import { commitShardBatch, committedSeq, KeyAppliedElsewhereError, PartitionKeeper, ShardFencedError, type ShardBatch } from '../internal/store/writes';
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

test('a batch of the current hour costs four round trips (BEGIN, COPY, one statement for the rest, COMMIT) and writes all of it', async () => {
  const stream = `s3-${env.namespace}`;
  const now = Date.now();
  const view = event({ createdAt: new Date(now - 2000) });
  const click = event({ name: 'click', createdAt: new Date(now - 1000) });
  await partitions.ensureFor([view, click]);
  const sessionId = '0190c0de-0000-7000-8000-5e5510000001';
  const session: SessionState = {
    id: sessionId, projectId, deviceId: view.deviceId, profileId: 'p1', startedAt: now - 2000, lastEventAt: now - 1000,
    screenViewCount: 1, eventCount: 2, entryOrigin: 'https://x.test', entryPath: '/', exitOrigin: 'https://x.test', exitPath: '/',
    isBot: false, dims: Object.fromEntries(SESSION_DIMENSIONS.map((d) => [d, ''])) as SessionState['dims'], ended: false,
    updatedAtMs: now, lastEvent: { id: click.id, createdAt: now - 1000, isScreenView: false },
  };
  // Every statement the batch's connection sends.
  const sent: string[] = [];
  const counting = {
    connect: async () => {
      const c = await env.db.connect();
      const { query, release } = c;
      c.query = ((...a: unknown[]) => {
        sent.push(typeof a[0] === 'string' ? a[0] : (a[0] as { text?: string }).text ?? String(a[0]));
        return (query as (...x: unknown[]) => unknown).apply(c, a);
      }) as typeof c.query;
      c.release = (e?: Error | boolean) => {
        Object.assign(c, { query, release });
        return release.call(c, e);
      };
      return c;
    },
  } as unknown as typeof env.db;
  const seq = await committedSeq(env.db, stream, 0);
  await commitShardBatch(counting, batch(stream, seq, [view, click], {
    sessions: [session], viewDurations: [{ eventId: view.id, createdAt: view.createdAt.getTime(), durationMs: 1000 }],
    opKeys: [{ projectId, key: 'k-four', opId: click.id }],
  }));
  assert.equal(sent.length, 4, sent.map((x) => x.slice(0, 60)).join(' | '));
  assert.equal(sent[0], 'BEGIN');
  assert.equal(sent[3], 'COMMIT');
  // ...and every part of it landed.
  assert.equal(await committedSeq(env.db, stream, 0), seq + 1);
  const stored = await env.db.query<{ id: string; duration_ms: string | null }>('SELECT id, duration_ms FROM events WHERE id = ANY($1::uuid[]) ORDER BY created_at', [[view.id, click.id]]);
  assert.deepEqual(stored.rows.map((r) => [r.id, r.duration_ms === null ? null : Number(r.duration_ms)]), [[view.id, 1000], [click.id, null]]);
  const s = await env.db.query('SELECT event_count, screen_view_count FROM sessions WHERE id = $1', [sessionId]);
  assert.deepEqual(s.rows, [{ event_count: 2, screen_view_count: 1 }]);
  assert.equal((await env.db.query('SELECT 1 FROM op_keys WHERE project_id = $1 AND key = $2', [projectId, 'k-four'])).rowCount, 1);
  const hour = new Date(Math.floor((now - 2000) / 3_600_000) * 3_600_000);
  const inv = await env.db.query('SELECT rebuild FROM rollup_invalidations WHERE project_id = $1 AND bucket = $2 AND shard = 0', [projectId, hour]);
  assert.deepEqual(inv.rows, [{ rebuild: true }]);
  // A key recorded by another batch rolls the whole batch back.
  const other = event({ createdAt: new Date(now - 500) });
  await assert.rejects(commitShardBatch(env.db, batch(stream, seq + 1, [other], { opKeys: [{ projectId, key: 'k-four', opId: other.id }] })), KeyAppliedElsewhereError);
  assert.equal((await env.db.query('SELECT 1 FROM events WHERE id = $1', [other.id])).rowCount, 0);
  assert.equal(await committedSeq(env.db, stream, 0), seq + 1);
});
