-- The event cube of sql/015_event_cube.sql per local DAY and full combination, for filtered
-- export reads that name three or more cube columns (e.g. events by os where country = DE and
-- device = mobile): no pair of sql/015 holds them, so they read every hour's
-- event_cube_hourly rows, ~720 index probes and all their rows for a 30-day chart.
-- (The read planner's catalogue, internal/query/planner.ts, names it; internal/export/rollups.ts
-- reads it.)
--
-- event_cube_daily: per local day of the project's timezone (`bucket` = its first instant,
--   only days that start and end on whole UTC hours, as sql/015's pair rows), event name, bot
--   flag and combination of the nine cube columns, the number of events: the day's
--   event_cube_hourly rows summed. Combinations repeat from hour to hour, so a day holds far
--   fewer rows than its 24 hours (bench data, 10M events: ~4.4 times fewer).
--   A day's rows are complete exactly when its pair rows are: both are written by the same
--   refresh, in the same transaction, for the days listed in event_cube_days (read only when
--   none of their hours is in rollup_invalidations, as the pair rows).
--
-- tm_refresh_event_cube() (sql/functions/) writes these rows where this table is there. A
-- plain table on every engine (TimescaleDB too, as sql/015), registered in rollup_registry
-- (retention deletes its old days). This migration logs every hour that holds events: the
-- days already listed have no rows here yet, and a listed day with a logged hour is never
-- read, so an upgraded database answers exactly (hourly rows, raw events) until the refresh
-- job has rebuilt each day.

CREATE TABLE event_cube_daily (
  project_id     text NOT NULL,
  bucket         timestamptz NOT NULL,
  name           text NOT NULL,
  is_bot         boolean NOT NULL,
  referrer_name  text NOT NULL,
  referrer_type  text NOT NULL,
  utm_source     text NOT NULL,
  utm_medium     text NOT NULL,
  country        text NOT NULL,
  device         text NOT NULL,
  browser        text NOT NULL,
  os             text NOT NULL,
  brand          text NOT NULL,
  count          bigint NOT NULL
);
-- reads probe (project, day); the refresh and retention delete by (project, day)
CREATE INDEX event_cube_daily_bucket_idx ON event_cube_daily (project_id, bucket);


INSERT INTO rollup_registry (relation, refresh_fn) VALUES ('event_cube_daily', 'tm_refresh_event_cube');

INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
