-- An index for OpenPanel's funnel (internal/insights/funnel.ts, GET /insights/{projectId}/funnel):
-- a funnel reads, for each step's event name, every non-bot event of the period, and needs only
-- its session, profile and time. With them in the index the read is index-only (no event rows;
-- the visibility map is kept by (auto)vacuum): at 10M events a 3-step funnel over 30 days read
-- the month's partition three times from the heap (bench/RESULTS.md, "Product analytics
-- queries"). Partial: bots' rows are not in it (the funnel never counts them). The query repeats
-- the predicate literally.
--
-- Migrations run in a transaction, so this builds with a plain CREATE INDEX, which blocks
-- writes to events meanwhile; on a large live table create it beforehand without blocking (on
-- plain PostgreSQL: CREATE INDEX ... ON ONLY events, then CREATE INDEX CONCURRENTLY on each
-- partition and ALTER INDEX ... ATTACH PARTITION) under this name; IF NOT EXISTS then makes
-- this migration a no-op.
CREATE INDEX IF NOT EXISTS events_funnel_idx ON events (project_id, name, created_at)
  INCLUDE (session_id, profile_id)
  WHERE NOT is_bot;
