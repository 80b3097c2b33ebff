-- The VALUES rows (pair, a, b) of every pair of the nine cube columns of row `alias`, in the
-- cube's column order of sql/015 ('referrer_name,referrer_type', ...): 36 rows, for the daily pair layers of
-- this cube and of the session cube (sql/016_session_cube_pairs.sql).
CREATE OR REPLACE FUNCTION tm_cube_pair_values(alias text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $body$
DECLARE
  dims text[] := ARRAY['referrer_name', 'referrer_type', 'utm_source', 'utm_medium', 'country', 'device', 'browser', 'os', 'brand'];
  pairs text := '';
BEGIN
  FOR i IN 1 .. array_length(dims, 1) - 1 LOOP
    FOR j IN i + 1 .. array_length(dims, 1) LOOP
      pairs := pairs || CASE WHEN pairs = '' THEN '' ELSE ', ' END
        || format('(%L, %I.%I, %I.%I)', dims[i] || ',' || dims[j], alias, dims[i], alias, dims[j]);
    END LOOP;
  END LOOP;
  RETURN pairs;
END
$body$;
