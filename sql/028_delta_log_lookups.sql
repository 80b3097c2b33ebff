-- The rollup refresh takes a bounded number of (project, hour) pairs per transaction, in turn
-- across projects (internal/store/rollups.ts, docs/rollups.md "Bounds and fairness"): it
-- reads the delta log rows of the hours it picked (a session's by its start hour, an event's
-- by its own) and every row of the sessions they name, and checks which hours have none left.
-- Before, each round consumed the whole log at once (one transaction for any backlog, its
-- time and its locks unbounded); these indexes keep the lookups of a part of a large backlog
-- (a backfill of many hours) from reading all of it each time.
CREATE INDEX IF NOT EXISTS rollup_delta_sessions_hour_idx ON rollup_delta_sessions (project_id, started_at);
CREATE INDEX IF NOT EXISTS rollup_delta_sessions_session_idx ON rollup_delta_sessions (session_id);
CREATE INDEX IF NOT EXISTS rollup_delta_events_hour_idx ON rollup_delta_events (project_id, created_at);
CREATE INDEX IF NOT EXISTS rollup_delta_events_session_idx ON rollup_delta_events (session_id);
