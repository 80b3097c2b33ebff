-- Every session write (one upsert per changed session per batch) maintains each index on
-- sessions, and no read needs sessions_project_start_idx: sessions_visitors_idx
-- (sql/002_rollups.sql) has the same key, (project_id, started_at), and serves every scan
-- of a project's sessions by start time (insights, export, rollup refreshes) as well.
-- The indexes that stay, and the read each one serves, are listed in docs/operating.md
-- ("Writes").
DROP INDEX IF EXISTS sessions_project_start_idx;
