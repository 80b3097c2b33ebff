-- Hourly rollup of the pages answer (internal/insights/pages.ts), kept by the service on
-- BOTH engines (a continuous aggregate cannot join events to sessions): one row per
-- (project, UTC hour of the SESSION's start, origin, path) with the additive parts of a
-- pages row over the non-bot sessions that started in that hour:
--   sessions     distinct sessions that viewed the page (a session has one start hour, so
--                these add up over hours)
--   entries      of those, the sessions that entered on it; bounces: entered and bounced
--   timed_views  views with a time on page (duration_ms set); duration_ms: their sum
--   title, title_at, title_id: the latest titled view (created_at DESC, id DESC), so that
--                "latest seen" can be merged across hours with the same tie-break
-- rollup_pages_daily holds the same columns per UTC day (sums of the day's hourly rows, the
-- day's latest title), so that a 30-day answer reads ~30 rows per page instead of ~720: a
-- query reads it for the whole UTC days of the period that have no hour in the log, and the
-- hourly rows for the rest (see internal/insights/rollups.ts, rollupPagesSql).
-- The views counted are those of the reference query (service.ts, referencePagesSql):
-- screen_view events of the session at or after its start. The worker logs the start hour
-- of every session it changes in rollup_invalidations, and a page view always changes its
-- session, so the queries read raw rows for exactly the hours this table may be behind on.

CREATE TABLE rollup_pages_hourly (
  project_id   text NOT NULL,
  bucket       timestamptz NOT NULL,
  origin       text NOT NULL,
  path         text NOT NULL,
  sessions     bigint NOT NULL,
  entries      bigint NOT NULL,
  bounces      bigint NOT NULL,
  timed_views  bigint NOT NULL,
  duration_ms  bigint NOT NULL,
  title        text NOT NULL DEFAULT '',
  title_at     timestamptz,
  title_id     uuid,
  PRIMARY KEY (project_id, bucket, origin, path)
);

-- A page's latest titled row, read backwards, for the title of each row of an answer.
CREATE INDEX rollup_pages_hourly_title_idx ON rollup_pages_hourly (project_id, path, origin, title_at DESC, title_id DESC)
  WHERE title <> '';

CREATE TABLE rollup_pages_daily (LIKE rollup_pages_hourly INCLUDING DEFAULTS);
ALTER TABLE rollup_pages_daily ADD PRIMARY KEY (project_id, bucket, origin, path);
CREATE INDEX rollup_pages_daily_title_idx ON rollup_pages_daily (project_id, path, origin, title_at DESC, title_id DESC)
  WHERE title <> '';

-- Recomputes one (project, hour) and then its UTC day from the day's hourly rows. Refreshes
-- of two hours of the same day take turns on an advisory lock, so the day is always summed
-- after the other's hour is committed (READ COMMITTED: each statement sees the latest commits).
CREATE FUNCTION tm_refresh_pages_bucket(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
BEGIN
  DELETE FROM rollup_pages_hourly WHERE project_id = p_project AND bucket = p_bucket;
  INSERT INTO rollup_pages_hourly (project_id, bucket, origin, path, sessions, entries, bounces, timed_views, duration_ms, title, title_at, title_id)
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
           coalesce(sum(v.duration_ms), 0) AS duration_ms
    FROM v
    GROUP BY v.origin, v.path
  )
  SELECT p_project, p_bucket, a.origin, a.path, a.sessions, a.entries, a.bounces, a.timed_views, a.duration_ms,
         coalesce(t.title, ''), t.created_at, t.id
  FROM agg a LEFT JOIN titles t ON t.origin = a.origin AND t.path = a.path;

  PERFORM pg_advisory_xact_lock(727274008, hashtext(p_project || '/' || date_trunc('day', p_bucket, 'UTC')::text));
  DELETE FROM rollup_pages_daily WHERE project_id = p_project AND bucket = date_trunc('day', p_bucket, 'UTC');
  INSERT INTO rollup_pages_daily (project_id, bucket, origin, path, sessions, entries, bounces, timed_views, duration_ms, title, title_at, title_id)
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
           sum(h.timed_views) AS timed_views, sum(h.duration_ms) AS duration_ms
    FROM h GROUP BY h.origin, h.path
  )
  SELECT p_project, date_trunc('day', p_bucket, 'UTC'), a.origin, a.path, a.sessions, a.entries, a.bounces, a.timed_views,
         a.duration_ms, coalesce(t.title, ''), t.title_at, t.title_id
  FROM agg a LEFT JOIN titles t ON t.origin = a.origin AND t.path = a.path;
END
$body$;

-- Both tables are kept by the same function (the refresh job calls it once per hour).
INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('rollup_pages_hourly', 'tm_refresh_pages_bucket'),
  ('rollup_pages_daily', 'tm_refresh_pages_bucket');

-- Hours that already hold sessions (a database migrated with data) are not in the new table
-- yet: log them, so that queries read them raw until the refresh job has filled them in.
INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
