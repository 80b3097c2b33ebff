-- Hourly rollups of sessions for the insights queries: one relation for the totals and one
-- per breakdown dimension, under the same names on both engines.
--   TimescaleDB: continuous aggregates (real-time) over the sessions hypertable, refreshed
--                by the service (PGlite-style engines run no background jobs).
--   PostgreSQL:  plain tables kept by the service with tm_refresh_rollup_bucket()
--                (sql/functions/, applied after the migrations).
-- Either way the worker logs every (project, hour) whose sessions it changed in
-- rollup_invalidations, in the same transaction; queries read rollups for the buckets
-- not in that log and raw sessions for the ones in it, so answers are always exact.

CREATE SEQUENCE rollup_version_seq;

CREATE TABLE rollup_invalidations (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  -- bumped on every change: the refresh deletes an entry only at the version it refreshed
  version     bigint NOT NULL DEFAULT nextval('rollup_version_seq'),
  PRIMARY KEY (project_id, bucket)
);

-- Distinct visitors are counted exactly from sessions; this index keeps it an index-only scan.
CREATE INDEX sessions_visitors_idx ON sessions (project_id, started_at) INCLUDE (profile_id, is_bot);

CREATE TABLE rollup_dimensions (
  dimension  text PRIMARY KEY,
  relation   text NOT NULL,
  parent     text
);
INSERT INTO rollup_dimensions (dimension, relation, parent) VALUES
  ('referrer', 'rollup_referrer_hourly', NULL),
  ('referrer_name', 'rollup_referrer_name_hourly', NULL),
  ('referrer_type', 'rollup_referrer_type_hourly', NULL),
  ('utm_source', 'rollup_utm_source_hourly', NULL),
  ('utm_medium', 'rollup_utm_medium_hourly', NULL),
  ('utm_campaign', 'rollup_utm_campaign_hourly', NULL),
  ('utm_term', 'rollup_utm_term_hourly', NULL),
  ('utm_content', 'rollup_utm_content_hourly', NULL),
  ('country', 'rollup_country_hourly', NULL),
  ('region', 'rollup_region_hourly', 'country'),
  ('city', 'rollup_city_hourly', 'country'),
  ('device', 'rollup_device_hourly', NULL),
  ('browser', 'rollup_browser_hourly', NULL),
  ('browser_version', 'rollup_browser_version_hourly', 'browser'),
  ('os', 'rollup_os_hourly', NULL),
  ('os_version', 'rollup_os_version_hourly', 'os'),
  ('brand', 'rollup_brand_hourly', NULL),
  ('model', 'rollup_model_hourly', NULL);

DO $$
DECLARE
  measures constant text := $m$
    count(*) AS sessions,
    sum(CASE WHEN is_bounce THEN 1 ELSE 0 END) AS bounces,
    sum(CASE WHEN duration_ms > 0 THEN 1 ELSE 0 END) AS timed_sessions,
    sum(CASE WHEN duration_ms > 0 THEN duration_ms ELSE 0 END) AS duration_ms,
    sum(screen_view_count) AS screen_views$m$;
  measure_cols constant text := $c$
    sessions bigint NOT NULL, bounces bigint NOT NULL, timed_sessions bigint NOT NULL,
    duration_ms numeric NOT NULL, screen_views bigint NOT NULL$c$;
  d record;
  keys text;
BEGIN
  IF tm_timescale() THEN
    EXECUTE format($v$CREATE MATERIALIZED VIEW rollup_sessions_hourly
      WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
      SELECT project_id, time_bucket('1 hour', started_at) AS bucket, %s
      FROM sessions WHERE NOT is_bot GROUP BY 1, 2 WITH NO DATA$v$, measures);
    FOR d IN SELECT * FROM rollup_dimensions LOOP
      keys := CASE WHEN d.parent IS NULL THEN format('%I AS value', d.dimension)
                   ELSE format('%I AS prefix, %I AS value', d.parent, d.dimension) END;
      EXECUTE format($v$CREATE MATERIALIZED VIEW %I
        WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
        SELECT project_id, time_bucket('1 hour', started_at) AS bucket, %s, %s
        FROM sessions WHERE NOT is_bot GROUP BY %s WITH NO DATA$v$,
        d.relation, keys, measures, CASE WHEN d.parent IS NULL THEN '1, 2, 3' ELSE '1, 2, 3, 4' END);
      EXECUTE format('CREATE INDEX ON %I (project_id, bucket)', d.relation);
    END LOOP;
    EXECUTE 'CREATE INDEX ON rollup_sessions_hourly (project_id, bucket)';
  ELSE
    EXECUTE format('CREATE TABLE rollup_sessions_hourly (project_id text NOT NULL, bucket timestamptz NOT NULL, %s, PRIMARY KEY (project_id, bucket))', measure_cols);
    FOR d IN SELECT * FROM rollup_dimensions LOOP
      IF d.parent IS NULL THEN
        EXECUTE format('CREATE TABLE %I (project_id text NOT NULL, bucket timestamptz NOT NULL, value text NOT NULL, %s, PRIMARY KEY (project_id, bucket, value))', d.relation, measure_cols);
      ELSE
        EXECUTE format('CREATE TABLE %I (project_id text NOT NULL, bucket timestamptz NOT NULL, prefix text NOT NULL, value text NOT NULL, %s, PRIMARY KEY (project_id, bucket, prefix, value))', d.relation, measure_cols);
      END IF;
    END LOOP;
  END IF;
END $$;
