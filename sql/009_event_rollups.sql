-- Hourly event-count rollups for the export API (internal/export/rollups.ts): exact counts
-- of events per (project, UTC hour of created_at), kept exactly like the session rollups of
-- 002_rollups.sql and registered in rollup_registry (007), so the refresh job and retention
-- keep them with no change:
--   TimescaleDB: real-time continuous aggregates over the events hypertable (refresh_fn NULL).
--   PostgreSQL:  plain tables recomputed per (project, hour) by tm_refresh_event_rollups()
--                (sql/functions/).
-- The worker logs the (project, hour) of every event it inserts or deletes in
-- rollup_invalidations in the same transaction (internal/store/writes.ts); reads take the
-- rollup rows of the hours NOT in that log and raw events for the hours in it.
--
--   events_hourly (project_id, bucket, name, is_bot, count): every event, bots and the
--     service's own session_start/session_end included (what /export/events counts).
--   events_<dimension>_hourly (project_id, bucket, name, value, count), one per column in
--     events_rollup_dimensions: events that charts count (no bots, no session_start /
--     session_end), per event name and value of the column (for breakdowns).
--
-- The names are not rollup_*: test/timescale-parity.test.ts equates every rollup_% relation
-- with the session dimensions of rollup_dimensions.

CREATE TABLE events_rollup_dimensions (
  dimension  text PRIMARY KEY,
  relation   text NOT NULL UNIQUE
);
INSERT INTO events_rollup_dimensions (dimension, relation)
SELECT d, 'events_' || d || '_hourly' FROM unnest(ARRAY[
  'referrer', 'referrer_name', 'referrer_type',
  'utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content',
  'country', 'region', 'city',
  'device', 'browser', 'browser_version', 'os', 'os_version', 'brand', 'model',
  'origin', 'path'
]) AS d;

DO $$
DECLARE
  charted constant text := $w$NOT is_bot AND name <> ALL (ARRAY['session_start', 'session_end']::text[])$w$;
  d record;
BEGIN
  IF tm_timescale() THEN
    CREATE MATERIALIZED VIEW events_hourly
      WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
      SELECT project_id, time_bucket('1 hour', created_at) AS bucket, name, is_bot, count(*) AS count
      FROM events GROUP BY 1, 2, 3, 4 WITH NO DATA;
    CREATE INDEX ON events_hourly (project_id, bucket);
    FOR d IN SELECT * FROM events_rollup_dimensions ORDER BY dimension LOOP
      EXECUTE format($v$CREATE MATERIALIZED VIEW %I
        WITH (timescaledb.continuous, timescaledb.materialized_only = false) AS
        SELECT project_id, time_bucket('1 hour', created_at) AS bucket, name, %I AS value, count(*) AS count
        FROM events WHERE %s GROUP BY 1, 2, 3, 4 WITH NO DATA$v$, d.relation, d.dimension, charted);
      EXECUTE format('CREATE INDEX ON %I (project_id, bucket)', d.relation);
    END LOOP;
  ELSE
    CREATE TABLE events_hourly (
      project_id text NOT NULL, bucket timestamptz NOT NULL, name text NOT NULL, is_bot boolean NOT NULL,
      count bigint NOT NULL,
      PRIMARY KEY (project_id, bucket, name, is_bot)
    );
    FOR d IN SELECT * FROM events_rollup_dimensions ORDER BY dimension LOOP
      EXECUTE format('CREATE TABLE %I (project_id text NOT NULL, bucket timestamptz NOT NULL, name text NOT NULL,
        value text NOT NULL, count bigint NOT NULL, PRIMARY KEY (project_id, bucket, name, value))', d.relation);
    END LOOP;
  END IF;
END $$;

INSERT INTO rollup_registry (relation, refresh_fn)
SELECT r.relation, CASE WHEN tm_timescale() THEN NULL ELSE 'tm_refresh_event_rollups' END
FROM (SELECT 'events_hourly' AS relation UNION ALL SELECT relation FROM events_rollup_dimensions) r;

-- Hours that already hold events (a database migrated with data) are in none of the new
-- relations yet: log them, so that reads count them raw until the refresh job has rolled
-- them up (and, on TimescaleDB, so that the refresh materialises them).
INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
