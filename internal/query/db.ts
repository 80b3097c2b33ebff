// Database access shared by the read side (insights, export): a read-only transaction with a
// statement timeout over the minimal query surface of ./source.ts, so no dashboard query can
// hold a connection for long. What PostgreSQL's errors mean is ./errors.ts.
import { exactVisitorsMaxFrom } from '../config/config';
import { budgetOf } from './budget';
import { PG_QUERY_CANCELED, pgErrorCode, QueryTimeoutError } from './errors';
import type { ReadPath } from './planner';
import type { ConnectionSource, Queryable } from './source';

export const DEFAULT_STATEMENT_TIMEOUT_MS = 5000;

/** How insights and the export read. */
export interface ReadOptions {
  /** Statement timeout of every query, ms (default 5000). */
  statementTimeoutMs?: number;
  /**
   * 'auto' (default): the rollups where the read planner (./planner.ts) finds a source, else
   * the raw rows. 'raw': the raw rows everywhere, never the sketches (the reference the tests
   * compare with, and a fallback).
   */
  path?: ReadPath;
  /**
   * Insights' unique visitors and the charts' user, session and user_average count exactly
   * while the period holds at most this many sessions (of the series' events), else from
   * HyperLogLog sketches if the hll extension is installed. Default:
   * TIDEMARK_EXACT_VISITORS_MAX (internal/config/config.ts).
   */
  exactVisitorsMax?: number;
}

let envExactVisitorsMax: number | undefined;

/** `options.exactVisitorsMax`, or TIDEMARK_EXACT_VISITORS_MAX (read once). */
export function exactVisitorsMaxOf(options: ReadOptions): number {
  return options.exactVisitorsMax ?? (envExactVisitorsMax ??= exactVisitorsMaxFrom(process.env));
}

/**
 * Runs `fn` in a READ ONLY transaction whose statements are cancelled after `timeoutMs`, or
 * sooner when `pool` lends under a request budget (./budget.ts): the statement timeout is
 * then what is left of the budget, and the budget cancels the statement when it ends.
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
  const budget = budgetOf(pool);
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN READ ONLY');
    const statementMs = budget ? Math.max(1, Math.min(timeoutMs, Math.ceil(budget.remainingMs()))) : timeoutMs;
    // SET cannot take parameters; set_config(..., true) is the parameterised SET LOCAL.
    await client.query("SELECT set_config('statement_timeout', $1, true)", [String(statementMs)]);
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
    } catch {
      broken = true; // the connection is unusable; let the pool discard it
    }
    const ended = budget?.ended;
    if (ended) throw budget!.errorFor(ended);
    if (pgErrorCode(err) === PG_QUERY_CANCELED) {
      throw new QueryTimeoutError(timeoutMs);
    }
    throw err;
  } finally {
    client.release(broken);
  }
}
