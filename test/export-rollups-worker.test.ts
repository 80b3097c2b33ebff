// The worker's commit logs the hours whose EVENT counts change (sql/009_event_rollups.sql):
// the hour of every event it inserts, also where no session starts, and the hour of every
// session_end row it deletes when an idle-ended session is reopened; with those logged, the
// rollup path of /export/events totalCount and /export/charts stays equal to the raw path
// before and after refreshes. Store level (processOps + commitShardBatch, as the shard runner
// does), so event times and session checks are exact.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createEnricher, type Enricher } from '../internal/enrich';
import { getChart } from '../internal/export/charts';
import { getEventsPage } from '../internal/export/events';
import { parseChartParams, parseEventsParams } from '../internal/export/params';
import type { QueuedOp, QueuedTrack } from '../internal/model/event';
import type { SessionState } from '../internal/sessionize/session';
import { refreshRollups } from '../internal/store/rollups';
import { PartitionKeeper } from '../internal/store/partitions';
import { commitShardBatch, committedSeq } from '../internal/store/writes';
import { processOps } from '../internal/worker/processor';
import { TestEnv } from './support/harness';

const UA = 'Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0';
const MIN = 60_000;
const HOUR = 60 * MIN;
const T0 = Date.parse('2024-05-01T10:50:00Z');

let env: TestEnv;
let enricher: Enricher;

before(async () => {
  env = await new TestEnv('export_rw').setup();
  enricher = await createEnricher();
});

after(async () => {
  await env?.teardown();
});

test('the worker logs the hours of the events it inserts and deletes; rollup reads stay exact', { timeout: 60_000 }, async () => {
  const projectId = await env.project({ timezone: 'UTC' });
  const timescale = (await env.db.query<{ ts: boolean }>('SELECT tm_timescale() AS ts')).rows[0]!.ts;
  const stream = `unit-${env.namespace}`;
  const dev = 'd'.repeat(32);
  const cache = new Map<string, SessionState>();
  let now = Date.parse('2024-05-03T12:00:00Z');
  const partitions = new PartitionKeeper(env.db, timescale);
  let seq = await committedSeq(env.db, stream, 3);
  const run = async (ops: QueuedOp[]) => {
    const out = await processOps(ops, { enricher, cache, loadSessions: async () => [], timeoutMs: 30 * MIN, nowMs: () => now });
    await partitions.ensureFor(out.events);
    await commitShardBatch(env.db, {
      stream, shard: 3, fromSeq: seq, toSeq: seq + 1, events: out.events, viewDurations: out.viewDurations,
      sessions: out.sessions, reopenedSessionIds: out.reopenedSessionIds, profileOps: out.profileOps,
    });
    seq++;
    for (const [k, s] of out.states) cache.set(k, s);
    return out;
  };
  let n = 0;
  const op = (at: number, name: string): QueuedTrack => ({
    kind: 'track', id: `0190c0de-0000-7000-8000-${String(++n).padStart(12, '0')}`, projectId, deviceId: dev,
    receivedAt: new Date(now).toISOString(), name, profileId: dev, createdAt: new Date(at).toISOString(), properties: {},
    groups: [], url: 'https://shop.example/p', title: null, referrer: null, ip: null, userAgent: UA,
  });
  const logged = async () =>
    (await env.db.query<{ bucket: Date }>('SELECT DISTINCT bucket FROM rollup_invalidations WHERE project_id = $1 ORDER BY bucket', [projectId]))
      .rows.map((r) => r.bucket.toISOString());
  const refreshAll = async () => {
    while ((await refreshRollups(env.db, timescale, { before: new Date(now) })).buckets > 0);
    assert.deepEqual(await logged(), []);
  };
  const hour = (ms: number) => new Date(Math.floor(ms / HOUR) * HOUR).toISOString();
  const same = async (phase: string) => {
    for (const q of ['limit=5', 'limit=5&start=2024-05-01T10:00:00Z', 'limit=5&event=session_end']) {
      const params = parseEventsParams(new URLSearchParams(q));
      const [a, r] = [await getEventsPage(env.db, projectId, params), await getEventsPage(env.db, projectId, params, { path: 'raw' })];
      assert.deepEqual(a, r, `${phase}: /export/events ${q}`);
    }
    const series = JSON.stringify([{ name: '*' }]);
    const chart = parseChartParams(new URLSearchParams({ startDate: '2024-05-01', endDate: '2024-05-01', interval: 'hour', series, breakdowns: JSON.stringify([{ name: 'name' }]) }));
    const [a, r] = [await getChart(env.db, projectId, chart, new Date(now)), await getChart(env.db, projectId, chart, new Date(now), { path: 'raw' })];
    assert.deepEqual(a, r, `${phase}: /export/charts`);
    return (await getEventsPage(env.db, projectId, parseEventsParams(new URLSearchParams('limit=1')))).meta.totalCount;
  };

  // A session that starts at 10:50 and has events until 11:55: hour 11 has events but no session start.
  await run([op(T0, 'screen_view'), op(T0 + 25 * MIN, 'click'), op(T0 + 50 * MIN, 'click'), op(T0 + 65 * MIN, 'click')]);
  assert.deepEqual(await logged(), [hour(T0), hour(T0 + 65 * MIN)], 'the hour of every inserted event');
  await same('(1)');
  await refreshAll();
  assert.equal(await same('(1) refreshed'), 5); // session_start, screen_view, 3 clicks

  // Idle end by the check: session_end at the last event (11:55).
  const sid = cache.values().next().value!.id;
  now += 30 * MIN;
  await run([{ kind: 'session_check', id: 'c1', projectId, deviceId: dev, receivedAt: '', sessionId: sid }]);
  assert.equal((await env.db.query(`SELECT count(*)::int AS n FROM events WHERE name = 'session_end'`)).rows[0].n, 1);
  assert.ok((await logged()).includes(hour(T0 + 65 * MIN)), 'the hour of the session_end row');
  await refreshAll();
  assert.equal(await same('(2) refreshed'), 6);

  // An event at 12:10 reopens the session: its session_end row (hour 11) goes; hour 11 gets no other write.
  now += 1000;
  await run([op(T0 + 80 * MIN, 'click')]);
  assert.ok((await logged()).includes(hour(T0 + 65 * MIN)), 'the hour of the deleted session_end row');
  assert.equal(await same('(3) reopened'), 6);
  await refreshAll();
  assert.equal(await same('(3) refreshed'), 6);
});
