// Unique visitors counted exactly from the sessions (no hll, a period under the exact bound, or
// anything the visit days do not answer): the distinct profiles of the period's non-bot
// sessions, per series bucket and over the whole period.
//
// Unfiltered, bucket by bucket: one index-only range of sessions_visitors_idx (project_id,
// started_at) INCLUDE (profile_id, is_bot) per bucket, its distinct profiles sorted in memory,
// and the whole period's once more. One distinct count grouped by bucket over the whole period
// sorted every session of it by bucket first: at 10M events a day's 53k sessions spilled that
// sort to disk, 75-110 ms of a 24-hour series' read. Filtered, the filters read the sessions'
// rows, not only the index: one scan, grouped as before, rather than reading them twice.

/** The statement's bound values (SQL expressions) that the count needs. */
export interface ExactVisitorsScope {
  project: string;
  start: string;
  end: string;
}

/**
 * CTE `exact_visitors` (bucket: 1-based index of `starts`, 0 before the first start, NULL for the
 * whole period; visitors), as width_bucket over `starts` would group the period's sessions.
 * `where(alias)`: the filters' condition on a sessions alias (called once per use); `exact`: the
 * statement's decision to count exactly; `total`: whether to add the whole period's row (false
 * when another source gives it); `filtered`: whether `where` tests the sessions' columns.
 */
export function exactVisitorsCte(
  b: ExactVisitorsScope,
  starts: string,
  where: (alias: string) => string,
  exact: string,
  { total = true, filtered = false }: { total?: boolean; filtered?: boolean } = {},
): string {
  // COLLATE "C" (both forms): the same distinct values (equality is bytewise either way),
  // sorted by memcmp instead of the locale's strcoll: half the CPU of this step.
  if (filtered) {
    return `
      exact_visitors AS (
        SELECT width_bucket(v.started_at, ${starts}) AS bucket, count(DISTINCT v.profile_id COLLATE "C") AS visitors
        FROM sessions v
        WHERE v.project_id = ${b.project} AND v.started_at >= ${b.start} AND v.started_at < ${b.end} AND NOT v.is_bot
          AND ${where('v')}
          AND ${exact}
        GROUP BY GROUPING SETS ((width_bucket(v.started_at, ${starts}))${total ? ', ()' : ''})
      )`;
  }
  const distinct = (alias: string, lo: string, hi: string, bucket = '') => `SELECT ${bucket}count(DISTINCT ${alias}.profile_id COLLATE "C") AS visitors
          FROM sessions ${alias}
          WHERE ${alias}.project_id = ${b.project} AND ${alias}.started_at >= ${lo} AND ${alias}.started_at < ${hi} AND NOT ${alias}.is_bot
            AND ${where(alias)}
            AND ${exact}`;
  return `
      exact_visitors AS (
        SELECT k.i AS bucket, x.visitors
        FROM (
          SELECT i, greatest(CASE WHEN i = 0 THEN '-infinity'::timestamptz ELSE (${starts})[i] END, ${b.start}) AS lo,
                 least(coalesce((${starts})[i + 1], 'infinity'::timestamptz), ${b.end}) AS hi
          FROM generate_series(0, cardinality(${starts})) AS i
        ) k
        -- LATERAL (kept by OFFSET 0): one index range per bucket, whatever the row estimates
        CROSS JOIN LATERAL (
          ${distinct('v', 'k.lo', 'k.hi')}
          OFFSET 0
        ) x
        WHERE k.lo < k.hi AND x.visitors > 0${total ? `
        UNION ALL
        ${distinct('w', b.start, b.end, 'NULL::int, ')}` : ''}
      )`;
}
