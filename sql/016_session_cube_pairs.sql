-- Per-day session sums per PAIR of cube dimensions, beside the session cube of
-- sql/012_rollup_session_cube.sql, for the most common filtered breakdown: one dimension
-- broken down, filtered on one other (e.g. referrer_name where device = mobile).
-- (internal/insights/rollups.ts, cubeBreakdownSql, reads it.)
--
-- rollup_session_cube_pairs_daily: per local day listed in rollup_session_cube_days (same
--   days, built and dropped together with rollup_session_cube_daily), per pair of the nine cube
--   dimensions (`pair` = 'referrer_name,device': the two names in sql/012's column order), the
--   sums of the day's sessions per (a, b) = (value of the first, value of the second). A
--   30-day breakdown naming two dimensions reads ~30 days of one pair's rows instead of ~30
--   days of every combination of nine, so its cost follows the two dimensions' values, not
--   the number of combinations (which grows with the data).
--
-- tm_refresh_session_cube() (sql/functions/) writes the pair rows (summed from the day's
-- combination rows, by tm_session_cube_pairs()) where this table is there. Days already
-- built have no pair rows yet: the first hour with sessions of each is logged, so reads take
-- those days from their hours until the refresh job has rebuilt them with their pair rows.

CREATE TABLE rollup_session_cube_pairs_daily (
  project_id      text NOT NULL,
  pair            text NOT NULL,
  bucket          timestamptz NOT NULL,
  a               text NOT NULL,
  b               text NOT NULL,
  sessions        bigint NOT NULL,
  bounces         bigint NOT NULL,
  timed_sessions  bigint NOT NULL,
  duration_ms     numeric NOT NULL
);
-- reads probe (project, pair, day); the refresh and retention delete by (project, day)
CREATE INDEX rollup_session_cube_pairs_daily_pair_idx ON rollup_session_cube_pairs_daily (project_id, pair, bucket);
CREATE INDEX rollup_session_cube_pairs_daily_bucket_idx ON rollup_session_cube_pairs_daily (project_id, bucket);

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('rollup_session_cube_pairs_daily', 'tm_refresh_session_cube');

-- Days already built: the first hour with sessions of each is logged, so the refresh
-- rebuilds the day with its pair rows (a day without sessions has no pair rows to add).
INSERT INTO rollup_invalidations (project_id, bucket)
SELECT d.project_id, date_trunc('hour', min(s.started_at), 'UTC')
FROM rollup_session_cube_days d
JOIN sessions s ON s.project_id = d.project_id AND s.started_at >= d.bucket
  AND s.started_at < d.bucket + d.hours * interval '1 hour' AND NOT s.is_bot
GROUP BY d.project_id, d.bucket
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
