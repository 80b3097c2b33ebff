-- Every rollup relation in one list, with how it is kept, so that the refresh job and
-- retention need no change when a later migration adds a rollup:
--   refresh_fn NULL      a TimescaleDB continuous aggregate: refreshed over hour ranges
--                        with refresh_continuous_aggregate(); retention re-refreshes it.
--   refresh_fn 'f'       a table the service keeps: f(p_project text, p_bucket timestamptz)
--                        recomputes one (project, UTC hour); retention deletes its old rows.
-- A migration that adds a rollup registers it here (on each engine as it is kept there).
CREATE TABLE rollup_registry (
  relation    text PRIMARY KEY,
  refresh_fn  text
);

INSERT INTO rollup_registry (relation, refresh_fn)
SELECT r.relation, CASE WHEN tm_timescale() THEN NULL ELSE 'tm_refresh_rollup_bucket' END
FROM (SELECT 'rollup_sessions_hourly' AS relation UNION ALL SELECT relation FROM rollup_dimensions) r;
