// A migrated template database for the tests: migrating a new database runs every migration
// of sql/ (about 1.5 s on this machine kind), copying a migrated template is a tenth of that.
// The template is named after a hash of sql/ and of which extensions the server offers, so a
// changed migration or function, or hll installed or removed, makes a new one; it is built
// under a name of its own and renamed when complete, under an advisory lock, so parallel
// test files neither build it twice nor copy a half-built one.
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { createPool } from '../../internal/store/db';
import { migrate, SQL_DIR } from '../../internal/store/migrate';

const LOCK_KEY = 727_274_077;
const PREFIX = 'tm_tpl_';

async function sqlHash(): Promise<string> {
  const h = createHash('sha256');
  for (const dir of [SQL_DIR, path.join(SQL_DIR, 'functions')]) {
    for (const f of (await readdir(dir)).filter((x) => x.endsWith('.sql')).sort()) {
      h.update(`${dir === SQL_DIR ? '' : 'functions/'}${f}\0`);
      h.update(await readFile(path.join(dir, f)));
    }
  }
  return h.digest('hex');
}

/** The name of a migrated template database for this sql/ and server, built if missing. */
async function ensureTemplate(admin: pg.Client, base: string): Promise<string> {
  const ext = await admin.query<{ name: string }>("SELECT name FROM pg_available_extensions WHERE name IN ('hll', 'timescaledb') ORDER BY name");
  const name = PREFIX + createHash('sha256').update(await sqlHash()).update(ext.rows.map((r) => r.name).join(',')).digest('hex').slice(0, 16);
  const exists = async () => ((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount ?? 0) > 0;
  if (await exists()) return name;
  await admin.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
  try {
    if (await exists()) return name;
    const building = `${name}_b${process.pid}`;
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(building)}`);
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(building)}`);
    const pool = createPool(`${base}/${building}`, 1);
    try {
      await migrate(pool);
    } finally {
      await pool.end();
    }
    await admin.query(`ALTER DATABASE ${pg.escapeIdentifier(building)} RENAME TO ${pg.escapeIdentifier(name)}`);
    // Templates of an older sql/ are not used again.
    const old = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE '${PREFIX}%' AND datname <> $1`, [name]);
    for (const r of old.rows) await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(r.datname)} WITH (FORCE)`).catch(() => {});
    return name;
  } finally {
    await admin.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]);
  }
}

/**
 * Creates `dbName` as a copy of the migrated template. False when it could not (the caller
 * then creates and migrates it the usual way).
 */
export async function createFromTemplate(base: string, dbName: string): Promise<boolean> {
  const admin = new pg.Client({ connectionString: `${base}/postgres` });
  await admin.connect();
  try {
    const template = await ensureTemplate(admin, base);
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(dbName)} TEMPLATE ${pg.escapeIdentifier(template)}`);
    return true;
  } catch {
    return false;
  } finally {
    await admin.end();
  }
}
