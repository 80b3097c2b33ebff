-- The session measures, once, for every table that sums sessions: those of the list that
-- table `rel` has as columns (resolved through the search path, so a shadow copy of the delta
-- runs answers as its table), as SQL fragments, each starting with ', ':
--   cols:  the column names;
--   exprs: their values over the sessions of row alias `alias` (a group of sessions);
--   sums:  their sums over rows of the table itself under alias `alias` (a day of hours).
-- Bots are left out by the callers' WHERE.
CREATE OR REPLACE FUNCTION tm_session_measures(rel text, alias text, OUT cols text, OUT exprs text, OUT sums text)
LANGUAGE plpgsql STABLE AS $body$
DECLARE
  m record;
BEGIN
  cols := '';
  exprs := '';
  sums := '';
  FOR m IN
    SELECT v.name, v.expr
    FROM (VALUES
      (1, 'sessions', 'count(*)'),
      (2, 'bounces', 'count(*) FILTER (WHERE %1$I.is_bounce)'),
      (3, 'timed_sessions', 'count(*) FILTER (WHERE %1$I.duration_ms > 0)'),
      (4, 'duration_ms', 'coalesce(sum(%1$I.duration_ms) FILTER (WHERE %1$I.duration_ms > 0), 0)'),
      (5, 'screen_views', 'coalesce(sum(%1$I.screen_view_count), 0)')
    ) AS v(i, name, expr)
    WHERE EXISTS (SELECT 1 FROM pg_attribute a
                  WHERE a.attrelid = to_regclass(rel) AND a.attname = v.name AND a.attnum > 0 AND NOT a.attisdropped)
    ORDER BY v.i
  LOOP
    cols := cols || ', ' || quote_ident(m.name);
    exprs := exprs || ', ' || format(m.expr, alias);
    sums := sums || format(', sum(%I.%I)', alias, m.name);
  END LOOP;
END
$body$;
