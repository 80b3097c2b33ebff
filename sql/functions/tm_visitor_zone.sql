-- The zone a project's visit days are computed in: its timezone, or UTC for a zone
-- PostgreSQL does not know (as tm_local_day counts it).
CREATE OR REPLACE FUNCTION tm_visitor_zone(p_timezone text) RETURNS text
LANGUAGE plpgsql STABLE AS $body$
BEGIN
  PERFORM now() AT TIME ZONE p_timezone;
  RETURN p_timezone;
EXCEPTION WHEN invalid_parameter_value THEN
  RETURN 'UTC';
END
$body$;
