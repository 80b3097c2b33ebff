-- The events that the per-column event rollups leave out, so that the /export/events
-- totalCount of a page filtered on ONE rolled-up column can be summed from rollups
-- (internal/export/rollups.ts: layerRows, totalCountSql) instead of counting raw rows.
--
-- events_<column>_hourly (sql/009) and the event_counts_daily rows of a column (sql/014) hold
-- the events charts count: no bots, no session_start / session_end. The export lists every
-- event, so its count of e.g. `city is Paris` is those rows plus the bots and the service's
-- own session rows of Paris. These tables hold exactly that remainder, per column:
--
-- event_uncharted_hourly (project_id, bucket, dimension, name, value, count): per (project,
--   UTC hour of created_at, column of events_rollup_dimensions, event name, value of that
--   column) the number of events that are bots or named session_start / session_end.
--   So for a column C, an hour not in rollup_invalidations and any filter that tests only C
--   and the name: events_C_hourly rows + these rows of dimension C passing the filter = the
--   raw events of the hour passing it.
-- event_uncharted_daily (project_id, bucket, dimension, name, value, count): the same per
--   local day of the project's timezone (`bucket` = its first instant; only days that start
--   and end on whole UTC hours, as sql/014), the day's hourly rows summed.
-- event_uncharted_days (project_id, bucket, hours): the days whose daily rows are complete
--   (built while no other hour of the day was logged), as event_counts_days of sql/014. A
--   read takes a day's rows only when the day is listed here AND in event_counts_days with
--   the same hours, lies inside the counted span, and none of its hours is logged; every
--   other hour reads its hourly rows (or, logged, its raw events).
--
-- Plain tables kept by the service on every engine (on TimescaleDB too, as the cube of
-- sql/015: the refresh job refreshes the continuous aggregates of an hour range first, then
-- runs every refresh function per (project, hour) and removes the log entries in the same
-- transaction, so an hour read from rollups has both its charted rows and these exact).
-- Registered in rollup_registry with tm_refresh_event_uncharted(project, hour): the hour's
-- rows from one GROUPING SETS scan of the hour's uncharted events, then the local day's rows
-- from the day's hourly rows when no other hour of the day is still logged.
-- The names are not events_% / rollup_%: tests list those relations.

CREATE TABLE event_uncharted_hourly (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  dimension   text NOT NULL,
  name        text NOT NULL,
  value       text NOT NULL,
  count       bigint NOT NULL,
  -- reads probe (project, hour, dimension); the refresh deletes by (project, hour)
  PRIMARY KEY (project_id, bucket, dimension, name, value)
);

CREATE TABLE event_uncharted_daily (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  dimension   text NOT NULL,
  name        text NOT NULL,
  value       text NOT NULL,
  count       bigint NOT NULL,
  -- reads probe (project, day, dimension); the refresh deletes by (project, day)
  PRIMARY KEY (project_id, bucket, dimension, name, value)
);

CREATE TABLE event_uncharted_days (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  hours       integer NOT NULL CHECK (hours > 0),
  PRIMARY KEY (project_id, bucket)
);

-- Kept by tm_refresh_event_uncharted(project, hour) (sql/functions/).

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('event_uncharted_hourly', 'tm_refresh_event_uncharted'),
  ('event_uncharted_daily', 'tm_refresh_event_uncharted'),
  ('event_uncharted_days', 'tm_refresh_event_uncharted');

-- Hours that already hold events (a database migrated with data) have no rows here yet: log
-- them, so that reads count them raw until the refresh job has filled them in.
INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
