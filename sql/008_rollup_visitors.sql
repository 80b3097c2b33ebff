-- Unique-visitor sketches per (project, UTC hour of the session's start), for metrics over
-- periods too large to count distinct profile ids exactly within the latency aims
-- (internal/insights/rollups.ts, TIDEMARK_EXACT_VISITORS_MAX). Uses the `hll` extension
-- (postgresql-hll, Debian package postgresql-15-hll) when the server has it; without it
-- nothing is created and unique visitors are always counted exactly.
--
-- HyperLogLog parameters: log2m 14 (m = 16384 registers), regwidth 5, expthresh -1 (auto:
-- an exact list of hashes up to 1280 distinct values), sparse on. Every sketch (stored or
-- computed by a query) must use these same parameters to be unioned. Numbers are read with
-- tm_visitors_estimate() (below), never with hll_cardinality() alone: postgresql-hll uses
-- the original HyperLogLog estimator, which switches from linear counting to the raw
-- estimate at 2.5 m (40960) and overestimates there (measured with this hash: +2.4% just
-- above 2.5 m, +1.1% at 3 m, +0.3% at 3.5 m, ~0 from 4 m); tm_visitors_estimate() removes
-- that bias with the measured curve (HyperLogLog++'s empirical bias correction), leaving
-- <= 0.2%. Error: exact (up to 64-bit hash collisions) up to 1280 distinct values;
-- above, a relative standard error of 0.5-1.0% depending on the count (nominal
-- 1.04 / sqrt(m) = 0.81%), so 99.7% of numbers lie within 3%.
--
-- tm_setup_visitors_rollup() does the whole setup and is safe to call again: a server that
-- gets the package later enables the sketches with `SELECT tm_setup_visitors_rollup();`
-- (as a superuser; every hour that holds sessions is then logged in rollup_invalidations,
-- so that queries read raw rows until the refresh job has filled the table in).

CREATE FUNCTION tm_setup_visitors_rollup() RETURNS boolean
LANGUAGE plpgsql AS $setup$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'hll') THEN
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'hll') THEN
      RETURN false;
    END IF;
    BEGIN
      CREATE EXTENSION IF NOT EXISTS hll;
    EXCEPTION WHEN OTHERS THEN
      -- e.g. not a superuser: keep the exact counts
      RAISE NOTICE 'hll extension not created (%): unique visitors stay exact', SQLERRM;
      RETURN false;
    END;
  END IF;
  -- EXECUTE: the hll type and functions do not exist when this function is created.
  EXECUTE $e$
    CREATE OR REPLACE FUNCTION tm_visitors_estimate(h hll) RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $body$
    DECLARE
      c constant float8 := hll_cardinality(h);
      t float8;
      bias float8;
    BEGIN
      IF c IS NULL THEN
        RETURN 0;
      END IF;
      t := c / 16384;
      IF t < 2.5 OR t >= 4.5 THEN
        RETURN round(c);
      END IF;
      -- linear counting (unbiased) was used: its values are m ln(m / V), V an integer
      IF abs(16384 * ln(16384 / greatest(round(16384 * exp(-t)), 1)) - c) < 1e-9 * c THEN
        RETURN round(c);
      END IF;
      -- the raw estimate: minus its measured bias (percent), interpolated over c / m
      bias := CASE
        WHEN t < 2.75 THEN 2.60 + (1.75 - 2.60) * (t - 2.50) / 0.25
        WHEN t < 3.00 THEN 1.75 + (1.15 - 1.75) * (t - 2.75) / 0.25
        WHEN t < 3.25 THEN 1.15 + (0.72 - 1.15) * (t - 3.00) / 0.25
        WHEN t < 3.50 THEN 0.72 + (0.40 - 0.72) * (t - 3.25) / 0.25
        WHEN t < 3.75 THEN 0.40 + (0.18 - 0.40) * (t - 3.50) / 0.25
        WHEN t < 4.00 THEN 0.18 + (0.08 - 0.18) * (t - 3.75) / 0.25
        ELSE 0.08 - 0.08 * (t - 4.00) / 0.50
      END;
      RETURN round(c * (1 - bias / 100));
    END
    $body$$e$;
  IF to_regclass('rollup_visitors_hourly') IS NOT NULL THEN
    RETURN true;
  END IF;
  EXECUTE $t$
    CREATE TABLE rollup_visitors_hourly (
      project_id  text NOT NULL,
      bucket      timestamptz NOT NULL,
      visitors    hll NOT NULL,
      PRIMARY KEY (project_id, bucket)
    )$t$;
  -- Day parts: per UTC day (bucket), the union of its hours 0..k (kind 'p', prefix) and of
  -- its hours k..23 (kind 's', suffix), k = 0..23 (no row: no visitor). A series bucket made
  -- of whole hours is then at most one suffix, whole days (prefix 23) and one prefix per
  -- UTC day it touches (e.g. a Berlin day: 23:00-24:00 of the day before and 00:00-23:00):
  -- a 30-day series unions ~60 sketches instead of ~720.
  EXECUTE $t$
    CREATE TABLE rollup_visitors_dayparts (
      project_id  text NOT NULL,
      bucket      timestamptz NOT NULL,
      kind        text NOT NULL CHECK (kind IN ('p', 's')),
      k           integer NOT NULL CHECK (k BETWEEN 0 AND 23),
      visitors    hll NOT NULL,
      PRIMARY KEY (project_id, bucket, kind, k)
    )$t$;
  EXECUTE $f$
    CREATE FUNCTION tm_refresh_visitors_bucket(p_project text, p_bucket timestamptz) RETURNS void
    LANGUAGE plpgsql AS $body$
    BEGIN
      DELETE FROM rollup_visitors_hourly WHERE project_id = p_project AND bucket = p_bucket;
      INSERT INTO rollup_visitors_hourly (project_id, bucket, visitors)
      SELECT p_project, p_bucket, hll_add_agg(hll_hash_text(s.profile_id), 14, 5, -1, 1)
      FROM sessions s
      WHERE s.project_id = p_project AND s.started_at >= p_bucket AND s.started_at < p_bucket + interval '1 hour' AND NOT s.is_bot
      HAVING count(*) > 0;
      -- The hour's UTC day parts, from the day's hourly sketches; refreshes of two hours of
      -- one day take turns (READ COMMITTED: each statement sees the other's commit).
      PERFORM pg_advisory_xact_lock(727274009, hashtext(p_project || '/' || date_trunc('day', p_bucket, 'UTC')::text));
      DELETE FROM rollup_visitors_dayparts WHERE project_id = p_project AND bucket = date_trunc('day', p_bucket, 'UTC');
      INSERT INTO rollup_visitors_dayparts (project_id, bucket, kind, k, visitors)
      SELECT p_project, date_trunc('day', p_bucket, 'UTC'), parts.kind, parts.k, hll_union_agg(h.visitors)
      FROM (SELECT 'p' AS kind, k, 0 AS lo, k + 1 AS hi FROM generate_series(0, 23) k
            UNION ALL SELECT 's', k, k, 24 FROM generate_series(0, 23) k) parts
      JOIN rollup_visitors_hourly h
        ON h.project_id = p_project
       AND h.bucket >= date_trunc('day', p_bucket, 'UTC') + parts.lo * interval '1 hour'
       AND h.bucket < date_trunc('day', p_bucket, 'UTC') + parts.hi * interval '1 hour'
      GROUP BY parts.kind, parts.k;
    END
    $body$$f$;
  INSERT INTO rollup_registry (relation, refresh_fn) VALUES
    ('rollup_visitors_hourly', 'tm_refresh_visitors_bucket'),
    ('rollup_visitors_dayparts', 'tm_refresh_visitors_bucket')
  ON CONFLICT (relation) DO NOTHING;
  INSERT INTO rollup_invalidations (project_id, bucket)
  SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions
  ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
  RETURN true;
END
$setup$;

SELECT tm_setup_visitors_rollup();
