-- Unique visitors over any run of whole local days, exact and without reading the period's
-- sessions (docs/rollups.md, "Unique visitors by days"): a visitor counts in days [a, b) when
-- one of their visit days lies in it, which is the same as: the number of (visitor, day)
-- pairs with a <= day < b whose visitor's previous visit day is before a. So the service
-- keeps, per project and local day, how many of the day's visitors last visited on each
-- earlier day (`visitor_day_returns`), and a period's count is a sum over at most
-- (days asked) x (distinct earlier days) rows.
--
--   visitor_days         one row per (project, profile, local day) with a non-bot session
--                        that started that day: how many (the visit days, in order per visitor)
--   visitor_day_returns  per (project, day, prev_day): the visitors of `day` whose previous
--                        visit day is `prev_day` ('-infinity': none before)
--   visitor_log          every change of the sessions that count (a non-bot session inserted
--                        or deleted, its profile changed), written by triggers on `sessions`
--                        in the writer's own transaction, so nothing that commits is missed;
--                        tm_visitor_apply() folds it into the two tables above (a periodic job)
--                        and reads add what it has not folded yet
--   visitor_state        the projects whose two tables are built, and the timezone they are
--                        built in; a project without a row (new, its timezone changed, after
--                        retention) is rebuilt from its sessions by tm_visitor_build(), and read
--                        as before (from its sessions or sketches) until then
CREATE TABLE IF NOT EXISTS visitor_days (
  project_id text NOT NULL,
  profile_id text NOT NULL,
  day        date NOT NULL,
  sessions   integer NOT NULL CHECK (sessions > 0),
  PRIMARY KEY (project_id, profile_id, day)
);

CREATE TABLE IF NOT EXISTS visitor_day_returns (
  project_id text NOT NULL,
  day        date NOT NULL,
  prev_day   date NOT NULL,
  visitors   integer NOT NULL,
  PRIMARY KEY (project_id, day, prev_day)
);

CREATE TABLE IF NOT EXISTS visitor_log (
  id         bigserial PRIMARY KEY,
  project_id text NOT NULL,
  profile_id text NOT NULL,
  started_at timestamptz NOT NULL,
  delta      integer NOT NULL
);
CREATE INDEX IF NOT EXISTS visitor_log_project_idx ON visitor_log (project_id);

CREATE TABLE IF NOT EXISTS visitor_state (
  project_id text PRIMARY KEY,
  -- the project's timezone when built (compared with projects.timezone), and the zone the
  -- days are computed in (UTC for a zone PostgreSQL does not know)
  timezone   text NOT NULL,
  zone       text NOT NULL,
  built_at   timestamptz NOT NULL DEFAULT now()
);

-- The triggers (sql/functions/tm_visitor_log*.sql). On PostgreSQL one per statement, over its
-- transition tables (one INSERT into the log per statement, not one per session); a
-- TimescaleDB hypertable takes no transition tables: one per row there. A bulk load
-- (bench/generate) or a retention delete sets tidemark.visitor_log = 'off' for its own
-- statements and rebuilds afterwards.
DROP TRIGGER IF EXISTS sessions_visitor_insert ON sessions;
DROP TRIGGER IF EXISTS sessions_visitor_update ON sessions;
DROP TRIGGER IF EXISTS sessions_visitor_delete ON sessions;
DO $do$
BEGIN
  IF tm_timescale() THEN
    CREATE TRIGGER sessions_visitor_insert AFTER INSERT ON sessions FOR EACH ROW
      WHEN (NOT NEW.is_bot AND current_setting('tidemark.visitor_log', true) IS DISTINCT FROM 'off')
      EXECUTE FUNCTION tm_visitor_log();
    CREATE TRIGGER sessions_visitor_update AFTER UPDATE OF profile_id ON sessions FOR EACH ROW
      WHEN (NOT NEW.is_bot AND OLD.profile_id IS DISTINCT FROM NEW.profile_id
            AND current_setting('tidemark.visitor_log', true) IS DISTINCT FROM 'off')
      EXECUTE FUNCTION tm_visitor_log();
    CREATE TRIGGER sessions_visitor_delete AFTER DELETE ON sessions FOR EACH ROW
      WHEN (NOT OLD.is_bot AND current_setting('tidemark.visitor_log', true) IS DISTINCT FROM 'off')
      EXECUTE FUNCTION tm_visitor_log();
  ELSE
    CREATE TRIGGER sessions_visitor_insert AFTER INSERT ON sessions REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION tm_visitor_log_statement();
    CREATE TRIGGER sessions_visitor_update AFTER UPDATE ON sessions REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION tm_visitor_log_statement();
    CREATE TRIGGER sessions_visitor_delete AFTER DELETE ON sessions REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION tm_visitor_log_statement();
  END IF;
END
$do$;
