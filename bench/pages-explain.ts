// Pages read diagnostic (the "Pages at 10M" note in bench/RESULTS.md): the SQL the
// rolled-up pages read runs (rollupPagesSql) for range 7d and 30d of the bench's main project,
// with the bench's live tail logged as bench/queries.ts logs it (the last two hours of data);
// prints EXPLAIN (ANALYZE, BUFFERS) and/or times the statement in-process (jit off, as the
// service runs it). With --old <module>, a second builder (another checkout's
// internal/insights/rollups.ts) is timed alternately with this one (A/B on the same data).
//
//   npx tsx bench/pages-explain.ts --db postgres://postgres@127.0.0.1:5432/bench_10m [--explain] [--n 30] [--old /path/rollups.ts] [--no-tail]
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { rollupPagesSql } from '../internal/insights/rollups';
import { SCREEN_VIEW } from '../internal/model/event';
import { SqlParams } from '../internal/query/filters';
import { resolvePeriod } from '../internal/query/period';
import { MAIN_PROJECT } from './generate';
import { logLiveTail } from './query-support';

type Builder = typeof rollupPagesSql;

const { values } = parseArgs({
  options: {
    db: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/bench_10m' },
    explain: { type: 'boolean', default: false },
    n: { type: 'string', default: '0' },
    old: { type: 'string' },
    range: { type: 'string', multiple: true },
    limit: { type: 'string', default: '10' },
    'no-tail': { type: 'boolean', default: false },
  },
});

async function main(): Promise<void> {
  const db = new pg.Client({ connectionString: values.db });
  await db.connect();
  await db.query("SET jit = off");
  await logLiveTail(db, MAIN_PROJECT, 'sessions');
  // --no-tail: the same reads with nothing logged for the main project (every hour from the
  // rollups: generate.ts refreshed every hour), in a transaction rolled back at the end.
  if (values['no-tail']) {
    await db.query('BEGIN');
    await db.query('DELETE FROM rollup_invalidations WHERE project_id = $1', [MAIN_PROJECT]);
  }
  const builders: [string, Builder][] = [['new', rollupPagesSql]];
  if (values.old) builders.unshift(['old', ((await import(values.old)) as { rollupPagesSql: Builder }).rollupPagesSql]);
  const { rows: [tz] } = await db.query<{ timezone: string }>('SELECT timezone FROM projects WHERE id = $1', [MAIN_PROJECT]);
  const now = new Date();
  const limit = Number(values.limit);
  for (const range of values.range ?? ['7d', '30d']) {
    const period = resolvePeriod({ range } as never, tz!.timezone, now);
    const build = (b: Builder) => {
      const p = new SqlParams();
      const sql = b({ projectId: MAIN_PROJECT, start: period.start, end: period.end }, p, limit, 0, SCREEN_VIEW);
      return { sql, values: p.values };
    };
    console.log(`== ${range}: [${period.start.toISOString()}, ${period.end.toISOString()})`);
    // Same answer from every builder.
    const answers = new Map<string, string>();
    for (const [name, b] of builders) {
      const q = build(b);
      answers.set(name, JSON.stringify((await db.query(q.sql, q.values)).rows));
    }
    if (new Set(answers.values()).size > 1) throw new Error(`${range}: the builders disagree`);
    if (values.explain) {
      for (const [name, b] of builders) {
        const q = build(b);
        const r = await db.query(`EXPLAIN (ANALYZE, BUFFERS) ${q.sql}`, q.values);
        console.log(`-- ${name}\n${r.rows.map((x: Record<string, string>) => x['QUERY PLAN']).join('\n')}`);
      }
    }
    const n = Number(values.n);
    if (n > 0) {
      const times = new Map<string, number[]>(builders.map(([name]) => [name, []]));
      for (let i = 0; i < n + 3; i++) {
        for (const [name, b] of i % 2 ? [...builders].reverse() : builders) {
          const q = build(b);
          const t = performance.now();
          await db.query(q.sql, q.values);
          if (i >= 3) times.get(name)!.push(performance.now() - t);
        }
      }
      for (const [name, ts] of times) {
        ts.sort((a, c) => a - c);
        const pct = (x: number) => ts[Math.min(ts.length - 1, Math.floor((x / 100) * ts.length))]!.toFixed(1);
        console.log(`${range} ${name}: p50 ${pct(50)} ms, p90 ${pct(90)} ms (n=${ts.length})`);
      }
    }
  }
  if (values['no-tail']) await db.query('ROLLBACK');
  await db.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
