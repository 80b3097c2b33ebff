-- Recomputes one (project, UTC hour) of rollup_sessions_hourly and of every per-dimension
-- rollup of rollup_dimensions (sql/002), generated at call time: a dimension added there
-- needs its table and nothing else. Kept by the service on PostgreSQL since sql/002 and on
-- TimescaleDB since sql/026 (continuous aggregates before).
-- Two statements whatever the number of dimensions: one deletes the hour's rows of every
-- table, one reads the hour's sessions once and inserts every table's rows from that read
-- (data-modifying CTEs all run). One statement per table and step took twice the time of an
-- hour of a few dozen sessions, most of it planning (bench/RESULTS.md, "Refresh functions").
CREATE OR REPLACE FUNCTION tm_refresh_rollup_bucket(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  m record;
  d record;
  n int := 0;
  deletes text := '';
  inserts text := '';
  cols text := '';
BEGIN
  FOR d IN SELECT dimension, relation, parent FROM rollup_dimensions ORDER BY dimension LOOP
    n := n + 1;
    m := tm_session_measures(d.relation, 's');
    deletes := deletes || format('d%s AS (DELETE FROM %I WHERE project_id = $1 AND bucket = $2), ', n, d.relation);
    cols := cols || format(', %I', d.dimension);
    inserts := inserts || format(', i%s AS (INSERT INTO %I (project_id, bucket%s, value%s) SELECT $1, $2%s, s.%I%s FROM s GROUP BY %s)',
      n, d.relation, CASE WHEN d.parent IS NULL THEN '' ELSE ', prefix' END, m.cols,
      CASE WHEN d.parent IS NULL THEN '' ELSE format(', s.%I', d.parent) END, d.dimension, m.exprs,
      CASE WHEN d.parent IS NULL THEN '3' ELSE '3, 4' END);
  END LOOP;
  EXECUTE format('WITH %s d AS (DELETE FROM rollup_sessions_hourly WHERE project_id = $1 AND bucket = $2) SELECT', deletes)
    USING p_project, p_bucket;
  m := tm_session_measures('rollup_sessions_hourly', 's');
  -- (the parents are dimensions too: cols lists every column a table groups by)
  EXECUTE format($q$WITH s AS MATERIALIZED (
      SELECT is_bounce, duration_ms, screen_view_count%s FROM sessions
      WHERE project_id = $1 AND started_at >= $2 AND started_at < $2 + interval '1 hour' AND NOT is_bot
    )%s
    INSERT INTO rollup_sessions_hourly (project_id, bucket%s) SELECT $1, $2%s FROM s HAVING count(*) > 0$q$,
    cols, inserts, m.cols, m.exprs) USING p_project, p_bucket;
END
$body$;
