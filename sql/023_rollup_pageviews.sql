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
-- Their refresh functions (sql/functions/) write the new column where the table has it.
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
