-- Indexes for the insights pages query (internal/insights/service.ts, pagesSql). Both are
-- partial (screen views only): no cost for other events. Migrations run in a transaction, so
-- this builds them with a plain CREATE INDEX, which blocks writes to events meanwhile (about
-- 40 s for 10M events on 2 cores). On a large live table create them beforehand without
-- blocking (on plain PostgreSQL: CREATE INDEX ... ON ONLY events, then CREATE INDEX
-- CONCURRENTLY on each partition and ALTER INDEX ... ATTACH PARTITION) under these names;
-- IF NOT EXISTS then makes this migration a no-op.
--
-- events_views_idx: the views of a project in a time range with everything the aggregation
-- reads (session, page, time on page), so pages scans no event rows (index-only scan; the
-- visibility map is kept by (auto)vacuum).
CREATE INDEX IF NOT EXISTS events_views_idx ON events (project_id, created_at)
  INCLUDE (session_id, origin, path, duration_ms)
  WHERE name = 'screen_view';

-- events_view_titles_idx: a page's latest titled view, read backwards, for the title of each
-- row of a pages answer (created_at, id: the order in which "latest" is decided).
CREATE INDEX IF NOT EXISTS events_view_titles_idx ON events (project_id, path, origin, created_at, id)
  WHERE name = 'screen_view' AND title <> '';
