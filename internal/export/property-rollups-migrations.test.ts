// Property segments of /export/charts from the hourly property rollups
// (sql/013_event_property_rollups.sql, ./property-rollups.ts) against the raw path, on
// databases of their own (the events of test/support/export-property-dataset.ts): a database
// with events migrated to 013 (every hour logged, answers exact before and after the refresh),
// and TimescaleDB on the PGlite engine (the migration applies, the refresh fills the rollups).
// The tests on one shared dataset: property-rollups.test.ts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { ChartResponse } from './charts';
import { createSqlDb, dropSqlDb, functionsSql, migrationFiles, migrationSql } from '../../test/support/sql-db';
import { startTimescale, type Timescale } from '../../test/support/timescale';
import { migrate } from '../store/migrate';
import type { Pool } from '../store/db';
import {
  bd, chartBothWays, generate, NOW, PROJECTS, refreshAll, s, SEGMENTS, UPGRADE_FULL_HOURS,
} from '../../test/support/export-property-dataset';

const UPGRADE_DB = `tidemark_test_export_props_up_${randomBytes(6).toString('hex')}`;

/** The TimescaleDB engine of its test, started first (its WASM start-up runs while the other test does). */
let timescale: Promise<Timescale> | undefined;

before(() => {
  timescale = startTimescale();
  timescale.catch(() => {}); // (reported by its test)
});

after(async () => {
  // Stopped by its test already, unless that did not run.
  await timescale?.then((engine) => engine.stop()).catch(() => {});
});

// The upgrade and TimescaleDB tests have databases of their own and run beside each other.
describe('export property rollups', { concurrency: 2 }, () => {
  describe('on databases of their own', { concurrency: 2 }, () => {
    it('upgrade: a database with events migrated to 013 logs every hour, answers exactly before and after the refresh', async () => {
      const skip = (file: string) => file >= '013';
      const db = await createSqlDb(UPGRADE_DB, { max: 4, edit: (file, sql) => (skip(file) ? 'SELECT 1' : sql) });
      try {
        assert.equal((await db.query(`SELECT to_regclass('event_properties_hourly') IS NULL AS missing`)).rows[0].missing, true);
        for (const [i, p] of PROJECTS.slice(0, 3).entries()) {
          await db.query('INSERT INTO projects (id, name, timezone) VALUES ($1, $1, $2)', [p.id, p.timezone]);
          // From March 18 (Berlin's DST change inside), every hour of UPGRADE_FULL_HOURS and
          // sparse hours elsewhere (about 400 hours in all, 1,044 when every hour had events):
          // every hour with events is refreshed twice here.
          await generate(db, p.id, 0.5 + i / 10, 3000, '2026-03-18T00:00:00Z', UPGRADE_FULL_HOURS);
        }
        // The release before: every hour refreshed (its own rollups), nothing logged.
        await db.query(`INSERT INTO rollup_invalidations (project_id, bucket) SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events`);
        await refreshAll(db, new Date(Math.floor(NOW.getTime() / 3_600_000) * 3_600_000 + 86_400_000));
        assert.equal((await db.query('SELECT count(*)::int AS n FROM rollup_invalidations')).rows[0].n, 0);
        for (const file of migrationFiles().filter(skip)) await db.query(migrationSql(file));
        await db.query(await functionsSql());
        const hours = await db.query(
          `SELECT (SELECT count(DISTINCT (project_id, date_trunc('hour', created_at, 'UTC')))::int FROM events) AS with_events,
                  (SELECT count(DISTINCT (project_id, bucket))::int FROM rollup_invalidations) AS logged,
                  (SELECT count(*)::int FROM event_properties_hourly) AS rows`,
        );
        // hundreds of hours logged by the migration (over 1,000 before the data was thinned)
        assert.ok(hours.rows[0].with_events > 300, `${hours.rows[0].with_events} hours with events`);
        assert.equal(hours.rows[0].logged, hours.rows[0].with_events);
        assert.equal(hours.rows[0].rows, 0);
        const cases = (segment: string) => [
          { range: '30d', previous: true, series: s({ name: 'purchase', segment, property: 'properties.amount' }), breakdowns: bd('country') },
          { startDate: '2026-03-01', endDate: '2026-03-31', series: s({ name: '*', segment, property: 'properties.amount' }) },
          { startDate: '2026-03-27', endDate: '2026-03-30', interval: 'hour', series: s({ name: '*', segment, property: 'properties.qty' }), breakdowns: bd('name') },
        ];
        const answers = async () => {
          const out: ChartResponse[] = [];
          for (const p of PROJECTS.slice(0, 3)) {
            for (const segment of SEGMENTS) for (const q of cases(segment)) out.push(await chartBothWays(db, p.id, q));
          }
          return out;
        };
        const before = await answers();
        await refreshAll(db, new Date(Math.floor(NOW.getTime() / 3_600_000) * 3_600_000 + 86_400_000));
        const rows = await db.query('SELECT count(*)::int AS n FROM event_properties_hourly');
        assert.ok(rows.rows[0].n > 2_000, `rows after the refresh: ${rows.rows[0].n}`);
        assert.deepEqual(await answers(), before);
      } finally {
        await dropSqlDb(db, UPGRADE_DB);
      }
    });

    it('TimescaleDB (PGlite engine): the migration applies, the refresh fills the rollups, answers equal the raw path', { timeout: 300_000 }, async () => {
      const engine = await timescale!;
      const db = new pg.Pool({ connectionString: engine.url, max: 1 });
      try {
        assert.equal((await migrate(db as unknown as Pool)).timescale, true);
        await db.query(`INSERT INTO projects (id, name, timezone) VALUES ('t_ber', 't_ber', 'Europe/Berlin')`);
        // Every hour from March 16 (the engine is slow per hour: its rollups are continuous
        // aggregates refreshed over hour ranges, and sparse hours would cost a refresh each):
        // four days of them refreshed below (eight from March 12 before: the rollups filled is
        // what is asserted, not how many days), the rest compared logged. 1,500 events (2,500
        // before): the engine (WASM, in a child process of test/support/timescale.ts) takes a
        // core for as long as it works, beside the file's other tests on a 2-core machine.
        await generate(db, 't_ber', 0.7, 1500, '2026-03-16T00:00:00Z', null);
        await db.query(`INSERT INTO rollup_invalidations (project_id, bucket) SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events`);
        const cases = SEGMENTS.flatMap((segment) => [
          { range: '30d', previous: true, series: s({ name: 'purchase', segment, property: 'properties.amount' }), breakdowns: bd('country') },
          { startDate: '2026-03-27', endDate: '2026-03-30', interval: 'hour', series: s({ name: '*', segment, property: 'properties.qty' }), breakdowns: bd('name') },
        ]);
        const compare = async () => {
          for (const q of cases) await chartBothWays(db, 't_ber', q);
        };
        await compare();
        await refreshAll(db, new Date('2026-03-20T00:00:00Z'), true);
        const rows = await db.query(`SELECT count(*)::int AS n, (SELECT count(*)::int FROM event_properties_raw_hours) AS long FROM event_properties_hourly`);
        assert.ok(rows.rows[0].n > 1000, `rows: ${rows.rows[0].n}`);
        assert.equal(rows.rows[0].long, 1);
        await compare();
      } finally {
        await db.end();
        await engine.stop();
      }
    });
  });
});
