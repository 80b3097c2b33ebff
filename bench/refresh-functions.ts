// What each rollup refresh function costs PostgreSQL for one (project, UTC hour): the fixed
// cost a refresh round, a delta round (every function twice per touched hour) and an
// upgrade's backfill pay per hour, whatever the hour holds. On a database made by
// bench/generate.ts, a sample of hours with events is recomputed function by function inside
// a transaction that is rolled back (nothing changes), a few rounds, alternating, VACUUM
// before each; the best round of each function is reported (the machine's noise only adds).
//
//   npx tsx bench/generate.ts --events 50000 --db postgres://postgres@127.0.0.1:5432/bench_refresh
//   npx tsx bench/refresh-functions.ts --db postgres://postgres@127.0.0.1:5432/bench_refresh [--hours 150] [--rounds 5] [--fns a,b]
//
// --fns: functions to time instead of every refresh function of rollup_registry (an A/B of two
// bodies: load the other one under another name first, e.g. tm_refresh_rollup_bucket_old).
import os from 'node:os';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { redactUrl } from '../internal/store/db';

const { values: args } = parseArgs({
  options: {
    db: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/bench_refresh' },
    hours: { type: 'string', default: '150' },
    rounds: { type: 'string', default: '5' },
    fns: { type: 'string' },
  },
});

async function main(): Promise<void> {
  const c = new pg.Client({ connectionString: args.db });
  await c.connect();
  try {
    const fns = args.fns
      ? args.fns.split(',').map((f) => f.trim()).filter(Boolean)
      : (await c.query<{ fn: string }>('SELECT DISTINCT refresh_fn AS fn FROM rollup_registry WHERE refresh_fn IS NOT NULL ORDER BY 1')).rows.map((r) => r.fn);
    const hours = (await c.query<{ project_id: string; b: Date; n: string }>(
      `SELECT project_id, date_trunc('hour', created_at, 'UTC') AS b, count(*) AS n FROM events GROUP BY 1, 2 ORDER BY md5(project_id || date_trunc('hour', created_at, 'UTC')::text) LIMIT $1`,
      [Number(args.hours)],
    )).rows;
    if (!hours.length) throw new Error('no events: make the database with bench/generate.ts first');
    const events = hours.reduce((a, h) => a + Number(h.n), 0) / hours.length;
    // Two ways an hour is recomputed: while another hour of its local day still awaits one (a
    // refresh round's hours but the last of each day: the hour's rows only), and as the day's
    // last (its daily rows built again from the day's hours, as a late write's recompute does).
    const best = new Map<string, number>();
    for (let round = 0; round < Number(args.rounds); round++) {
      for (const [mode, fn] of fns.flatMap((f) => [['hour', f], ['day', f]] as const)) {
        await c.query('VACUUM');
        await c.query('BEGIN');
        if (mode === 'hour') {
          await c.query(
            `INSERT INTO rollup_invalidations (project_id, bucket, shard)
             SELECT DISTINCT x.project_id, x.b + d * interval '1 hour', 999
             FROM unnest($1::text[], $2::timestamptz[]) AS x(project_id, b) CROSS JOIN (VALUES (-1), (1)) v(d)
             ON CONFLICT DO NOTHING`,
            [hours.map((h) => h.project_id), hours.map((h) => h.b)],
          );
        }
        const t = process.hrtime.bigint();
        for (const h of hours) await c.query(`SELECT ${pg.escapeIdentifier(fn)}($1, $2)`, [h.project_id, h.b]);
        const ms = Number(process.hrtime.bigint() - t) / 1e6 / hours.length;
        await c.query('ROLLBACK');
        best.set(`${fn}\u0000${mode}`, Math.min(best.get(`${fn}\u0000${mode}`) ?? Infinity, ms));
      }
    }
    const of = (fn: string, mode: string) => best.get(`${fn}\u0000${mode}`)!;
    const rows = fns.map((fn) => [fn, of(fn, 'hour'), of(fn, 'day')] as const).sort((a, b) => b[2] - a[2]);
    console.log(`${hours.length} hours of ${redactUrl(args.db)} (${events.toFixed(1)} events each on average), best of ${args.rounds} rounds; ${os.cpus().length} CPUs, load ${os.loadavg().map((x) => x.toFixed(2)).join(' / ')}`);
    console.log('\n| function | ms per hour, day pending | ms per hour, building its day |\n|---|---|---|');
    for (const [fn, h, d] of rows) console.log(`| ${fn} | ${h.toFixed(2)} | ${d.toFixed(2)} |`);
    if (!args.fns) console.log(`| all | ${rows.reduce((a, r) => a + r[1], 0).toFixed(2)} | ${rows.reduce((a, r) => a + r[2], 0).toFixed(2)} |`);
  } finally {
    await c.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
