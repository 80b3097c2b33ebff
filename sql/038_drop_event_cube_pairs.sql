-- The event cube's pair rows (event_cube_pairs_daily, sql/015) go. They held, per complete
-- local day, the counts of every pair of the nine cube columns (36 pairs), so that a chart or
-- a filtered /export/events count naming at most two of those columns read a pair's rows
-- instead of the day's full combinations (event_cube_daily, sql/017). Every event paid for
-- them: on bench/generate's data they were the third-largest rollup table (885,870 rows at 1M
-- events, 1.8M at 10M), the day's refresh built them, and each late write or session end
-- merged into them; a read naming two columns now takes the full-combination rows of the
-- day, as three or more columns always did, within the same aim (bench/RESULTS.md, "Export
-- queries"). Reads are exact either way: the days listed in event_cube_days have their
-- full-combination rows (sql/017 rebuilt every day when it ran).
DELETE FROM rollup_registry WHERE relation = 'event_cube_pairs_daily';
DROP TABLE IF EXISTS event_cube_pairs_daily;
