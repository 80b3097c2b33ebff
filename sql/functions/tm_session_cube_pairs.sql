-- The pair rows of one local day of the session cube (sql/016): per pair of the nine cube
-- dimensions and pair of values, the sums of the day's combination rows.
CREATE OR REPLACE FUNCTION tm_session_cube_pairs(p_project text, p_day timestamptz) RETURNS void
LANGUAGE plpgsql
-- Hashed, not sorted: a delta's shadow tables are written within the same run and have no
-- statistics, so every grouped statement here looked like one row and was planned as a sort
-- then a group (1.7 µs a grouped row against 0.9 hashed; bench/rollup-cost.ts); in memory.
-- No JIT: a statement that must sort all the same is costed past jit_above_cost by the
-- disabled sort, and compiling it took longer than running it.
SET enable_sort = off
SET work_mem = '64MB'
SET jit = off
AS $body$
DECLARE
  m record;
  g record;
BEGIN
  m := tm_session_measures('rollup_session_cube_pairs_daily', 'h');
  g := tm_cube_pair_grouping('h', ARRAY[]::text[]);
  EXECUTE format($q$INSERT INTO rollup_session_cube_pairs_daily (project_id, pair, bucket, a, b%1$s)
    SELECT $1, %3$s, $2, %4$s, %5$s%2$s
    FROM rollup_session_cube_daily h
    WHERE h.project_id = $1 AND h.bucket = $2
    GROUP BY GROUPING SETS (%6$s)$q$, m.cols, m.sums, g.pair, g.a, g.b, g.sets) USING p_project, p_day;
END
$body$;
