-- Per-local-day event counts for /export/charts (internal/export/rollups.ts): the events that
-- charts count (no bots, no session_start / session_end), per (project, local day of the
-- project's timezone), so that a 30-day chart reads ~30 rows per value instead of the ~720
-- hourly rows of events_hourly / events_<column>_hourly (sql/009_event_rollups.sql).
--
-- event_counts_daily (project_id, dimension, name, bucket, value, count):
--   bucket     the first instant of a local day (only days that start and end on whole UTC
--              hours: not e.g. Asia/Kolkata; a zone PostgreSQL does not know counts as UTC);
--   dimension  ''       value '': the day's charted events of one name;
--              <column> (one of events_rollup_dimensions): the same per value of that column.
-- event_counts_days (project_id, bucket, hours): the local days whose rows are complete
--   (built while none of their other hours was logged), exactly like events_sketches_days
--   of sql/011_event_sketches.sql. A read takes a day's rows only when the day is listed
--   here, none of its hours is in rollup_invalidations, and it lies inside one chart bucket;
--   every other hour reads the hourly rollups (or, logged, its raw events). So a changed
--   timezone or a day not yet complete costs speed, never correctness.
--
-- Plain tables kept by the service on every engine (also on TimescaleDB, where the hourly
-- rollups are continuous aggregates refreshed separately: so a day is built from the raw
-- events of the day, with one GROUPING SETS scan, never from the hourly rollups). Registered
-- in rollup_registry with tm_refresh_event_counts(project, hour): for each logged hour it
-- rebuilds the hour's local day when no other hour of that day is still logged (a bulk
-- refresh in hour order builds each day once, from its last hour; the others only delete).
-- The names are not events_% / rollup_%: tests list those relations.

CREATE TABLE event_counts_daily (
  project_id  text NOT NULL,
  dimension   text NOT NULL,
  name        text NOT NULL,
  bucket      timestamptz NOT NULL,
  value       text NOT NULL,
  count       bigint NOT NULL,
  -- reads probe (project, dimension, bucket): every name and value of one day
  PRIMARY KEY (project_id, dimension, bucket, name, value)
);
-- the refresh and retention delete by (project_id, bucket)
CREATE INDEX event_counts_daily_bucket_idx ON event_counts_daily (project_id, bucket);

CREATE TABLE event_counts_days (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  hours       integer NOT NULL CHECK (hours > 0),
  PRIMARY KEY (project_id, bucket)
);

-- Kept by tm_refresh_event_counts(project, hour) (sql/functions/).

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('event_counts_daily', 'tm_refresh_event_counts'),
  ('event_counts_days', 'tm_refresh_event_counts');

-- Days that already hold events (a database migrated with data) are not listed yet: log
-- every hour with events, so that the refresh job builds their days (reads meanwhile take
-- the hourly rollups or raw events exactly as before).
INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
