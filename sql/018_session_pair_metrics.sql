-- Per-day metrics per PAIR of cube dimensions, for insights metrics filtered on two of them
-- (e.g. country = DE and device = mobile). The session cube (sql/012, sql/016) keeps only
-- the additive breakdown sums; metrics also need screen views and unique visitors, which
-- are not additive, so before this such metrics read every raw session of the period.
-- (internal/insights/rollups.ts, pairMetricsFor() and rollupMetricsSql(), reads it.)
--
-- rollup_session_pair_metrics_daily: per local day (project timezone; bucket = its first
--   instant, only days that start and end on whole UTC hours: tm_local_day() of
--   sql/015_event_cube.sql), per pair of the nine cube dimensions (`pair` = 'country,device',
--   the two names in CUBE_DIMENSIONS order) and values (a, b) of the pair: sessions, bounces,
--   timed sessions and their duration, screen views, and a HyperLogLog sketch of the
--   sessions' profile ids (same parameters as every sketch: sql/008_rollup_visitors.sql).
--   Summed straight from the day's raw sessions (bots left out), since sketches cannot be
--   summed from the cube's rows.
-- rollup_session_pair_metrics_days (project_id, bucket, hours): the days whose rows are
--   complete (built while none of the day's other hours was logged). A read takes a day's
--   rows only when the day is listed here, lies inside the period and inside one series
--   bucket, and none of its hours is in rollup_invalidations; every other hour of the period
--   reads its raw sessions (an index range per hour). So a changed timezone or a day not yet
--   built costs speed, never correctness.
--
-- Kept by the service (rollup_registry, refresh function tm_refresh_session_pair_metrics) on
-- servers with the hll extension; without it only tm_setup_pair_metrics() is created and such
-- metrics stay on the raw sessions. An upgraded database logs the first hour of every local day that
-- holds sessions, so the refresh job builds the days it can; until then reads are exact on
-- the raw path.

-- tm_setup_pair_metrics(): creates all of it when the hll type exists and it does not yet;
-- true when it exists afterwards. Run again after installing hll later (docs/operating.md).
CREATE FUNCTION tm_setup_pair_metrics() RETURNS boolean
LANGUAGE plpgsql AS $setup$
BEGIN
  IF to_regclass('rollup_session_pair_metrics_daily') IS NOT NULL THEN
    RETURN true;
  END IF;
  IF to_regtype('hll') IS NULL THEN
    RAISE NOTICE 'hll extension missing: metrics filtered on two cube dimensions read raw sessions';
    RETURN false;
  END IF;
  -- EXECUTE: the hll type may not exist when this file is parsed.
  EXECUTE $t$
    CREATE TABLE rollup_session_pair_metrics_daily (
      project_id      text NOT NULL,
      pair            text NOT NULL,
      bucket          timestamptz NOT NULL,
      a               text NOT NULL,
      b               text NOT NULL,
      sessions        bigint NOT NULL,
      bounces         bigint NOT NULL,
      timed_sessions  bigint NOT NULL,
      duration_ms     numeric NOT NULL,
      screen_views    bigint NOT NULL,
      visitors        hll NOT NULL
    )$t$;
  -- reads probe (project, pair, day); the refresh and retention delete by (project, day)
  CREATE INDEX rollup_session_pair_metrics_daily_pair_idx ON rollup_session_pair_metrics_daily (project_id, pair, bucket);
  CREATE INDEX rollup_session_pair_metrics_daily_bucket_idx ON rollup_session_pair_metrics_daily (project_id, bucket);
  CREATE TABLE rollup_session_pair_metrics_days (
    project_id  text NOT NULL,
    bucket      timestamptz NOT NULL,
    hours       integer NOT NULL CHECK (hours > 0),
    PRIMARY KEY (project_id, bucket)
  );

  EXECUTE format($f$
    CREATE FUNCTION tm_refresh_session_pair_metrics(p_project text, p_bucket timestamptz) RETURNS void
    LANGUAGE plpgsql AS $body$
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
      PERFORM pg_advisory_xact_lock(727274018, hashtext(p_project || '/' || d0::text));
      DELETE FROM rollup_session_pair_metrics_days WHERE project_id = p_project AND bucket = d0;
      DELETE FROM rollup_session_pair_metrics_daily WHERE project_id = p_project AND bucket = d0;
      -- Another hour of the day still logged: its refresh builds the day.
      IF EXISTS (SELECT 1 FROM rollup_invalidations i
                 WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
        RETURN;
      END IF;
      INSERT INTO rollup_session_pair_metrics_daily
      SELECT p_project, x.pair, d0, x.a, x.b,
             count(*),
             count(*) FILTER (WHERE s.is_bounce),
             count(*) FILTER (WHERE s.duration_ms > 0),
             coalesce(sum(s.duration_ms) FILTER (WHERE s.duration_ms > 0), 0),
             coalesce(sum(s.screen_view_count), 0),
             hll_add_agg(hll_hash_text(s.profile_id), 14, 5, -1, 1)
      FROM sessions s
      CROSS JOIN LATERAL (VALUES %1$s) AS x(pair, a, b)
      WHERE s.project_id = p_project AND s.started_at >= d0 AND s.started_at < d1 AND NOT s.is_bot
      GROUP BY x.pair, x.a, x.b;
      INSERT INTO rollup_session_pair_metrics_days (project_id, bucket, hours)
      VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
    END
    $body$$f$, tm_cube_pair_values('s'));

  INSERT INTO rollup_registry (relation, refresh_fn) VALUES
    ('rollup_session_pair_metrics_daily', 'tm_refresh_session_pair_metrics'),
    ('rollup_session_pair_metrics_days', 'tm_refresh_session_pair_metrics');

  -- Upgrades: one logged hour per local day with sessions (its first), so the refresh job
  -- builds the day; the other layers recompute that hour to the same rows.
  INSERT INTO rollup_invalidations (project_id, bucket)
  SELECT DISTINCT h.project_id, l.d0
  FROM (SELECT DISTINCT s.project_id, date_trunc('hour', s.started_at, 'UTC') AS hour FROM sessions s) h
  CROSS JOIN LATERAL tm_local_day(h.project_id, h.hour) l
  WHERE l.d0 IS NOT NULL
  ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
  RETURN true;
END
$setup$;

SELECT tm_setup_pair_metrics();
