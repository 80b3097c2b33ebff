// Rollups kept by deltas (sql/025_rollup_deltas.sql, internal/store/rollups.ts and
// internal/store/rollup-deltas.ts): writes into past hours are logged by the worker's commit
// as deltas, and the refresh adds the change of the touched sessions and events to every
// rollup table instead of recomputing the hour.
// Store level (processOps + commitShardBatch, as the shard runner does), so event times and
// session checks are exact. The reference is the recompute itself: after every delta round,
// every rollup table of the project must hold exactly what recomputing all its hours gives.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { blankEventRecord, createEnricher, type Enricher } from '../internal/enrich';
import type { QueuedOp, QueuedTrack } from '../internal/model/event';
import type { SessionState } from '../internal/sessionize/session';
import { catalogueEntry, isCatalogued, measuresOf } from '../internal/store/rollup-catalogue';
import { PartitionKeeper } from '../internal/store/partitions';
import { refreshRollups } from '../internal/store/rollups';
import { commitShardBatch, committedSeq } from '../internal/store/writes';
import { processOps } from '../internal/worker/processor';
import { drainRefresh, recomputeAllHours, rollupSnapshot } from './support/rollup-reference';
import { TestEnv } from './support/harness';
import { mulberry32 } from './support/random';
import { UAS } from './support/sessions-traffic';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY0 = Date.parse('2024-05-01T00:00:00+02:00'); // a local day of Europe/Berlin
const IPS = ['8.8.8.8', '81.2.69.160', '5.9.0.1', '133.11.0.1', '2.16.0.1'];
const PATHS = ['/', '/pricing', '/blog/a', '/blog/b', '/docs'];
const REFS = [null, 'https://www.google.com/', 'https://t.co/x', 'https://news.example.org/item'];

let env: TestEnv;
let enricher: Enricher;

before(async () => {
  env = await new TestEnv('rollup_delta').setup();
  enricher = await createEnricher();
});

after(async () => {
  await env?.teardown();
});

const snapshot = (projectId: string) => rollupSnapshot(env.db, projectId);
const FAR = new Date('2030-01-01T00:00:00Z');
/** Refresh rounds until nothing is due; every delta hour takes its delta (these hours are small). */
const drain = () => drainRefresh(env.db, FAR, { recomputeLargeDeltas: false });
/** What recomputing every hour of the project gives (the reference), restoring nothing. */
const recomputeAll = (projectId: string) => recomputeAllHours(env.db, projectId, new Date('2030-01-01T00:00:00Z'));

/** A project's traffic at store level (processOps + commitShardBatch) under a clock of its own. */
async function deltaTraffic(seed: number) {
  const projectId = await env.project({ timezone: 'Europe/Berlin' });
  const stream = `unit-${env.namespace}-${seed}`;
  const cache = new Map<string, SessionState>();
  const partitions = new PartitionKeeper(env.db, false);
  let seq = await committedSeq(env.db, stream, 1);
  const clock = { now: DAY0 + 3 * 86_400_000 };
  const run = async (ops: QueuedOp[]) => {
    const out = await processOps(ops, { enricher, cache, loadSessions: async () => [], timeoutMs: 30 * MIN, nowMs: () => clock.now });
    await partitions.ensureFor(out.events);
    await commitShardBatch(env.db, {
      stream, shard: 1, fromSeq: seq, toSeq: seq + 1, events: out.events, viewDurations: out.viewDurations,
      sessions: out.sessions, reopenedSessionIds: out.reopenedSessionIds, endedOnlySessionIds: out.endedOnlySessionIds, profileOps: out.profileOps,
    });
    seq++;
    for (const [k, s] of out.states) cache.set(k, s);
  };
  const rnd = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const uas = Object.values(UAS).map((u) => u.ua);
  let n = 0;
  const op = (dev: number, at: number, name: string, extra: Partial<QueuedTrack> = {}): QueuedTrack => {
    const path = pick(PATHS);
    return {
      kind: 'track', id: `0190c0de-${String(seed).padStart(4, '0')}-7000-8000-${String(++n).padStart(12, '0')}`, projectId, deviceId: `dev-${dev}`.padEnd(32, '0'),
      receivedAt: new Date(clock.now).toISOString(), name, profileId: `dev-${dev}`, createdAt: new Date(at).toISOString(),
      properties: name === 'purchase' ? { amount: Math.round(rnd() * 10_000) / 100 } : {},
      groups: [], url: `https://shop.example${path}${rnd() < 0.3 ? '?utm_source=news&utm_medium=email' : ''}`,
      title: name === 'screen_view' ? `Title ${path}` : null, referrer: pick(REFS), ip: IPS[dev % IPS.length]!, userAgent: uas[dev % uas.length]!,
      ...extra,
    };
  };
  const last = new Map<number, number>();
  const session = (dev: number, start: number, events: number): QueuedTrack[] => {
    const ops: QueuedTrack[] = [];
    let at = start;
    for (let i = 0; i < events; i++) {
      ops.push(op(dev, at, i === 0 || rnd() < 0.6 ? 'screen_view' : 'purchase'));
      at += Math.floor(1 + rnd() * 12) * MIN;
    }
    last.set(dev, Math.max(last.get(dev) ?? 0, at - 1));
    return ops;
  };
  return { projectId, clock, cache, run, rnd, op, session, last };
}

test('late writes into rolled-up hours are applied as deltas, and every rollup table equals a recompute', { timeout: 120_000 }, async () => {
  const { projectId, clock, cache, run, rnd, op, session, last } = await deltaTraffic(25);
  // Round 1: 24 devices over the local day, sessions crossing hours, sent out of order.
  const r1: QueuedTrack[] = [];
  for (let dev = 0; dev < 24; dev++) r1.push(...session(dev, DAY0 + Math.floor(rnd() * 22 * 60) * MIN, 1 + Math.floor(rnd() * 6)));
  r1.sort(() => rnd() - 0.5);
  for (let i = 0; i < r1.length; i += 7) await run(r1.slice(i, i + 7).sort((a, b) => a.createdAt.localeCompare(b.createdAt)));
  const deltas = async () => (await env.db.query<{ n: number }>(
    'SELECT (SELECT count(*) FROM rollup_delta_sessions) + (SELECT count(*) FROM rollup_delta_events) AS n')).rows[0]!.n;
  assert.equal(Number(await deltas()), 0, 'a backfill into hours that hold nothing logs no delta');
  assert.ok(((await env.db.query('SELECT 1 FROM rollup_invalidations WHERE project_id = $1 AND rebuild', [projectId])).rowCount ?? 0) > 0,
    'its hours are logged for a recompute');
  await drain();
  assert.equal(Number(await deltas()), 0, 'the refresh consumed every delta');
  const days = await env.db.query('SELECT bucket FROM rollup_session_cube_days WHERE project_id = $1', [projectId]);
  assert.deepEqual(days.rows.map((r) => r.bucket.toISOString()), [new Date(DAY0).toISOString()], 'the backfilled day is built');
  const afterRound1 = await snapshot(projectId);
  assert.deepEqual(afterRound1, await recomputeAll(projectId), 'round 1 (a backfill, recomputed) equals a recompute');

  // A row no write touches, planted in an hour the next round changes: a recompute of that
  // hour would remove it; a delta leaves it. (An hour with sessions: into one that held
  // nothing, the writes would be logged for a recompute.)
  const touched = (await env.db.query<{ b: Date }>(
    `SELECT date_trunc('hour', started_at, 'UTC') AS b FROM sessions WHERE project_id = $1 GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1`,
    [projectId])).rows[0]!.b.getTime();

  // A late view continuing a session, alone in a refresh round (charted events only, no
  // session_start): the delta leaves the day's uncharted events as they were, and must neither
  // unlist that day in any daily table nor send the hour to a recompute.
  clock.now += HOUR;
  const continuedAt = last.get(5)! + 2 * MIN;
  const continued = Math.floor(continuedAt / HOUR) * HOUR;
  await env.db.query(
    `INSERT INTO rollup_browser_hourly (project_id, bucket, value, sessions, bounces, timed_sessions, duration_ms, screen_views)
     VALUES ($1, $2, 'Planted2', 7, 0, 0, 0, 0)`, [projectId, new Date(continued).toISOString()]);
  const listed = async () => (await env.db.query(
    `SELECT (SELECT count(*) FROM rollup_session_cube_days WHERE project_id = $1)::int AS cube,
            (SELECT count(*) FROM event_cube_days WHERE project_id = $1)::int AS event_cube,
            (SELECT count(*) FROM event_counts_days WHERE project_id = $1)::int AS counts,
            (SELECT count(*) FROM event_uncharted_days WHERE project_id = $1)::int AS uncharted,
            (SELECT count(*) FROM rollup_session_dim_pairs_days WHERE project_id = $1)::int AS dim_pairs`, [projectId])).rows[0];
  const listedBefore = await listed();
  assert.deepEqual(listedBefore, { cube: 1, event_cube: 1, counts: 1, uncharted: 1, dim_pairs: 1 });
  await run([op(5, continuedAt, 'screen_view')]);
  last.set(5, continuedAt);
  await drain();
  assert.equal((await env.db.query(
    `SELECT sessions FROM rollup_browser_hourly WHERE project_id = $1 AND bucket = $2 AND value = 'Planted2'`,
    [projectId, new Date(continued).toISOString()])).rows[0]?.sessions, 7, 'the continued session\'s hour took a delta, not a recompute');
  assert.deepEqual(await listed(), listedBefore, 'the built day stays listed in every daily table');
  await env.db.query(`DELETE FROM rollup_browser_hourly WHERE project_id = $1 AND value = 'Planted2'`, [projectId]);
  assert.deepEqual(await snapshot(projectId), await recomputeAll(projectId), 'a continued session alone equals a recompute');
  await env.db.query(
    `INSERT INTO rollup_browser_hourly (project_id, bucket, value, sessions, bounces, timed_sessions, duration_ms, screen_views)
     VALUES ($1, $2, 'Planted', 7, 0, 0, 0, 0)`, [projectId, new Date(touched).toISOString()]);

  // Round 2, late: new sessions in rolled-up hours, continued sessions (a view's duration set
  // by the next view), and purchases.
  const r2: QueuedTrack[] = [...session(100, touched + 5 * MIN, 3), ...session(101, touched + 40 * MIN, 1)];
  for (const dev of [0, 3, 5, 8]) r2.push(op(dev, last.get(dev)! + 2 * MIN, 'screen_view'), op(dev, last.get(dev)! + 3 * MIN, 'purchase'));
  for (const o of r2) await run([o]);
  // Idle ends by the check (session_end rows at each session's last event), then one reopened.
  clock.now += HOUR;
  const endedIds = [0, 3].map((dev) => [...cache.values()].find((x) => x.deviceId === `dev-${dev}`.padEnd(32, '0'))!.id);
  const logRows = async (table: string) => (await env.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${table} WHERE session_id = ANY($1::uuid[])`, [endedIds])).rows[0]!.n;
  const [sessionRows, eventRows] = [await logRows('rollup_delta_sessions'), await logRows('rollup_delta_events')];
  for (const dev of [0, 3]) {
    const s = [...cache.values()].find((x) => x.deviceId === `dev-${dev}`.padEnd(32, '0'))!;
    await run([{ kind: 'session_check', id: `check-${dev}`, projectId, deviceId: s.deviceId, receivedAt: '', sessionId: s.id }]);
  }
  const ended = (await env.db.query(`SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = 'session_end'`, [projectId])).rows[0].n;
  assert.ok(ended >= 2, 'session_end rows written');
  assert.equal(await logRows('rollup_delta_sessions'), sessionRows, 'an idle end alone logs no session delta');
  assert.equal(await logRows('rollup_delta_events'), eventRows + 2, 'its session_end row is logged, as an event');
  await drain();
  assert.equal((await env.db.query(
    `SELECT sessions FROM rollup_browser_hourly WHERE project_id = $1 AND bucket = $2 AND value = 'Planted'`,
    [projectId, new Date(touched).toISOString()])).rows[0]?.sessions, 7, 'the hour took a delta, not a recompute');
  await env.db.query(`DELETE FROM rollup_browser_hourly WHERE project_id = $1 AND value = 'Planted'`, [projectId]);
  const afterRound2 = await snapshot(projectId);
  assert.notDeepEqual(afterRound2, afterRound1, 'round 2 changed the rollups');
  assert.deepEqual(afterRound2, await recomputeAll(projectId), 'round 2 (late, continued, ended) equals a recompute');

  // Round 3: an event reopens an ended session (its session_end row goes), in a rolled-up hour.
  clock.now += 1000;
  const s0 = [...cache.values()].find((x) => x.deviceId === 'dev-0'.padEnd(32, '0'))!;
  await run([op(0, s0.lastEventAt + 10 * MIN, 'screen_view')]);
  await drain();
  assert.deepEqual(await snapshot(projectId), await recomputeAll(projectId), 'round 3 (reopened) equals a recompute');
});

test("a round of idle ends alone computes only the tables that count session_start / session_end (the catalogue's serviceEvents), and equals a recompute", { timeout: 120_000 }, async () => {
  const { projectId, clock, cache, run, rnd, session } = await deltaTraffic(31);
  const r1: QueuedTrack[] = [];
  for (let dev = 0; dev < 12; dev++) r1.push(...session(dev, DAY0 + Math.floor(rnd() * 20 * 60) * MIN, 1 + Math.floor(rnd() * 5)));
  for (const o of r1.sort((a, b) => a.createdAt.localeCompare(b.createdAt))) await run([o]);
  await drain();
  const before = await snapshot(projectId);
  assert.deepEqual(before, await recomputeAll(projectId), 'the backfill equals a recompute');

  // Every open session ends by its check, an hour of wall time later: session_end rows into
  // built hours, and nothing else.
  clock.now += HOUR;
  const open = [...cache.values()].filter((x) => !x.ended);
  assert.ok(open.length >= 5, `open sessions: ${open.length}`);
  await run(open.map((x, i) => ({ kind: 'session_check', id: `check-${i}`, projectId, deviceId: x.deviceId, receivedAt: '', sessionId: x.id }) as QueuedOp));
  const logged = await env.db.query<{ sessions: number; events: number }>(
    'SELECT (SELECT count(*) FROM rollup_delta_sessions)::int AS sessions, (SELECT count(*) FROM rollup_delta_events)::int AS events');
  assert.deepEqual(logged.rows[0], { sessions: 0, events: open.length }, 'each end logs its session_end row alone');
  let serviceOnly = 0;
  for (;;) {
    const r = await refreshRollups(env.db, false, { before: FAR, recomputeLargeDeltas: false });
    serviceOnly += r.serviceOnlyDeltas;
    if (r.buckets === 0) break;
  }
  assert.ok(serviceOnly >= 1, 'the round knew its delta was session_end rows alone');
  const after = await snapshot(projectId);
  assert.deepEqual(after, await recomputeAll(projectId), 'the ends, applied to the flagged tables alone, equal a recompute');
  // A recompute of every table agrees, so the tables the ends changed are all flagged; and
  // every flagged table that the service keeps did change (the flags are not too wide).
  const changed = Object.keys(after).filter((rel) => JSON.stringify(after[rel]) !== JSON.stringify(before[rel])).sort();
  const flagged = Object.keys(after).filter((rel) => catalogueEntry(rel)?.serviceEvents).sort();
  assert.deepEqual(changed, flagged);
});

test('a backfill into empty hours is logged for a recompute, not as deltas; a burst larger than a built hour is recomputed; a few late writes stay deltas; each equals a recompute', { timeout: 120_000 }, async () => {
  const { projectId, clock, run, rnd, op, session, last } = await deltaTraffic(33);
  const rounds = async () => {
    let promoted = 0;
    for (let r = await refreshRollups(env.db, false, { before: FAR }); r.buckets > 0; r = await refreshRollups(env.db, false, { before: FAR })) promoted += r.promoted;
    return promoted;
  };
  const logged = async () => (await env.db.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM rollup_delta_sessions WHERE project_id = $1) + (SELECT count(*) FROM rollup_delta_events WHERE project_id = $1) AS n`,
    [projectId])).rows[0]!.n;
  const recomputes = async () => (await env.db.query('SELECT 1 FROM rollup_invalidations WHERE project_id = $1 AND rebuild', [projectId])).rowCount;
  const send = async (ops: QueuedTrack[]) => {
    for (let i = 0; i < ops.length; i += 5) await run(ops.slice(i, i + 5).sort((a, b) => a.createdAt.localeCompare(b.createdAt)));
  };
  // Sessions that stay inside their hour (at most 4 events, 12 minutes apart, from minute 2-7).
  const inHour = (dev: number, h: number, events: number) => session(dev, DAY0 + h * HOUR + (2 + Math.floor(rnd() * 5)) * MIN, events);

  // One session in each of three past hours that hold nothing: logged for a recompute.
  await send([...inHour(0, 9, 2), ...inHour(1, 10, 2), ...inHour(2, 11, 2)]);
  assert.equal(Number(await logged()), 0, 'no delta logged');
  assert.equal(await recomputes(), 3, 'the three hours logged for a recompute');
  await rounds();
  assert.deepEqual(await snapshot(projectId), await recomputeAll(projectId), 'the backfill equals a recompute');

  // A burst of 12 sessions into those hours, now built: logged as deltas; each hour's change
  // is more than it holds, so each is recomputed instead.
  const burst: QueuedTrack[] = [];
  for (let dev = 3; dev < 15; dev++) burst.push(...inHour(dev, 9 + (dev % 3), 2 + (dev % 3)));
  await send(burst);
  assert.ok(Number(await logged()) > 0, 'the burst is logged as deltas');
  assert.equal(await recomputes(), 0, 'no recompute logged');
  assert.equal(await rounds(), 3, 'the three hours recomputed, their delta log consumed with them');
  assert.equal(Number(await logged()), 0);
  assert.deepEqual(await snapshot(projectId), await recomputeAll(projectId), 'the burst equals a recompute');

  // Two late views continuing a session in one of those hours: far less than it holds, so a
  // delta (a row planted there survives: a recompute would remove it).
  const dev = 4;
  const at = last.get(dev)! + 2 * MIN;
  const hour = new Date(Math.floor(at / HOUR) * HOUR).toISOString();
  await env.db.query(
    `INSERT INTO rollup_browser_hourly (project_id, bucket, value, sessions, bounces, timed_sessions, duration_ms, screen_views)
     VALUES ($1, $2, 'Planted', 7, 0, 0, 0, 0)`, [projectId, hour]);
  clock.now += HOUR;
  await run([op(dev, at, 'screen_view'), op(dev, at + MIN, 'screen_view')]);
  assert.equal(await rounds(), 0, 'no hour recomputed');
  assert.equal((await env.db.query(`SELECT sessions FROM rollup_browser_hourly WHERE project_id = $1 AND bucket = $2 AND value = 'Planted'`,
    [projectId, hour])).rows[0]?.sessions, 7, 'the hour took a delta');
  await env.db.query(`DELETE FROM rollup_browser_hourly WHERE project_id = $1 AND value = 'Planted'`, [projectId]);
  assert.deepEqual(await snapshot(projectId), await recomputeAll(projectId), 'the late writes equal a recompute');
});

test('every rollup table the service keeps is in the catalogue, so its deltas can be added', async () => {
  const rels = (await env.db.query<{ relation: string }>('SELECT relation FROM rollup_registry WHERE refresh_fn IS NOT NULL')).rows.map((r) => r.relation);
  assert.ok(rels.length > 40);
  assert.deepEqual(rels.filter((r) => !isCatalogued(r)), []);
  for (const r of rels) {
    const e = catalogueEntry(r);
    if (!e) continue;
    const cols = (await env.db.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1`, [r])).rows.map((x) => x.column_name);
    for (const m of measuresOf(e)) assert.ok(cols.includes(m), `${r}.${m}`);
    assert.ok(cols.includes('project_id') && cols.includes('bucket'), r);
  }
});

test('a write into a past hour awaiting its recompute keeps it a recompute and does not move its last_at; logged as a delta only if the hour has rollup rows', async () => {
  const projectId = await env.project({ timezone: 'UTC' });
  const stream = `q-${env.namespace}`;
  let seq = await committedSeq(env.db, stream, 2);
  // The hour before the current one, logged while it was current and not recomputed yet: no
  // rollup rows (a session_end's usual case). And an older hour with rollup rows whose
  // recompute was logged later (by retention, say).
  const empty = new Date(Math.floor(Date.now() / HOUR) * HOUR - HOUR);
  const built = new Date('2024-06-01T08:00:00Z');
  await env.db.query(`INSERT INTO events_hourly (project_id, bucket, name, is_bot, count) VALUES ($1, $2, 'view', false, 1)`, [projectId, built]);
  for (const hour of [empty, built]) {
    await env.db.query(
      `INSERT INTO rollup_invalidations (project_id, bucket, shard, rebuild, first_at, last_at)
       VALUES ($1, $2::timestamptz, 2, true, least($2::timestamptz + interval '1 minute', now() - interval '2 hours'), least($2::timestamptz + interval '59 minutes', now() - interval '1 hour'))`,
      [projectId, hour]);
    const before = (await env.db.query('SELECT last_at FROM rollup_invalidations WHERE project_id = $1 AND bucket = $2', [projectId, hour])).rows[0].last_at;
    const events = [blankEventRecord({
      id: `0190c0de-0000-7000-8000-00000000e00${hour === empty ? 1 : 2}`, projectId, name: 'click', deviceId: 'f'.repeat(32), profileId: 'p',
      createdAt: new Date(hour.getTime() + 60_000),
    })];
    await new PartitionKeeper(env.db, false).ensureFor(events);
    await commitShardBatch(env.db, { stream, shard: 2, fromSeq: seq, toSeq: seq + 1, events, viewDurations: [], sessions: [], reopenedSessionIds: [], profileOps: [] });
    seq++;
    const after = (await env.db.query('SELECT rebuild, last_at FROM rollup_invalidations WHERE project_id = $1 AND bucket = $2', [projectId, hour])).rows;
    assert.equal(after.length, 1);
    assert.equal(after[0].rebuild, true, 'still a recompute');
    assert.deepEqual(after[0].last_at, before, 'last_at kept');
  }
  assert.deepEqual((await env.db.query(`SELECT created_at FROM rollup_delta_events WHERE project_id = $1`, [projectId])).rows.map((r) => r.created_at.toISOString()),
    [new Date(built.getTime() + 60_000).toISOString()], 'the insert into the built hour is logged, the other is left to the recompute');
  // The recompute consumes the logged delta: each hour's rows count its event once.
  await drain();
  assert.equal((await env.db.query('SELECT count(*)::int AS n FROM rollup_delta_events WHERE project_id = $1', [projectId])).rows[0].n, 0);
  assert.deepEqual((await env.db.query(`SELECT bucket, count::int AS n FROM events_hourly WHERE project_id = $1 AND name = 'click' ORDER BY bucket`, [projectId])).rows,
    [{ bucket: built, n: 1 }, { bucket: empty, n: 1 }]);
});
