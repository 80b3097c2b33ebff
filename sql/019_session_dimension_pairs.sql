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

-- The VALUES rows (pair, a, a_prefix, b) of every (wide, cube) pair of row `alias`, wide
-- dimensions and cube dimensions each in the order above ('referrer,referrer_name', ...).
CREATE FUNCTION tm_dim_pair_values(alias text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $body$
DECLARE
  wide text[] := ARRAY['referrer', 'utm_campaign', 'utm_term', 'utm_content', 'region', 'city', 'browser_version', 'os_version', 'model'];
  parent text[] := ARRAY[NULL, NULL, NULL, NULL, 'country', 'country', 'browser', 'os', NULL];
  cube text[] := ARRAY['referrer_name', 'referrer_type', 'utm_source', 'utm_medium', 'country', 'device', 'browser', 'os', 'brand'];
  pairs text := '';
BEGIN
  FOR i IN 1 .. array_length(wide, 1) LOOP
    FOR j IN 1 .. array_length(cube, 1) LOOP
      pairs := pairs || CASE WHEN pairs = '' THEN '' ELSE ', ' END
        || format('(%L, %I.%I, %s, %I.%I)', wide[i] || ',' || cube[j], alias, wide[i],
                  CASE WHEN parent[i] IS NULL THEN quote_literal('') ELSE format('%I.%I', alias, parent[i]) END,
                  alias, cube[j]);
    END LOOP;
  END LOOP;
  RETURN pairs;
END
$body$;

DO $migration$
BEGIN
  EXECUTE format($f$
    CREATE FUNCTION tm_refresh_session_dim_pairs(p_project text, p_bucket timestamptz) RETURNS void
    LANGUAGE plpgsql
    -- the day's groups (tens of thousands at 50k sessions a day) hashed in memory, not spilled
    SET work_mem = '64MB'
    AS $body$
    DECLARE
      d0 timestamptz;
      d1 timestamptz;
    BEGIN
      SELECT l.d0, l.d1 INTO d0, d1 FROM tm_local_day(p_project, p_bucket) l;
      IF d0 IS NULL THEN
        RETURN;
      END IF;
      -- Refreshes of two hours of one day take turns (READ COMMITTED: each statement sees
      -- the other's commit, log deletions included).
      PERFORM pg_advisory_xact_lock(727274019, hashtext(p_project || '/' || d0::text));
      DELETE FROM rollup_session_dim_pairs_days WHERE project_id = p_project AND bucket = d0;
      DELETE FROM rollup_session_dim_pairs_daily WHERE project_id = p_project AND bucket = d0;
      -- Another hour of the day still logged: its refresh builds the day.
      IF EXISTS (SELECT 1 FROM rollup_invalidations i
                 WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
        RETURN;
      END IF;
      INSERT INTO rollup_session_dim_pairs_daily
      SELECT p_project, x.pair, d0, x.a, x.a_prefix, x.b,
             count(*),
             count(*) FILTER (WHERE s.is_bounce),
             count(*) FILTER (WHERE s.duration_ms > 0),
             coalesce(sum(s.duration_ms) FILTER (WHERE s.duration_ms > 0), 0)
      FROM sessions s
      CROSS JOIN LATERAL (VALUES %1$s) AS x(pair, a, a_prefix, b)
      WHERE s.project_id = p_project AND s.started_at >= d0 AND s.started_at < d1 AND NOT s.is_bot
      GROUP BY x.pair, x.a, x.a_prefix, x.b
      -- a read takes one pair of one day: its rows on a few adjacent pages, not one page each
      ORDER BY x.pair;
      INSERT INTO rollup_session_dim_pairs_days (project_id, bucket, hours)
      VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
    END
    $body$$f$, tm_dim_pair_values('s'));
END
$migration$;

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
