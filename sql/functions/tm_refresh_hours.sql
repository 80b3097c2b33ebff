-- Runs the refresh functions `fns`, in order, for each (project, UTC hour) of the arrays, in
-- their order: one statement for a refresh round's recomputes instead of one round trip per
-- function and hour (internal/store/rollups.ts). With `shadowed`, each hour leaves the
-- round's temporary rollup_invalidations once its functions are done, so that a later hour of
-- the same local day sees it recomputed (tm_day_build builds a day when no hour of it awaits
-- a recompute).
CREATE OR REPLACE FUNCTION tm_refresh_hours(fns text[], projects text[], buckets timestamptz[], shadowed boolean)
RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  i int;
  fn text;
BEGIN
  FOR i IN 1 .. coalesce(array_length(projects, 1), 0) LOOP
    FOREACH fn IN ARRAY fns LOOP
      EXECUTE format('SELECT %I($1, $2)', fn) USING projects[i], buckets[i];
    END LOOP;
    IF shadowed THEN
      EXECUTE 'DELETE FROM pg_temp.rollup_invalidations WHERE project_id = $1 AND bucket = $2' USING projects[i], buckets[i];
    END IF;
  END LOOP;
END
$body$;
