-- The local day (project timezone) holding a UTC hour, as the daily layers of sql/011, 012
-- and 014 compute it: a zone PostgreSQL does not know counts as UTC; NULLs when the project is
-- unknown or the day does not start and end on whole UTC hours (e.g. Asia/Kolkata).
CREATE OR REPLACE FUNCTION tm_local_day(p_project text, p_bucket timestamptz, OUT d0 timestamptz, OUT d1 timestamptz)
LANGUAGE plpgsql STABLE AS $body$
DECLARE
  tz text;
BEGIN
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
  IF NOT (p_bucket >= d0 AND p_bucket < d1) OR extract(epoch FROM d0) % 3600 <> 0 OR extract(epoch FROM d1) % 3600 <> 0 THEN
    d0 := NULL;
    d1 := NULL;
  END IF;
END
$body$;
