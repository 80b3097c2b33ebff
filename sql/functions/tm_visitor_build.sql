-- Builds a project's visit days and returns (sql/038) from its sessions, in the project's
-- current timezone, and takes its log: what the log holds is in the sessions read. Run in a
-- REPEATABLE READ transaction of its own under the visitors' advisory lock
-- (internal/store/visitor-days.ts), so the sessions read and the log taken are of one snapshot.
CREATE OR REPLACE FUNCTION tm_visitor_build(p_project text) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  tz text;
  z text;
BEGIN
  SELECT p.timezone INTO tz FROM projects p WHERE p.id = p_project;
  DELETE FROM visitor_days WHERE project_id = p_project;
  DELETE FROM visitor_day_returns WHERE project_id = p_project;
  DELETE FROM visitor_log WHERE project_id = p_project;
  IF tz IS NULL THEN
    DELETE FROM visitor_state WHERE project_id = p_project;
    RETURN;
  END IF;
  z := tm_visitor_zone(tz);
  INSERT INTO visitor_days (project_id, profile_id, day, sessions)
  SELECT p_project, s.profile_id, (s.started_at AT TIME ZONE z)::date, count(*)
  FROM sessions s WHERE s.project_id = p_project AND NOT s.is_bot
  GROUP BY 2, 3;
  INSERT INTO visitor_day_returns (project_id, day, prev_day, visitors)
  SELECT p_project, x.day, x.prev_day, count(*)
  FROM (SELECT d.day, coalesce(lag(d.day) OVER (PARTITION BY d.profile_id ORDER BY d.day), '-infinity'::date) AS prev_day
        FROM visitor_days d WHERE d.project_id = p_project) x
  GROUP BY 2, 3;
  INSERT INTO visitor_state (project_id, timezone, zone) VALUES (p_project, tz, z)
  ON CONFLICT (project_id) DO UPDATE SET timezone = EXCLUDED.timezone, zone = EXCLUDED.zone, built_at = now();
END
$body$;
