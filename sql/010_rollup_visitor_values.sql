-- Unique-visitor sketches per (project, session dimension, UTC hour of the session's start,
-- prefix, value), for metrics filtered on one session dimension (and its parent) over
-- periods too large to count distinct profile ids exactly (internal/insights/rollups.ts,
-- TIDEMARK_EXACT_VISITORS_MAX). The keys mirror the dimension rollups of 002_rollups.sql:
-- `value` is the session's value of `dimension`, `prefix` its parent's value for region and
-- city (country), browser_version (browser) and os_version (os), '' for the others; so a
-- filter on a dimension and on its parent applies to the same row as in rollup_<dim>_hourly.
-- Bots are left out; every session of the hour is in exactly one row per dimension (the
-- value '' included).
--
-- Same HyperLogLog parameters as rollup_visitors_hourly (008_rollup_visitors.sql: log2m 14,
-- regwidth 5, expthresh -1, sparse on), read with tm_visitors_estimate(). Needs the `hll`
-- extension: tm_setup_visitor_values_rollup() first runs tm_setup_visitors_rollup() (which
-- creates the extension if the server has it) and creates nothing when that fails, so
-- servers without hll (and the TimescaleDB/PGlite test engine) keep exact counts. Safe to
-- call again: a server that gets the package later runs
--   SELECT tm_setup_visitor_values_rollup();
-- as a superuser (it sets up both sketch rollups). Every hour that holds sessions is then
-- logged in rollup_invalidations, so queries read (and hash) raw sessions there until the
-- refresh job has filled the table in: exact, only slower.
--
-- The refresh recomputes all dimensions of one (project, hour) in one scan of its sessions.

CREATE FUNCTION tm_setup_visitor_values_rollup() RETURNS boolean
LANGUAGE plpgsql AS $setup$
DECLARE
  d record;
  dims text := '';
  rows_of text := '';
BEGIN
  IF NOT tm_setup_visitors_rollup() THEN
    RETURN false;
  END IF;
  IF to_regclass('rollup_visitor_values_hourly') IS NOT NULL THEN
    RETURN true;
  END IF;
  -- dimension second: a query reads one dimension's rows over a range of hours.
  EXECUTE $t$
    CREATE TABLE rollup_visitor_values_hourly (
      project_id  text NOT NULL,
      dimension   text NOT NULL,
      bucket      timestamptz NOT NULL,
      prefix      text NOT NULL,
      value       text NOT NULL,
      visitors    hll NOT NULL,
      PRIMARY KEY (project_id, dimension, bucket, prefix, value)
    )$t$;
  -- One (dimension, prefix, value) triple per session and dimension, from rollup_dimensions.
  FOR d IN SELECT * FROM rollup_dimensions ORDER BY dimension LOOP
    dims := dims || CASE WHEN dims = '' THEN '' ELSE ', ' END || quote_literal(d.dimension);
    rows_of := rows_of || CASE WHEN rows_of = '' THEN '' ELSE ', ' END
      || format('(%L, %s, s.%I)', d.dimension, CASE WHEN d.parent IS NULL THEN quote_literal('') ELSE format('s.%I', d.parent) END, d.dimension);
  END LOOP;
  EXECUTE format($f$
    CREATE FUNCTION tm_refresh_visitor_values_bucket(p_project text, p_bucket timestamptz) RETURNS void
    LANGUAGE plpgsql AS $body$
    BEGIN
      DELETE FROM rollup_visitor_values_hourly
      WHERE project_id = p_project AND dimension = ANY (ARRAY[%1$s]) AND bucket = p_bucket;
      -- one scan of the hour's sessions; sorted groups (one sketch in memory at a time)
      INSERT INTO rollup_visitor_values_hourly (project_id, dimension, bucket, prefix, value, visitors)
      SELECT p_project, v.dimension, p_bucket, v.prefix, v.value, hll_add_agg(hll_hash_text(v.profile_id), 14, 5, -1, 1)
      FROM (
        SELECT x.dimension, x.prefix, x.value, s.profile_id
        FROM sessions s
        CROSS JOIN LATERAL (VALUES %2$s) AS x(dimension, prefix, value)
        WHERE s.project_id = p_project AND s.started_at >= p_bucket AND s.started_at < p_bucket + interval '1 hour' AND NOT s.is_bot
        ORDER BY 1, 2, 3
      ) v
      GROUP BY v.dimension, v.prefix, v.value;
    END
    $body$$f$, dims, rows_of);
  INSERT INTO rollup_registry (relation, refresh_fn) VALUES
    ('rollup_visitor_values_hourly', 'tm_refresh_visitor_values_bucket')
  ON CONFLICT (relation) DO NOTHING;
  -- Exact until refreshed: every hour with sessions is read raw until the refresh job's turn.
  INSERT INTO rollup_invalidations (project_id, bucket)
  SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions
  ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
  RETURN true;
END
$setup$;

SELECT tm_setup_visitor_values_rollup();
