-- The VALUES rows (pair, a, a_prefix, b) of every (wide, cube) pair of row `alias`, wide
-- dimensions and cube dimensions each in the order of sql/019 ('referrer,referrer_name', ...).
CREATE OR REPLACE FUNCTION tm_dim_pair_values(alias text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $body$
DECLARE
  wide text[] := ARRAY['referrer', 'utm_campaign', 'utm_term', 'utm_content', 'region', 'city', 'browser_version', 'os_version', 'model'];
  parent text[] := ARRAY[NULL, NULL, NULL, NULL, 'country', 'country', 'browser', 'os', NULL];
  cube text[] := ARRAY['referrer_name', 'referrer_type', 'utm_source', 'utm_medium', 'country', 'device', 'browser', 'os', 'brand'];
  pairs text := '';
BEGIN
  FOR i IN 1 .. array_length(wide, 1) LOOP
    FOR j IN 1 .. array_length(cube, 1) LOOP
      pairs := pairs || CASE WHEN pairs = '' THEN '' ELSE ', ' END
        || format('(%L, %I.%I, %s, %I.%I)', wide[i] || ',' || cube[j], alias, wide[i],
                  CASE WHEN parent[i] IS NULL THEN quote_literal('') ELSE format('%I.%I', alias, parent[i]) END,
                  alias, cube[j]);
    END LOOP;
  END LOOP;
  RETURN pairs;
END
$body$;
