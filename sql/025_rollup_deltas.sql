-- Rollups kept by deltas: a change to a past hour costs the change, not the hour.
-- (internal/store/rollups.ts and internal/store/rollup-catalogue.ts use these; docs/rollups.md
-- explains the scheme.)
--
-- Before: every write into a (project, hour) logged the hour, and the refresh recomputed the
-- whole hour in every refresh function. Now the worker, in the same transaction as its
-- writes, logs what it is about to change in a past hour:
--   rollup_delta_sessions  a session of a past hour it upserts: the row as it was before
--                          (old NULL: the session is new);
--   rollup_delta_events    an event it inserts ('i'), changes ('u': a view's duration) or
--                          deletes ('d': the session_end of a reopened session), with the row as
--                          it was before for 'u' and 'd'; for every event of a session logged
--                          above and every event of a past hour.
-- The refresh (one transaction, REPEATABLE READ) rebuilds the contribution of exactly the
-- logged sessions and events twice, as they were before (the earliest logged state) and as
-- they are now, by running the usual refresh functions over temporary tables that shadow
-- sessions, events and the rollup tables; it adds (now - before) to every rollup row, and
-- deletes the log rows it read. The current hour, which is still being written, is logged as
-- before (rebuild = true) and recomputed once when it is over. `at`: when a row was logged
-- (a burst of late writes is applied in one round once quiet, ROLLUP_REFRESH_QUIET_MS).
--
-- rollup_invalidations.rebuild: true when the hour must be recomputed (the current hour's
-- writes, a migration, retention, a manual entry); false when every change was logged as a
-- delta. An hour with any rebuild entry takes no deltas (its recompute covers them). The
-- worker's upsert keeps a true: rebuild = rebuild OR EXCLUDED.rebuild.
ALTER TABLE rollup_invalidations ADD COLUMN rebuild boolean NOT NULL DEFAULT true;

CREATE TABLE rollup_delta_sessions (
  seq         bigserial PRIMARY KEY,
  project_id  text NOT NULL,
  session_id  uuid NOT NULL,
  started_at  timestamptz NOT NULL,
  old         jsonb,
  at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE rollup_delta_events (
  seq         bigserial PRIMARY KEY,
  project_id  text NOT NULL,
  event_id    uuid NOT NULL,
  created_at  timestamptz NOT NULL,
  session_id  uuid,
  op          char(1) NOT NULL CHECK (op IN ('i', 'u', 'd')),
  old         jsonb,
  at          timestamptz NOT NULL DEFAULT now()
);

