-- The start of a daily layer's refresh, for the local day holding one (project, UTC hour):
-- the day (tm_local_day; NULLs and build = false when the day is not whole UTC hours or the
-- project is unknown); the day's lock, so that refreshes of two hours of one day take turns
-- (READ COMMITTED: each statement sees the other's commit, log deletions included); the day's
-- rows deleted from each of `tables` that exists (its *_days entry first); and whether to
-- build the day now: not while another hour of it is still logged (that hour's refresh
-- builds it).
CREATE OR REPLACE FUNCTION tm_day_build(p_project text, p_bucket timestamptz, p_lock integer, p_tables text[],
  OUT d0 timestamptz, OUT d1 timestamptz, OUT build boolean)
LANGUAGE plpgsql AS $body$
DECLARE
  t text;
BEGIN
  build := false;
  SELECT l.d0, l.d1 INTO d0, d1 FROM tm_local_day(p_project, p_bucket) l;
  IF d0 IS NULL THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock(p_lock, hashtext(p_project || '/' || d0::text));
  FOREACH t IN ARRAY p_tables LOOP
    IF to_regclass(t) IS NOT NULL THEN
      EXECUTE format('DELETE FROM %I WHERE project_id = $1 AND bucket = $2', t) USING p_project, d0;
    END IF;
  END LOOP;
  build := NOT EXISTS (SELECT 1 FROM rollup_invalidations i
                       WHERE i.project_id = p_project AND i.bucket >= d0 AND i.bucket < d1 AND i.bucket <> p_bucket);
END
$body$;
