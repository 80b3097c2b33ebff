// What the indexes on `events` cost an insert, in one run: the same rows (the latest `--rows`
// events of a generated database's busiest project, every column) inserted into copies of the
// events table that differ only in their secondary indexes, alternated `--rounds` times:
//
//   primary key only        the floor (what bench/rollup-cost.ts's bare insert has)
//   before sql/039          the ten indexes events carried before (their definitions below)
//   now                     the indexes the database's events table has (pg_indexes)
//
// Each insert is one INSERT ... SELECT of all the rows into the emptied copy, on one
// connection; its cost is that backend's CPU (utime + stime from /proc/<pid>/stat, so the
// database server must be on this machine), per row. The median of the rounds is reported.
//
//   npx tsx bench/event-indexes.ts --db postgres://postgres@127.0.0.1:5432/bench_1m [--rows 60000] [--rounds 5] [--record]
//
// --record writes the section "Event indexes" of bench/RESULTS.md.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { machineInfo, writeSection } from './run';

const { values: a } = parseArgs({
  options: {
    db: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/bench_1m' },
    rows: { type: 'string', default: '60000' },
    rounds: { type: 'string', default: '5' },
    record: { type: 'boolean', default: false },
  },
});

/** The secondary indexes of events before sql/039 (sql/001, 003, 033, 034), as (columns) [INCLUDE] [WHERE]. */
export const BEFORE_039 = [
  '(project_id, created_at DESC, id DESC)',
  '(session_id)',
  '(project_id, name, created_at)',
  '(project_id, profile_id, created_at DESC)',
  "(project_id, created_at) INCLUDE (session_id, origin, path, duration_ms) WHERE name = 'screen_view'",
  "(project_id, path, origin, created_at, id) WHERE name = 'screen_view' AND title <> ''",
  "(project_id, created_at) INCLUDE (profile_id) WHERE NOT is_bot AND name NOT IN ('session_start', 'session_end')",
  "(project_id, created_at) INCLUDE (profile_id) WHERE NOT is_bot AND name NOT IN ('session_start', 'session_end') AND profile_id <> device_id",
  '(project_id, name, created_at) INCLUDE (session_id, profile_id) WHERE NOT is_bot',
];

const TICK_MS = 10; // USER_HZ = 100 on Linux

async function main(): Promise<void> {
  const rowsWanted = Number(a.rows);
  const rounds = Number(a.rounds);
  const db = new pg.Client({ connectionString: a.db });
  await db.connect();
  const pid = (await db.query<{ p: number }>('SELECT pg_backend_pid() AS p')).rows[0]!.p;
  const cpuMs = (): number => {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_MS;
  };
  // The indexes the events table has now, as definitions to put on the copy.
  const now = (
    await db.query<{ def: string }>(
      `SELECT regexp_replace(indexdef, '^CREATE (UNIQUE )?INDEX \\S+ ON (ONLY )?\\S+ USING btree ', '') AS def
       FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'events' AND indexname <> 'events_pkey' ORDER BY indexname`,
    )
  ).rows.map((r) => r.def);
  const sets: Array<[string, string[]]> = [
    ['primary key only', []],
    [`before sql/039 (${BEFORE_039.length + 1} indexes)`, BEFORE_039],
    [`now (${now.length + 1} indexes)`, now],
  ];
  await db.query('DROP TABLE IF EXISTS bench_ev_src, bench_ev_copy');
  const project = (
    await db.query<{ id: string }>('SELECT p.id FROM projects p ORDER BY (SELECT count(*) FROM sessions s WHERE s.project_id = p.id) DESC, p.id LIMIT 1')
  ).rows[0]!.id;
  await db.query(`CREATE TABLE bench_ev_src AS SELECT * FROM events WHERE project_id = $1 ORDER BY created_at DESC, id DESC LIMIT ${rowsWanted}`, [project]);
  const n = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM bench_ev_src')).rows[0]!.n;
  const names = (await db.query<{ name: string; n: number }>('SELECT name, count(*)::int AS n FROM bench_ev_src GROUP BY 1 ORDER BY 2 DESC LIMIT 4')).rows;
  const samples = new Map<string, number[]>();
  const machine = machineInfo();
  for (let r = 0; r < rounds; r++) {
    for (const [label, defs] of sets) {
      await db.query('DROP TABLE IF EXISTS bench_ev_copy');
      await db.query('CREATE TABLE bench_ev_copy (LIKE events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)');
      await db.query('ALTER TABLE bench_ev_copy ADD PRIMARY KEY (created_at, id)');
      for (const def of defs) await db.query(`CREATE INDEX ON bench_ev_copy ${def}`);
      const c0 = cpuMs();
      await db.query('INSERT INTO bench_ev_copy SELECT * FROM bench_ev_src');
      const us = ((cpuMs() - c0) * 1000) / n;
      samples.set(label, [...(samples.get(label) ?? []), us]);
    }
  }
  await db.query('DROP TABLE IF EXISTS bench_ev_src, bench_ev_copy');
  await db.end();
  const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const floor = median(samples.get(sets[0]![0])!);
  const before = median(samples.get(sets[1]![0])!);
  const lines = [
    '## Event indexes',
    '',
    `Command: \`npx tsx bench/event-indexes.ts --db ${a.db.replace(/\/\/[^@]*@/, '//…@')} --rows ${rowsWanted} --rounds ${rounds}${a.record ? ' --record' : ''}\``,
    '',
    `Machine: ${machine.nproc} CPUs, ${machine.cpu}, Node ${machine.node}; load average before ${machine.load}. Date: ${machine.date}. The latest ${n.toLocaleString('en-US')} events of the database's busiest project (${names.map((x) => `${x.name} ${x.n.toLocaleString('en-US')}`).join(', ')}, …), every column, inserted with one INSERT ... SELECT into an emptied copy of the events table that has only the indexes named; the backend's CPU (/proc) per row, median of ${rounds} rounds (the three copies alternated in each).`,
    '',
    '| indexes on the copy | µs a row (median) | all rounds | x primary key only | x before sql/039 |',
    '|---|---:|---|---:|---:|',
    ...sets.map(([label]) => {
      const xs = samples.get(label)!;
      const m = median(xs);
      return `| ${label} | ${m.toFixed(1)} | ${xs.map((x) => x.toFixed(1)).join(', ')} | ${(m / floor).toFixed(2)} | ${(m / before).toFixed(2)} |`;
    }),
    '',
    `Now: ${now.map((d) => `\`${d}\``).join('; ')}.`,
  ];
  const md = lines.join('\n');
  process.stdout.write(`${md}\n`);
  if (a.record) writeSection('Event indexes', md);
}

await main();
