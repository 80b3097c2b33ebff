-- Tidemark base schema. Runs on plain PostgreSQL 15 and on TimescaleDB 2.x; the
-- engine-specific parts are chosen at run time by tm_timescale().

CREATE OR REPLACE FUNCTION tm_timescale() RETURNS boolean LANGUAGE sql STABLE AS
$$ SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'timescaledb') $$;

CREATE TABLE projects (
  id              text PRIMARY KEY,
  name            text NOT NULL,
  timezone        text NOT NULL DEFAULT 'UTC',
  allowed_origins text[] NOT NULL DEFAULT '{}',
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE clients (
  id           text PRIMARY KEY,
  project_id   text NOT NULL REFERENCES projects(id),
  mode         text NOT NULL CHECK (mode IN ('read', 'write', 'root')),
  -- scrypt$N$r$p$salt$hash (base64); the secret itself is never stored
  secret_hash  text NOT NULL,
  ingest_rate  integer NOT NULL DEFAULT 1000 CHECK (ingest_rate >= 0),
  revoked_at   timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX clients_project_idx ON clients (project_id);

-- Events: time-range scans per project. Hypertable on TimescaleDB, monthly range
-- partitions (created on demand by the worker) on plain PostgreSQL.
DO $$
DECLARE cols text := $cols$(
  id              uuid NOT NULL,
  project_id      text NOT NULL,
  name            text NOT NULL,
  device_id       text NOT NULL,
  profile_id      text NOT NULL,
  session_id      uuid,
  created_at      timestamptz NOT NULL,
  received_at     timestamptz NOT NULL DEFAULT now(),
  properties      jsonb NOT NULL DEFAULT '{}',
  groups          text[] NOT NULL DEFAULT '{}',
  origin          text NOT NULL DEFAULT '',
  path            text NOT NULL DEFAULT '',
  title           text NOT NULL DEFAULT '',
  referrer        text NOT NULL DEFAULT '',
  referrer_name   text NOT NULL DEFAULT '',
  referrer_type   text NOT NULL DEFAULT '',
  utm_source      text NOT NULL DEFAULT '',
  utm_medium      text NOT NULL DEFAULT '',
  utm_campaign    text NOT NULL DEFAULT '',
  utm_term        text NOT NULL DEFAULT '',
  utm_content     text NOT NULL DEFAULT '',
  country         text NOT NULL DEFAULT '',
  region          text NOT NULL DEFAULT '',
  city            text NOT NULL DEFAULT '',
  latitude        double precision,
  longitude       double precision,
  device          text NOT NULL DEFAULT '',
  browser         text NOT NULL DEFAULT '',
  browser_version text NOT NULL DEFAULT '',
  os              text NOT NULL DEFAULT '',
  os_version      text NOT NULL DEFAULT '',
  brand           text NOT NULL DEFAULT '',
  model           text NOT NULL DEFAULT '',
  is_bot          boolean NOT NULL DEFAULT false,
  bot_reason      text,
  duration_ms     bigint,
  PRIMARY KEY (created_at, id)
)$cols$;
BEGIN
  IF tm_timescale() THEN
    EXECUTE 'CREATE TABLE events ' || cols;
    PERFORM create_hypertable('events', 'created_at', chunk_time_interval => interval '1 day', create_default_indexes => false);
  ELSE
    EXECUTE 'CREATE TABLE events ' || cols || ' PARTITION BY RANGE (created_at)';
  END IF;
END $$;
CREATE INDEX events_project_time_idx ON events (project_id, created_at DESC, id DESC);
CREATE INDEX events_session_idx ON events (session_id);
CREATE INDEX events_project_name_time_idx ON events (project_id, name, created_at);
CREATE INDEX events_project_profile_idx ON events (project_id, profile_id, created_at DESC);

-- Sessions: one row per session, visible from its first event and updated as events arrive.
DO $$
DECLARE cols text := $cols$(
  id                 uuid NOT NULL,
  project_id         text NOT NULL,
  device_id          text NOT NULL,
  profile_id         text NOT NULL,
  started_at         timestamptz NOT NULL,
  last_event_at      timestamptz NOT NULL,
  duration_ms        bigint NOT NULL DEFAULT 0,
  ended              boolean NOT NULL DEFAULT false,
  entry_origin       text NOT NULL DEFAULT '',
  entry_path         text NOT NULL DEFAULT '',
  exit_origin        text NOT NULL DEFAULT '',
  exit_path          text NOT NULL DEFAULT '',
  screen_view_count  integer NOT NULL DEFAULT 0,
  event_count        integer NOT NULL DEFAULT 0,
  is_bounce          boolean NOT NULL DEFAULT true,
  is_bot             boolean NOT NULL DEFAULT false,
  -- the latest real event, so that a restarted worker can give a screen view its time on page
  last_event_id      uuid,
  last_event_is_view boolean NOT NULL DEFAULT false,
  referrer           text NOT NULL DEFAULT '',
  referrer_name      text NOT NULL DEFAULT '',
  referrer_type      text NOT NULL DEFAULT '',
  utm_source         text NOT NULL DEFAULT '',
  utm_medium         text NOT NULL DEFAULT '',
  utm_campaign       text NOT NULL DEFAULT '',
  utm_term           text NOT NULL DEFAULT '',
  utm_content        text NOT NULL DEFAULT '',
  country            text NOT NULL DEFAULT '',
  region             text NOT NULL DEFAULT '',
  city               text NOT NULL DEFAULT '',
  device             text NOT NULL DEFAULT '',
  browser            text NOT NULL DEFAULT '',
  browser_version    text NOT NULL DEFAULT '',
  os                 text NOT NULL DEFAULT '',
  os_version         text NOT NULL DEFAULT '',
  brand              text NOT NULL DEFAULT '',
  model              text NOT NULL DEFAULT '',
  updated_at         timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (started_at, id)
)$cols$;
BEGIN
  EXECUTE 'CREATE TABLE sessions ' || cols;
  IF tm_timescale() THEN
    PERFORM create_hypertable('sessions', 'started_at', chunk_time_interval => interval '7 days', create_default_indexes => false);
  END IF;
END $$;
CREATE INDEX sessions_project_start_idx ON sessions (project_id, started_at);
CREATE INDEX sessions_device_idx ON sessions (project_id, device_id, started_at DESC);
CREATE INDEX sessions_id_idx ON sessions (id);

CREATE TABLE profiles (
  project_id  text NOT NULL,
  id          text NOT NULL,
  first_name  text,
  last_name   text,
  email       text,
  properties  jsonb NOT NULL DEFAULT '{}',
  groups      text[] NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id)
);

CREATE TABLE groups (
  project_id  text NOT NULL,
  id          text NOT NULL,
  type        text NOT NULL,
  name        text NOT NULL,
  properties  jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id)
);

-- The JetStream position each shard has committed, written in the same transaction as
-- the effects: a redelivered message at or below it is acked and skipped.
CREATE TABLE shard_offsets (
  stream      text NOT NULL,
  shard       integer NOT NULL,
  stream_seq  bigint NOT NULL DEFAULT 0,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (stream, shard)
);

-- Operations the worker could not apply (e.g. increment of a non-numeric value).
CREATE TABLE op_failures (
  op_id       text PRIMARY KEY,
  project_id  text NOT NULL,
  kind        text NOT NULL,
  reason      text NOT NULL,
  payload     jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
