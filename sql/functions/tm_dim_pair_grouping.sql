-- tm_pair_grouping() of the dimension pairs (sql/019) over row `alias`: each wide dimension
-- (with its parent as a_prefix) with each cube dimension, in the order of sql/019
-- ('referrer,referrer_name', ...), as tm_dim_pair_values() lists them.
CREATE OR REPLACE FUNCTION tm_dim_pair_grouping(alias text, OUT sets text, OUT pair text, OUT a text, OUT a_prefix text, OUT b text)
LANGUAGE plpgsql IMMUTABLE AS $body$
DECLARE
  wide text[] := ARRAY['referrer', 'utm_campaign', 'utm_term', 'utm_content', 'region', 'city', 'browser_version', 'os_version', 'model'];
  parent text[] := ARRAY[NULL, NULL, NULL, NULL, 'country', 'country', 'browser', 'os', NULL];
  cube text[] := ARRAY['referrer_name', 'referrer_type', 'utm_source', 'utm_medium', 'country', 'device', 'browser', 'os', 'brand'];
  firsts text[] := ARRAY[]::text[];
  parents text[] := ARRAY[]::text[];
  seconds text[] := ARRAY[]::text[];
  g record;
BEGIN
  FOR i IN 1 .. array_length(wide, 1) LOOP
    FOR j IN 1 .. array_length(cube, 1) LOOP
      firsts := firsts || wide[i];
      parents := parents || parent[i];
      seconds := seconds || cube[j];
    END LOOP;
  END LOOP;
  g := tm_pair_grouping(alias, ARRAY[]::text[], firsts, parents, seconds);
  sets := g.sets; pair := g.pair; a := g.a; a_prefix := g.a_prefix; b := g.b;
END
$body$;
