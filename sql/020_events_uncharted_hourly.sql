-- The events that the per-column event rollups leave out, so that the /export/events
-- totalCount of a page filtered on ONE rolled-up column can be summed from rollups
-- (internal/export/column.ts columnTotalCountSql) instead of counting raw rows.
--
-- events_<column>_hourly (sql/009) and the event_counts_daily rows of a column (sql/014) hold
-- the events charts count: no bots, no session_start / session_end. The export lists every
-- event, so its count of e.g. `city is Paris` is those rows plus the bots and the service's
-- own session rows of Paris. These tables hold exactly that remainder, per column:
--
-- event_uncharted_hourly (project_id, bucket, dimension, name, value, count): per (project,
--   UTC hour of created_at, column of events_rollup_dimensions, event name, value of that
--   column) the number of events that are bots or named session_start / session_end.
--   So for a column C, an hour not in rollup_invalidations and any filter that tests only C
--   and the name: events_C_hourly rows + these rows of dimension C passing the filter = the
--   raw events of the hour passing it.
-- event_uncharted_daily (project_id, bucket, dimension, name, value, count): the same per
--   local day of the project's timezone (`bucket` = its first instant; only days that start
--   and end on whole UTC hours, as sql/014), the day's hourly rows summed.
-- event_uncharted_days (project_id, bucket, hours): the days whose daily rows are complete
--   (built while no other hour of the day was logged), as event_counts_days of sql/014. A
--   read takes a day's rows only when the day is listed here AND in event_counts_days with
--   the same hours, lies inside the counted span, and none of its hours is logged; every
--   other hour reads its hourly rows (or, logged, its raw events).
--
-- Plain tables kept by the service on every engine (on TimescaleDB too, as the cube of
-- sql/015: the refresh job refreshes the continuous aggregates of an hour range first, then
-- runs every refresh function per (project, hour) and removes the log entries in the same
-- transaction, so an hour read from rollups has both its charted rows and these exact).
-- Registered in rollup_registry with tm_refresh_event_uncharted(project, hour): the hour's
-- rows from one GROUPING SETS scan of the hour's uncharted events, then the local day's rows
-- from the day's hourly rows when no other hour of the day is still logged.
-- The names are not events_% / rollup_%: tests list those relations.

CREATE TABLE event_uncharted_hourly (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  dimension   text NOT NULL,
  name        text NOT NULL,
  value       text NOT NULL,
  count       bigint NOT NULL,
  -- reads probe (project, hour, dimension); the refresh deletes by (project, hour)
  PRIMARY KEY (project_id, bucket, dimension, name, value)
);

CREATE TABLE event_uncharted_daily (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  dimension   text NOT NULL,
  name        text NOT NULL,
  value       text NOT NULL,
  count       bigint NOT NULL,
  -- reads probe (project, day, dimension); the refresh deletes by (project, day)
  PRIMARY KEY (project_id, bucket, dimension, name, value)
);

CREATE TABLE event_uncharted_days (
  project_id  text NOT NULL,
  bucket      timestamptz NOT NULL,
  hours       integer NOT NULL CHECK (hours > 0),
  PRIMARY KEY (project_id, bucket)
);

DO $migration$
DECLARE
  d record;
  sets text := '';
  dims text := '';
  vals text := '';
  cols text := '';
BEGIN
  FOR d IN SELECT dimension FROM events_rollup_dimensions ORDER BY dimension LOOP
    cols := cols || format(', x.%1$I COLLATE "C" AS %1$I', d.dimension);
    sets := sets || CASE WHEN sets = '' THEN '' ELSE ', ' END || format('(e.name, e.%1$I)', d.dimension);
    dims := dims || format(' WHEN GROUPING(e.%1$I) = 0 THEN %1$L', d.dimension);
    vals := vals || format(' WHEN GROUPING(e.%1$I) = 0 THEN e.%1$I', d.dimension);
  END LOOP;
  EXECUTE format($f$
    CREATE FUNCTION tm_refresh_event_uncharted(p_project text, p_bucket timestamptz) RETURNS void
    LANGUAGE plpgsql AS $body$
    DECLARE
      d0 timestamptz;
      d1 timestamptz;
    BEGIN
      DELETE FROM event_uncharted_hourly WHERE project_id = p_project AND bucket = p_bucket;
      INSERT INTO event_uncharted_hourly (project_id, bucket, dimension, name, value, count)
      SELECT p_project, p_bucket, CASE %1$s END, e.name, CASE %2$s END, count(*)
      FROM (
        -- COLLATE "C": the same groups (equality is bytewise either way), sorted by memcmp
        SELECT x.name COLLATE "C" AS name%3$s
        FROM events x
        WHERE x.project_id = p_project AND x.created_at >= p_bucket AND x.created_at < p_bucket + interval '1 hour'
          AND (x.is_bot OR x.name = ANY (ARRAY['session_start', 'session_end']::text[]))
      ) e
      GROUP BY GROUPING SETS (%4$s);

      SELECT l.d0, l.d1 INTO d0, d1 FROM tm_local_day(p_project, p_bucket) l;
      IF d0 IS NULL THEN
        RETURN;
      END IF;
      -- Refreshes of two hours of one day take turns (READ COMMITTED: each statement sees
      -- the other's commit, log deletions included).
      PERFORM pg_advisory_xact_lock(727274020, hashtext(p_project || '/' || d0::text));
      DELETE FROM event_uncharted_days WHERE project_id = p_project AND bucket = d0;
      DELETE FROM event_uncharted_daily WHERE project_id = p_project AND bucket = d0;
      -- Another hour of the day still logged: its refresh builds the day.
      IF EXISTS (SELECT 1 FROM rollup_invalidations i
                 WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket) THEN
        RETURN;
      END IF;
      INSERT INTO event_uncharted_daily (project_id, bucket, dimension, name, value, count)
      SELECT p_project, d0, h.dimension, h.name, h.value, sum(h.count)
      FROM event_uncharted_hourly h
      WHERE h.project_id = p_project AND h.bucket >= d0 AND h.bucket < d1
      GROUP BY h.dimension, h.name, h.value;
      INSERT INTO event_uncharted_days (project_id, bucket, hours)
      VALUES (p_project, d0, (extract(epoch FROM d1 - d0) / 3600)::integer);
    END
    $body$$f$, dims, vals, cols, sets);
END
$migration$;

INSERT INTO rollup_registry (relation, refresh_fn) VALUES
  ('event_uncharted_hourly', 'tm_refresh_event_uncharted'),
  ('event_uncharted_daily', 'tm_refresh_event_uncharted'),
  ('event_uncharted_days', 'tm_refresh_event_uncharted');

-- Hours that already hold events (a database migrated with data) have no rows here yet: log
-- them, so that reads count them raw until the refresh job has filled them in.
INSERT INTO rollup_invalidations (project_id, bucket)
SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
ON CONFLICT (project_id, bucket, shard) DO UPDATE SET version = nextval('rollup_version_seq');
