// The worker's event write (internal/store/writes.ts, its COPY internal/store/event-inserts.ts):
// COPY into events, exactly once by event id. Text that COPY's text format must escape
// round-trips unchanged; a batch holding an event that is stored already (a redelivery) is
// redone with the insert that skips it; the shard position and the idempotency keys still
// commit with it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { blankEventRecord } from '../internal/enrich';
import { SESSION_DIMENSIONS, type EventRecord } from '../internal/model/event';
import type { SessionState } from '../internal/sessionize/session';
import { PartitionKeeper } from '../internal/store/partitions';
import { commitShardBatch, committedSeq, KeyAppliedElsewhereError, ShardFencedError, type ShardBatch } from '../internal/store/writes';
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

/** A pool that records the text of every statement sent through it (its own queries and its clients'). */
function countingPool(sent: string[]): typeof env.db {
  const text = (a: unknown) => (typeof a === 'string' ? a : (a as { text?: string }).text ?? String(a));
  return {
    query: (...a: unknown[]) => {
      sent.push(text(a[0]));
      return (env.db.query as (...x: unknown[]) => unknown)(...a);
    },
    connect: async () => {
      const c = await env.db.connect();
      const { query, release } = c;
      c.query = ((...a: unknown[]) => {
        sent.push(text(a[0]));
        return (query as (...x: unknown[]) => unknown).apply(c, a);
      }) as typeof c.query;
      c.release = (e?: Error | boolean) => {
        Object.assign(c, { query, release });
        return release.call(c, e);
      };
      return c;
    },
  } as unknown as typeof env.db;
}

/** Times in the current UTC hour, `ms` apart, the last one now or earlier (never before the hour). */
function thisHour(n: number, ms: number): Date[] {
  const now = Date.now();
  const first = Math.max(now - n * ms, Math.floor(now / 3_600_000) * 3_600_000);
  return Array.from({ length: n }, (_, i) => new Date(first + i * Math.min(ms, (now - first) / n)));
}

const sessionOf = (id: string, events: EventRecord[]): SessionState => ({
  id, projectId, deviceId: events[0]!.deviceId, profileId: 'p1', startedAt: events[0]!.createdAt.getTime(),
  lastEventAt: events[events.length - 1]!.createdAt.getTime(), screenViewCount: 1, eventCount: events.length,
  entryOrigin: 'https://x.test', entryPath: '/', exitOrigin: 'https://x.test', exitPath: '/', isBot: false,
  dims: Object.fromEntries(SESSION_DIMENSIONS.map((d) => [d, ''])) as SessionState['dims'], ended: false, updatedAtMs: Date.now(),
  lastEvent: { id: events[events.length - 1]!.id, createdAt: events[events.length - 1]!.createdAt.getTime(), isScreenView: false },
  stepNames: null, stepFirstAt: null, stepLastAt: null,
});

test('a batch of the current hour is four round trips (BEGIN, COPY, one statement for the rest, COMMIT) and writes all of it; a moved fence or a key applied elsewhere undoes all of it', async () => {
  const stream = `s3-${env.namespace}`;
  const [t0, t1, t2] = thisHour(3, 1000);
  const earlier = event({ createdAt: t0 }); // a view of an earlier batch, its time on page known now
  const view = event({ createdAt: t1 });
  const click = event({ name: 'click', createdAt: t2 });
  await partitions.ensureFor([earlier]);
  let seq = await committedSeq(env.db, stream, 0);
  await commitShardBatch(env.db, batch(stream, seq, [earlier]));
  seq++;
  const sessionId = '0190c0de-0000-7000-8000-5e5510000001';
  const sent: string[] = [];
  await commitShardBatch(countingPool(sent), batch(stream, seq, [view, click], {
    sessions: [sessionOf(sessionId, [earlier, view, click])],
    viewDurations: [{ eventId: earlier.id, createdAt: earlier.createdAt.getTime(), durationMs: 1000 }],
    opKeys: [{ projectId, key: 'k-one', opId: click.id }],
  }));
  assert.deepEqual(sent.map((x) => x.split(/\s/)[0]), ['BEGIN', 'COPY', 'WITH', 'COMMIT'], sent.map((x) => x.slice(0, 60)).join(' | '));
  seq++;
  // ...and every part of it landed.
  assert.equal(await committedSeq(env.db, stream, 0), seq);
  const stored = await env.db.query<{ id: string; duration_ms: string | null }>(
    'SELECT id, duration_ms FROM events WHERE id = ANY($1::uuid[]) ORDER BY created_at', [[earlier.id, view.id, click.id]]);
  assert.deepEqual(stored.rows.map((r) => [r.id, r.duration_ms === null ? null : Number(r.duration_ms)]), [[earlier.id, 1000], [view.id, null], [click.id, null]]);
  const s = await env.db.query('SELECT event_count, screen_view_count FROM sessions WHERE id = $1', [sessionId]);
  assert.deepEqual(s.rows, [{ event_count: 3, screen_view_count: 1 }]);
  assert.equal((await env.db.query('SELECT 1 FROM op_keys WHERE project_id = $1 AND key = $2', [projectId, 'k-one'])).rowCount, 1);
  const hour = new Date(Math.floor(t1!.getTime() / 3_600_000) * 3_600_000);
  const inv = await env.db.query('SELECT rebuild FROM rollup_invalidations WHERE project_id = $1 AND bucket = $2 AND shard = 0', [projectId, hour]);
  assert.deepEqual(inv.rows, [{ rebuild: true }]);
  // A redelivered event in a batch is skipped, the rest stored (the COPY fails, the insert that skips stored rows redoes it).
  const [t3, t4] = thisHour(2, 10);
  const fresh = event({ createdAt: t3 });
  await commitShardBatch(env.db, batch(stream, seq, [click, fresh]));
  seq++;
  assert.equal((await env.db.query('SELECT count(*)::int AS n FROM events WHERE id = ANY($1::uuid[])', [[click.id, fresh.id]])).rows[0].n, 2);
  // A key recorded by another batch, or a position that moved on, undoes the whole transaction.
  const other = event({ createdAt: t4 });
  await assert.rejects(commitShardBatch(env.db, batch(stream, seq, [other], { opKeys: [{ projectId, key: 'k-one', opId: other.id }] })), KeyAppliedElsewhereError);
  await assert.rejects(commitShardBatch(env.db, batch(stream, seq - 1, [other], { sessions: [sessionOf('0190c0de-0000-7000-8000-5e5510000002', [other])] })), ShardFencedError);
  assert.equal((await env.db.query('SELECT 1 FROM events WHERE id = $1', [other.id])).rowCount, 0);
  assert.equal((await env.db.query("SELECT 1 FROM sessions WHERE id = '0190c0de-0000-7000-8000-5e5510000002'")).rowCount, 0);
  assert.equal(await committedSeq(env.db, stream, 0), seq);
});
