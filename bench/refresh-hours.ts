// Refresh rounds over many logged hours (a migration that logs every hour, a backfill, the
// service catching up after downtime): the wall time of refreshing every logged hour of a
// dataset, and each SQL function's own time (pg_stat_user_functions, track_functions = all),
// so that the functions' time and the rest (round trips, the round's setup) are told apart.
// The dataset: the daily-layer test projects (UTC, Europe/Berlin, America/New_York,
// Asia/Kolkata), `--events` events each over six weeks, every hour around the two spring DST
// changes and sparse hours elsewhere (test/support/sql-db.ts), on a fresh database of the
// local PostgreSQL, dropped afterwards. Run it from two checkouts back to back for an A/B.
//
//   npx tsx bench/refresh-hours.ts [--events 4000] [--runs 1]
import { parseArgs } from 'node:util';
import pg from 'pg';
import {
  createSqlDb, dropSqlDb, generateColumnEvents, dailyLayerProjects, DAILY_LAYER_TIME, DAILY_LAYER_FULL_HOURS, refreshAllBefore, SERVER_URL,
} from '../test/support/sql-db';

const { values: args } = parseArgs({ options: { events: { type: 'string', default: '4000' }, runs: { type: 'string', default: '1' } } });
const EVENTS = Number(args.events);

for (let run = 0; run < Number(args.runs); run++) {
  const name = `tm_bench_refresh_${process.pid}_${run}`;
  const setup = await createSqlDb(name, { max: 1 });
  await setup.query(`ALTER DATABASE ${pg.escapeIdentifier(name)} SET track_functions = 'all'`);
  await setup.end();
  const db = new pg.Pool({ connectionString: `${SERVER_URL}/${name}`, max: 2 });
  try {
    for (const [i, p] of dailyLayerProjects('r').entries()) {
      await db.query('INSERT INTO projects (id, name, timezone) VALUES ($1, $1, $2)', [p.id, p.timezone]);
      await generateColumnEvents(db, p.id, i / 10, EVENTS, { botShare: 0.03, full: DAILY_LAYER_FULL_HOURS, every: 11 });
    }
    await db.query(`INSERT INTO rollup_invalidations (project_id, bucket) SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events`);
    const hours = (await db.query('SELECT count(*)::int AS n FROM rollup_invalidations')).rows[0].n as number;
    const t0 = performance.now();
    await refreshAllBefore(db, DAILY_LAYER_TIME.NOW_HOUR);
    const ms = performance.now() - t0;
    const fns = await db.query<{ funcname: string; calls: string; self: number }>(
      `SELECT funcname, calls, self_time AS self FROM pg_stat_user_functions ORDER BY self_time DESC`);
    const selfMs = fns.rows.reduce((a, r) => a + r.self, 0);
    console.log(`run ${run + 1}: ${hours} logged (project, hour)s, ${EVENTS} events per project: refresh ${(ms / 1000).toFixed(2)} s wall, ` +
      `SQL functions' own time ${(selfMs / 1000).toFixed(2)} s, the rest ${((ms - selfMs) / 1000).toFixed(2)} s`);
    for (const r of fns.rows.slice(0, 8)) console.log(`  ${r.funcname}: ${r.calls} calls, ${(r.self / 1000).toFixed(2)} s`);
  } finally {
    await db.end();
    await dropSqlDb(undefined, name);
  }
}
