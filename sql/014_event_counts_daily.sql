-- Per-local-day event counts for /export/charts (internal/export/rollups.ts): the events that
-- charts count (no bots, no session_start / session_end), per (project, local day of the
-- project's timezone), so that a 30-day chart reads ~30 rows per value instead of the ~720
-- hourly rows of events_hourly / events_<column>_hourly (sql/009_event_rollups.sql).
--
-- event_counts_daily (project_id, dimension, name, bucket, value, count):
--   bucket     the first instant of a local day (only days that start and end on whole UTC
--              hours: not e.g. Asia/Kolkata; a zone PostgreSQL does not know counts as UTC);
--   dimension  ''       value '': the day's charted events of one name;
--              <column> (one of events_rollup_dimensions): the same per value of that column.
-- event_counts_days (project_id, bucket, hours): the local days whose rows are complete
--   (built while none of their other hours was logged), exactly like events_sketches_days
--   of sql/011_event_sketches.sql. A read takes a day's rows only when the day is listed
--   here, none of its hours is in rollup_invalidations, and it lies inside one chart bucket;
--   every other hour reads the hourly rollups (or, logged, its raw events). So a changed
--   timezone or a day not yet complete costs speed, never correctness.
--
-- Plain tables kept by the service on every engine (also on TimescaleDB, where the hourly
-- rollups are continuous aggregates refreshed separately: so a day is built from the raw
-- events of the day, with one GROUPING SETS scan, never from the hourly rollups). Registered
-- in rollup_registry with tm_refresh_event_counts(project, hour): for each logged hour it
-- rebuilds the hour's local day when no other hour of that day is still logged (a bulk
-- refresh in hour order builds each day once, from its last hour; the others only delete).
-- The names are not events_% / rollup_%: tests list those relations.

CREATE TABLE event_counts_daily (
  project_id  text NOT NULL,
  dimension   text NOT NULL,
  name        text NOT NULL,
  bucket      timestamptz NOT NULL,
  value       text NOT NULL,
  count       bigint NOT NULL,
  -- reads probe (project, dimension, bucket): every name and value of one day
  PRIMARY KEY (project_id, dimension, bucket, name, value)
);
-- the refresh and retention delete by (project_id, bucket)
CREATE INDEX event_counts_daily_bucket_idx ON event_counts_daily (project_id, bucket);

CREATE TABLE event_counts_days (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  hours       integer NOT NULL CHECK (hours > 0),
  PRIMARY KEY (project_id, bucket)
);

DO $migration$
DECLARE
  d record;
  sets text := '(e.name)';
  dims text := '';
  vals text := '';
  cols text := '';
BEGIN
  FOR d IN SELECT dimension FROM events_rollup_dimensions ORDER BY dimension LOOP
    cols := cols || format(', x.%1$I COLLATE "C" AS %1$I', d.dimension);
    sets := sets || format(', (e.name, e.%1$I)', d.dimension);
    dims := dims || format(' WHEN GROUPING(e.%1$I) = 0 THEN %1$L', d.dimension);
    vals := vals || format(' WHEN GROUPING(e.%1$I) = 0 THEN e.%1$I', d.dimension);
  END LOOP;
  EXECUTE format($f$
    CREATE FUNCTION tm_refresh_event_counts(p_project text, p_bucket timestamptz) RETURNS void
    LANGUAGE plpgsql AS $body$
    DECLARE
      tz text;
      d0 timestamptz;
      d1 timestamptz;
    BEGIN
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
      PERFORM pg_advisory_xact_lock(727274014, hashtext(p_project || '/' || d0::text));
      DELETE FROM event_counts_days WHERE project_id = p_project AND bucket = d0;
      DELETE FROM event_counts_daily WHERE project_id = p_project AND bucket = d0;
      -- Another hour of the day still logged: its refresh builds the day.
      IF EXISTS (SELECT 1 FROM rollup_invalidations i
                 WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
        RETURN;
      END IF;
      INSERT INTO event_counts_daily (project_id, dimension, name, bucket, value, count)
      SELECT p_project, CASE %1$s ELSE '' END, e.name, d0, CASE %2$s ELSE '' END, count(*)
      FROM (
        -- COLLATE "C": the same groups (equality is bytewise either way), sorted by memcmp
        SELECT x.name COLLATE "C" AS name%3$s
        FROM events x
        WHERE x.project_id = p_project AND x.created_at >= d0 AND x.created_at < d1
          AND NOT x.is_bot AND x.name <> ALL (ARRAY['session_start', 'session_end']::text[])
      ) e
      GROUP BY GROUPING SETS (%4$s);
      INSERT INTO event_counts_days (project_id, bucket, hours)
      VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
    END
    $body$$f$, dims, vals, cols, sets);
END
$migration$;

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('event_counts_daily', 'tm_refresh_event_counts'),
  ('event_counts_days', 'tm_refresh_event_counts');

-- Days that already hold events (a database migrated with data) are not listed yet: log
-- every hour with events, so that the refresh job builds their days (reads meanwhile take
-- the hourly rollups or raw events exactly as before).
INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
