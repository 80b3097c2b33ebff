-- The events charts leave out (sql/020: bots, session_start, session_end) of one (project,
-- UTC hour), per event name and value of each events_rollup_dimensions column; then, when no
-- other hour of its local day is still logged, the day's rows (the sum of its hours') and
-- its entry in event_uncharted_days.
CREATE OR REPLACE FUNCTION tm_refresh_event_uncharted(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  g record;
  d0 timestamptz;
  d1 timestamptz;
BEGIN
  g := tm_event_groups('e.name', true);
  DELETE FROM event_uncharted_hourly WHERE project_id = p_project AND bucket = p_bucket;
  EXECUTE format($q$INSERT INTO event_uncharted_hourly (project_id, bucket, dimension, name, value, count)
    SELECT $1, $2, CASE %1$s END, e.name, CASE %2$s END, count(*)
    FROM (
      SELECT x.name COLLATE "C" AS name%3$s
      FROM events x
      WHERE x.project_id = $1 AND x.created_at >= $2 AND x.created_at < $2 + interval '1 hour'
        AND (x.is_bot OR x.name = ANY (ARRAY['session_start', 'session_end']::text[]))
    ) e
    GROUP BY GROUPING SETS (%4$s)$q$, g.dims, g.vals, g.cols, g.sets) USING p_project, p_bucket;

  SELECT l.d0, l.d1 INTO d0, d1 FROM tm_local_day(p_project, p_bucket) l;
  IF d0 IS NULL THEN
    RETURN;
  END IF;
  -- Refreshes of two hours of one day take turns (READ COMMITTED: each statement sees the
  -- other's commit, log deletions included).
  PERFORM pg_advisory_xact_lock(727274020, hashtext(p_project || '/' || d0::text));
  DELETE FROM event_uncharted_days WHERE project_id = p_project AND bucket = d0;
  DELETE FROM event_uncharted_daily WHERE project_id = p_project AND bucket = d0;
  -- Another hour of the day still logged: its refresh builds the day.
  IF EXISTS (SELECT 1 FROM rollup_invalidations i
             WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
    RETURN;
  END IF;
  INSERT INTO event_uncharted_daily (project_id, bucket, dimension, name, value, count)
  SELECT p_project, d0, h.dimension, h.name, h.value, sum(h.count)
  FROM event_uncharted_hourly h
  WHERE h.project_id = p_project AND h.bucket >= d0 AND h.bucket < d1
  GROUP BY h.dimension, h.name, h.value;
  INSERT INTO event_uncharted_days (project_id, bucket, hours)
  VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
END
$body$;
