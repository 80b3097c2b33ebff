// ROLLUP_REFRESH_QUIET_MS / ROLLUP_REFRESH_MAX_DELAY_MS (sql/024, internal/store/rollups.ts):
// the refresh recomputes a past hour once nothing changed it for the quiet time, or once its
// oldest entry waited the max delay; an hour still being written waits (read from the raw
// rows meanwhile, so answers stay exact). The worker's upsert moves last_at, not first_at.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { blankEventRecord } from '../internal/enrich';
import { getMetrics } from '../internal/insights/service';
import { parsePeriodParams } from '../internal/query/params';
import { refreshRollups } from '../internal/store/rollups';
import { PartitionKeeper } from '../internal/store/partitions';
import { commitShardBatch, committedSeq, type ShardBatch } from '../internal/store/writes';
import { TestEnv, sleep } from './support/harness';

let env: TestEnv;
let projectId: string;
let timescale = false;
const HOUR = 3_600_000;
const base = Math.floor(Date.now() / HOUR) * HOUR - 30 * HOUR;
const hourIso = (i: number) => new Date(base + i * HOUR).toISOString();

before(async () => {
  env = await new TestEnv('rquiet').setup();
  projectId = await env.project({ timezone: 'UTC' });
  timescale = (await env.db.query<{ ts: boolean }>('SELECT tm_timescale() AS ts')).rows[0]!.ts;
});

after(async () => {
  await env?.teardown();
});

/** Sessions in hours 0..4 (two each), every hour logged, then the log rewritten as each case needs. */
async function seed(): Promise<void> {
  await env.db.query('DELETE FROM sessions');
  await env.db.query('DELETE FROM rollup_invalidations');
  await env.db.query(
    `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, duration_ms, screen_view_count, event_count, is_bounce, is_bot)
     SELECT gen_random_uuid(), $1, 'd' || h || k, 'd' || h || k, $2::timestamptz + h * interval '1 hour' + k * interval '10 minutes',
            $2::timestamptz + h * interval '1 hour' + k * interval '10 minutes', 0, 1, 1, true, false
     FROM generate_series(0, 4) h CROSS JOIN generate_series(1, 2) k`,
    [projectId, hourIso(0)],
  );
  const at = (sec: number) => `now() - interval '${sec} seconds'`;
  // hour 0: changing for 10 minutes, last change 2 s ago: due by the max delay
  // hour 1: first logged 20 s ago, changed 1 s ago: not due
  // hour 2: quiet for 45 s: due
  // hour 3: two shards, one quiet, one changed 1 s ago: not due (the latest change counts)
  // hour 4: quiet for 45 s on both shards: due
  await env.db.query(
    `INSERT INTO rollup_invalidations (project_id, bucket, shard, first_at, last_at) VALUES
       ($1, $2, 0, ${at(600)}, ${at(2)}),
       ($1, $3, 0, ${at(20)}, ${at(1)}),
       ($1, $4, 0, ${at(60)}, ${at(45)}),
       ($1, $5, 0, ${at(60)}, ${at(50)}), ($1, $5, 1, ${at(20)}, ${at(1)}),
       ($1, $6, 0, ${at(60)}, ${at(45)}), ($1, $6, 1, ${at(90)}, ${at(46)})`,
    [projectId, hourIso(0), hourIso(1), hourIso(2), hourIso(3), hourIso(4)],
  );
}

const logged = async (): Promise<string[]> =>
  (await env.db.query<{ b: Date }>('SELECT DISTINCT bucket AS b FROM rollup_invalidations WHERE project_id = $1 ORDER BY 1', [projectId])).rows.map((r) => r.b.toISOString());

test('only quiet hours, and hours that waited the max delay, are recomputed; the rest wait, and answers stay exact', async () => {
  await seed();
  const params = parsePeriodParams(new URLSearchParams({ startDate: hourIso(0).slice(0, 10), endDate: new Date(base + 5 * HOUR).toISOString().slice(0, 10) }));
  const raw = await getMetrics(env.db, projectId, params, new Date(), { path: 'raw' });
  assert.equal(raw.metrics.total_sessions, 10);
  const r = await refreshRollups(env.db, timescale, { quietMs: 30_000, maxDelayMs: 300_000, before: new Date(base + 6 * HOUR) });
  assert.equal(r.buckets, 4, 'entries of hours 0, 2 and 4 (two shards)');
  assert.deepEqual(await logged(), [hourIso(1), hourIso(3)]);
  // The waiting hours are read raw: the same answer as the raw path.
  assert.deepEqual(await getMetrics(env.db, projectId, params, new Date(), {}), raw);
  if (!timescale) {
    const { rows } = await env.db.query<{ b: Date; n: string }>('SELECT bucket AS b, sessions AS n FROM rollup_sessions_hourly WHERE project_id = $1 ORDER BY 1', [projectId]);
    assert.deepEqual(rows.map((x) => [x.b.toISOString(), Number(x.n)]), [[hourIso(0), 2], [hourIso(2), 2], [hourIso(4), 2]]);
  }
  // A second round with nothing quieter takes nothing; quietMs 0 takes the rest at once.
  assert.equal((await refreshRollups(env.db, timescale, { quietMs: 30_000, maxDelayMs: 300_000, before: new Date(base + 6 * HOUR) })).buckets, 0);
  assert.equal((await refreshRollups(env.db, timescale, { before: new Date(base + 6 * HOUR) })).buckets, 3);
  assert.deepEqual(await logged(), []);
  assert.deepEqual(await getMetrics(env.db, projectId, params, new Date(), {}), raw);
});

test("the worker's upsert moves an entry's last_at and keeps its first_at", async () => {
  await env.db.query('DELETE FROM rollup_invalidations');
  const stream = `s-${env.namespace}`;
  let n = 0;
  const batch = (fromSeq: number): ShardBatch => ({
    stream, shard: 0, fromSeq, toSeq: fromSeq + 1, viewDurations: [], sessions: [], reopenedSessionIds: [], profileOps: [],
    events: [blankEventRecord({
      id: `0190c0de-0000-7000-8000-${String(++n).padStart(12, '0')}`, projectId, name: 'click',
      deviceId: 'e'.repeat(32), profileId: 'p', createdAt: new Date(base + 7 * HOUR + n * 1000),
    })],
  });
  const partitions = new PartitionKeeper(env.db, timescale);
  let seq = await committedSeq(env.db, stream, 0);
  const one = batch(seq);
  await partitions.ensureFor(one.events);
  await commitShardBatch(env.db, one, { copy: !timescale });
  seq++;
  const first = (await env.db.query('SELECT first_at, last_at FROM rollup_invalidations WHERE bucket = $1', [new Date(base + 7 * HOUR)])).rows[0];
  assert.deepEqual(first.first_at, first.last_at);
  await sleep(50);
  const two = batch(seq);
  await partitions.ensureFor(two.events);
  await commitShardBatch(env.db, two, { copy: !timescale });
  const second = (await env.db.query('SELECT first_at, last_at FROM rollup_invalidations WHERE bucket = $1', [new Date(base + 7 * HOUR)])).rows[0];
  assert.deepEqual(second.first_at, first.first_at, 'first_at kept');
  assert.ok(second.last_at.getTime() > first.last_at.getTime(), 'last_at moved');
});
