-- The statement triggers of sql/038 on `sessions` (PostgreSQL): the non-bot sessions a
-- statement inserted (+1 for their profile and start), deleted (-1), or moved to another
-- profile (-1 the old, +1 the new: an identify), into visitor_log in one INSERT. Off while
-- tidemark.visitor_log is 'off' (a bulk load or retention, which rebuild instead).
CREATE OR REPLACE FUNCTION tm_visitor_log_statement() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
  IF current_setting('tidemark.visitor_log', true) = 'off' THEN
    RETURN NULL;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO visitor_log (project_id, profile_id, started_at, delta)
    SELECT n.project_id, n.profile_id, n.started_at, 1 FROM new_rows n WHERE NOT n.is_bot;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO visitor_log (project_id, profile_id, started_at, delta)
    SELECT o.project_id, o.profile_id, o.started_at, -1 FROM old_rows o WHERE NOT o.is_bot;
  ELSE
    INSERT INTO visitor_log (project_id, profile_id, started_at, delta)
    SELECT x.project_id, x.profile_id, x.started_at, x.delta
    FROM old_rows o
    JOIN new_rows n ON n.id = o.id AND n.started_at = o.started_at
    CROSS JOIN LATERAL (VALUES (o.project_id, o.profile_id, o.started_at, -1), (n.project_id, n.profile_id, n.started_at, 1))
      AS x(project_id, profile_id, started_at, delta)
    WHERE NOT n.is_bot AND o.profile_id IS DISTINCT FROM n.profile_id;
  END IF;
  RETURN NULL;
END
$body$;
