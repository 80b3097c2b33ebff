// Unique visitors by days (sql/038, docs/rollups.md, "Unique visitors by days"): folds the
// log the triggers on `sessions` write into the visit days and their returns, and builds the
// projects whose days are not built in their current timezone (new, timezone changed, after
// retention). A periodic job (internal/app/runtime.ts) runs it every few seconds.
import type { Pool } from './db';

/** One folder at a time; taken before the transaction's snapshot, so no fold misses another's. */
export const VISITOR_LOCK = 727_274_038;
/** Log entries a transaction folds at most. */
export const VISITOR_APPLY_BATCH = 20_000;

export interface VisitorApplyResult {
  /** Projects built from their sessions. */
  built: number;
  /** Log entries folded. */
  entries: number;
  transactions: number;
  /** False: another process held the lock, nothing was done. */
  ran: boolean;
}

/**
 * Builds every project whose visit days are not built in its current timezone (one
 * transaction each), then folds the visitor log until it is empty or `maxTransactions`
 * transactions ran (at most `batch` entries each). Every transaction is REPEATABLE READ, under
 * a lock taken before its snapshot; concurrent calls: one works, the others return at once.
 */
export async function applyVisitorLog(db: Pool, opts: { batch?: number; maxTransactions?: number } = {}): Promise<VisitorApplyResult> {
  const batch = Math.max(1, opts.batch ?? VISITOR_APPLY_BATCH);
  const most = Math.max(1, opts.maxTransactions ?? 50);
  const c = await db.connect();
  const result: VisitorApplyResult = { built: 0, entries: 0, transactions: 0, ran: false };
  const inTransaction = async (sql: string, values: unknown[]): Promise<number> => {
    await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    try {
      const r = await c.query<{ n: number | null }>(sql, values);
      await c.query('COMMIT');
      result.transactions++;
      return Number(r.rows[0]?.n ?? 0);
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      throw err;
    }
  };
  try {
    const got = await c.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [VISITOR_LOCK]);
    if (!got.rows[0]?.ok) return result;
    result.ran = true;
    try {
      const unbuilt = await c.query<{ id: string }>(
        `SELECT p.id FROM projects p LEFT JOIN visitor_state s ON s.project_id = p.id
         WHERE s.project_id IS NULL OR s.timezone IS DISTINCT FROM p.timezone ORDER BY p.id`);
      for (const p of unbuilt.rows) {
        await inTransaction('SELECT tm_visitor_build($1), NULL AS n', [p.id]);
        result.built++;
      }
      while (result.transactions < most) {
        const n = await inTransaction('SELECT tm_visitor_apply($1) AS n', [batch]);
        result.entries += n;
        if (n < batch) break;
      }
    } finally {
      await c.query('SELECT pg_advisory_unlock($1)', [VISITOR_LOCK]);
    }
    return result;
  } finally {
    c.release();
  }
}
