-- The event cube of sql/015_event_cube.sql per local DAY and full combination, for filtered
-- export reads that name three or more cube columns (e.g. events by os where country = DE and
-- device = mobile): no pair of sql/015 holds them, so they read every hour's
-- event_cube_hourly rows, ~720 index probes and all their rows for a 30-day chart.
-- (internal/export/cube.ts reads it.)
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
-- tm_refresh_event_cube() is replaced by the same function that also writes these rows. A
-- plain table on every engine (TimescaleDB too, as sql/015), registered in rollup_registry
-- (retention deletes its old days). This migration logs every hour that holds events: the
-- days already listed have no rows here yet, and a listed day with a logged hour is never
-- read, so an upgraded database answers exactly (hourly rows, raw events) until the refresh
-- job has rebuilt each day. (Building them here instead would race with a refresh already
-- running the old function, which lists days without these rows.)

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

DO $migration$
BEGIN
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION tm_refresh_event_cube(p_project text, p_bucket timestamptz) RETURNS void
    LANGUAGE plpgsql AS $body$
    DECLARE
      d0 timestamptz;
      d1 timestamptz;
    BEGIN
      DELETE FROM event_cube_hourly WHERE project_id = p_project AND bucket = p_bucket;
      INSERT INTO event_cube_hourly
      SELECT p_project, p_bucket, e.name, e.is_bot,
             e.referrer_name, e.referrer_type, e.utm_source, e.utm_medium, e.country, e.device, e.browser, e.os, e.brand,
             count(*)
      FROM events e
      WHERE e.project_id = p_project AND e.created_at >= p_bucket AND e.created_at < p_bucket + interval '1 hour'
      GROUP BY e.name, e.is_bot, e.referrer_name, e.referrer_type, e.utm_source, e.utm_medium, e.country, e.device, e.browser, e.os, e.brand;

      SELECT l.d0, l.d1 INTO d0, d1 FROM tm_local_day(p_project, p_bucket) l;
      IF d0 IS NULL THEN
        RETURN;
      END IF;
      -- Refreshes of two hours of one day take turns (READ COMMITTED: each statement sees
      -- the other's commit, log deletions included).
      PERFORM pg_advisory_xact_lock(727274015, hashtext(p_project || '/' || d0::text));
      DELETE FROM event_cube_days WHERE project_id = p_project AND bucket = d0;
      DELETE FROM event_cube_pairs_daily WHERE project_id = p_project AND bucket = d0;
      DELETE FROM event_cube_daily WHERE project_id = p_project AND bucket = d0;
      -- Another hour of the day still logged: its refresh builds the day.
      IF EXISTS (SELECT 1 FROM rollup_invalidations i
                 WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
        RETURN;
      END IF;
      INSERT INTO event_cube_daily
      SELECT p_project, d0, h.name, h.is_bot,
             h.referrer_name, h.referrer_type, h.utm_source, h.utm_medium, h.country, h.device, h.browser, h.os, h.brand,
             sum(h.count)
      FROM event_cube_hourly h
      WHERE h.project_id = p_project AND h.bucket >= d0 AND h.bucket < d1
      GROUP BY h.name, h.is_bot, h.referrer_name, h.referrer_type, h.utm_source, h.utm_medium, h.country, h.device, h.browser, h.os, h.brand;
      -- The pair rows from the day's rows (fewer than its hourly rows; the same sums).
      INSERT INTO event_cube_pairs_daily (project_id, pair, bucket, name, is_bot, a, b, count)
      SELECT p_project, x.pair, d0, h.name, h.is_bot, x.a, x.b, sum(h.count)
      FROM event_cube_daily h
      CROSS JOIN LATERAL (VALUES %1$s) AS x(pair, a, b)
      WHERE h.project_id = p_project AND h.bucket = d0
      GROUP BY x.pair, h.name, h.is_bot, x.a, x.b;
      INSERT INTO event_cube_days (project_id, bucket, hours)
      VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
    END
    $body$$f$, tm_cube_pair_values('h'));
END
$migration$;

INSERT INTO rollup_registry (relation, refresh_fn) VALUES ('event_cube_daily', 'tm_refresh_event_cube');

INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
