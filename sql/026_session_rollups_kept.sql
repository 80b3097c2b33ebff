-- The session rollups (rollup_sessions_hourly, rollup_<dimension>_hourly, sql/002) kept by
-- the service on TimescaleDB too, from one definition on both engines.
--
-- On TimescaleDB they were continuous aggregates. Sessions change after the fact (every
-- session_end, every late event of a session, a reopened session), and a continuous
-- aggregate's refresh re-reads the whole hour, so there a late write still cost the hour.
-- As tables kept by the service they take deltas like every other kept table
-- (docs/rollups.md): a late write costs the change. The event aggregates (events_hourly,
-- events_<dimension>_hourly, sql/009) stay continuous aggregates: an event row is written
-- once.
--
-- tm_refresh_rollup_bucket() (sql/functions/) recomputes one (project, UTC hour), generated
-- at call time from rollup_dimensions, on both engines. Every hour that holds sessions is
-- logged for a recompute: reads take those hours raw, exactly, until the refresh job has
-- filled the new tables in (a migration never calls a refresh function: they are applied
-- after the migrations).

DO $$
DECLARE
  cols constant text := 'sessions bigint NOT NULL, bounces bigint NOT NULL, timed_sessions bigint NOT NULL, duration_ms numeric NOT NULL, screen_views bigint NOT NULL';
  d record;
BEGIN
  IF NOT tm_timescale() THEN
    RETURN;
  END IF;
  -- The aggregates' rows were exact only together with the log (hours not yet refreshed are
  -- read raw); the tables are filled from the sessions themselves, by the refresh job.
  DROP MATERIALIZED VIEW rollup_sessions_hourly;
  EXECUTE format('CREATE TABLE rollup_sessions_hourly (project_id text NOT NULL, bucket timestamptz NOT NULL, %s, PRIMARY KEY (project_id, bucket))', cols);
  FOR d IN SELECT dimension, relation, parent FROM rollup_dimensions ORDER BY dimension LOOP
    EXECUTE format('DROP MATERIALIZED VIEW %I', d.relation);
    IF d.parent IS NULL THEN
      EXECUTE format('CREATE TABLE %I (project_id text NOT NULL, bucket timestamptz NOT NULL, value text NOT NULL, %s, PRIMARY KEY (project_id, bucket, value))', d.relation, cols);
    ELSE
      EXECUTE format('CREATE TABLE %I (project_id text NOT NULL, bucket timestamptz NOT NULL, prefix text NOT NULL, value text NOT NULL, %s, PRIMARY KEY (project_id, bucket, prefix, value))', d.relation, cols);
    END IF;
  END LOOP;
  UPDATE rollup_registry SET refresh_fn = 'tm_refresh_rollup_bucket'
  WHERE relation = 'rollup_sessions_hourly' OR relation IN (SELECT relation FROM rollup_dimensions);
  -- Every hour that holds sessions, recomputed by the refresh job (a delta logged before now
  -- is in the aggregates' rows, not in the new tables: its hour is recomputed too, never
  -- added to).
  INSERT INTO rollup_invalidations (project_id, bucket, rebuild)
  SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC'), true FROM sessions WHERE NOT is_bot
  ON CONFLICT (project_id, bucket, shard) DO UPDATE SET rebuild = true, version = nextval('rollup_version_seq');
  UPDATE rollup_invalidations SET rebuild = true, version = nextval('rollup_version_seq') WHERE NOT rebuild;
END $$;
