// The repair tool, `cli rollups rebuild --project P --from T --to T` (internal/store/
// rollup-rebuild.ts): rollup rows that went wrong (a row off, rows missing, a row for an hour
// with nothing in it) are recomputed from the raw rows, in chunks of hours; a rebuild stopped
// half way goes on from its last chunk when the same command runs again; hours outside the
// span and other projects are left as they are. The reference is the recompute of every hour
// (test/support/rollup-reference.ts), taken before the rows were spoilt.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, test } from 'node:test';
import { rebuildRollups, rebuildSpan, REBUILD_SHARD } from '../internal/store/rollup-rebuild';
import { eventRow, insertEvents, insertSessions, sessionRow, type EventRow, type SessionRow } from './support/export-server';
import { ROOT, TestEnv } from './support/harness';
import { recomputeAllHours, rollupSnapshot } from './support/rollup-reference';

const HOUR = 3_600_000;
const FAR = new Date('2030-01-01T00:00:00Z');
// Three local days of Europe/Berlin (UTC+1 in March): 2026-03-01 .. 03.
const T0 = Date.parse('2026-02-28T23:00:00Z');
const COUNTRIES = ['DE', 'FR', 'US'];
const PATHS = ['/', '/pricing', '/docs'];

let env: TestEnv;
let P = '';
let Q = '';

interface Run { code: number; stdout: string; stderr: string }

function cli(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'cmd/cli/main.ts', ...args], {
      cwd: ROOT, env: { ...process.env, ...env.env({ LOG_LEVEL: 'warn' }) }, timeout: 120_000,
    }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Two sessions an hour over `hours` hours from T0: session_start, two views and a click each. */
async function traffic(projectId: string, hours: number): Promise<void> {
  const sessions: SessionRow[] = [];
  const events: EventRow[] = [];
  for (let h = 0; h < hours; h++) {
    for (let k = 0; k < 2; k++) {
      const start = T0 + h * HOUR + k * 20 * 60_000;
      const at = (m: number) => new Date(start + m * 60_000).toISOString();
      const dims = { country: COUNTRIES[(h + k) % 3]!, browser: k ? 'Firefox' : 'Chrome', device: 'desktop', os: 'Linux' };
      const device = `d-${h}-${k}`;
      const s = sessionRow(projectId, {
        started_at: at(0), last_event_at: at(3), duration_ms: 3 * 60_000, ended: true, device_id: device, profile_id: device,
        entry_origin: 'https://shop.example', entry_path: PATHS[h % 3]!, exit_origin: 'https://shop.example', exit_path: PATHS[(h + 1) % 3]!,
        screen_view_count: 2, event_count: 3, is_bounce: false, ...dims,
      });
      sessions.push(s);
      const base = { session_id: s.id, device_id: device, profile_id: device, origin: 'https://shop.example', ...dims };
      events.push(
        eventRow(projectId, { ...base, name: 'session_start', created_at: at(0), path: PATHS[h % 3]! }),
        eventRow(projectId, { ...base, name: 'screen_view', created_at: at(0), path: PATHS[h % 3]!, duration_ms: 2 * 60_000 }),
        eventRow(projectId, { ...base, name: 'screen_view', created_at: at(2), path: PATHS[(h + 1) % 3]! }),
        eventRow(projectId, { ...base, name: 'click', created_at: at(3), path: PATHS[(h + 1) % 3]! }),
      );
    }
  }
  await insertSessions(env.db, sessions);
  await insertEvents(env.db, events);
}

const iso = (t: number) => new Date(t).toISOString();
/** The stored `sessions` of rollup_sessions_hourly at an hour. */
async function sessionsAt(projectId: string, hour: number): Promise<number> {
  const r = await env.db.query<{ n: string }>('SELECT sessions AS n FROM rollup_sessions_hourly WHERE project_id = $1 AND bucket = $2', [projectId, iso(hour)]);
  return Number(r.rows[0]?.n ?? -1);
}

before(async () => {
  env = await new TestEnv('rollup_rebuild').setup();
  P = await env.project({ timezone: 'Europe/Berlin' });
  Q = await env.project({ timezone: 'UTC' });
  await traffic(P, 72);
  await traffic(Q, 24);
});

after(async () => {
  await env?.teardown();
});

test('the span: whole UTC hours, never the current hour, and nothing to rebuild is an error', () => {
  const now = new Date('2026-03-05T10:30:00Z');
  assert.deepEqual(rebuildSpan(new Date('2026-03-01T10:20:00Z'), new Date('2026-03-01T12:05:00Z'), now),
    { from: new Date('2026-03-01T10:00:00Z'), to: new Date('2026-03-01T13:00:00Z') });
  assert.deepEqual(rebuildSpan(new Date('2026-03-05T08:00:00Z'), new Date('2026-03-06T00:00:00Z'), now).to, new Date('2026-03-05T10:00:00Z'));
  assert.throws(() => rebuildSpan(new Date('2026-03-02T00:00:00Z'), new Date('2026-03-01T00:00:00Z'), now), /nothing to rebuild/);
  assert.throws(() => rebuildSpan(new Date('2026-03-05T10:10:00Z'), new Date('2026-03-05T12:00:00Z'), now), /nothing to rebuild/);
});

test('spoilt rollups of the span come back as the recompute; stopped half way, the same command goes on; nothing else moves', async () => {
  const expected = await recomputeAllHours(env.db, P, FAR);
  const expectedQ = await rollupSnapshot(env.db, Q);
  assert.ok(expected.rollup_sessions_hourly!.length >= 72, 'the reference has the hours');

  // The span: the second and third local days (Berlin). Outside it: the first day, and Q.
  const from = T0 + 24 * HOUR;
  const to = T0 + 72 * HOUR;
  const inside = from + 5 * HOUR; // in the first chunk of 6 hours
  const later = from + 30 * HOUR; // in a later chunk
  const empty = T0 + 80 * HOUR; // no raw rows there (the traffic ends at T0 + 72 h): inside a wider span below
  const outside = T0 + 3 * HOUR;
  const off = (await sessionsAt(P, inside)) + 7;
  const outsideWas = await sessionsAt(P, outside);
  await env.db.query('UPDATE rollup_sessions_hourly SET sessions = sessions + 7 WHERE project_id = $1 AND bucket = $2', [P, iso(inside)]);
  const gone = await env.db.query('DELETE FROM events_country_hourly WHERE project_id = $1 AND bucket = $2', [P, iso(later)]);
  assert.ok((gone.rowCount ?? 0) > 0, 'rows removed');
  await env.db.query('UPDATE rollup_sessions_hourly SET sessions = sessions + 5 WHERE project_id = $1 AND bucket = $2', [P, iso(outside)]);
  await env.db.query('UPDATE rollup_sessions_hourly SET sessions = sessions + 3 WHERE project_id = $1 AND bucket = $2', [Q, iso(outside)]);
  assert.equal(await sessionsAt(P, inside), off);

  // Stopped after its first chunk: that chunk is right, the rest not yet, and the progress is kept.
  const steps: number[] = [];
  const first = await rebuildRollups(env.db, {
    projectId: P, from: new Date(from), to: new Date(to), timescale: false, chunkHours: 6, maxChunks: 1, now: FAR,
    onProgress: (p) => steps.push(p.hoursDone),
  });
  assert.equal(first.done, false);
  assert.equal(first.hours, 6);
  assert.equal(first.hoursTotal, 48);
  assert.equal(first.resumedFrom, null);
  assert.equal(steps[steps.length - 1], 6, 'progress reported');
  assert.equal(await sessionsAt(P, inside), off - 7, 'the first chunk is rebuilt');
  const kept = await env.db.query<{ next_at: Date; hours_done: number }>('SELECT next_at, hours_done FROM rollup_rebuilds WHERE project_id = $1', [P]);
  assert.deepEqual(kept.rows, [{ next_at: new Date(from + 6 * HOUR), hours_done: 6 }]);
  assert.equal((await env.db.query('SELECT 1 FROM events_country_hourly WHERE project_id = $1 AND bucket = $2', [P, iso(later)])).rowCount, 0, 'a later chunk waits');

  // The same span by the CLI: it goes on from the kept chunk and finishes (without --to: the
  // end of the unfinished rebuild from the same start, not the current hour).
  const r = await cli(['rollups', 'rebuild', '--project', P, '--from', iso(from), '--chunk-hours', '6']);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(out, {
    projectId: P, from: iso(from), to: iso(to), hours: 42, hoursTotal: 48, resumedFrom: iso(from + 6 * HOUR), seconds: out.seconds,
  });
  assert.match(r.stderr, new RegExp(`rollups rebuild ${P}: 48/48 hours \\(100%\\)`));
  assert.equal((await env.db.query('SELECT 1 FROM rollup_rebuilds')).rowCount, 0, 'a finished span leaves no progress row');
  assert.equal((await env.db.query('SELECT 1 FROM rollup_invalidations WHERE shard = $1', [REBUILD_SHARD])).rowCount, 0, 'every logged hour recomputed');

  // Outside the span nothing moved: P's first day and Q keep their spoilt rows.
  assert.equal(await sessionsAt(P, outside), outsideWas + 5);
  await env.db.query('UPDATE rollup_sessions_hourly SET sessions = sessions - 5 WHERE project_id = $1 AND bucket = $2', [P, iso(outside)]);
  assert.deepEqual(await rollupSnapshot(env.db, P), expected, 'every table of P equals the recompute');
  await env.db.query('UPDATE rollup_sessions_hourly SET sessions = sessions - 3 WHERE project_id = $1 AND bucket = $2', [Q, iso(outside)]);
  assert.deepEqual(await rollupSnapshot(env.db, Q), expectedQ, 'Q is as it was');

  // A rollup row of an hour with no raw rows (left behind) goes too.
  await env.db.query(`INSERT INTO events_hourly (project_id, bucket, name, is_bot, count) VALUES ($1, $2, 'ghost', false, 4)`, [P, iso(empty)]);
  const wide = await cli(['rollups', 'rebuild', '--project', P, '--from', iso(to), '--to', iso(empty + HOUR)]);
  assert.equal(wide.code, 0, wide.stderr);
  assert.equal(JSON.parse(wide.stdout).hours, 1);
  // (its local day may now be listed as built, with no rows: the *_days lists)
  const now = await rollupSnapshot(env.db, P);
  const stray = Object.entries(now).flatMap(([rel, rows]) =>
    rows.filter((j) => !rel.endsWith('_days') && Date.parse(JSON.parse(j).bucket) >= to).map((j) => `${rel} ${j}`));
  assert.deepEqual(stray, [], 'the stray row is gone, and no other came');
  const within = Object.fromEntries(Object.entries(now).map(([rel, rows]) => [rel, rows.filter((j) => Date.parse(JSON.parse(j).bucket) < to)]));
  assert.deepEqual(within, expected);
});

test('bad input: a clear message and exit 2, nothing done', async () => {
  const cases: [string[], RegExp][] = [
    [['rollups', 'rebuild'], /needs --project/],
    [['rollups', 'rebuild', '--project', 'nope'], /no project with id "nope"/],
    [['rollups', 'rebuild', '--project', P, '--from', 'yesterday'], /--from: "yesterday" is not an ISO 8601/],
    [['rollups', 'rebuild', '--project', P, '--from', '2026-03-02', '--to', '2026-03-01'], /nothing to rebuild/],
    [['rollups', 'rebuild', '--project', P, '--chunk-hours', '0'], /--chunk-hours must be a whole number/],
  ];
  for (const [args, message] of cases) {
    const r = await cli(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, message);
  }
  assert.equal((await env.db.query('SELECT 1 FROM rollup_rebuilds')).rowCount, 0);
});
