-- A cube of events over the low-cardinality columns, for /export/charts and the /export/events
-- totalCount when they are FILTERED (e.g. events per country where device = mobile), which the
-- per-column event rollups of sql/009 and sql/014 cannot answer: each of those keeps one
-- column per row. (The read planner's catalogue, internal/query/planner.ts, names it;
-- internal/export/rollups.ts reads it.)
--
-- event_cube_hourly: per (project, UTC hour of created_at, event name, bot flag and the
--   combination of referrer_name, referrer_type, utm_source, utm_medium, country, device,
--   browser, os, brand) the number of events. Every event is counted, bots and the service's
--   session_start / session_end included (the export lists them; charts leave them out by
--   the name and is_bot columns). The columns carry the events' own names and values ('' when
--   unknown), so a filter compiled for `events` tests these rows the same.
-- event_cube_pairs_daily: per local day of the project's timezone (`bucket` = its first
--   instant, when it and the next local midnight are whole UTC hours), per PAIR of those
--   columns (`pair` = 'country,device': the two names in the order above), event name and bot
--   flag, the number of events per (a, b) = (value of the first, value of the second). A
--   30-day chart filtered on one column and broken down by another reads ~30 days of one
--   pair's rows instead of ~720 hours of every combination: far fewer rows than the whole
--   cube per day (the combinations of nine columns multiply; those of two do not).
-- event_cube_days (project_id, bucket, hours): the days whose pair rows are complete (built
--   from hourly rows of which none was logged), as rollup_session_cube_days of
--   sql/012_rollup_session_cube.sql. A read takes a day's rows only when the day is listed
--   here, lies inside the period (and inside one chart bucket), and none of its hours is in
--   rollup_invalidations; every other hour reads its hourly rows (or, logged, its raw
--   events). The interval read is the stored one, so a changed timezone costs speed, never
--   correctness.
--
-- Plain tables kept by the service on every engine (registered in rollup_registry, refresh
-- function tm_refresh_event_cube(project, hour)): the refresh recomputes the hour's rows from
-- its events, then its local day's pair rows from the day's hourly rows when no other hour of
-- the day is still logged (a bulk refresh in hour order builds each day once, from its last
-- hour). This migration logs every hour that holds events, so an upgraded database answers
-- exactly as before until the refresh job has filled the cube in.

CREATE TABLE event_cube_hourly (
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
-- reads and the refresh select by (project, bucket)
CREATE INDEX event_cube_hourly_bucket_idx ON event_cube_hourly (project_id, bucket);

CREATE TABLE event_cube_pairs_daily (
  project_id  text NOT NULL,
  pair        text NOT NULL,
  bucket      timestamptz NOT NULL,
  name        text NOT NULL,
  is_bot      boolean NOT NULL,
  a           text NOT NULL,
  b           text NOT NULL,
  count       bigint NOT NULL
);
-- reads probe (project, pair, day); the refresh and retention delete by (project, day)
CREATE INDEX event_cube_pairs_daily_pair_idx ON event_cube_pairs_daily (project_id, pair, bucket);
CREATE INDEX event_cube_pairs_daily_bucket_idx ON event_cube_pairs_daily (project_id, bucket);

CREATE TABLE event_cube_days (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  hours       integer NOT NULL CHECK (hours > 0),
  PRIMARY KEY (project_id, bucket)
);

-- tm_local_day(project, hour): the local day holding a UTC hour (sql/functions/).

-- tm_cube_pair_values(alias): the VALUES rows of the pairs (sql/functions/).

-- Kept by tm_refresh_event_cube(project, hour) (sql/functions/).

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('event_cube_hourly', 'tm_refresh_event_cube'),
  ('event_cube_pairs_daily', 'tm_refresh_event_cube'),
  ('event_cube_days', 'tm_refresh_event_cube');

INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
