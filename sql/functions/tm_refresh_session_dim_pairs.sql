-- The dimension pairs (sql/019) of the local day holding one (project, UTC hour), when no
-- other hour of that day is still logged: per (wide, cube) pair of dimensions and values, the
-- sums of the day's raw sessions; and the day's entry in rollup_session_dim_pairs_days.
CREATE OR REPLACE FUNCTION tm_refresh_session_dim_pairs(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql
-- the day's groups (tens of thousands at 50k sessions a day) hashed in memory, not spilled
SET work_mem = '64MB'
AS $body$
DECLARE
  m record;
  d0 timestamptz;
  d1 timestamptz;
BEGIN
  SELECT l.d0, l.d1 INTO d0, d1 FROM tm_local_day(p_project, p_bucket) l;
  IF d0 IS NULL THEN
    RETURN;
  END IF;
  -- Refreshes of two hours of one day take turns (READ COMMITTED: each statement sees the
  -- other's commit, log deletions included).
  PERFORM pg_advisory_xact_lock(727274019, hashtext(p_project || '/' || d0::text));
  DELETE FROM rollup_session_dim_pairs_days WHERE project_id = p_project AND bucket = d0;
  DELETE FROM rollup_session_dim_pairs_daily WHERE project_id = p_project AND bucket = d0;
  -- Another hour of the day still logged: its refresh builds the day.
  IF EXISTS (SELECT 1 FROM rollup_invalidations i
             WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
    RETURN;
  END IF;
  m := tm_session_measures('rollup_session_dim_pairs_daily', 's');
  EXECUTE format($q$INSERT INTO rollup_session_dim_pairs_daily (project_id, pair, bucket, a, a_prefix, b%1$s)
    SELECT $1, x.pair, $2, x.a, x.a_prefix, x.b%2$s
    FROM sessions s
    CROSS JOIN LATERAL (VALUES %3$s) AS x(pair, a, a_prefix, b)
    WHERE s.project_id = $1 AND s.started_at >= $2 AND s.started_at < $3 AND NOT s.is_bot
    GROUP BY x.pair, x.a, x.a_prefix, x.b
    -- a read takes one pair of one day: its rows on a few adjacent pages, not one page each
    ORDER BY x.pair$q$, m.cols, m.exprs, tm_dim_pair_values('s')) USING p_project, d0, d1;
  INSERT INTO rollup_session_dim_pairs_days (project_id, bucket, hours)
  VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
END
$body$;
