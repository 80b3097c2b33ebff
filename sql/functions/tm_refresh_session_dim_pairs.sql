-- The dimension pairs (sql/019) of the local day holding one (project, UTC hour), when no
-- other hour of that day is still logged: per (wide, cube) pair of dimensions and values, the
-- sums of the day's raw sessions (one grouping set a pair: tm_dim_pair_grouping); and the
-- day's entry in rollup_session_dim_pairs_days.
CREATE OR REPLACE FUNCTION tm_refresh_session_dim_pairs(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql
-- the day's groups (tens of thousands at 50k sessions a day) hashed in memory, one hash table
-- a pair in one pass over the day's sessions (tm_pair_grouping), not spilled; no JIT
SET work_mem = '64MB'
SET enable_sort = off
SET jit = off
AS $body$
DECLARE
  m record;
  g record;
  ld record;
BEGIN
  ld := tm_day_build(p_project, p_bucket, 727274019, ARRAY['rollup_session_dim_pairs_days', 'rollup_session_dim_pairs_daily']);
  IF NOT ld.build THEN
    RETURN;
  END IF;
  m := tm_session_measures('rollup_session_dim_pairs_daily', 's');
  g := tm_dim_pair_grouping('s');
  EXECUTE format($q$INSERT INTO rollup_session_dim_pairs_daily (project_id, pair, bucket, a, a_prefix, b%1$s)
    SELECT $1, %3$s, $2, %4$s, %5$s, %6$s%2$s
    FROM sessions s
    WHERE s.project_id = $1 AND s.started_at >= $2 AND s.started_at < $3 AND NOT s.is_bot
    GROUP BY GROUPING SETS (%7$s)
    -- a read takes one pair of one day: its rows on a few adjacent pages, not one page each
    ORDER BY 2$q$, m.cols, m.exprs, g.pair, g.a, g.a_prefix, g.b, g.sets) USING p_project, ld.d0, ld.d1;
  INSERT INTO rollup_session_dim_pairs_days (project_id, bucket, hours)
  VALUES (p_project, ld.d0, (extract(epoch FROM ld.d1 - ld.d0) / 3600)::integer);
END
$body$;
