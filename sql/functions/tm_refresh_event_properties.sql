-- The numeric event properties (sql/013) of one (project, UTC hour): count, sum, min and max
-- per property key and event name, overall and per value of each events_rollup_dimensions
-- column; keys with a value over 1000 characters are listed in event_properties_raw_hours
-- instead (reads take that hour raw).
CREATE OR REPLACE FUNCTION tm_refresh_event_properties(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  g record;
BEGIN
  g := tm_event_groups('e.name, e.key', false);
  DELETE FROM event_properties_hourly WHERE project_id = p_project AND bucket = p_bucket;
  DELETE FROM event_properties_raw_hours WHERE project_id = p_project AND bucket = p_bucket;
  EXECUTE format($q$
    WITH kv AS MATERIALIZED (
      SELECT x.name, p.key, p.value AS t%3$s
      FROM events x CROSS JOIN LATERAL jsonb_each_text(x.properties) p
      WHERE x.project_id = $1 AND x.created_at >= $2 AND x.created_at < $2 + interval '1 hour'
        AND NOT x.is_bot AND x.name <> ALL (ARRAY['session_start', 'session_end']::text[])
        AND jsonb_typeof(x.properties) = 'object'
        AND octet_length(p.key) <= 200
        -- NUMERIC_TEXT of internal/export/charts.ts (only ASCII blanks: PostgreSQL's \s
        -- also matches U+3000 and friends, which ::numeric refuses)
        AND p.value ~ '^[ \t\n\r\f\v]*[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]{1,3})?[ \t\n\r\f\v]*$'
    ),
    long AS MATERIALIZED (
      SELECT DISTINCT kv.key FROM kv WHERE length(kv.t) > 1000
    ),
    marked AS (
      INSERT INTO event_properties_raw_hours (project_id, bucket, key)
      SELECT $1, $2, long.key FROM long
    )
    INSERT INTO event_properties_hourly (project_id, key, dimension, bucket, name, value, count, sum, min, max)
    SELECT $1, e.key, CASE %1$s ELSE '' END, $2, e.name, CASE %2$s ELSE '' END,
           count(*), sum(e.v), min(e.v), max(e.v)
    FROM (
      SELECT kv.*, CASE WHEN length(kv.t) <= 1000 THEN kv.t::numeric END AS v FROM kv
      WHERE NOT EXISTS (SELECT 1 FROM long WHERE long.key = kv.key)
    ) e
    GROUP BY GROUPING SETS ((e.name, e.key), %4$s)$q$, g.dims, g.vals, g.cols, g.sets) USING p_project, p_bucket;
END
$body$;
