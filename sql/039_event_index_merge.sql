-- Fewer indexes on events: every event written maintains each of them, and they were most of
-- what an event's insert costs PostgreSQL (bench/RESULTS.md, "Event indexes"). Five indexes
-- become two that carry the same reads, each still an index-only scan:
--
--   events_name_time_idx (project_id, name, created_at) INCLUDE (session_id, profile_id,
--   is_bot, origin, path, duration_ms): every row. Replaces
--     events_project_name_time_idx (the same key: export and raw lists by event name, the
--       event catalogue's names, user flow's start events),
--     events_funnel_idx (the same key, no bots, INCLUDE session and profile: the funnel now
--       filters NOT is_bot on the index entry),
--     events_views_idx ((project_id, created_at) of screen views INCLUDE session, origin, path,
--       duration: the insights pages' views are the range name = 'screen_view' of this key).
--   events_time_idx (project_id, created_at DESC, id DESC) INCLUDE (profile_id, is_bot, name):
--   every row. Replaces
--     events_project_time_idx (the same key: export pages and counts, raw tails),
--     events_activity_idx ((project_id, created_at) INCLUDE profile_id, no bots, no
--       session_start / session_end: active users now filter both on the index entry).
--
-- events_view_titles_idx, events_identified_activity_idx, events_session_idx and
-- events_project_profile_idx stay. docs/operating.md ("Writes") lists every index and its reads.
--
-- Migrations run in a transaction, so the two new indexes build with a plain CREATE INDEX,
-- which blocks writes to events meanwhile; on a large live table create them beforehand
-- without blocking (on plain PostgreSQL: CREATE INDEX ... ON ONLY events, then CREATE INDEX
-- CONCURRENTLY on each partition and ALTER INDEX ... ATTACH PARTITION) under these names; IF
-- NOT EXISTS then skips them here, and only the drops remain.
CREATE INDEX IF NOT EXISTS events_name_time_idx ON events (project_id, name, created_at)
  INCLUDE (session_id, profile_id, is_bot, origin, path, duration_ms);
CREATE INDEX IF NOT EXISTS events_time_idx ON events (project_id, created_at DESC, id DESC)
  INCLUDE (profile_id, is_bot, name);
DROP INDEX IF EXISTS events_project_name_time_idx;
DROP INDEX IF EXISTS events_funnel_idx;
DROP INDEX IF EXISTS events_views_idx;
DROP INDEX IF EXISTS events_project_time_idx;
DROP INDEX IF EXISTS events_activity_idx;
