-- The session cube (sql/012) of one (project, UTC hour): the hour's rows per combination of
-- the nine cube dimensions, then, when no other hour of its local day is still logged, the
-- day's rows (the sum of its hourly rows), its pair rows (sql/016, tm_session_cube_pairs)
-- and its entry in rollup_session_cube_days.
CREATE OR REPLACE FUNCTION tm_refresh_session_cube(p_project text, p_bucket timestamptz) RETURNS void
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
  dims constant text := 'referrer_name, referrer_type, utm_source, utm_medium, country, device, browser, os, brand';
  m record;
  ld record;
BEGIN
  m := tm_session_measures('rollup_session_cube_hourly', 's');
  DELETE FROM rollup_session_cube_hourly WHERE project_id = p_project AND bucket = p_bucket;
  EXECUTE format($q$INSERT INTO rollup_session_cube_hourly (project_id, bucket, %1$s%2$s)
    SELECT $1, $2, %1$s%3$s
    FROM sessions s
    WHERE s.project_id = $1 AND s.started_at >= $2 AND s.started_at < $2 + interval '1 hour' AND NOT s.is_bot
    GROUP BY %1$s$q$, dims, m.cols, m.exprs) USING p_project, p_bucket;

  ld := tm_day_build(p_project, p_bucket, 727274012,
    ARRAY['rollup_session_cube_days', 'rollup_session_cube_daily', 'rollup_session_cube_pairs_daily']);
  IF NOT ld.build THEN
    RETURN;
  END IF;
  m := tm_session_measures('rollup_session_cube_daily', 'h');
  EXECUTE format($q$INSERT INTO rollup_session_cube_daily (project_id, bucket, %1$s%2$s)
    SELECT $1, $2, %1$s%3$s
    FROM rollup_session_cube_hourly h
    WHERE h.project_id = $1 AND h.bucket >= $2 AND h.bucket < $3
    GROUP BY %1$s$q$, dims, m.cols, m.sums) USING p_project, ld.d0, ld.d1;
  IF to_regclass('rollup_session_cube_pairs_daily') IS NOT NULL THEN
    PERFORM tm_session_cube_pairs(p_project, ld.d0);
  END IF;
  INSERT INTO rollup_session_cube_days (project_id, bucket, hours)
  VALUES (p_project, ld.d0, (extract(epoch FROM ld.d1 - ld.d0) / 3600)::integer);
END
$body$;
