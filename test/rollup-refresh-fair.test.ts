// The refresh's bounds and fairness (internal/store/rollups.ts, docs/rollups.md "Bounds and
// fairness"): a round takes at most ROLLUP_REFRESH_ROUND_HOURS (project, hour) pairs, in
// transactions of at most ROLLUP_REFRESH_TRANSACTION_HOURS, picked in turn across projects,
// so one project's backlog of late hours (a backfill over years of months) neither holds
// another project's hour back nor makes one transaction lock every month's partition. A
// session's delta rows go together, whichever of its hours was picked. Answers stay exact
// between rounds (a logged hour is read raw), and once drained every kept table equals a
// recompute of every hour.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createEnricher, type Enricher } from '../internal/enrich';
import { getMetrics } from '../internal/insights/service';
import type { QueuedOp, QueuedTrack } from '../internal/model/event';
import { parsePeriodParams } from '../internal/query/params';
import type { SessionState } from '../internal/sessionize/session';
import { refreshRollups } from '../internal/store/rollups';
import { PartitionKeeper } from '../internal/store/partitions';
import { commitShardBatch, committedSeq } from '../internal/store/writes';
import { processOps } from '../internal/worker/processor';
import { drainRefresh, recomputeAllHours, rollupSnapshot } from './support/rollup-reference';
import { TestEnv } from './support/harness';
import { UAS } from './support/sessions-traffic';

const MIN = 60_000;
const HOUR = 60 * MIN;
const FAR = new Date('2100-01-01T00:00:00Z');

let env: TestEnv;
let enricher: Enricher;

before(async () => {
  env = await new TestEnv('rfair').setup();
  enricher = await createEnricher();
});

after(async () => {
  enricher?.close();
  await env?.teardown();
});

const snapshot = (projectId: string) => rollupSnapshot(env.db, projectId);
const drain = async (): Promise<void> => void (await drainRefresh(env.db, FAR));
/** What recomputing every hour of the project gives. */
const recomputeAll = (projectId: string) => recomputeAllHours(env.db, projectId, FAR);

/** Writes ops the way a shard runner does (processOps, partitions, one commit per batch). */
function writer(stream: string, shard: number) {
  const cache = new Map<string, SessionState>();
  const partitions = new PartitionKeeper(env.db, false);
  let seq: number | null = null;
  return async (ops: QueuedOp[]) => {
    seq ??= await committedSeq(env.db, stream, shard);
    const out = await processOps(ops, { enricher, cache, loadSessions: async () => [], timeoutMs: 30 * MIN, nowMs: () => Date.now() });
    await partitions.ensureFor(out.events);
    await commitShardBatch(env.db, {
      stream, shard, fromSeq: seq, toSeq: seq + 1, events: out.events, viewDurations: out.viewDurations,
      sessions: out.sessions, reopenedSessionIds: out.reopenedSessionIds, profileOps: out.profileOps,
    });
    seq++;
    for (const [k, s] of out.states) cache.set(k, s);
  };
}

let n = 0;
const op = (projectId: string, device: string, at: number, name: string, path: string): QueuedTrack => ({
  kind: 'track', id: `0190c0de-0000-7000-8000-${String(++n).padStart(12, '0')}`, projectId, deviceId: device.padEnd(32, '0'),
  receivedAt: new Date().toISOString(), name, profileId: device, createdAt: new Date(at).toISOString(),
  properties: name === 'purchase' ? { amount: n % 7 } : {}, groups: [], url: `https://shop.example${path}`,
  title: name === 'screen_view' ? `Title ${path}` : null, referrer: null, ip: '8.8.8.8', userAgent: UAS.chrome.ua,
});

/** A session of three events from hh:50, crossing into the next hour. */
const session = (projectId: string, device: string, start: number): QueuedTrack[] => [
  op(projectId, device, start, 'screen_view', '/'),
  op(projectId, device, start + 15 * MIN, 'screen_view', '/pricing'),
  op(projectId, device, start + 20 * MIN, 'purchase', '/pricing'),
];

const logged = async (projectId: string): Promise<number> =>
  (await env.db.query<{ n: number }>('SELECT count(DISTINCT bucket)::int AS n FROM rollup_invalidations WHERE project_id = $1', [projectId])).rows[0]!.n;

test('one project\'s backlog of late hours in 40 months: a round is bounded and another project\'s hours go in its first transaction; exact throughout', { timeout: 300_000 }, async () => {
  const flood = await env.project({ timezone: 'UTC' });
  const other = await env.project({ timezone: 'Europe/Berlin' });
  const write = writer(`fair-${env.namespace}`, 1);
  const thisMonth = new Date();
  // The flooding project: a late session in each of 40 past months (each two hours: 80).
  const ops: QueuedTrack[] = [];
  for (let i = 1; i <= 40; i++) {
    const start = Date.UTC(thisMonth.getUTCFullYear(), thisMonth.getUTCMonth() - i, 10, i % 23, 50);
    ops.push(...session(flood, `flood-${String(i).padStart(4, '0')}`, start));
  }
  for (let i = 0; i < ops.length; i += 30) await write(ops.slice(i, i + 30));
  // The other project, afterwards: one late session yesterday, and an hour to recompute.
  const yesterday = Math.floor(Date.now() / HOUR) * HOUR - 20 * HOUR - 10 * MIN;
  await write(session(other, 'other-1', yesterday));
  await env.db.query(`INSERT INTO rollup_invalidations (project_id, bucket, shard, rebuild) VALUES ($1, $2, 0, true)`,
    [other, new Date(Math.floor(Date.now() / HOUR) * HOUR - 30 * HOUR).toISOString()]);
  assert.equal(await logged(flood), 80, 'every late hour of the flood is logged');
  assert.equal(await logged(other), 3);

  const start = new Date(Date.UTC(thisMonth.getUTCFullYear(), thisMonth.getUTCMonth() - 41, 1)).toISOString().slice(0, 10);
  const params = parsePeriodParams(new URLSearchParams({ startDate: start, endDate: new Date().toISOString().slice(0, 10) }));
  const rawFlood = await getMetrics(env.db, flood, params, new Date(), { path: 'raw' });
  assert.equal(rawFlood.metrics.total_sessions, 40);

  const r = await refreshRollups(env.db, false, { before: FAR, roundHours: 16, transactionHours: 4 });
  assert.equal(r.hours, 16, 'the round took its bound of (project, hour) pairs');
  assert.equal(r.transactions, 4, 'in transactions of at most 4');
  assert.equal(await logged(other), 0, 'the other project\'s three hours went in the first round, behind 80 of the flood\'s');
  const left = await logged(flood);
  // 13 pairs of the flood (its hours oldest logged first: often both hours of one session,
  // whose delta goes whole), and at most each picked session's other hour with them.
  assert.ok(left >= 80 - 2 * 13 && left <= 80 - 7, `the flood's backlog shrank by the round's share (${left} left)`);
  // Between rounds, answers are exact: logged hours are read raw, refreshed ones from rollups.
  assert.deepEqual(await getMetrics(env.db, flood, params, new Date(), {}), rawFlood);
  // A session's delta rows go together: no session is half applied.
  const split = await env.db.query(
    `SELECT s.session_id FROM rollup_delta_sessions s
     WHERE NOT EXISTS (SELECT 1 FROM rollup_delta_events e WHERE e.session_id = s.session_id)`);
  assert.equal(split.rowCount, 0, 'every session still logged has its events still logged');

  // The next round serves the flood only, and so on until nothing is logged.
  let rounds = 1;
  for (;;) {
    const x = await refreshRollups(env.db, false, { before: FAR, roundHours: 16, transactionHours: 4 });
    if (x.buckets === 0) break;
    assert.ok(x.hours <= 16 && x.transactions <= 4);
    rounds++;
  }
  // 80 delta hours, then each backfilled day's recompute that builds its daily rows (one
  // logged hour per day: 40), 16 pairs a round.
  assert.ok(rounds >= 5 && rounds <= 12, `80 + 40 hours, 16 a round (${rounds} rounds)`);
  assert.equal(await logged(flood), 0);
  assert.equal((await env.db.query('SELECT (SELECT count(*) FROM rollup_delta_sessions) + (SELECT count(*) FROM rollup_delta_events) AS n')).rows[0].n, 0);
  assert.deepEqual(await getMetrics(env.db, flood, params, new Date(), {}), rawFlood);
  for (const p of [flood, other]) {
    const kept = await snapshot(p);
    assert.ok(kept.events_hourly!.length > 0);
    assert.deepEqual(kept, await recomputeAll(p), `every kept table of ${p === flood ? 'the flood' : 'the other project'} equals a recompute`);
  }
});

test('projects a full round left out go first in the next round', { timeout: 120_000 }, async () => {
  const projects: string[] = [];
  for (let i = 0; i < 6; i++) projects.push(await env.project({ timezone: 'UTC' }));
  const hour = Math.floor(Date.now() / HOUR) * HOUR - 50 * HOUR;
  // Each project: four hours to recompute.
  for (const p of projects) {
    for (let h = 0; h < 4; h++) {
      await env.db.query('INSERT INTO rollup_invalidations (project_id, bucket, shard, rebuild) VALUES ($1, $2, 0, true)', [p, new Date(hour + h * HOUR).toISOString()]);
    }
  }
  const pending = async () => Promise.all(projects.map((p) => logged(p)));
  // A round of 4 pairs serves four projects once each; the next serves the two left out first.
  await refreshRollups(env.db, false, { before: FAR, roundHours: 4, transactionHours: 2 });
  const after1 = await pending();
  assert.deepEqual([...after1].sort(), [3, 3, 3, 3, 4, 4], `one hour each of four projects (${after1})`);
  await refreshRollups(env.db, false, { before: FAR, roundHours: 2, transactionHours: 2 });
  const after2 = await pending();
  assert.deepEqual(after2.map((x, i) => (after1[i] === 4 ? x : null)).filter((x) => x !== null), [3, 3], `the two left out went first (${after2})`);
  await drain();
  assert.deepEqual(await pending(), [0, 0, 0, 0, 0, 0]);
});
