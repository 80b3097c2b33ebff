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
-- tm_refresh_rollup_bucket() recomputes one (project, UTC hour). It is generated at call time
-- from rollup_dimensions, so a dimension added there needs its table and nothing else; it
-- replaces 002's body on PostgreSQL (the same rows: the same measures, keys and filter).

CREATE OR REPLACE FUNCTION tm_refresh_rollup_bucket(p_project text, p_bucket timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  measures constant text := $m$
    count(*),
    sum(CASE WHEN is_bounce THEN 1 ELSE 0 END),
    sum(CASE WHEN duration_ms > 0 THEN 1 ELSE 0 END),
    sum(CASE WHEN duration_ms > 0 THEN duration_ms ELSE 0 END),
    sum(screen_view_count)$m$;
  hour constant text := $w$project_id = $1 AND started_at >= $2 AND started_at < $2 + interval '1 hour' AND NOT is_bot$w$;
  d record;
BEGIN
  EXECUTE 'DELETE FROM rollup_sessions_hourly WHERE project_id = $1 AND bucket = $2' USING p_project, p_bucket;
  EXECUTE format($q$INSERT INTO rollup_sessions_hourly (project_id, bucket, sessions, bounces, timed_sessions, duration_ms, screen_views)
    SELECT project_id, date_trunc('hour', started_at, 'UTC'), %s FROM sessions WHERE %s GROUP BY 1, 2$q$, measures, hour)
    USING p_project, p_bucket;
  FOR d IN SELECT dimension, relation, parent FROM rollup_dimensions ORDER BY dimension LOOP
    EXECUTE format('DELETE FROM %I WHERE project_id = $1 AND bucket = $2', d.relation) USING p_project, p_bucket;
    IF d.parent IS NULL THEN
      EXECUTE format($q$INSERT INTO %I (project_id, bucket, value, sessions, bounces, timed_sessions, duration_ms, screen_views)
        SELECT project_id, date_trunc('hour', started_at, 'UTC'), %I, %s FROM sessions WHERE %s GROUP BY 1, 2, 3$q$,
        d.relation, d.dimension, measures, hour) USING p_project, p_bucket;
    ELSE
      EXECUTE format($q$INSERT INTO %I (project_id, bucket, prefix, value, sessions, bounces, timed_sessions, duration_ms, screen_views)
        SELECT project_id, date_trunc('hour', started_at, 'UTC'), %I, %I, %s FROM sessions WHERE %s GROUP BY 1, 2, 3, 4$q$,
        d.relation, d.parent, d.dimension, measures, hour) USING p_project, p_bucket;
    END IF;
  END LOOP;
END $body$;

DO $$
DECLARE
  cols constant text := 'sessions bigint NOT NULL, bounces bigint NOT NULL, timed_sessions bigint NOT NULL, duration_ms numeric NOT NULL, screen_views bigint NOT NULL';
  d record;
  p record;
BEGIN
  IF NOT tm_timescale() THEN
    RETURN;
  END IF;
  -- The aggregates' rows were exact only together with the log (hours not yet refreshed are
  -- read raw); the tables are filled from the sessions themselves, once.
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
  -- Every hour that holds sessions, by the refresh function itself: the same rows it keeps.
  FOR p IN SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') AS bucket FROM sessions WHERE NOT is_bot LOOP
    PERFORM tm_refresh_rollup_bucket(p.project_id, p.bucket);
  END LOOP;
  -- A delta logged before now is already in these rows: the hours it touched are recomputed
  -- instead (a recompute consumes their deltas, it never adds them).
  UPDATE rollup_invalidations SET rebuild = true, version = nextval('rollup_version_seq') WHERE NOT rebuild;
END $$;
