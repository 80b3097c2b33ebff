// Partitions of `events` (PartitionKeeper, docs/operating.md "Event time and partitions"): a
// month's partition is a table like `events` attached to it, which takes a lock on `events`
// that no read or write conflicts with (CREATE TABLE ... PARTITION OF takes ACCESS EXCLUSIVE:
// it waited for every statement on `events`, and queued every later one behind it). The lock
// is still waited for at most lock_timeout, a few times (DDL can hold it), then the creation
// gives up (the batch is retried). The coming months are created ahead; a partition of
// another name covering a month counts as that month's.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv } from '../../test/support/harness';
import { blankEventRecord } from '../enrich';
import { applyRetention } from './maintenance';
import { PartitionBusyError, PartitionKeeper } from './partitions';

let env: TestEnv;

before(async () => {
  env = await new TestEnv('partitions').setup();
});

after(async () => {
  await env?.teardown();
});

const at = (iso: string) => [blankEventRecord({ id: '0190c0de-0000-7000-8000-000000000001', projectId: 'p', name: 'x', deviceId: 'd', profileId: 'd', createdAt: new Date(iso) })];
const partitions = async (): Promise<string[]> =>
  (await env.db.query<{ name: string }>(`SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass ORDER BY 1`)).rows.map((r) => r.name);

test('a partition is created while long reads and writes of events run: they hold no lock it waits for', async () => {
  // A long statement on events: a transaction that read and wrote it (a refresh, an export).
  const holder = await env.db.connect();
  await holder.query('BEGIN');
  await holder.query('SELECT count(*) FROM events');
  await holder.query(`DELETE FROM events WHERE created_at < '1990-01-01'`);
  try {
    const t0 = Date.now();
    await new PartitionKeeper(env.db, false, { lockTimeoutMs: 200, attempts: 1 }).ensureFor(at('2019-03-04T05:06:07Z'));
    assert.ok(Date.now() - t0 < 1_000, `created at once (${Date.now() - t0} ms)`);
    assert.ok((await partitions()).includes('events_p201903'));
  } finally {
    await holder.query('COMMIT');
    holder.release();
  }
  // As a partition made by CREATE TABLE ... PARTITION OF: the same columns, defaults and indexes.
  const described = async (table: string) => (await env.db.query<{ d: string }>(
    `SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), ''), ', ' ORDER BY a.attnum) AS d
     FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped`, [table])).rows[0]!.d;
  await env.db.query(`CREATE TABLE events_reference PARTITION OF events FOR VALUES FROM ('2019-04-01T00:00:00Z') TO ('2019-05-01T00:00:00Z')`);
  assert.equal(await described('events_p201903'), await described('events_reference'));
  const indexes = async (table: string) => (await env.db.query<{ d: string }>(
    `SELECT regexp_replace(pg_get_indexdef(indexrelid), '^.* USING ', '') AS d FROM pg_index WHERE indrelid = $1::regclass ORDER BY 1`, [table])).rows.map((r) => r.d);
  assert.deepEqual(await indexes('events_p201903'), await indexes('events_reference'));
  await env.db.query('DROP TABLE events_reference');
});

test('a creation that cannot get its lock (DDL on events holds it) gives up after lock_timeout, a few times, without holding readers back', async () => {
  const holder = await env.db.connect();
  await holder.query('BEGIN');
  await holder.query('LOCK TABLE events IN SHARE UPDATE EXCLUSIVE MODE'); // as another attach, or ANALYZE events
  try {
    const keeper = new PartitionKeeper(env.db, false, { lockTimeoutMs: 200, attempts: 3 });
    const t0 = Date.now();
    const creating = keeper.ensureFor(at('2019-06-04T05:06:07Z'));
    await new Promise((r) => setTimeout(r, 50));
    const r0 = Date.now();
    await env.db.query(`SELECT count(*) FROM events WHERE created_at >= '2026-01-01'`);
    const readMs = Date.now() - r0;
    await assert.rejects(creating, (err: unknown) => err instanceof PartitionBusyError && /events_p201906 not created/.test((err as Error).message));
    const ms = Date.now() - t0;
    assert.ok(ms >= 3 * 200 && ms < 3_000, `three attempts of 200 ms (${ms} ms)`);
    assert.ok(readMs < 150, `a reader is not queued behind the waiting creation (${readMs} ms)`);
    assert.ok(!(await partitions()).some((p) => p === 'events_p201906'), 'nothing half made');
    assert.equal((await env.db.query(`SELECT to_regclass('events_p201906') AS t`)).rows[0].t, null);
  } finally {
    await holder.query('COMMIT');
    holder.release();
  }
  await new PartitionKeeper(env.db, false, { lockTimeoutMs: 200 }).ensureFor(at('2019-06-04T05:06:07Z'));
  assert.ok((await partitions()).includes('events_p201906'));
});

test('an existing partition needs no lock; one of another name covering the month counts as the month\'s', async () => {
  await new PartitionKeeper(env.db, false).ensureFor(at('2018-07-01T00:00:00Z'));
  await env.db.query(`CREATE TABLE events_custom PARTITION OF events FOR VALUES FROM ('2017-05-01T00:00:00Z') TO ('2017-06-01T00:00:00Z')`);
  const holder = await env.db.connect();
  await holder.query('BEGIN');
  await holder.query('SELECT count(*) FROM events');
  try {
    const t0 = Date.now();
    const keeper = new PartitionKeeper(env.db, false, { lockTimeoutMs: 5_000 });
    await keeper.ensureFor(at('2018-07-15T00:00:00Z'));
    assert.ok(Date.now() - t0 < 2_000, 'the existing partition was not waited for');
  } finally {
    await holder.query('COMMIT');
    holder.release();
  }
  await new PartitionKeeper(env.db, false).ensureFor(at('2017-05-20T00:00:00Z'));
  const names = await partitions();
  assert.ok(names.includes('events_custom') && !names.includes('events_p201705'), names.join(', '));
});

test('this month and the next two are created ahead', async () => {
  const now = Date.UTC(2031, 11, 20); // December: the next two months are in the next year
  assert.equal(await new PartitionKeeper(env.db, false).ensureAhead(2, now), 3);
  const names = await partitions();
  for (const m of ['events_p203112', 'events_p203201', 'events_p203202']) assert.ok(names.includes(m), m);
});

test('retention drops whole old partitions (its drop waits for its lock as a creation does)', async () => {
  await new PartitionKeeper(env.db, false).ensureFor(at('2016-01-10T00:00:00Z'));
  assert.ok((await partitions()).includes('events_p201601'));
  await applyRetention(env.db, 3000);
  assert.ok(!(await partitions()).includes('events_p201601'));
});
