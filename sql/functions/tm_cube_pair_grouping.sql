-- tm_pair_grouping() of every pair of the nine cube columns (sql/015, 016) over row `alias`,
-- with the `common` columns in every set, in the cube's column order
-- ('referrer_name,referrer_type', ...), as tm_cube_pair_values() lists them.
CREATE OR REPLACE FUNCTION tm_cube_pair_grouping(alias text, common text[], OUT sets text, OUT pair text, OUT a text, OUT a_prefix text, OUT b text)
LANGUAGE plpgsql IMMUTABLE AS $body$
DECLARE
  dims text[] := ARRAY['referrer_name', 'referrer_type', 'utm_source', 'utm_medium', 'country', 'device', 'browser', 'os', 'brand'];
  firsts text[] := ARRAY[]::text[];
  parents text[] := ARRAY[]::text[];
  seconds text[] := ARRAY[]::text[];
  g record;
BEGIN
  FOR i IN 1 .. array_length(dims, 1) - 1 LOOP
    FOR j IN i + 1 .. array_length(dims, 1) LOOP
      firsts := firsts || dims[i];
      parents := parents || NULL::text;
      seconds := seconds || dims[j];
    END LOOP;
  END LOOP;
  g := tm_pair_grouping(alias, common, firsts, parents, seconds);
  sets := g.sets; pair := g.pair; a := g.a; a_prefix := g.a_prefix; b := g.b;
END
$body$;
