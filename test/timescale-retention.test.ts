// Retention on the TimescaleDB path (PGlite engine, test/support/timescale.ts): old chunks are
// dropped, the continuous aggregates forget them, and the service-kept rollup tables (pages)
// lose their old rows; recent data and its rollups stay; the visit days are rebuilt.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import type { Pool } from '../internal/store/db';
import { applyRetention } from '../internal/store/maintenance';
import { migrate } from '../internal/store/migrate';
import { refreshRollups } from '../internal/store/rollups';
import { applyVisitorLog } from '../internal/store/visitor-days';
import { startTimescale, type Timescale } from './support/timescale';

test('TimescaleDB retention drops old chunks and the rollup rows that counted them', { timeout: 300_000 }, async () => {
  let engine: Timescale | undefined;
  let db: Pool | undefined;
  try {
    engine = await startTimescale();
    db = new pg.Pool({ connectionString: engine.url, max: 1 }) as unknown as Pool;
    assert.equal((await migrate(db)).timescale, true);
    await db.query("INSERT INTO projects (id, name) VALUES ('p', 'P')");
    const hour = (daysAgo: number) => new Date(Math.floor((Date.now() - daysAgo * 86_400_000) / 3_600_000) * 3_600_000 + 60_000);
    // 40 days old: its 7-day session chunk and 1-day event chunk end well before the cutoff.
    for (const [n, at] of [[1, hour(40)], [2, hour(1)]] as const) {
      const sid = `00000000-0000-7000-8000-00000000000${n}`;
      await db.query(
        `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, country, entry_path, screen_view_count)
         VALUES ($1, 'p', $2, $2, $3, $3, 'DE', '/a', 1)`, [sid, `d${n}`, at.toISOString()]);
      await db.query(
        `INSERT INTO events (id, project_id, name, device_id, profile_id, session_id, created_at, country, path)
         VALUES (gen_random_uuid(), 'p', 'screen_view', $1, $1, $2, $3, 'DE', '/a')`, [`d${n}`, sid, at.toISOString()]);
      await db.query('INSERT INTO rollup_invalidations (project_id, bucket) VALUES ($1, date_trunc(\'hour\', $2::timestamptz, \'UTC\'))', ['p', at.toISOString()]);
    }
    while ((await refreshRollups(db, true, { before: new Date(Date.now() + 86_400_000) })).buckets > 0);
    const n = async (sql: string) => Number((await db!.query(sql)).rows[0].n);
    const sums = async () => ({
      sessions: await n('SELECT count(*) AS n FROM sessions'),
      events: await n('SELECT count(*) AS n FROM events'),
      sessionRollup: await n("SELECT coalesce(sum(sessions), 0) AS n FROM rollup_sessions_hourly WHERE project_id = 'p'"),
      countryRollup: await n("SELECT coalesce(sum(sessions), 0) AS n FROM rollup_country_hourly WHERE project_id = 'p'"),
      eventRollup: await n("SELECT coalesce(sum(count), 0) AS n FROM events_hourly WHERE project_id = 'p'"),
      pages: await n("SELECT coalesce(sum(sessions), 0) AS n FROM rollup_pages_hourly WHERE project_id = 'p'"),
    });
    assert.deepEqual(await sums(), { sessions: 2, events: 2, sessionRollup: 2, countryRollup: 2, eventRollup: 2, pages: 2 });
    // The visit days (sql/038): built, they count both visitors' days.
    await applyVisitorLog(db);
    const visitDays = () => n("SELECT count(*) AS n FROM visitor_days WHERE project_id = 'p'");
    assert.equal(await visitDays(), 2);
    await applyRetention(db, 5);
    assert.deepEqual(await sums(), { sessions: 1, events: 1, sessionRollup: 1, countryRollup: 1, eventRollup: 1, pages: 1 });
    // drop_chunks fires no trigger: the project awaits a rebuild, which counts what is left.
    assert.equal(await n('SELECT count(*) AS n FROM visitor_state'), 0);
    await applyVisitorLog(db);
    assert.equal(await visitDays(), 1);
  } finally {
    await db?.end();
    await engine?.stop();
  }
});
