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

CREATE FUNCTION tm_refresh_session_cube(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  tz text;
  d0 timestamptz;
  d1 timestamptz;
BEGIN
  DELETE FROM rollup_session_cube_hourly WHERE project_id = p_project AND bucket = p_bucket;
  INSERT INTO rollup_session_cube_hourly
  SELECT p_project, p_bucket,
         s.referrer_name, s.referrer_type, s.utm_source, s.utm_medium, s.country, s.device, s.browser, s.os, s.brand,
         count(*),
         count(*) FILTER (WHERE s.is_bounce),
         count(*) FILTER (WHERE s.duration_ms > 0),
         coalesce(sum(s.duration_ms) FILTER (WHERE s.duration_ms > 0), 0)
  FROM sessions s
  WHERE s.project_id = p_project AND s.started_at >= p_bucket AND s.started_at < p_bucket + interval '1 hour'
    AND NOT s.is_bot
  GROUP BY s.referrer_name, s.referrer_type, s.utm_source, s.utm_medium, s.country, s.device, s.browser, s.os, s.brand;

  -- The local day (project timezone) holding the hour, as in sql/011_event_sketches.sql: a
  -- zone PostgreSQL does not know counts as UTC; days that do not start and end on whole UTC
  -- hours (e.g. Asia/Kolkata) get no daily rows.
  SELECT p.timezone INTO tz FROM projects p WHERE p.id = p_project;
  IF tz IS NULL THEN
    RETURN;
  END IF;
  BEGIN
    d0 := date_trunc('day', p_bucket AT TIME ZONE tz) AT TIME ZONE tz;
    d1 := (date_trunc('day', p_bucket AT TIME ZONE tz) + interval '1 day') AT TIME ZONE tz;
  EXCEPTION WHEN invalid_parameter_value THEN
    d0 := date_trunc('day', p_bucket, 'UTC');
    d1 := d0 + interval '1 day';
  END;
  IF NOT (p_bucket >= d0 AND p_bucket < d1) OR extract(epoch FROM d0) % 3600 <> 0 OR extract(epoch FROM d1) % 3600 <> 0 THEN
    RETURN;
  END IF;
  -- Refreshes of two hours of one day take turns (READ COMMITTED: each statement sees the
  -- other's commit, log deletions included).
  PERFORM pg_advisory_xact_lock(727274012, hashtext(p_project || '/' || d0::text));
  DELETE FROM rollup_session_cube_days WHERE project_id = p_project AND bucket = d0;
  DELETE FROM rollup_session_cube_daily WHERE project_id = p_project AND bucket = d0;
  -- Another hour of the day still logged: its refresh builds the day.
  IF EXISTS (SELECT 1 FROM rollup_invalidations i
             WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
    RETURN;
  END IF;
  INSERT INTO rollup_session_cube_daily
  SELECT p_project, d0,
         h.referrer_name, h.referrer_type, h.utm_source, h.utm_medium, h.country, h.device, h.browser, h.os, h.brand,
         sum(h.sessions), sum(h.bounces), sum(h.timed_sessions), sum(h.duration_ms)
  FROM rollup_session_cube_hourly h
  WHERE h.project_id = p_project AND h.bucket >= d0 AND h.bucket < d1
  GROUP BY h.referrer_name, h.referrer_type, h.utm_source, h.utm_medium, h.country, h.device, h.browser, h.os, h.brand;
  INSERT INTO rollup_session_cube_days (project_id, bucket, hours)
  VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
END
$body$;

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('rollup_session_cube_hourly', 'tm_refresh_session_cube'),
  ('rollup_session_cube_daily', 'tm_refresh_session_cube'),
  ('rollup_session_cube_days', 'tm_refresh_session_cube');

INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
