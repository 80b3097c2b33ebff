// Applies the functions of sql/functions/ (each file one function's current body, CREATE OR
// REPLACE; PL/pgSQL, so they can be created on any schema), then the numbered plain-SQL
// migrations in sql/ once each, in order (a migration may call a helper of sql/functions/),
// then the functions again, under an advisory lock so that several processes starting
// together do not race.
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Pool } from './db';

export const SQL_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../sql');
const LOCK_KEY = 727_274_001;

interface MigrateResult {
  applied: string[];
  timescale: boolean;
}

async function listMigrations(dir = SQL_DIR): Promise<string[]> {
  return (await readdir(dir)).filter((f) => /^\d+_.*\.sql$/.test(f)).sort();
}

/** The function files of `dir`/functions (sql/functions/README.md), in name order. */
async function listRoutines(dir = SQL_DIR): Promise<string[]> {
  const files = await readdir(path.join(dir, 'functions')).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [] as string[];
    throw err;
  });
  return files.filter((f) => /^[a-z_0-9]+\.sql$/.test(f)).sort();
}

/** The SQL that creates or replaces every function of sql/functions/, in one string. */
export async function routinesSql(dir = SQL_DIR): Promise<string> {
  const parts: string[] = [];
  for (const file of await listRoutines(dir)) parts.push(await readFile(path.join(dir, 'functions', file), 'utf8'));
  return parts.join('\n');
}

export async function migrate(pool: Pool, dir = SQL_DIR): Promise<MigrateResult> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
    const available = await client.query("SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb'");
    if (available.rowCount) await client.query('CREATE EXTENSION IF NOT EXISTS timescaledb');
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    const routines = await routinesSql(dir);
    // The functions before and after the migrations, every start: a changed file takes effect
    // with the release that changed it; an unchanged one is replaced by the same body.
    const applyRoutines = async () => {
      if (!routines) return;
      await client.query('BEGIN');
      try {
        await client.query(routines);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw new Error(`sql/functions failed: ${(err as Error).message}`);
      }
    };
    await applyRoutines();
    const done = new Set((await client.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((r) => r.name));
    const applied: string[] = [];
    for (const file of await listMigrations(dir)) {
      if (done.has(file)) continue;
      const sql = await readFile(path.join(dir, file), 'utf8');
      await client.query('BEGIN');
      try {
        await client.query(sql);
        await client.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${file} failed: ${(err as Error).message}`);
      }
      applied.push(file);
    }
    if (applied.length) await applyRoutines();
    const ts = await client.query<{ ts: boolean }>('SELECT tm_timescale() AS ts');
    return { applied, timescale: ts.rows[0]?.ts === true };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => {});
    client.release();
  }
}

/** Pending migration names (readiness requires none). */
export async function pendingMigrations(pool: Pool, dir = SQL_DIR): Promise<string[]> {
  const all = await listMigrations(dir);
  const res = await pool.query<{ name: string }>('SELECT name FROM schema_migrations').catch(() => ({ rows: [] as { name: string }[] }));
  const done = new Set(res.rows.map((r) => r.name));
  return all.filter((f) => !done.has(f));
}
