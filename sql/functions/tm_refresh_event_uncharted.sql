-- The events charts leave out (sql/020: bots, session_start, session_end) of one (project,
-- UTC hour), per event name and value of each events_rollup_dimensions column; then, when no
-- other hour of its local day is still logged, the day's rows (the sum of its hours') and
-- its entry in event_uncharted_days.
CREATE OR REPLACE FUNCTION tm_refresh_event_uncharted(p_project text, p_bucket timestamptz) RETURNS void
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
  g record;
  ld record;
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

  ld := tm_day_build(p_project, p_bucket, 727274020, ARRAY['event_uncharted_days', 'event_uncharted_daily']);
  IF NOT ld.build THEN
    RETURN;
  END IF;
  INSERT INTO event_uncharted_daily (project_id, bucket, dimension, name, value, count)
  SELECT p_project, ld.d0, h.dimension, h.name, h.value, sum(h.count)
  FROM event_uncharted_hourly h
  WHERE h.project_id = p_project AND h.bucket >= ld.d0 AND h.bucket < ld.d1
  GROUP BY h.dimension, h.name, h.value;
  INSERT INTO event_uncharted_days (project_id, bucket, hours)
  VALUES (p_project, ld.d0, (extract(epoch FROM ld.d1 - ld.d0) / 3600)::integer);
END
$body$;
