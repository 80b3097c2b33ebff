// Database access shared by the read side (insights, export): a minimal query surface and
// a read-only transaction with a statement timeout, so no dashboard query can hold a
// connection for long.
import type pg from 'pg';
import { QueryTimeoutError } from './errors';

/** What a pg Pool, PoolClient or Client offers for running one statement. */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>;
}

/** What a pg Pool offers: a dedicated connection for a transaction. */
export interface ConnectionSource {
  connect(): Promise<pg.PoolClient>;
}

export const DEFAULT_STATEMENT_TIMEOUT_MS = 5000;

/** PostgreSQL SQLSTATE codes the read side maps to HTTP errors. */
export const PG_QUERY_CANCELED = '57014';
export const PG_INVALID_REGULAR_EXPRESSION = '2201B';

/** The SQLSTATE of a pg error, or undefined for anything else. */
export function pgErrorCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = (err as { code: unknown }).code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

/**
 * Runs `fn` in a READ ONLY transaction whose statements are cancelled after `timeoutMs`.
 * A cancelled statement becomes QueryTimeoutError (503); other errors pass through.
 */
export async function withTimeout<T>(
  pool: ConnectionSource,
  timeoutMs: number,
  fn: (db: Queryable) => Promise<T>,
): Promise<T> {
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`statement timeout must be a positive integer of ms, got ${timeoutMs}`);
  }
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN READ ONLY');
    // SET cannot take parameters; set_config(..., true) is the parameterised SET LOCAL.
    await client.query("SELECT set_config('statement_timeout', $1, true)", [String(timeoutMs)]);
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
    } catch {
      broken = true; // the connection is unusable; let the pool discard it
    }
    if (pgErrorCode(err) === PG_QUERY_CANCELED) {
      throw new QueryTimeoutError(timeoutMs);
    }
    throw err;
  } finally {
    client.release(broken);
  }
}
