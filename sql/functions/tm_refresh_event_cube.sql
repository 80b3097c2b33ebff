-- The event cube (sql/015) of one (project, UTC hour): the hour's event counts per name, bot
-- flag and combination of the nine cube columns; then, when no other hour of its local day is
-- still logged, the day's full-combination rows (event_cube_daily, sql/017, where it is
-- there), its pair rows (summed from the day's rows, fewer than its hours' and the same sums)
-- and its entry in event_cube_days.
CREATE OR REPLACE FUNCTION tm_refresh_event_cube(p_project text, p_bucket timestamptz) RETURNS void
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
  daily constant boolean := to_regclass('event_cube_daily') IS NOT NULL;
  ld record;
  g record;
BEGIN
  DELETE FROM event_cube_hourly WHERE project_id = p_project AND bucket = p_bucket;
  INSERT INTO event_cube_hourly
  SELECT p_project, p_bucket, e.name, e.is_bot,
         e.referrer_name, e.referrer_type, e.utm_source, e.utm_medium, e.country, e.device, e.browser, e.os, e.brand,
         count(*)
  FROM events e
  WHERE e.project_id = p_project AND e.created_at >= p_bucket AND e.created_at < p_bucket + interval '1 hour'
  GROUP BY e.name, e.is_bot, e.referrer_name, e.referrer_type, e.utm_source, e.utm_medium, e.country, e.device, e.browser, e.os, e.brand;

  ld := tm_day_build(p_project, p_bucket, 727274015, ARRAY['event_cube_days', 'event_cube_pairs_daily', 'event_cube_daily']);
  IF NOT ld.build THEN
    RETURN;
  END IF;
  IF daily THEN
    INSERT INTO event_cube_daily
    SELECT p_project, ld.d0, h.name, h.is_bot,
           h.referrer_name, h.referrer_type, h.utm_source, h.utm_medium, h.country, h.device, h.browser, h.os, h.brand,
           sum(h.count)
    FROM event_cube_hourly h
    WHERE h.project_id = p_project AND h.bucket >= ld.d0 AND h.bucket < ld.d1
    GROUP BY h.name, h.is_bot, h.referrer_name, h.referrer_type, h.utm_source, h.utm_medium, h.country, h.device, h.browser, h.os, h.brand;
  END IF;
  g := tm_cube_pair_grouping('h', ARRAY['name', 'is_bot']);
  EXECUTE format($q$INSERT INTO event_cube_pairs_daily (project_id, pair, bucket, name, is_bot, a, b, count)
    SELECT $1, %2$s, $2, h.name, h.is_bot, %3$s, %4$s, sum(h.count)
    FROM %1$s h
    WHERE h.project_id = $1 AND h.bucket >= $2 AND h.bucket < $3
    GROUP BY GROUPING SETS (%5$s)$q$,
    CASE WHEN daily THEN 'event_cube_daily' ELSE 'event_cube_hourly' END, g.pair, g.a, g.b, g.sets) USING p_project, ld.d0, ld.d1;
  INSERT INTO event_cube_days (project_id, bucket, hours)
  VALUES (p_project, ld.d0, (extract(epoch FROM ld.d1 - ld.d0) / 3600)::integer);
END
$body$;
