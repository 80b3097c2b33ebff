// Unique visitors by days (sql/038, internal/store/visitor-days.ts,
// internal/insights/day-visitors.ts): the visit days and their returns, folded from the log the
// triggers on `sessions` write, equal a build from the sessions after any mix of inserts,
// profile moves and deletes, folded in small steps; metrics over whole local days count unique
// visitors from them exactly as the raw sessions do, whether the log is folded or not (a read
// adds what is not), across a DST change, after a timezone change and after retention.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { getMetrics } from '../internal/insights/service';
import { parsePeriodParams } from '../internal/query/params';
import { updateProject } from '../internal/store/accounts';
import { applyRetention } from '../internal/store/maintenance';
import { applyVisitorLog } from '../internal/store/visitor-days';
import { insertSessions, sessionRow, type SessionRow } from './support/export-server';
import { TestEnv } from './support/harness';
import { startTimescale } from './support/timescale';
import { createProject } from '../internal/store/accounts';
import { createPool, type Pool } from '../internal/store/db';
import { migrate } from '../internal/store/migrate';
import { mulberry32 } from './support/random';

const DAY = 86_400_000;
// 2026-10-15 .. 2026-11-05 UTC: Europe/Berlin leaves summer time on 2026-10-25.
const T0 = Date.parse('2026-10-15T00:00:00Z');
const SPAN_DAYS = 21;

let env: TestEnv;
let P = '';
let Q = '';
const rand = mulberry32(38);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const PROFILES = Array.from({ length: 14 }, (_, i) => `u${i}`);

before(async () => {
  env = await new TestEnv('visitor_days').setup();
  P = await env.project({ timezone: 'Europe/Berlin' });
  Q = await env.project({ timezone: 'America/New_York' });
});

after(async () => {
  await env?.teardown();
});

/** `n` sessions of random profiles at random times of the span; a tenth are bots. */
async function insertRandom(projectId: string, n: number, db: Pool = env.db): Promise<void> {
  const rows: SessionRow[] = [];
  for (let i = 0; i < n; i++) {
    const profile = pick(PROFILES);
    const at = new Date(T0 + Math.floor(rand() * SPAN_DAYS * DAY)).toISOString();
    rows.push(sessionRow(projectId, { started_at: at, device_id: `d-${profile}`, profile_id: profile, is_bot: rand() < 0.1 }));
  }
  await insertSessions(db, rows);
}

/** Moves `n` random sessions to another profile (an identify) and deletes `d` others. */
async function moveAndDelete(projectId: string, n: number, d: number, db: Pool = env.db): Promise<void> {
  for (let i = 0; i < n; i++) {
    await db.query(
      `UPDATE sessions SET profile_id = $2 WHERE id = (SELECT id FROM sessions WHERE project_id = $1 ORDER BY random() LIMIT 1)`,
      [projectId, pick(PROFILES)]);
  }
  await db.query(
    `DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE project_id = $1 ORDER BY random() LIMIT $2)`, [projectId, d]);
}

/** The project's two tables, row by row. */
async function tables(projectId: string, db: Pool = env.db): Promise<{ days: string[]; returns: string[] }> {
  const days = await db.query<{ r: string }>(
    `SELECT concat_ws(' ', profile_id, day, sessions) AS r FROM visitor_days WHERE project_id = $1 ORDER BY 1`, [projectId]);
  const returns = await db.query<{ r: string }>(
    `SELECT concat_ws(' ', day, prev_day, visitors) AS r FROM visitor_day_returns WHERE project_id = $1 ORDER BY 1`, [projectId]);
  return { days: days.rows.map((x) => x.r), returns: returns.rows.map((x) => x.r) };
}

/** What a build from the sessions gives, without keeping it. */
async function built(projectId: string, db: Pool = env.db): Promise<{ days: string[]; returns: string[] }> {
  const c = await db.connect();
  try {
    await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await c.query('SELECT tm_visitor_build($1)', [projectId]);
    const days = await c.query<{ r: string }>(
      `SELECT concat_ws(' ', profile_id, day, sessions) AS r FROM visitor_days WHERE project_id = $1 ORDER BY 1`, [projectId]);
    const returns = await c.query<{ r: string }>(
      `SELECT concat_ws(' ', day, prev_day, visitors) AS r FROM visitor_day_returns WHERE project_id = $1 ORDER BY 1`, [projectId]);
    return { days: days.rows.map((x) => x.r), returns: returns.rows.map((x) => x.r) };
  } finally {
    await c.query('ROLLBACK');
    c.release();
  }
}

const localDate = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** Unique visitors (total and per bucket) by the service and from the raw sessions, for periods of the span. */
async function assertVisitorsExact(projectId: string, label: string, db: Pool = env.db): Promise<void> {
  const periods: [string, string][] = [
    [localDate(T0 - DAY), localDate(T0 + (SPAN_DAYS + 1) * DAY)], // every session, daily buckets
    [localDate(T0 + 3 * DAY), localDate(T0 + 12 * DAY)], // across the DST change
    [localDate(T0 + 9 * DAY), localDate(T0 + 10 * DAY)], // the day of the change and the next
    [localDate(T0 + 5 * DAY), localDate(T0 + 5 * DAY)], // one day: hourly buckets
    [localDate(T0 + 10 * DAY), localDate(T0 + 10 * DAY)], // the day of the change: 25 hourly buckets
  ];
  for (const [startDate, endDate] of periods) {
    const params = parsePeriodParams(new URLSearchParams({ startDate, endDate }));
    // Sketches or not (hll installed here or not): every count exact (no bound) takes the
    // visit days for whole days, and for an hourly series' total.
    const [auto, exact, raw] = await Promise.all([
      getMetrics(db, projectId, params, new Date()),
      getMetrics(db, projectId, params, new Date(), { exactVisitorsMax: Infinity }),
      getMetrics(db, projectId, params, new Date(), { path: 'raw' }),
    ]);
    for (const [name, got] of [['auto', auto], ['no bound', exact]] as const) {
      assert.equal(got.metrics.unique_visitors, raw.metrics.unique_visitors, `${label}: ${startDate}..${endDate} total (${name})`);
      assert.deepEqual(got.series.map((s) => s.unique_visitors), raw.series.map((s) => s.unique_visitors), `${label}: ${startDate}..${endDate} series (${name})`);
    }
  }
}

test('the log folded in small steps equals a build from the sessions, and reads are exact folded or not', async () => {
  for (let round = 0; round < 6; round++) {
    await insertRandom(P, 40);
    await insertRandom(Q, 15);
    await moveAndDelete(P, 5, 3);
    await moveAndDelete(Q, 2, 1);
    // Unfolded entries (rounds 1, 3, 5 read with a log of two rounds) and folded ones.
    await assertVisitorsExact(P, `round ${round}, before folding`);
    await assertVisitorsExact(Q, `round ${round}, before folding`);
    if (round % 2 === 0) {
      const r = await applyVisitorLog(env.db, { batch: 7 });
      assert.ok(r.ran);
      assert.equal((await env.db.query('SELECT 1 FROM visitor_log')).rowCount, 0, 'the log is folded whole');
      assert.deepEqual(await tables(P), await built(P), `round ${round}: folded = built (Berlin)`);
      assert.deepEqual(await tables(Q), await built(Q), `round ${round}: folded = built (New York)`);
      await assertVisitorsExact(P, `round ${round}, folded`);
    }
  }
  const states = await env.db.query<{ project_id: string; timezone: string }>('SELECT project_id, timezone FROM visitor_state ORDER BY 1');
  assert.equal(states.rowCount, 2, 'both projects are built');
});

test("a session upsert that changes its counts alone logs nothing; a profile change logs the move", async () => {
  await applyVisitorLog(env.db);
  const log = async () => (await env.db.query<{ profile_id: string; delta: number }>('SELECT profile_id, delta FROM visitor_log ORDER BY delta')).rows;
  assert.deepEqual(await log(), []);
  // The worker's statement: an upsert of existing sessions that sets every column, the profile
  // to the one it has.
  const upserted = await env.db.query(
    `INSERT INTO sessions SELECT * FROM sessions WHERE project_id = $1 AND NOT is_bot ORDER BY id LIMIT 20
     ON CONFLICT (started_at, id) DO UPDATE SET event_count = sessions.event_count + 1, profile_id = EXCLUDED.profile_id`, [P]);
  assert.equal(upserted.rowCount, 20);
  assert.deepEqual(await log(), [], 'no entry for a session whose profile did not change');
  // An identify: one session moves to another profile.
  const moved = await env.db.query<{ old: string }>(
    `UPDATE sessions s SET profile_id = 'u-identified' FROM (SELECT id, profile_id FROM sessions WHERE project_id = $1 AND NOT is_bot ORDER BY id LIMIT 1) o
     WHERE s.id = o.id RETURNING o.profile_id AS old`, [P]);
  assert.deepEqual(await log(), [{ profile_id: moved.rows[0]!.old, delta: -1 }, { profile_id: 'u-identified', delta: 1 }]);
  await applyVisitorLog(env.db);
  assert.deepEqual(await tables(P), await built(P));
  await assertVisitorsExact(P, 'after an identify');
});

test('reads take the visit days: a spoilt returns row shows in the answer', async () => {
  await applyVisitorLog(env.db);
  const params = parsePeriodParams(new URLSearchParams({ startDate: localDate(T0), endDate: localDate(T0 + SPAN_DAYS * DAY) }));
  const before = (await getMetrics(env.db, P, params, new Date())).metrics.unique_visitors;
  // A row the period's total counts: a visit day in the period whose previous visit day is before it.
  const row = await env.db.query<{ day: string; prev_day: string }>(
    `UPDATE visitor_day_returns SET visitors = visitors + 1000
     WHERE (project_id, day, prev_day) = (SELECT project_id, day, prev_day FROM visitor_day_returns
                                          WHERE project_id = $1 AND day > $2::date AND day <= $3::date AND prev_day < $2::date
                                          ORDER BY day, prev_day LIMIT 1)
     RETURNING day::text, prev_day::text`, [P, localDate(T0), localDate(T0 + SPAN_DAYS * DAY)]);
  assert.equal(row.rowCount, 1);
  assert.equal((await getMetrics(env.db, P, params, new Date())).metrics.unique_visitors, before + 1000);
  await env.db.query(`UPDATE visitor_day_returns SET visitors = visitors - 1000 WHERE project_id = $1 AND day = $2::date AND prev_day = $3::date`,
    [P, row.rows[0]!.day, row.rows[0]!.prev_day]);
  assert.equal((await getMetrics(env.db, P, params, new Date())).metrics.unique_visitors, before);
});

test("an hourly series of one local day takes its total from the visit days and counts its hours from the sessions", async () => {
  await applyVisitorLog(env.db);
  const day = localDate(T0 + 5 * DAY);
  const params = parsePeriodParams(new URLSearchParams({ startDate: day, endDate: day }));
  const options = { exactVisitorsMax: Infinity };
  const before = await getMetrics(env.db, P, params, new Date(), options);
  assert.equal(before.series.length, 24);
  assert.ok(before.metrics.unique_visitors > 0);
  const row = await env.db.query(
    `UPDATE visitor_day_returns SET visitors = visitors + 1000
     WHERE (project_id, day, prev_day) = (SELECT project_id, day, prev_day FROM visitor_day_returns WHERE project_id = $1 AND day = $2::date LIMIT 1)`,
    [P, day]);
  assert.equal(row.rowCount, 1);
  try {
    const spoilt = await getMetrics(env.db, P, params, new Date(), options);
    assert.equal(spoilt.metrics.unique_visitors, before.metrics.unique_visitors + 1000, 'the total is the visit days\' sum');
    assert.deepEqual(spoilt.series.map((s) => s.unique_visitors), before.series.map((s) => s.unique_visitors), 'the hours are counted from the sessions');
  } finally {
    await env.db.query('UPDATE visitor_day_returns SET visitors = visitors - 1000 WHERE project_id = $1 AND day = $2::date AND visitors > 1000', [P, day]);
  }
});

test('a timezone change: read as before until rebuilt in the new zone, exact throughout', async () => {
  await updateProject(env.db, P, { timezone: 'Asia/Tokyo' });
  await insertRandom(P, 10);
  await assertVisitorsExact(P, 'Tokyo, not rebuilt');
  await applyVisitorLog(env.db);
  const state = await env.db.query<{ timezone: string }>('SELECT timezone FROM visitor_state WHERE project_id = $1', [P]);
  assert.equal(state.rows[0]?.timezone, 'Asia/Tokyo');
  assert.deepEqual(await tables(P), await built(P));
  await assertVisitorsExact(P, 'Tokyo, rebuilt');
});

test('retention: the sessions go without log entries and the projects are rebuilt from what is left', async () => {
  // A cutoff in the middle of the span, whenever this runs.
  const days = Math.round((Date.now() - (T0 + 10.5 * DAY)) / DAY);
  const r = await applyRetention(env.db, days);
  assert.ok(r.sessions > 0, 'some sessions went');
  assert.equal((await env.db.query('SELECT 1 FROM visitor_log')).rowCount, 0, 'no log entry per session deleted');
  assert.equal((await env.db.query('SELECT 1 FROM visitor_state')).rowCount, 0, 'every project awaits its rebuild');
  await assertVisitorsExact(P, 'after retention, not rebuilt');
  await applyVisitorLog(env.db);
  assert.deepEqual(await tables(P), await built(P));
  assert.deepEqual(await tables(Q), await built(Q));
  await assertVisitorsExact(P, 'after retention, rebuilt');
  await assertVisitorsExact(Q, 'after retention, rebuilt');
});

test('TimescaleDB: row triggers on the sessions hypertable, the same fold and reads', async () => {
  const engine = await startTimescale();
  const db = createPool(engine.url, 1); // the engine serves one connection
  try {
    await migrate(db);
    const ts = (await db.query<{ ts: boolean }>('SELECT tm_timescale() AS ts')).rows[0]!.ts;
    assert.equal(ts, true);
    const T = (await createProject(db, { name: 'Timescale', timezone: 'Europe/Berlin', origins: [] })).id;
    await applyVisitorLog(db); // builds the new project (nothing in it)
    for (let round = 0; round < 2; round++) {
      await insertRandom(T, 30, db);
      await moveAndDelete(T, 4, 2, db);
      await assertVisitorsExact(T, `TimescaleDB round ${round}, before folding`, db);
      const r = await applyVisitorLog(db, { batch: 9 });
      assert.ok(r.entries > 0, 'the row triggers logged the changes');
      assert.deepEqual(await tables(T, db), await built(T, db), `TimescaleDB round ${round}: folded = built`);
      await assertVisitorsExact(T, `TimescaleDB round ${round}, folded`, db);
    }
  } finally {
    await db.end();
    await engine.stop();
  }
});
