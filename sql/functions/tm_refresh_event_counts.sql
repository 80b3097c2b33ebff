-- Event counts per local day (sql/014) of the day holding one (project, UTC hour), when no
-- other hour of that day is still logged: per event name, overall and per value of each
-- events_rollup_dimensions column (charted events: no bots, no session_start/session_end);
-- and the day's entry in event_counts_days.
CREATE OR REPLACE FUNCTION tm_refresh_event_counts(p_project text, p_bucket timestamptz) RETURNS void
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
  ld := tm_day_build(p_project, p_bucket, 727274014, ARRAY['event_counts_days', 'event_counts_daily']);
  IF NOT ld.build THEN
    RETURN;
  END IF;
  g := tm_event_groups('e.name', true);
  EXECUTE format($q$INSERT INTO event_counts_daily (project_id, dimension, name, bucket, value, count)
    SELECT $1, CASE %1$s ELSE '' END, e.name, $2, CASE %2$s ELSE '' END, count(*)
    FROM (
      SELECT x.name COLLATE "C" AS name%3$s
      FROM events x
      WHERE x.project_id = $1 AND x.created_at >= $2 AND x.created_at < $3
        AND NOT x.is_bot AND x.name <> ALL (ARRAY['session_start', 'session_end']::text[])
    ) e
    GROUP BY GROUPING SETS ((e.name), %4$s)$q$, g.dims, g.vals, g.cols, g.sets) USING p_project, ld.d0, ld.d1;
  INSERT INTO event_counts_days (project_id, bucket, hours)
  VALUES (p_project, ld.d0, (extract(epoch FROM ld.d1 - ld.d0) / 3600)::integer);
END
$body$;
