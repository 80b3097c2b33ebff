-- A cube of sessions over the low-cardinality session dimensions, for breakdowns filtered on
-- ANOTHER dimension (e.g. referrer_name where device = mobile), which the per-dimension
-- rollups of sql/002_rollups.sql cannot answer: each of those keeps one dimension per row.
-- (internal/insights/rollups.ts, CUBE_DIMENSIONS and cubeFor(), reads it.)
--
-- rollup_session_cube_hourly: per (project, UTC hour of the session start, and the
--   combination of referrer_name, referrer_type, utm_source, utm_medium, country, device,
--   browser, os, brand) the additive breakdown sums: sessions, bounces, timed sessions (duration
--   above 0) and their duration; bots left out, as in every rollup. Dimensions are '' when
--   unknown, as in `sessions`, so a filter compiled for `sessions` tests these rows the same.
-- rollup_session_cube_daily (same columns): per local day of the project's timezone (`bucket`
--   = its first instant, when it and the next local midnight are whole UTC hours), the sum of
--   the day's hourly rows: a 30-day breakdown reads ~30 days of combinations instead of ~720
--   hours of them.
-- rollup_session_cube_days (project_id, bucket, hours): the days whose daily rows are complete
--   (built from hourly rows of which none was logged). A read takes a day's rows only when the
--   day is listed here, lies inside the period, and none of its hours is in
--   rollup_invalidations; every other hour reads its hourly rows (or, logged, its raw
--   sessions). The interval read is the stored one, so a changed timezone costs speed, never
--   correctness.
--
-- Kept by the service on every engine (registered in rollup_registry, refresh function
-- tm_refresh_session_cube(project, hour)) like sql/011_event_sketches.sql: the refresh
-- recomputes the hour's rows, then its local day's when no other hour of that day is still
-- logged (a bulk refresh in hour order builds each day once, from its last hour). This
-- migration logs every hour that holds sessions, so an upgraded database answers exactly as
-- before until the refresh job has filled the cube in.

CREATE TABLE rollup_session_cube_hourly (
  project_id      text NOT NULL,
  bucket          timestamptz NOT NULL,
  referrer_name   text NOT NULL,
  referrer_type   text NOT NULL,
  utm_source      text NOT NULL,
  utm_medium      text NOT NULL,
  country         text NOT NULL,
  device          text NOT NULL,
  browser         text NOT NULL,
  os              text NOT NULL,
  brand           text NOT NULL,
  sessions        bigint NOT NULL,
  bounces         bigint NOT NULL,
  timed_sessions  bigint NOT NULL,
  duration_ms     numeric NOT NULL
);
-- reads and the refresh select by (project, bucket)
CREATE INDEX rollup_session_cube_hourly_bucket_idx ON rollup_session_cube_hourly (project_id, bucket);
CREATE TABLE rollup_session_cube_daily (LIKE rollup_session_cube_hourly);
CREATE INDEX rollup_session_cube_daily_bucket_idx ON rollup_session_cube_daily (project_id, bucket);
CREATE TABLE rollup_session_cube_days (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  hours       integer NOT NULL CHECK (hours > 0),
  PRIMARY KEY (project_id, bucket)
);

-- Kept by tm_refresh_session_cube(project, hour) (sql/functions/).

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('rollup_session_cube_hourly', 'tm_refresh_session_cube'),
  ('rollup_session_cube_daily', 'tm_refresh_session_cube'),
  ('rollup_session_cube_days', 'tm_refresh_session_cube');

INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
