-- When each rollup_invalidations entry was first logged and last changed, so that the
-- refresh job can let a past hour that is still being written settle before it recomputes
-- the whole hour (internal/store/rollups.ts, ROLLUP_REFRESH_QUIET_MS and
-- ROLLUP_REFRESH_MAX_DELAY_MS). Without it, 30 late events one a second into a past hour
-- (or the session_ends that follow every hour for 30 minutes) recomputed that hour in every
-- 10-second refresh round they touched. Reads are exact either way: a logged hour is read
-- from the raw rows until its entry is refreshed away.
--   first_at  when the entry was created (a refresh deletes it; the next change creates it anew)
--   last_at   the latest change (the worker's upsert sets it with the version)
ALTER TABLE rollup_invalidations
  ADD COLUMN first_at timestamptz NOT NULL DEFAULT now(),
  ADD COLUMN last_at timestamptz NOT NULL DEFAULT now();
