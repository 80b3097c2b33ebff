// Migrations: upgrading a database that already holds data (the migrations that add rollups log
// the existing hours, so reads stay exact before the refresh and the refresh fills the rollups),
// and the functions of sql/functions/, applied on every start.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TestEnv } from '../../test/support/harness';
import { createPool, ensureDatabase } from './db';
import { migrate, SQL_DIR } from './migrate';
import { refreshRollups } from './rollups';

test('migrating a database with events and sessions to the rollup release logs their hours and the refresh fills every rollup', async () => {
  const env = new TestEnv('upgrade');
  await ensureDatabase(env.databaseUrl);
  const db = createPool(env.databaseUrl, 2);
  const older = mkdtempSync(path.join(os.tmpdir(), 'tm-sql-'));
  try {
    // The release before the rollup registry: migrations 001-006.
    for (const f of readdirSync(SQL_DIR).filter((f) => /^00[1-6]_/.test(f))) cpSync(path.join(SQL_DIR, f), path.join(older, f));
    await migrate(db, older);
    const month = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), 1));
    const next = new Date(Date.UTC(month.getUTCFullYear(), month.getUTCMonth() + 1, 1));
    await db.query(`CREATE TABLE events_upgrade PARTITION OF events FOR VALUES FROM ('${month.toISOString()}') TO ('${next.toISOString()}')`);
    await db.query("INSERT INTO projects (id, name) VALUES ('p', 'P')");
    // Two sessions in one hour; three events, one of them an hour later (a session that runs over).
    const at = new Date(Math.max(month.getTime(), Math.floor(Date.now() / 3_600_000 - 3) * 3_600_000) + 60_000);
    const later = new Date(at.getTime() + 3_600_000);
    for (const [sid, device] of [['00000000-0000-7000-8000-000000000001', 'd1'], ['00000000-0000-7000-8000-000000000002', 'd2']]) {
      await db.query(
        `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, country, entry_path, screen_view_count)
         VALUES ($1, 'p', $2, $2, $3, $3, 'DE', '/a', 1)`, [sid, device, at.toISOString()]);
    }
    const events: [string, string, Date][] = [['d1', '00000000-0000-7000-8000-000000000001', at], ['d2', '00000000-0000-7000-8000-000000000002', at], ['d1', '00000000-0000-7000-8000-000000000001', later]];
    for (const [device, sid, t] of events) {
      await db.query(
        `INSERT INTO events (id, project_id, name, device_id, profile_id, session_id, created_at, country, path)
         VALUES (gen_random_uuid(), 'p', 'screen_view', $1, $1, $2, $3, 'DE', '/a')`, [device, sid, t.toISOString()]);
    }

    const { applied } = await migrate(db);
    assert.ok(applied.includes('009_event_rollups.sql'), applied.join(', '));
    // (sql/036) The sessions written before carry no funnel steps: the steps answer only
    // periods that begin after the upgrade (on a new database, any period).
    const since = (await db.query<{ since: Date }>('SELECT since FROM session_steps_since')).rows[0]!.since;
    assert.ok(since.getTime() > later.getTime(), `steps since ${since.toISOString()}`);
    const logged = (await db.query<{ bucket: Date }>("SELECT DISTINCT bucket FROM rollup_invalidations WHERE project_id = 'p' ORDER BY bucket")).rows.map((r) => r.bucket.getTime());
    const hour = (d: Date) => Math.floor(d.getTime() / 3_600_000) * 3_600_000;
    // ... and (sql/018) the first hour of the session's local day (project timezone UTC), so
    // the refresh builds that day's pair metrics.
    const day = Math.floor(at.getTime() / 86_400_000) * 86_400_000;
    assert.deepEqual(logged, [...new Set([day, hour(at), hour(later)])].sort((a, b) => a - b),
      'the session hour, the later event hour and the first hour of the session\'s day are logged');

    while ((await refreshRollups(db, false, { before: new Date(Date.now() + 86_400_000) })).buckets > 0);
    const n = async (sql: string) => Number((await db.query(sql)).rows[0].n);
    assert.equal(await n("SELECT coalesce(sum(count), 0) AS n FROM events_hourly WHERE project_id = 'p'"), 3);
    assert.equal(await n("SELECT coalesce(sum(count), 0) AS n FROM events_country_hourly WHERE project_id = 'p' AND value = 'DE'"), 3);
    assert.equal(await n("SELECT coalesce(sum(sessions), 0) AS n FROM rollup_sessions_hourly WHERE project_id = 'p'"), 2);
    assert.equal(await n("SELECT coalesce(sum(sessions), 0) AS n FROM rollup_pages_hourly WHERE project_id = 'p' AND path = '/a'"), 2);
    assert.equal(await n('SELECT count(*) AS n FROM rollup_invalidations'), 0);
  } finally {
    rmSync(older, { recursive: true, force: true });
    await db.end();
    await env.teardown();
  }
});

test('sql/functions: every file is applied on a new database, and a changed file takes effect at the next start with no migration', async () => {
  const env = new TestEnv('routines');
  await ensureDatabase(env.databaseUrl);
  const db = createPool(env.databaseUrl, 2);
  const copy = mkdtempSync(path.join(os.tmpdir(), 'tm-sql-'));
  try {
    cpSync(SQL_DIR, copy, { recursive: true });
    const files = readdirSync(path.join(copy, 'functions')).filter((f) => f.endsWith('.sql'));
    assert.ok(files.length >= 10);
    const first = await migrate(db, copy);
    assert.ok(first.applied.length > 20);
    const names = files.map((f) => f.replace(/\.sql$/, ''));
    const defined = async () => (await db.query<{ proname: string; prosrc: string }>(
      `SELECT proname, prosrc FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND proname = ANY($1::text[])`, [names])).rows;
    assert.deepEqual((await defined()).map((r) => r.proname).sort(), [...names].sort(), 'one function per file, each defined');
    assert.ok((await defined()).every((r) => r.prosrc.length > 0));

    // A release that changes one function's body and adds no migration.
    const file = path.join(copy, 'functions', 'tm_local_day.sql');
    const before = readFileSync(file, 'utf8');
    assert.match(before, /DECLARE\n  tz text;/);
    writeFileSync(file, before.replace('DECLARE\n  tz text;', 'DECLARE\n  -- changed in a later release\n  tz text;'));
    const second = await migrate(db, copy);
    assert.deepEqual(second.applied, [], 'no migration ran');
    const body = (await defined()).find((r) => r.proname === 'tm_local_day')!.prosrc;
    assert.match(body, /changed in a later release/);
  } finally {
    rmSync(copy, { recursive: true, force: true });
    await db.end();
    await env.teardown();
  }
});
