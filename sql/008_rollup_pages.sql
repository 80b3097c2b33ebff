-- Hourly rollup of the pages answer (internal/insights/rollups.ts, rollupPagesSql), kept by
-- the service on BOTH engines (a continuous aggregate cannot join events to sessions): one row per
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

-- Kept by tm_refresh_pages_bucket(project, hour) (sql/functions/): the hour's rows, then its
-- UTC day's from the day's hourly rows.
-- Both tables are kept by the same function (the refresh job calls it once per hour).
INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('rollup_pages_hourly', 'tm_refresh_pages_bucket'),
  ('rollup_pages_daily', 'tm_refresh_pages_bucket');

-- Hours that already hold sessions (a database migrated with data) are not in the new table
-- yet: log them, so that queries read them raw until the refresh job has filled them in.
INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
