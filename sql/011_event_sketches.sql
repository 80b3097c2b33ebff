-- HyperLogLog sketches of the distinct users and sessions of the events that charts count
-- (no bots, no session_start / session_end), per (project, hour, event name, breakdown
-- column value), for /export/charts segments user, session and user_average over large
-- periods (internal/export/sketches.ts; TIDEMARK_EXACT_VISITORS_MAX decides). Uses the `hll`
-- extension like sql/008_rollup_visitors.sql: without it nothing is created and those
-- segments are always counted exactly from the raw events.
--
-- events_sketches_hourly (project_id, dimension, name, bucket, value, users, sessions), per
-- UTC hour `bucket`:
--   dimension ''         value '': the hour's events of one name (name = the event name),
--                        or of every charted name (name = '': ingest refuses empty names);
--   dimension <column>   (one of events_rollup_dimensions, sql/009): the same per value of
--                        that column.
--   users     hll of hll_hash_text(profile_id): a chart's "user" is the profile id (the
--             payload's profileId, else the device id; semantics.md), as count(DISTINCT
--             profile_id) on the raw path;
--   sessions  hll of hll_hash_text(session_id::text) of the events with a session (the raw
--             path's count(DISTINCT session_id) leaves NULL out); empty when none has one.
--   Filled for one (project, hour) by one scan of the hour's events grouped by GROUPING
--   SETS (per name and for every name, without and with each column).
-- events_sketches_daily (same columns): per local day of the project's timezone (`bucket`
--   = its first instant, when it and the next local midnight are whole UTC hours), the
--   union of the day's hourly rows: a 30-day chart reads ~30 rows per value instead of ~720.
-- events_sketches_days (project_id, bucket, hours): the local days whose daily rows are
--   complete (computed from hourly rows of which none was logged). A read takes a day's
--   rows only when the day is listed here, none of its hours is in rollup_invalidations, and
--   it lies inside one series bucket; every other hour reads its hourly rows (or, logged,
--   its raw events). So a changed timezone or a day not yet complete costs speed, never
--   correctness.
--
-- Same HyperLogLog parameters as 008 ('14, 5, -1, 1' = HLL_PARAMS of
-- internal/insights/rollups.ts), so sketches union with those computed by queries; numbers
-- are read with tm_visitors_estimate() (008): exact up to 1280 distinct values per union,
-- above a relative standard error of at most 1% (99.7% within 3%).
--
-- Kept by the service on every engine (registered in rollup_registry, refresh function
-- tm_refresh_event_sketches(project, hour)): the worker logs every changed (project, hour)
-- in rollup_invalidations; the refresh recomputes the hour's rows, then its local day's
-- rows when no other hour of that day is still logged (a bulk refresh in hour order builds
-- each day once, from its last hour). This migration logs every hour that holds events, so
-- an upgraded database answers exactly as before until the refresh job has filled them in.
--
-- tm_setup_event_sketches() does the whole setup and is safe to call again: a server that
-- gets the hll package later enables the sketches (and the visitor sketches of 008) with
-- `SELECT tm_setup_event_sketches();` as a superuser.

CREATE FUNCTION tm_setup_event_sketches() RETURNS boolean
LANGUAGE plpgsql AS $setup$
DECLARE
  d record;
  sets text := '(e.name), ()';
  dims text := '';
  vals text := '';
  cols text := '';
BEGIN
  -- The hll extension and tm_visitors_estimate() (creates them when it can; false without hll).
  IF NOT tm_setup_visitors_rollup() THEN
    RETURN false;
  END IF;
  IF to_regclass('events_sketches_days') IS NOT NULL THEN
    RETURN true;
  END IF;
  EXECUTE $t$
    CREATE TABLE events_sketches_hourly (
      project_id  text NOT NULL,
      dimension   text NOT NULL,
      name        text NOT NULL,
      bucket      timestamptz NOT NULL,
      value       text NOT NULL,
      users       hll NOT NULL,
      sessions    hll NOT NULL,
      -- reads probe (project, dimension, bucket): every name and value of one hour or day
      PRIMARY KEY (project_id, dimension, bucket, name, value)
    )$t$;
  EXECUTE 'CREATE TABLE events_sketches_daily (LIKE events_sketches_hourly INCLUDING ALL)';
  EXECUTE $t$
    CREATE TABLE events_sketches_days (
      project_id  text NOT NULL,
      bucket      timestamptz NOT NULL,
      hours       integer NOT NULL CHECK (hours > 0),
      PRIMARY KEY (project_id, bucket)
    )$t$;
  -- The refresh and retention delete by (project_id, bucket).
  EXECUTE 'CREATE INDEX events_sketches_hourly_bucket_idx ON events_sketches_hourly (project_id, bucket)';
  EXECUTE 'CREATE INDEX events_sketches_daily_bucket_idx ON events_sketches_daily (project_id, bucket)';
  FOR d IN SELECT dimension FROM events_rollup_dimensions ORDER BY dimension LOOP
    cols := cols || format(', x.%1$I COLLATE "C" AS %1$I', d.dimension);
    sets := sets || format(', (e.name, e.%1$I), (e.%1$I)', d.dimension);
    dims := dims || format(' WHEN GROUPING(e.%1$I) = 0 THEN %1$L', d.dimension);
    vals := vals || format(' WHEN GROUPING(e.%1$I) = 0 THEN e.%1$I', d.dimension);
  END LOOP;
  EXECUTE format($f$
    CREATE FUNCTION tm_refresh_event_sketches(p_project text, p_bucket timestamptz) RETURNS void
    LANGUAGE plpgsql AS $body$
    DECLARE
      tz text;
      d0 timestamptz;
      d1 timestamptz;
    BEGIN
      DELETE FROM events_sketches_hourly WHERE project_id = p_project AND bucket = p_bucket;
      INSERT INTO events_sketches_hourly (project_id, dimension, name, bucket, value, users, sessions)
      SELECT p_project,
             CASE %1$s ELSE '' END,
             CASE WHEN GROUPING(e.name) = 1 THEN '' ELSE e.name END,
             p_bucket,
             CASE %2$s ELSE '' END,
             hll_add_agg(hll_hash_text(e.profile_id), 14, 5, -1, 1),
             coalesce(hll_add_agg(hll_hash_text(e.session_id::text), 14, 5, -1, 1) FILTER (WHERE e.session_id IS NOT NULL),
                      hll_empty(14, 5, -1, 1))
      FROM (
        -- COLLATE "C": the same groups (equality is bytewise either way), sorted by memcmp
        SELECT x.name COLLATE "C" AS name%4$s, x.profile_id, x.session_id
        FROM events x
        WHERE x.project_id = p_project AND x.created_at >= p_bucket AND x.created_at < p_bucket + interval '1 hour'
          AND NOT x.is_bot AND x.name <> ALL (ARRAY['session_start', 'session_end']::text[])
      ) e
      GROUP BY GROUPING SETS (%3$s)
      -- count(*) > 0: GROUPING SETS' () emits a grand-total row even for an hour without
      -- events (sessions only), whose hll_add_agg is NULL; such an hour has no rows.
      HAVING (GROUPING(e.name) = 1 OR e.name <> '') AND count(*) > 0;

      -- The local day (project timezone) holding the hour. A zone PostgreSQL does not know
      -- counts as UTC (as the read side does); days that do not start and end on whole UTC
      -- hours (e.g. Asia/Kolkata) get no daily rows.
      SELECT p.timezone INTO tz FROM projects p WHERE p.id = p_project;
      IF tz IS NULL THEN
        RETURN;
      END IF;
      BEGIN
        d0 := date_trunc('day', p_bucket AT TIME ZONE tz) AT TIME ZONE tz;
        d1 := (date_trunc('day', p_bucket AT TIME ZONE tz) + interval '1 day') AT TIME ZONE tz;
      EXCEPTION WHEN invalid_parameter_value THEN
        d0 := date_trunc('day', p_bucket, 'UTC');
        d1 := d0 + interval '1 day';
      END;
      IF NOT (p_bucket >= d0 AND p_bucket < d1) OR extract(epoch FROM d0) %% 3600 <> 0 OR extract(epoch FROM d1) %% 3600 <> 0 THEN
        RETURN;
      END IF;
      -- Refreshes of two hours of one day take turns (READ COMMITTED: each statement sees
      -- the other's commit, log deletions included).
      PERFORM pg_advisory_xact_lock(727274011, hashtext(p_project || '/' || d0::text));
      DELETE FROM events_sketches_days WHERE project_id = p_project AND bucket = d0;
      DELETE FROM events_sketches_daily WHERE project_id = p_project AND bucket = d0;
      -- Another hour of the day still logged: its refresh builds the day.
      IF EXISTS (SELECT 1 FROM rollup_invalidations i
                 WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
        RETURN;
      END IF;
      INSERT INTO events_sketches_daily (project_id, dimension, name, bucket, value, users, sessions)
      SELECT p_project, h.dimension, h.name, d0, h.value, hll_union_agg(h.users), hll_union_agg(h.sessions)
      FROM events_sketches_hourly h
      WHERE h.project_id = p_project AND h.bucket >= d0 AND h.bucket < d1
      GROUP BY h.dimension, h.name, h.value;
      INSERT INTO events_sketches_days (project_id, bucket, hours)
      VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
    END
    $body$$f$, dims, vals, sets, cols);
  INSERT INTO rollup_registry (relation, refresh_fn) VALUES
    ('events_sketches_hourly', 'tm_refresh_event_sketches'),
    ('events_sketches_daily', 'tm_refresh_event_sketches'),
    ('events_sketches_days', 'tm_refresh_event_sketches')
  ON CONFLICT (relation) DO NOTHING;
  INSERT INTO rollup_invalidations (project_id, bucket)
  SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
  ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
  RETURN true;
END
$setup$;

SELECT tm_setup_event_sketches();
