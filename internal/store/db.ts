// PostgreSQL connection handling: pool creation, database creation, URL redaction.
import pg from 'pg';

// bigint (int8) and numeric come back as JS numbers: counts here never exceed 2^53.
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

/** The URL without its password, for log lines and error messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}

export class ServiceUnreachableError extends Error {
  constructor(readonly service: string, readonly url: string, cause: unknown) {
    super(`${service} is unreachable at ${redactUrl(url)}: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

export function createPool(url: string, max = 10): Pool {
  const pool = new pg.Pool({ connectionString: url, max, idleTimeoutMillis: 30_000, connectionTimeoutMillis: 5_000 });
  // A client losing its connection (PostgreSQL restarting) must not crash the process: idle
  // clients report on the pool; checked-out ones on themselves (pg-pool removes its own
  // listener while a client is lent out). The query in progress still fails and is retried.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/** Creates the database named in `url` when it does not exist yet. */
export async function ensureDatabase(url: string): Promise<void> {
  const target = new URL(url);
  const dbName = decodeURIComponent(target.pathname.replace(/^\//, '')) || 'postgres';
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
  } catch (err) {
    throw new ServiceUnreachableError('PostgreSQL', url, err);
  }
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName]);
    if (found.rowCount === 0) {
      try {
        await client.query(`CREATE DATABASE ${pg.escapeIdentifier(dbName)}`);
      } catch (err) {
        // Another process created it between our check and our CREATE.
        if ((err as { code?: string }).code !== '42P04') throw err;
      }
    }
  } finally {
    await client.end();
  }
}

/** Runs `fn` in one transaction on a pooled connection: COMMIT on success, ROLLBACK on error. */
export async function transaction<T>(db: Pool, fn: (c: PoolClient) => Promise<T>): Promise<T> {
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    const result = await fn(c);
    await c.query('COMMIT');
    return result;
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    c.release();
  }
}
