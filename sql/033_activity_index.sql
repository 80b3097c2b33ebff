-- Indexes for OpenPanel's user-activity routes (internal/insights/activity.ts: retention,
-- retention/cohort, active_users, engagement). Activity is events that are neither a bot's nor
-- the service's own session_start / session_end; the routes read them for a time range and need
-- only the profile (and whether it is identified), so both indexes carry profile_id and keep
-- those reads index-only (no event rows; the visibility map is kept by (auto)vacuum). Both are
-- partial: bots' rows and session_start / session_end rows are in neither, and anonymous
-- visitors' rows (profile_id = device_id) are not in the second, so the identified-only routes
-- scan only identified profiles' events. The queries repeat these predicates literally.
--
-- Migrations run in a transaction, so these build with a plain CREATE INDEX, which blocks
-- writes to events meanwhile; on a large live table create them beforehand without blocking (on
-- plain PostgreSQL: CREATE INDEX ... ON ONLY events, then CREATE INDEX CONCURRENTLY on each
-- partition and ALTER INDEX ... ATTACH PARTITION) under these names; IF NOT EXISTS then makes
-- this migration a no-op.
--
-- events_activity_idx: every profile's activity (active_users: anonymous visitors count).
CREATE INDEX IF NOT EXISTS events_activity_idx ON events (project_id, created_at)
  INCLUDE (profile_id)
  WHERE NOT is_bot AND name NOT IN ('session_start', 'session_end');

-- events_identified_activity_idx: identified profiles' activity (retention, retention/cohort,
-- engagement).
CREATE INDEX IF NOT EXISTS events_identified_activity_idx ON events (project_id, created_at)
  INCLUDE (profile_id)
  WHERE NOT is_bot AND name NOT IN ('session_start', 'session_end') AND profile_id <> device_id;
