-- Per-day session sums per PAIR of cube dimensions, beside the session cube of
-- sql/012_rollup_session_cube.sql, for the most common filtered breakdown: one dimension
-- broken down, filtered on one other (e.g. referrer_name where device = mobile).
-- (internal/insights/rollups.ts, cubeBreakdownSql, reads it.)
--
-- rollup_session_cube_pairs_daily: per local day listed in rollup_session_cube_days (same
--   days, built and dropped together with rollup_session_cube_daily), per pair of the nine cube
--   dimensions (`pair` = 'referrer_name,device': the two names in sql/012's column order), the
--   sums of the day's sessions per (a, b) = (value of the first, value of the second). A
--   30-day breakdown naming two dimensions reads ~30 days of one pair's rows instead of ~30
--   days of every combination of nine, so its cost follows the two dimensions' values, not
--   the number of combinations (which grows with the data).
--
-- tm_refresh_session_cube() is replaced by the same function that also writes the pair rows
-- (summed from the day's combination rows), and takes the local day from tm_local_day()
-- (sql/015_event_cube.sql). Days already built get their pair rows here, from their
-- combination rows, so nothing needs a refresh.

CREATE TABLE rollup_session_cube_pairs_daily (
  project_id      text NOT NULL,
  pair            text NOT NULL,
  bucket          timestamptz NOT NULL,
  a               text NOT NULL,
  b               text NOT NULL,
  sessions        bigint NOT NULL,
  bounces         bigint NOT NULL,
  timed_sessions  bigint NOT NULL,
  duration_ms     numeric NOT NULL
);
-- reads probe (project, pair, day); the refresh and retention delete by (project, day)
CREATE INDEX rollup_session_cube_pairs_daily_pair_idx ON rollup_session_cube_pairs_daily (project_id, pair, bucket);
CREATE INDEX rollup_session_cube_pairs_daily_bucket_idx ON rollup_session_cube_pairs_daily (project_id, bucket);

DO $migration$
BEGIN
  -- The pair rows of one day, summed from its combination rows.
  EXECUTE format($f$
    CREATE FUNCTION tm_session_cube_pairs(p_project text, p_day timestamptz) RETURNS void
    LANGUAGE sql AS $body$
      INSERT INTO rollup_session_cube_pairs_daily
      SELECT p_project, x.pair, p_day, x.a, x.b, sum(h.sessions), sum(h.bounces), sum(h.timed_sessions), sum(h.duration_ms)
      FROM rollup_session_cube_daily h
      CROSS JOIN LATERAL (VALUES %1$s) AS x(pair, a, b)
      WHERE h.project_id = p_project AND h.bucket = p_day
      GROUP BY x.pair, x.a, x.b
    $body$$f$, tm_cube_pair_values('h'));
END
$migration$;

CREATE OR REPLACE FUNCTION tm_refresh_session_cube(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
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

  SELECT l.d0, l.d1 INTO d0, d1 FROM tm_local_day(p_project, p_bucket) l;
  IF d0 IS NULL THEN
    RETURN;
  END IF;
  -- Refreshes of two hours of one day take turns (READ COMMITTED: each statement sees the
  -- other's commit, log deletions included).
  PERFORM pg_advisory_xact_lock(727274012, hashtext(p_project || '/' || d0::text));
  DELETE FROM rollup_session_cube_days WHERE project_id = p_project AND bucket = d0;
  DELETE FROM rollup_session_cube_daily WHERE project_id = p_project AND bucket = d0;
  DELETE FROM rollup_session_cube_pairs_daily WHERE project_id = p_project AND bucket = d0;
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
  PERFORM tm_session_cube_pairs(p_project, d0);
  INSERT INTO rollup_session_cube_days (project_id, bucket, hours)
  VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
END
$body$;

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('rollup_session_cube_pairs_daily', 'tm_refresh_session_cube');

-- Days already built: their pair rows from their combination rows.
SELECT tm_session_cube_pairs(d.project_id, d.bucket) FROM rollup_session_cube_days d;
