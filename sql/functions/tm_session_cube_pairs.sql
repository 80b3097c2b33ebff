-- The pair rows of one local day of the session cube (sql/016): per pair of the nine cube
-- dimensions and pair of values, the sums of the day's combination rows.
CREATE OR REPLACE FUNCTION tm_session_cube_pairs(p_project text, p_day timestamptz) RETURNS void
LANGUAGE plpgsql AS $body$
DECLARE
  m record;
BEGIN
  m := tm_session_measures('rollup_session_cube_pairs_daily', 'h');
  EXECUTE format($q$INSERT INTO rollup_session_cube_pairs_daily (project_id, pair, bucket, a, b%1$s)
    SELECT $1, x.pair, $2, x.a, x.b%2$s
    FROM rollup_session_cube_daily h
    CROSS JOIN LATERAL (VALUES %3$s) AS x(pair, a, b)
    WHERE h.project_id = $1 AND h.bucket = $2
    GROUP BY x.pair, x.a, x.b$q$, m.cols, m.sums, tm_cube_pair_values('h')) USING p_project, p_day;
END
$body$;
