-- The row triggers of sql/038 on `sessions` (TimescaleDB, whose hypertables take no
-- transition tables): a non-bot session inserted (+1 for its profile and
-- start), deleted (-1), or moved to another profile (-1 the old, +1 the new), into visitor_log.
CREATE OR REPLACE FUNCTION tm_visitor_log() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO visitor_log (project_id, profile_id, started_at, delta) VALUES (NEW.project_id, NEW.profile_id, NEW.started_at, 1);
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO visitor_log (project_id, profile_id, started_at, delta) VALUES (OLD.project_id, OLD.profile_id, OLD.started_at, -1);
  ELSE
    INSERT INTO visitor_log (project_id, profile_id, started_at, delta)
    VALUES (OLD.project_id, OLD.profile_id, OLD.started_at, -1), (NEW.project_id, NEW.profile_id, NEW.started_at, 1);
  END IF;
  RETURN NULL;
END
$body$;
