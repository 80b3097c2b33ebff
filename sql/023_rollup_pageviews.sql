-- `pageviews` on page and breakdown rows (semantics.md, "OpenPanel fidelity"): views of the
-- page for a pages row, screen views of the row's sessions (sessions.screen_view_count
-- summed) for a breakdown row. Every read path must give the same number as the raw one, so
-- the rollup families read by pages and breakdowns that did not keep a view count get one:
--   rollup_pages_hourly, rollup_pages_daily (sql/008):   views: screen_view events counted
--     as the pages rows count them (the reference query's views: of non-bot sessions started
--     in the hour, at or after the session's start);
--   rollup_session_cube_hourly, _daily (sql/012), rollup_session_cube_pairs_daily (sql/016),
--   rollup_session_dim_pairs_daily (sql/019):   screen_views: sum of screen_view_count.
-- The per-dimension hourly rollups (sql/002, continuous aggregates on TimescaleDB) and the
-- pair metrics (sql/018) already keep screen_views. The families above are plain tables on
-- both engines, so adding a column is enough.
--
-- Their refresh functions are replaced (latest definitions: tm_refresh_pages_bucket of
-- sql/008, tm_refresh_session_cube and tm_session_cube_pairs of sql/016,
-- tm_refresh_session_dim_pairs of sql/019) by the same ones that also fill the new column.
--
-- Existing rows get the new column filled in place, here, by set-based UPDATEs that compute
-- it from the source rows as the new refresh functions do (same sessions, same groups, same
-- days), so an upgraded database keeps reading its rollups: nothing is logged in
-- rollup_invalidations (logging every hour with sessions would send every read of every
-- rollup family to the raw rows until the refresh job had recomputed all history). Hours
-- already logged stay logged as they are: reads take them raw and the refresh recomputes
-- them. A row whose group has no view keeps the default 0, which is what the refresh writes.
--   pages hourly: screen_view events of the non-bot sessions started in the hour, at or after
--     the session's start and at most the latest last_event_at of those sessions (the
--     refresh's bound), per (origin, path);
--   pages daily: the sum of the UTC day's hourly rows (after those are filled);
--   session cube hourly: sum(screen_view_count) of the hour's non-bot sessions per combination;
--   session cube daily: the sum of the hourly rows of the day as listed in
--     rollup_session_cube_days (bucket, hours: the interval the day's rows were built from
--     and are read for); pair rows: summed from the daily rows (tm_session_cube_pairs);
--   dimension pairs: sum(screen_view_count) of the non-bot sessions started in the day as
--     listed in rollup_session_dim_pairs_days, per (pair, a, a_prefix, b), one day at a time
--     as the refresh does (81 pair rows per session).
-- Daily rows of a day not listed (none are, the refresh writes both together) are never read
-- and keep 0 until rebuilt. Every key column of these tables is NOT NULL (sessions' and
-- events' dimensions, origin and path are NOT NULL DEFAULT ''), so plain equality joins them
-- exactly. Rows of logged hours may be behind their sessions; theirs is filled from the
-- current sessions too, and never read until the refresh rewrites them.

ALTER TABLE rollup_pages_hourly ADD COLUMN views bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_pages_daily ADD COLUMN views bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_session_cube_hourly ADD COLUMN screen_views bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_session_cube_daily ADD COLUMN screen_views bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_session_cube_pairs_daily ADD COLUMN screen_views bigint NOT NULL DEFAULT 0;
ALTER TABLE rollup_session_dim_pairs_daily ADD COLUMN screen_views bigint NOT NULL DEFAULT 0;

-- sql/008's function, with views.
CREATE OR REPLACE FUNCTION tm_refresh_pages_bucket(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
  DELETE FROM rollup_pages_hourly WHERE project_id = p_project AND bucket = p_bucket;
  INSERT INTO rollup_pages_hourly (project_id, bucket, origin, path, sessions, entries, bounces, timed_views, duration_ms, views, title, title_at, title_id)
  WITH s AS MATERIALIZED (
    SELECT s.id, s.started_at, s.last_event_at, s.is_bounce, s.entry_origin, s.entry_path
    FROM sessions s
    WHERE s.project_id = p_project AND s.started_at >= p_bucket AND s.started_at < p_bucket + interval '1 hour' AND NOT s.is_bot
  ),
  v AS MATERIALIZED (
    SELECT e.id, e.session_id, e.origin, e.path, e.title, e.created_at, e.duration_ms, s.is_bounce,
           (s.entry_origin = e.origin AND s.entry_path = e.path) AS entered
    FROM s
    JOIN events e ON e.session_id = s.id
    WHERE e.project_id = p_project
      AND e.name = 'screen_view'
      AND e.created_at >= p_bucket
      -- a session's events lie in [started_at, last_event_at]; bounds the index range scan
      AND e.created_at <= (SELECT max(s2.last_event_at) FROM s s2)
      AND e.created_at >= s.started_at
  ),
  titles AS (
    SELECT DISTINCT ON (v.origin, v.path) v.origin, v.path, v.title, v.created_at, v.id
    FROM v WHERE v.title <> ''
    ORDER BY v.origin, v.path, v.created_at DESC, v.id DESC
  ),
  agg AS (
    SELECT v.origin, v.path,
           count(DISTINCT v.session_id) AS sessions,
           count(DISTINCT v.session_id) FILTER (WHERE v.entered) AS entries,
           count(DISTINCT v.session_id) FILTER (WHERE v.entered AND v.is_bounce) AS bounces,
           count(v.duration_ms) AS timed_views,
           coalesce(sum(v.duration_ms), 0) AS duration_ms,
           count(*) AS views
    FROM v
    GROUP BY v.origin, v.path
  )
  SELECT p_project, p_bucket, a.origin, a.path, a.sessions, a.entries, a.bounces, a.timed_views, a.duration_ms, a.views,
         coalesce(t.title, ''), t.created_at, t.id
  FROM agg a LEFT JOIN titles t ON t.origin = a.origin AND t.path = a.path;

  PERFORM pg_advisory_xact_lock(727274008, hashtext(p_project || '/' || date_trunc('day', p_bucket, 'UTC')::text));
  DELETE FROM rollup_pages_daily WHERE project_id = p_project AND bucket = date_trunc('day', p_bucket, 'UTC');
  INSERT INTO rollup_pages_daily (project_id, bucket, origin, path, sessions, entries, bounces, timed_views, duration_ms, views, title, title_at, title_id)
  WITH h AS MATERIALIZED (
    SELECT * FROM rollup_pages_hourly
    WHERE project_id = p_project
      AND bucket >= date_trunc('day', p_bucket, 'UTC') AND bucket < date_trunc('day', p_bucket, 'UTC') + interval '1 day'
  ),
  titles AS (
    SELECT DISTINCT ON (h.origin, h.path) h.origin, h.path, h.title, h.title_at, h.title_id
    FROM h WHERE h.title <> ''
    ORDER BY h.origin, h.path, h.title_at DESC, h.title_id DESC
  ),
  agg AS (
    SELECT h.origin, h.path, sum(h.sessions) AS sessions, sum(h.entries) AS entries, sum(h.bounces) AS bounces,
           sum(h.timed_views) AS timed_views, sum(h.duration_ms) AS duration_ms, sum(h.views) AS views
    FROM h GROUP BY h.origin, h.path
  )
  SELECT p_project, date_trunc('day', p_bucket, 'UTC'), a.origin, a.path, a.sessions, a.entries, a.bounces, a.timed_views,
         a.duration_ms, a.views, coalesce(t.title, ''), t.title_at, t.title_id
  FROM agg a LEFT JOIN titles t ON t.origin = a.origin AND t.path = a.path;
END
$body$;

-- sql/016's pair rows of one day, with screen_views.
DO $migration$
BEGIN
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION tm_session_cube_pairs(p_project text, p_day timestamptz) RETURNS void
    LANGUAGE sql AS $body$
      INSERT INTO rollup_session_cube_pairs_daily (project_id, pair, bucket, a, b, sessions, bounces, timed_sessions, duration_ms, screen_views)
      SELECT p_project, x.pair, p_day, x.a, x.b, sum(h.sessions), sum(h.bounces), sum(h.timed_sessions), sum(h.duration_ms),
             sum(h.screen_views)
      FROM rollup_session_cube_daily h
      CROSS JOIN LATERAL (VALUES %1$s) AS x(pair, a, b)
      WHERE h.project_id = p_project AND h.bucket = p_day
      GROUP BY x.pair, x.a, x.b
    $body$$f$, tm_cube_pair_values('h'));
END
$migration$;

-- sql/016's function, with screen_views.
CREATE OR REPLACE FUNCTION tm_refresh_session_cube(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  d0 timestamptz;
  d1 timestamptz;
BEGIN
  DELETE FROM rollup_session_cube_hourly WHERE project_id = p_project AND bucket = p_bucket;
  INSERT INTO rollup_session_cube_hourly (project_id, bucket,
         referrer_name, referrer_type, utm_source, utm_medium, country, device, browser, os, brand,
         sessions, bounces, timed_sessions, duration_ms, screen_views)
  SELECT p_project, p_bucket,
         s.referrer_name, s.referrer_type, s.utm_source, s.utm_medium, s.country, s.device, s.browser, s.os, s.brand,
         count(*),
         count(*) FILTER (WHERE s.is_bounce),
         count(*) FILTER (WHERE s.duration_ms > 0),
         coalesce(sum(s.duration_ms) FILTER (WHERE s.duration_ms > 0), 0),
         coalesce(sum(s.screen_view_count), 0)
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
  INSERT INTO rollup_session_cube_daily (project_id, bucket,
         referrer_name, referrer_type, utm_source, utm_medium, country, device, browser, os, brand,
         sessions, bounces, timed_sessions, duration_ms, screen_views)
  SELECT p_project, d0,
         h.referrer_name, h.referrer_type, h.utm_source, h.utm_medium, h.country, h.device, h.browser, h.os, h.brand,
         sum(h.sessions), sum(h.bounces), sum(h.timed_sessions), sum(h.duration_ms), sum(h.screen_views)
  FROM rollup_session_cube_hourly h
  WHERE h.project_id = p_project AND h.bucket >= d0 AND h.bucket < d1
  GROUP BY h.referrer_name, h.referrer_type, h.utm_source, h.utm_medium, h.country, h.device, h.browser, h.os, h.brand;
  PERFORM tm_session_cube_pairs(p_project, d0);
  INSERT INTO rollup_session_cube_days (project_id, bucket, hours)
  VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
END
$body$;

-- sql/019's function, with screen_views.
DO $migration$
BEGIN
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION tm_refresh_session_dim_pairs(p_project text, p_bucket timestamptz) RETURNS void
    LANGUAGE plpgsql
    -- the day's groups (tens of thousands at 50k sessions a day) hashed in memory, not spilled
    SET work_mem = '64MB'
    AS $body$
    DECLARE
      d0 timestamptz;
      d1 timestamptz;
    BEGIN
      SELECT l.d0, l.d1 INTO d0, d1 FROM tm_local_day(p_project, p_bucket) l;
      IF d0 IS NULL THEN
        RETURN;
      END IF;
      -- Refreshes of two hours of one day take turns (READ COMMITTED: each statement sees
      -- the other's commit, log deletions included).
      PERFORM pg_advisory_xact_lock(727274019, hashtext(p_project || '/' || d0::text));
      DELETE FROM rollup_session_dim_pairs_days WHERE project_id = p_project AND bucket = d0;
      DELETE FROM rollup_session_dim_pairs_daily WHERE project_id = p_project AND bucket = d0;
      -- Another hour of the day still logged: its refresh builds the day.
      IF EXISTS (SELECT 1 FROM rollup_invalidations i
                 WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
        RETURN;
      END IF;
      INSERT INTO rollup_session_dim_pairs_daily (project_id, pair, bucket, a, a_prefix, b,
             sessions, bounces, timed_sessions, duration_ms, screen_views)
      SELECT p_project, x.pair, d0, x.a, x.a_prefix, x.b,
             count(*),
             count(*) FILTER (WHERE s.is_bounce),
             count(*) FILTER (WHERE s.duration_ms > 0),
             coalesce(sum(s.duration_ms) FILTER (WHERE s.duration_ms > 0), 0),
             coalesce(sum(s.screen_view_count), 0)
      FROM sessions s
      CROSS JOIN LATERAL (VALUES %1$s) AS x(pair, a, a_prefix, b)
      WHERE s.project_id = p_project AND s.started_at >= d0 AND s.started_at < d1 AND NOT s.is_bot
      GROUP BY x.pair, x.a, x.a_prefix, x.b
      -- a read takes one pair of one day: its rows on a few adjacent pages, not one page each
      ORDER BY x.pair;
      INSERT INTO rollup_session_dim_pairs_days (project_id, bucket, hours)
      VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
    END
    $body$$f$, tm_dim_pair_values('s'));
END
$migration$;

-- Upgrades: the new columns of existing rows, filled in place (see above). Only groups with a
-- view are updated; every other row keeps the default 0.
SET LOCAL work_mem = '64MB';

UPDATE rollup_pages_hourly r SET views = v.views
FROM (
  SELECT s.project_id, s.bucket, e.origin, e.path, count(*) AS views
  FROM (
    SELECT s.project_id, s.id, s.started_at, date_trunc('hour', s.started_at, 'UTC') AS bucket,
           -- the refresh's bound: the latest last_event_at of the hour's non-bot sessions
           max(s.last_event_at) OVER (PARTITION BY s.project_id, date_trunc('hour', s.started_at, 'UTC')) AS bound
    FROM sessions s
    WHERE NOT s.is_bot
  ) s
  JOIN events e ON e.session_id = s.id
  WHERE e.project_id = s.project_id
    AND e.name = 'screen_view'
    AND e.created_at >= s.bucket
    AND e.created_at <= s.bound
    AND e.created_at >= s.started_at
  GROUP BY s.project_id, s.bucket, e.origin, e.path
) v
WHERE r.project_id = v.project_id AND r.bucket = v.bucket AND r.origin = v.origin AND r.path = v.path;

UPDATE rollup_pages_daily d SET views = h.views
FROM (
  SELECT h.project_id, date_trunc('day', h.bucket, 'UTC') AS bucket, h.origin, h.path, sum(h.views) AS views
  FROM rollup_pages_hourly h
  WHERE h.views <> 0
  GROUP BY h.project_id, date_trunc('day', h.bucket, 'UTC'), h.origin, h.path
) h
WHERE d.project_id = h.project_id AND d.bucket = h.bucket AND d.origin = h.origin AND d.path = h.path;

UPDATE rollup_session_cube_hourly h SET screen_views = x.screen_views
FROM (
  SELECT s.project_id, date_trunc('hour', s.started_at, 'UTC') AS bucket,
         s.referrer_name, s.referrer_type, s.utm_source, s.utm_medium, s.country, s.device, s.browser, s.os, s.brand,
         sum(s.screen_view_count) AS screen_views
  FROM sessions s
  WHERE NOT s.is_bot AND s.screen_view_count <> 0
  GROUP BY s.project_id, date_trunc('hour', s.started_at, 'UTC'),
           s.referrer_name, s.referrer_type, s.utm_source, s.utm_medium, s.country, s.device, s.browser, s.os, s.brand
) x
WHERE h.project_id = x.project_id AND h.bucket = x.bucket
  AND h.referrer_name = x.referrer_name AND h.referrer_type = x.referrer_type AND h.utm_source = x.utm_source
  AND h.utm_medium = x.utm_medium AND h.country = x.country AND h.device = x.device AND h.browser = x.browser
  AND h.os = x.os AND h.brand = x.brand;

UPDATE rollup_session_cube_daily d SET screen_views = x.screen_views
FROM (
  SELECT c.project_id, c.bucket,
         h.referrer_name, h.referrer_type, h.utm_source, h.utm_medium, h.country, h.device, h.browser, h.os, h.brand,
         sum(h.screen_views) AS screen_views
  FROM rollup_session_cube_days c
  JOIN rollup_session_cube_hourly h
    ON h.project_id = c.project_id AND h.bucket >= c.bucket AND h.bucket < c.bucket + c.hours * interval '1 hour'
  WHERE h.screen_views <> 0
  GROUP BY c.project_id, c.bucket,
           h.referrer_name, h.referrer_type, h.utm_source, h.utm_medium, h.country, h.device, h.browser, h.os, h.brand
) x
WHERE d.project_id = x.project_id AND d.bucket = x.bucket
  AND d.referrer_name = x.referrer_name AND d.referrer_type = x.referrer_type AND d.utm_source = x.utm_source
  AND d.utm_medium = x.utm_medium AND d.country = x.country AND d.device = x.device AND d.browser = x.browser
  AND d.os = x.os AND d.brand = x.brand;

DO $migration$
DECLARE
  d record;
  dim_pairs text;
BEGIN
  -- pair rows: tm_session_cube_pairs' sums over the day's combination rows
  EXECUTE format($f$
    UPDATE rollup_session_cube_pairs_daily p SET screen_views = x.screen_views
    FROM (
      SELECT h.project_id, h.bucket, x.pair, x.a, x.b, sum(h.screen_views) AS screen_views
      FROM rollup_session_cube_daily h
      CROSS JOIN LATERAL (VALUES %1$s) AS x(pair, a, b)
      WHERE h.screen_views <> 0
      GROUP BY h.project_id, h.bucket, x.pair, x.a, x.b
    ) x
    WHERE p.project_id = x.project_id AND p.pair = x.pair AND p.bucket = x.bucket AND p.a = x.a AND p.b = x.b
  $f$, tm_cube_pair_values('h'));

  -- dimension pairs: tm_refresh_session_dim_pairs' sums over the day's sessions, day by day
  dim_pairs := format($f$
    UPDATE rollup_session_dim_pairs_daily r SET screen_views = x.screen_views
    FROM (
      SELECT x.pair, x.a, x.a_prefix, x.b, sum(s.screen_view_count) AS screen_views
      FROM sessions s
      CROSS JOIN LATERAL (VALUES %1$s) AS x(pair, a, a_prefix, b)
      WHERE s.project_id = $1 AND s.started_at >= $2 AND s.started_at < $2 + $3 * interval '1 hour'
        AND NOT s.is_bot AND s.screen_view_count <> 0
      GROUP BY x.pair, x.a, x.a_prefix, x.b
    ) x
    WHERE r.project_id = $1 AND r.bucket = $2
      AND r.pair = x.pair AND r.a = x.a AND r.a_prefix = x.a_prefix AND r.b = x.b
  $f$, tm_dim_pair_values('s'));
  FOR d IN SELECT l.project_id, l.bucket, l.hours FROM rollup_session_dim_pairs_days l ORDER BY l.project_id, l.bucket LOOP
    EXECUTE dim_pairs USING d.project_id, d.bucket, d.hours;
  END LOOP;
END
$migration$;
