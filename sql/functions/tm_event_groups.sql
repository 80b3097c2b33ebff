-- The grouping of events by each column of events_rollup_dimensions (sql/009), for the event
-- rollups that keep one row per (dimension, value): SQL fragments over a subquery `x` of
-- events grouped as `e`.
--   keys:  the columns every grouping set starts with (e.g. 'e.name');
--   cols:  ', x.<column>' per dimension (with COLLATE "C" when `collate_c`: the same groups,
--          equality is bytewise either way, sorted by memcmp);
--   sets:  '(<keys>, e.<column>)' per dimension, comma-separated;
--   dims, vals: ' WHEN GROUPING(e.<column>) = 0 THEN <its name / its value>' per dimension,
--          for a CASE that names a row's dimension and value.
CREATE OR REPLACE FUNCTION tm_event_groups(keys text, collate_c boolean,
  OUT cols text, OUT sets text, OUT dims text, OUT vals text)
LANGUAGE plpgsql STABLE AS $body$
DECLARE
  d record;
BEGIN
  cols := '';
  sets := '';
  dims := '';
  vals := '';
  FOR d IN SELECT dimension FROM events_rollup_dimensions ORDER BY dimension LOOP
    cols := cols || CASE WHEN collate_c THEN format(', x.%1$I COLLATE "C" AS %1$I', d.dimension) ELSE format(', x.%I', d.dimension) END;
    sets := sets || CASE WHEN sets = '' THEN '' ELSE ', ' END || format('(%s, e.%I)', keys, d.dimension);
    dims := dims || format(' WHEN GROUPING(e.%1$I) = 0 THEN %1$L', d.dimension);
    vals := vals || format(' WHEN GROUPING(e.%1$I) = 0 THEN e.%1$I', d.dimension);
  END LOOP;
END
$body$;
