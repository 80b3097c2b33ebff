// Read-side helpers that insights and export share: a read's frame (withRead), the project's timezone, regexes.
import type pg from 'pg';
import { BadRequestError, NotFoundError } from '../http/errors';
import { DEFAULT_STATEMENT_TIMEOUT_MS, withTimeout, type ReadOptions } from './db';
import { PG_INVALID_REGULAR_EXPRESSION, pgErrorCode } from './errors';
import { regexValues } from './filters';
import type { Filter } from './params';
import { isValidTimeZone } from './period';
import type { ConnectionSource, Queryable } from './source';

/** The project's IANA timezone; one Intl does not know is treated as UTC (as insights does). */
async function projectTimezone(db: Queryable, projectId: string): Promise<string> {
  const { rows } = await db.query<{ timezone: string }>('SELECT timezone FROM projects WHERE id = $1', [projectId]);
  const row = rows[0];
  if (!row) throw new NotFoundError(`Project not found: ${projectId}`);
  return isValidTimeZone(row.timezone) ? row.timezone : 'UTC';
}

/**
 * Compiles every regex filter value in PostgreSQL so an invalid one is a 400 that names it.
 * `prefix` locates the filter list in the request (e.g. ['series', '0']).
 */
export async function checkRegexes(db: Queryable, filters: readonly Filter[], prefix: string[] = []): Promise<void> {
  const values = regexValues(filters);
  if (values.length === 0) return;
  if (values.length === 1) {
    try {
      await db.query("SELECT '' ~ $1::text", [values[0]!.pattern]);
      return;
    } catch (err) {
      throw regexError(err, values[0]!.path, prefix);
    }
  }
  // One statement compiles them all (one round trip however many values); only when one is
  // invalid are they compiled one by one, to name it, from a savepoint (callers run in a
  // transaction, which the failed statement aborted).
  await db.query('SAVEPOINT tm_check_regexes');
  try {
    await db.query("SELECT bool_and('' ~ p) FROM unnest($1::text[]) AS p", [values.map((v) => v.pattern)]);
    await db.query('RELEASE SAVEPOINT tm_check_regexes');
    return;
  } catch (err) {
    if (pgErrorCode(err) !== PG_INVALID_REGULAR_EXPRESSION) throw err;
  }
  await db.query('ROLLBACK TO SAVEPOINT tm_check_regexes');
  for (const { pattern, path } of values) {
    try {
      await db.query("SELECT '' ~ $1::text", [pattern]);
    } catch (err) {
      throw regexError(err, path, prefix);
    }
  }
}

/** An invalid regular expression as a 400 naming where it is; other errors as they are. */
function regexError(err: unknown, path: string[], prefix: string[]): unknown {
  if (pgErrorCode(err) !== PG_INVALID_REGULAR_EXPRESSION) return err;
  const detail = err instanceof Error ? err.message : 'invalid regular expression';
  const full = [...prefix, ...path];
  return new BadRequestError(`${full.join('.')}: ${detail}`, [{ path: full, message: detail }]);
}

/** created_at as exact text (microseconds, UTC) for keyset positions. */
export const TS_TEXT = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** A value from the database as a JS number (aggregates are selected as text). */
export function num(v: unknown): number {
  if (v === null || v === undefined) return 0;
  return typeof v === 'number' ? v : Number(v);
}

/**
 * Turns JIT compilation off for the rest of the transaction (`also`: more columns of that round
 * trip, its row returned): on these short reads compiling (10-200 ms) costs more than it saves,
 * and the raw tails' row estimates push plans past jit_above_cost (measured: a 30-day chart over
 * 800k events 2.7 s with JIT, 1.1 s without; a 10M-event insights breakdown 39 ms, 9 without).
 */
export async function withoutJit<S extends pg.QueryResultRow>(db: Queryable, also = ''): Promise<S | undefined> {
  return (await db.query<S>(`SELECT set_config('jit', 'off', true)${also}`)).rows[0];
}

/**
 * The frame of every read (insights, charts, events): withTimeout's transaction, JIT off
 * (`setup` as withoutJit's `also`), the project's timezone (404), the regexes of `filters`
 * checked (a 400 naming one); then `read`, an invalid regex that got past the check a 400 too.
 */
export async function withRead<T, S extends pg.QueryResultRow = pg.QueryResultRow>(
  pool: ConnectionSource,
  options: ReadOptions,
  projectId: string,
  filters: readonly Filter[],
  read: (db: Queryable, timezone: string, setup: S | undefined) => Promise<T>,
  setup = '',
): Promise<T> {
  return withTimeout(pool, options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS, async (db) => {
    const row = await withoutJit<S>(db, setup);
    const timezone = await projectTimezone(db, projectId);
    await checkRegexes(db, filters);
    try {
      return await read(db, timezone, row);
    } catch (err) {
      if (pgErrorCode(err) !== PG_INVALID_REGULAR_EXPRESSION) throw err;
      throw new BadRequestError('filters: invalid regular expression', [{ path: ['filters'], message: 'Invalid regular expression' }]);
    }
  });
}
