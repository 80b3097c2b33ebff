// The sessions' funnel steps (sql/036_session_steps.sql) worked out from their stored events:
// what the sessionizer keeps as events arrive in order (internal/sessionize/session.ts), for
// sessions written without it (bench/generate's bulk load) and as the tests' reference.
import type { Pool, PoolClient } from './db';
import { MAX_STEP_BYTES, MAX_STEP_ENTRIES } from '../sessionize/session';

/**
 * Sets step_names, step_first_at and step_last_at of every session that has step events (its
 * non-bot events other than screen_view, session_start and session_end) from those events;
 * names NULL past the sessionizer's limits. Ties are ordered by id (any order within an
 * instant means the same). Returns the sessions updated.
 */
export async function fillSessionSteps(db: Pool | PoolClient): Promise<number> {
  const r = await db.query(
    `UPDATE sessions s SET step_first_at = x.first_at, step_last_at = x.last_at,
       step_names = CASE WHEN cardinality(x.names) <= $1 AND x.bytes <= $2 THEN x.names END
     FROM (
       SELECT session_id, array_agg(v ORDER BY created_at, id, k) AS names, min(created_at) AS first_at, max(created_at) AS last_at,
              sum(octet_length(v) + 1) AS bytes
       FROM (SELECT session_id, created_at, id, name,
                    created_at = lag(created_at) OVER (PARTITION BY session_id ORDER BY created_at, id) AS tie
             FROM events
             WHERE session_id IS NOT NULL AND NOT is_bot AND name NOT IN ('screen_view', 'session_start', 'session_end')) e
       CROSS JOIN LATERAL (VALUES (1, CASE WHEN e.tie THEN '' END), (2, e.name)) AS x(k, v)
       WHERE v IS NOT NULL
       GROUP BY session_id
     ) x
     WHERE s.id = x.session_id`,
    [MAX_STEP_ENTRIES, MAX_STEP_BYTES],
  );
  return r.rowCount ?? 0;
}
