import pg from 'pg';
const db = process.argv[2]!;
const pool = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:5432/${db}`, max: 1 });
const fns = (await pool.query(`SELECT DISTINCT refresh_fn FROM rollup_registry WHERE refresh_fn IS NOT NULL ORDER BY 1`)).rows.map((r) => r.refresh_fn as string);
const hours = (await pool.query(`SELECT DISTINCT date_trunc('hour', started_at, 'UTC') AS b FROM sessions WHERE project_id = 'bench-main' ORDER BY 1 LIMIT 200`)).rows.map((r) => r.b as Date);
const out: Record<string, number> = {};
for (let rep = 0; rep < 2; rep++) for (const fn of fns) {
  const t0 = performance.now();
  await pool.query('BEGIN');
  for (const h of hours) await pool.query(`SELECT ${fn}('bench-main', $1)`, [h]);
  await pool.query('ROLLBACK');
  if (rep === 1) out[fn] = Math.round((performance.now() - t0) / hours.length * 100) / 100;
}
console.log(db, JSON.stringify(out), 'total ms/hour', Object.values(out).reduce((a, b) => a + b, 0).toFixed(1));
await pool.end();
