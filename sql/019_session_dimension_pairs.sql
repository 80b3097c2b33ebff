-- Per-day session sums per PAIR of one "wide" dimension (not in the session cube: referrer,
-- utm_campaign, utm_term, utm_content, region, city, browser_version, os_version, model) and
-- one cube dimension (sql/012), for breakdowns that name such a pair: a breakdown of a wide
-- dimension filtered on a cube one (city where device = mobile) or the other way round
-- (device where city = Paris). Before this they read every raw session of the period: the
-- session cube leaves wide dimensions out (their values would multiply its combinations), and
-- a dimension's own rollup holds no other dimension. (internal/insights/rollups.ts,
-- dimensionPairFor() and dimensionPairBreakdownSql(), reads it.)
--
-- rollup_session_dim_pairs_daily: per local day (project timezone; bucket = its first instant,
--   only days that start and end on whole UTC hours: tm_local_day() of sql/015), per pair
--   (`pair` = 'city,device': the wide dimension, then the cube one; 9 x 9 = 81 pairs) and
--   values: a = the wide dimension's value, a_prefix = its parent's (the country of a region
--   or city, the browser of a browser_version, the os of an os_version; '' for the others),
--   b = the cube dimension's value; the sessions, bounces, timed sessions and their duration
--   (bots left out), summed straight from the day's raw sessions.
-- rollup_session_dim_pairs_days (project_id, bucket, hours): the days whose rows are complete
--   (built while none of the day's other hours was logged). A read takes a day's rows only when
--   the day is listed here, lies inside the period, and none of its hours is in
--   rollup_invalidations; every other hour of the period reads its raw sessions (an index range
--   per hour). A changed timezone or a day not yet built costs speed, never correctness.
--
-- Kept by the service (rollup_registry, refresh function tm_refresh_session_dim_pairs) on
-- PostgreSQL and TimescaleDB alike (plain tables built from the raw sessions). An upgraded
-- database logs the first hour of every local day that holds sessions, so the refresh job
-- builds the days it can; until then reads are exact on the raw path.

CREATE TABLE rollup_session_dim_pairs_daily (
  project_id      text NOT NULL,
  pair            text NOT NULL,
  bucket          timestamptz NOT NULL,
  a               text NOT NULL,
  a_prefix        text NOT NULL,
  b               text NOT NULL,
  sessions        bigint NOT NULL,
  bounces         bigint NOT NULL,
  timed_sessions  bigint NOT NULL,
  duration_ms     numeric NOT NULL
);
-- reads probe (project, pair, day); the refresh and retention delete by (project, day)
CREATE INDEX rollup_session_dim_pairs_daily_pair_idx ON rollup_session_dim_pairs_daily (project_id, pair, bucket);
CREATE INDEX rollup_session_dim_pairs_daily_bucket_idx ON rollup_session_dim_pairs_daily (project_id, bucket);

CREATE TABLE rollup_session_dim_pairs_days (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  hours       integer NOT NULL CHECK (hours > 0),
  PRIMARY KEY (project_id, bucket)
);

-- tm_dim_pair_values(alias): the VALUES rows of the pairs (sql/functions/).

-- Kept by tm_refresh_session_dim_pairs(project, hour) (sql/functions/).

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('rollup_session_dim_pairs_daily', 'tm_refresh_session_dim_pairs'),
  ('rollup_session_dim_pairs_days', 'tm_refresh_session_dim_pairs');

-- Upgrades: one logged hour per local day with sessions (its first), so the refresh job
-- builds the day; the other layers recompute that hour to the same rows.
INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT h.project_id, l.d0
FROM (SELECT DISTINCT s.project_id, date_trunc('hour', s.started_at, 'UTC') AS hour FROM sessions s) h
CROSS JOIN LATERAL tm_local_day(h.project_id, h.hour) l
WHERE l.d0 IS NOT NULL
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
