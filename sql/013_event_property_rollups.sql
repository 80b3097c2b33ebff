-- Hourly rollups of numeric event properties for /export/charts segments property_sum,
-- property_average, property_min and property_max (internal/export/property-rollups.ts),
-- kept by the service on every engine like sql/011_event_sketches.sql: plain tables,
-- registered in rollup_registry with the refresh function
-- tm_refresh_event_properties(project, hour), so the refresh job and retention keep them
-- with no change. The worker logs every changed (project, hour) in rollup_invalidations;
-- reads take the rows of the hours NOT in that log and raw events for the hours in it.
--
-- event_properties_hourly (project_id, key, dimension, bucket, name, value, count, sum, min,
-- max), per (project, UTC hour `bucket`, event name, top-level property key):
--   dimension ''        value '': every event of the name;
--   dimension <column>  (one of events_rollup_dimensions, sql/009): per value of that column;
--   count  events whose `properties ->> key` is numeric text (the raw path's `n`, which ranks
--          breakdown values), sum / min / max of those values as numeric (exact: a sum of
--          hourly sums is the raw sum, the same digits and display scale; an average is
--          sum / count in numeric, which is what PostgreSQL's avg(numeric) computes).
--   The events are the ones charts count (no bots, no session_start / session_end); a value
--   counts when its text (jsonb_each_text, the same text as `->>`: JSON numbers and strings)
--   matches NUMERIC_TEXT of internal/export/charts.ts exactly.
--   Only keys of at most 200 bytes (UTF-8; longer keys are never read from here: the read
--   side sends them raw), so every index entry is small.
-- event_properties_raw_hours (project_id, bucket, key): the hours in which a numeric text
--   of the key is longer than 1000 characters. Such a text may not fit PostgreSQL's numeric
--   (the raw path then fails the same way), so the hour keeps no rows for the key and reads
--   take its raw events, as for a logged hour; the refresh never fails on it.
--
-- Names are not events_% (internal/export/rollups.test.ts equates events_% registry rows
-- with the event-count rollups of sql/009) nor rollup_% (test/timescale-parity.test.ts).
--
-- Filled for one (project, hour) by one scan of the hour's events (jsonb_each_text of their
-- properties) grouped by GROUPING SETS (per name and key, without and with each column).
-- This migration logs every hour that holds events, so an upgraded database answers
-- exactly as before (raw) until the refresh job has filled the rollups in.

CREATE TABLE event_properties_hourly (
  project_id  text NOT NULL,
  key         text NOT NULL,
  dimension   text NOT NULL,
  bucket      timestamptz NOT NULL,
  name        text NOT NULL,
  value       text NOT NULL,
  count       bigint NOT NULL,
  sum         numeric NOT NULL,
  min         numeric NOT NULL,
  max         numeric NOT NULL
);
-- Reads: (project, key, dimension, hour range), every name and value of those hours. The
-- rows are unique by (project_id, key, dimension, bucket, name, value) by construction; no
-- unique index, as values (paths, referrers) may be longer than a B-tree entry allows.
CREATE INDEX event_properties_hourly_read_idx ON event_properties_hourly (project_id, key, dimension, bucket);
-- The refresh and retention delete by (project_id, bucket).
CREATE INDEX event_properties_hourly_bucket_idx ON event_properties_hourly (project_id, bucket);
CREATE TABLE event_properties_raw_hours (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  key         text NOT NULL,
  PRIMARY KEY (project_id, bucket, key)
);

-- Kept by tm_refresh_event_properties(project, hour) (sql/functions/).

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('event_properties_hourly', 'tm_refresh_event_properties'),
  ('event_properties_raw_hours', 'tm_refresh_event_properties');

-- Hours that already hold events (a database migrated with data) are in neither table
-- yet: log them, so that reads take them raw until the refresh job has rolled them up.
INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
