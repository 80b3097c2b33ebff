-- The session cube (sql/012) of one (project, UTC hour): the hour's rows per combination of
-- the nine cube dimensions, then, when no other hour of its local day is still logged, the
-- day's rows (the sum of its hourly rows), its pair rows (sql/016, tm_session_cube_pairs)
-- and its entry in rollup_session_cube_days.
CREATE OR REPLACE FUNCTION tm_refresh_session_cube(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  dims constant text := 'referrer_name, referrer_type, utm_source, utm_medium, country, device, browser, os, brand';
  m record;
  d0 timestamptz;
  d1 timestamptz;
BEGIN
  m := tm_session_measures('rollup_session_cube_hourly', 's');
  DELETE FROM rollup_session_cube_hourly WHERE project_id = p_project AND bucket = p_bucket;
  EXECUTE format($q$INSERT INTO rollup_session_cube_hourly (project_id, bucket, %1$s%2$s)
    SELECT $1, $2, %1$s%3$s
    FROM sessions s
    WHERE s.project_id = $1 AND s.started_at >= $2 AND s.started_at < $2 + interval '1 hour' AND NOT s.is_bot
    GROUP BY %1$s$q$, dims, m.cols, m.exprs) USING p_project, p_bucket;

  SELECT l.d0, l.d1 INTO d0, d1 FROM tm_local_day(p_project, p_bucket) l;
  IF d0 IS NULL THEN
    RETURN;
  END IF;
  -- Refreshes of two hours of one day take turns (READ COMMITTED: each statement sees the
  -- other's commit, log deletions included).
  PERFORM pg_advisory_xact_lock(727274012, hashtext(p_project || '/' || d0::text));
  DELETE FROM rollup_session_cube_days WHERE project_id = p_project AND bucket = d0;
  DELETE FROM rollup_session_cube_daily WHERE project_id = p_project AND bucket = d0;
  IF to_regclass('rollup_session_cube_pairs_daily') IS NOT NULL THEN
    DELETE FROM rollup_session_cube_pairs_daily WHERE project_id = p_project AND bucket = d0;
  END IF;
  -- Another hour of the day still logged: its refresh builds the day.
  IF EXISTS (SELECT 1 FROM rollup_invalidations i
             WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
    RETURN;
  END IF;
  m := tm_session_measures('rollup_session_cube_daily', 'h');
  EXECUTE format($q$INSERT INTO rollup_session_cube_daily (project_id, bucket, %1$s%2$s)
    SELECT $1, $2, %1$s%3$s
    FROM rollup_session_cube_hourly h
    WHERE h.project_id = $1 AND h.bucket >= $2 AND h.bucket < $3
    GROUP BY %1$s$q$, dims, m.cols, m.sums) USING p_project, d0, d1;
  IF to_regclass('rollup_session_cube_pairs_daily') IS NOT NULL THEN
    PERFORM tm_session_cube_pairs(p_project, d0);
  END IF;
  INSERT INTO rollup_session_cube_days (project_id, bucket, hours)
  VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
END
$body$;
