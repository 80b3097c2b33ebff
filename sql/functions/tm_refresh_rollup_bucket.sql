-- Recomputes one (project, UTC hour) of rollup_sessions_hourly and of every per-dimension
-- rollup of rollup_dimensions (sql/002), generated at call time: a dimension added there
-- needs its table and nothing else. Kept by the service on PostgreSQL since sql/002 and on
-- TimescaleDB since sql/026 (continuous aggregates before).
CREATE OR REPLACE FUNCTION tm_refresh_rollup_bucket(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  hour constant text := $w$project_id = $1 AND started_at >= $2 AND started_at < $2 + interval '1 hour' AND NOT is_bot$w$;
  m record;
  d record;
BEGIN
  m := tm_session_measures('rollup_sessions_hourly', 'sessions');
  EXECUTE 'DELETE FROM rollup_sessions_hourly WHERE project_id = $1 AND bucket = $2' USING p_project, p_bucket;
  EXECUTE format($q$INSERT INTO rollup_sessions_hourly (project_id, bucket%s)
    SELECT project_id, date_trunc('hour', started_at, 'UTC')%s FROM sessions WHERE %s GROUP BY 1, 2$q$, m.cols, m.exprs, hour)
    USING p_project, p_bucket;
  FOR d IN SELECT dimension, relation, parent FROM rollup_dimensions ORDER BY dimension LOOP
    m := tm_session_measures(d.relation, 'sessions');
    EXECUTE format('DELETE FROM %I WHERE project_id = $1 AND bucket = $2', d.relation) USING p_project, p_bucket;
    IF d.parent IS NULL THEN
      EXECUTE format($q$INSERT INTO %I (project_id, bucket, value%s)
        SELECT project_id, date_trunc('hour', started_at, 'UTC'), %I%s FROM sessions WHERE %s GROUP BY 1, 2, 3$q$,
        d.relation, m.cols, d.dimension, m.exprs, hour) USING p_project, p_bucket;
    ELSE
      EXECUTE format($q$INSERT INTO %I (project_id, bucket, prefix, value%s)
        SELECT project_id, date_trunc('hour', started_at, 'UTC'), %I, %I%s FROM sessions WHERE %s GROUP BY 1, 2, 3, 4$q$,
        d.relation, m.cols, d.parent, d.dimension, m.exprs, hour) USING p_project, p_bucket;
    END IF;
  END LOOP;
END
$body$;
