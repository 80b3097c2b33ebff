-- The GROUPING SETS of a pair layer over row `alias` (one set a pair: its two columns, the
-- first one's parent when it has one, and the `common` columns), and the expressions that
-- name each output row's pair and values: `pair` ('first,second'), `a` (the first column's
-- value), `a_prefix` (its parent's, '' without one) and `b` (the second's). PostgreSQL hashes
-- every set in one pass over the rows; a CROSS JOIN LATERAL (VALUES ...) of the pairs instead
-- made a row per pair and input row and sorted them all: twice the time for a day of sessions
-- (bench/RESULTS.md, "Rollup cost: notes"). The pair columns are NOT NULL, so a column is
-- NULL in an output row exactly when its set leaves it out; GROUPING() over every pair column
-- (at most 31) tells the sets apart.
CREATE OR REPLACE FUNCTION tm_pair_grouping(alias text, common text[], firsts text[], parents text[], seconds text[],
  OUT sets text, OUT pair text, OUT a text, OUT a_prefix text, OUT b text)
LANGUAGE plpgsql IMMUTABLE AS $body$
DECLARE
  cols text[] := ARRAY[]::text[];
  g text;
  set_cols text[];
  mask bigint;
  c text;
  pairs text := '';
  firsts_case text := '';
  prefixes text := '';
  seconds_case text := '';
BEGIN
  FOR i IN 1 .. array_length(firsts, 1) LOOP
    FOREACH c IN ARRAY ARRAY[firsts[i], parents[i], seconds[i]] LOOP
      IF c IS NOT NULL AND NOT c = ANY (cols) THEN
        cols := cols || c;
      END IF;
    END LOOP;
  END LOOP;
  g := format('GROUPING(%s)', (SELECT string_agg(format('%I.%I', alias, x), ', ' ORDER BY o) FROM unnest(cols) WITH ORDINALITY AS u(x, o)));
  sets := '';
  FOR i IN 1 .. array_length(firsts, 1) LOOP
    set_cols := ARRAY[firsts[i]];
    IF parents[i] IS NOT NULL AND parents[i] <> seconds[i] THEN
      set_cols := set_cols || parents[i];
    END IF;
    set_cols := set_cols || seconds[i];
    -- GROUPING()'s bit of a column is 1 when the set leaves it out; the first argument is the highest bit
    mask := 0;
    FOR k IN 1 .. array_length(cols, 1) LOOP
      IF NOT cols[k] = ANY (set_cols) THEN
        mask := mask | (1::bigint << (array_length(cols, 1) - k));
      END IF;
    END LOOP;
    sets := sets || CASE WHEN i = 1 THEN '' ELSE ', ' END || format('(%s)',
      (SELECT string_agg(format('%I.%I', alias, x), ', ' ORDER BY o) FROM unnest(common || set_cols) WITH ORDINALITY AS u(x, o)));
    pairs := pairs || format(' WHEN %s THEN %L', mask, firsts[i] || ',' || seconds[i]);
    firsts_case := firsts_case || format(' WHEN %s THEN %I.%I', mask, alias, firsts[i]);
    seconds_case := seconds_case || format(' WHEN %s THEN %I.%I', mask, alias, seconds[i]);
    IF parents[i] IS NOT NULL THEN
      prefixes := prefixes || format(' WHEN %s THEN %I.%I', mask, alias, parents[i]);
    END IF;
  END LOOP;
  pair := format('CASE %s%s END', g, pairs);
  a := format('CASE %s%s END', g, firsts_case);
  a_prefix := format('CASE %s%s ELSE %L END', g, prefixes, '');
  b := format('CASE %s%s END', g, seconds_case);
END
$body$;
