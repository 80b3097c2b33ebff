-- The pair metrics (sql/018) of the local day holding one (project, UTC hour), when no other
-- hour of that day is still logged: per pair of cube dimensions and values, the sums of the
-- day's raw sessions and a HyperLogLog sketch of their profile ids (bots left out), one
-- hashed grouping set a pair (tm_cube_pair_grouping); and the day's entry in
-- rollup_session_pair_metrics_days. Called by tm_refresh_session_pair_metrics, which exists
-- only where the hll extension is (tm_setup_pair_metrics(), sql/018 and sql/035): the sketch
-- functions are named in dynamic SQL, so this file applies on any server.
CREATE OR REPLACE FUNCTION tm_session_pair_metrics_day(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql
SET work_mem = '64MB'
SET enable_sort = off
SET jit = off
AS $body$
DECLARE
  ld record;
  m record;
  g record;
BEGIN
  ld := tm_day_build(p_project, p_bucket, 727274018, ARRAY['rollup_session_pair_metrics_days', 'rollup_session_pair_metrics_daily']);
  IF NOT ld.build THEN
    RETURN;
  END IF;
  m := tm_session_measures('rollup_session_pair_metrics_daily', 's');
  g := tm_cube_pair_grouping('s', ARRAY[]::text[]);
  EXECUTE format($q$INSERT INTO rollup_session_pair_metrics_daily (project_id, pair, bucket, a, b%1$s, visitors)
    SELECT $1, %3$s, $2, %4$s, %5$s%2$s, hll_add_agg(hll_hash_text(s.profile_id), 14, 5, -1, 1)
    FROM sessions s
    WHERE s.project_id = $1 AND s.started_at >= $2 AND s.started_at < $3 AND NOT s.is_bot
    GROUP BY GROUPING SETS (%6$s)$q$, m.cols, m.exprs, g.pair, g.a, g.b, g.sets) USING p_project, ld.d0, ld.d1;
  INSERT INTO rollup_session_pair_metrics_days (project_id, bucket, hours)
  VALUES (p_project, ld.d0, (extract(epoch FROM ld.d1 - ld.d0) / 3600)::integer);
END
$body$;
