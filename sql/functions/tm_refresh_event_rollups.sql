-- The hourly event counts (sql/009) of one (project, UTC hour): events_hourly (every event,
-- per name and bot flag) and one events_<column>_hourly per events_rollup_dimensions column
-- (charted events: no bots, no session_start/session_end; per name and value), from one read
-- of the hour's events (data-modifying CTEs all run). Kept by the service on PostgreSQL; on
-- TimescaleDB these are continuous aggregates and this function is not registered.
CREATE OR REPLACE FUNCTION tm_refresh_event_rollups(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  d record;
  cols text := '';
  inserts text := '';
BEGIN
  DELETE FROM events_hourly WHERE project_id = p_project AND bucket = p_bucket;
  FOR d IN SELECT dimension, relation FROM events_rollup_dimensions ORDER BY dimension LOOP
    EXECUTE format('DELETE FROM %I WHERE project_id = $1 AND bucket = $2', d.relation) USING p_project, p_bucket;
    cols := cols || format(', %I', d.dimension);
    inserts := inserts || format(',
      %I AS (INSERT INTO %I SELECT $1, $2, ev.name, ev.%I, count(*) FROM ev WHERE ev.charted GROUP BY 3, 4)',
      'i_' || d.dimension, d.relation, d.dimension);
  END LOOP;
  EXECUTE format($q$
    WITH ev AS MATERIALIZED (
      SELECT name, is_bot, (NOT is_bot AND name <> ALL (ARRAY['session_start', 'session_end']::text[])) AS charted%1$s
      FROM events
      WHERE project_id = $1 AND created_at >= $2 AND created_at < $2 + interval '1 hour'
    )%2$s
    INSERT INTO events_hourly SELECT $1, $2, ev.name, ev.is_bot, count(*) FROM ev GROUP BY 3, 4$q$, cols, inserts)
    USING p_project, p_bucket;
END
$body$;
