-- The pages rollups (sql/008) of one (project, UTC hour), then its UTC day from the day's
-- hourly rows. Refreshes of two hours of the same day take turns on an advisory lock, so the
-- day is always summed after the other's hour is committed (READ COMMITTED: each statement
-- sees the latest commits). `views` (sql/023) is written where the tables have it.
CREATE OR REPLACE FUNCTION tm_refresh_pages_bucket(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql
-- The hour's sessions joined to its views by hashing, whatever the statistics say: an hour's
-- sessions are new, so the planner often has none for them (or a delta's shadow tables: none
-- at all), estimated one session and nested the views' scan under each session, reading the
-- hour's views once per session (a 10,000-event hour: 10 s of PostgreSQL at its close;
-- test/pages-log-hour.test.ts). No JIT: with a join method disabled, the costs it adds would
-- pass jit_above_cost where some other plan has to nest.
SET enable_nestloop = off
SET jit = off
AS $body$
DECLARE
  views constant boolean := EXISTS (SELECT 1 FROM pg_attribute a
    WHERE a.attrelid = to_regclass('rollup_pages_hourly') AND a.attname = 'views' AND a.attnum > 0 AND NOT a.attisdropped);
BEGIN
  DELETE FROM rollup_pages_hourly WHERE project_id = p_project AND bucket = p_bucket;
  EXECUTE format($q$INSERT INTO rollup_pages_hourly (project_id, bucket, origin, path, sessions, entries, bounces, timed_views, duration_ms%1$s, title, title_at, title_id)
  WITH s AS MATERIALIZED (
    SELECT s.id, s.started_at, s.last_event_at, s.is_bounce, s.entry_origin, s.entry_path
    FROM sessions s
    WHERE s.project_id = $1 AND s.started_at >= $2 AND s.started_at < $2 + interval '1 hour' AND NOT s.is_bot
  ),
  v AS MATERIALIZED (
    SELECT e.id, e.session_id, e.origin, e.path, e.title, e.created_at, e.duration_ms, s.is_bounce,
           (s.entry_origin = e.origin AND s.entry_path = e.path) AS entered
    FROM s
    JOIN events e ON e.session_id = s.id
    WHERE e.project_id = $1
      AND e.name = 'screen_view'
      AND e.created_at >= $2
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
  SELECT $1, $2, a.origin, a.path, a.sessions, a.entries, a.bounces, a.timed_views, a.duration_ms%2$s,
         coalesce(t.title, ''), t.created_at, t.id
  FROM agg a LEFT JOIN titles t ON t.origin = a.origin AND t.path = a.path$q$,
    CASE WHEN views THEN ', views' ELSE '' END, CASE WHEN views THEN ', a.views' ELSE '' END)
  USING p_project, p_bucket;

  PERFORM pg_advisory_xact_lock(727274008, hashtext(p_project || '/' || date_trunc('day', p_bucket, 'UTC')::text));
  DELETE FROM rollup_pages_daily WHERE project_id = p_project AND bucket = date_trunc('day', p_bucket, 'UTC');
  EXECUTE format($q$INSERT INTO rollup_pages_daily (project_id, bucket, origin, path, sessions, entries, bounces, timed_views, duration_ms%1$s, title, title_at, title_id)
  WITH h AS MATERIALIZED (
    SELECT * FROM rollup_pages_hourly
    WHERE project_id = $1 AND bucket >= $2 AND bucket < $2 + interval '1 day'
  ),
  titles AS (
    SELECT DISTINCT ON (h.origin, h.path) h.origin, h.path, h.title, h.title_at, h.title_id
    FROM h WHERE h.title <> ''
    ORDER BY h.origin, h.path, h.title_at DESC, h.title_id DESC
  ),
  agg AS (
    SELECT h.origin, h.path, sum(h.sessions) AS sessions, sum(h.entries) AS entries, sum(h.bounces) AS bounces,
           sum(h.timed_views) AS timed_views, sum(h.duration_ms) AS duration_ms%2$s
    FROM h GROUP BY h.origin, h.path
  )
  SELECT $1, $2, a.origin, a.path, a.sessions, a.entries, a.bounces, a.timed_views,
         a.duration_ms%3$s, coalesce(t.title, ''), t.title_at, t.title_id
  FROM agg a LEFT JOIN titles t ON t.origin = a.origin AND t.path = a.path$q$,
    CASE WHEN views THEN ', views' ELSE '' END, CASE WHEN views THEN ', sum(h.views) AS views' ELSE '' END,
    CASE WHEN views THEN ', a.views' ELSE '' END)
  USING p_project, date_trunc('day', p_bucket, 'UTC');
END
$body$;
