-- The pair metrics (sql/018) are built with GROUPING SETS, one hashed set a pair in one pass
-- over the day's sessions (tm_session_pair_metrics_day, sql/functions), instead of a row per
-- pair and session: a day of 5,400 sessions 288 -> 90 ms (bench/RESULTS.md, "Rollup cost:
-- notes"), the same rows.
--
-- The refresh function exists only where the hll extension is: sql/018's setup creates it.
-- That setup keeps its tables and registry rows under a new name; tm_setup_pair_metrics()
-- runs it and then makes the refresh function the one-line call of the day's build, here and
-- on a server that installs hll later (docs/operating.md).
ALTER FUNCTION tm_setup_pair_metrics() RENAME TO tm_setup_pair_metrics_tables;

CREATE FUNCTION tm_setup_pair_metrics() RETURNS boolean
LANGUAGE plpgsql AS $setup$
BEGIN
  IF NOT tm_setup_pair_metrics_tables() THEN
    RETURN false;
  END IF;
  CREATE OR REPLACE FUNCTION tm_refresh_session_pair_metrics(p_project text, p_bucket timestamptz) RETURNS void
  LANGUAGE plpgsql AS $body$
  BEGIN
    PERFORM tm_session_pair_metrics_day(p_project, p_bucket);
  END
  $body$;
  RETURN true;
END
$setup$;

SELECT tm_setup_pair_metrics();
