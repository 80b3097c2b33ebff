-- Idempotency keys (docs/api.md "Idempotent retries"): the workers apply at most one op per
-- (project, key). A retry of an event that took the receipt time as its time carries the
-- same op id but a different created_at, so the events primary key alone cannot tell the
-- copies apart: the key is recorded here in the transaction that applies its op, and an op
-- whose key is already here is dropped before it is sessionized. Pruned with the events
-- (RETENTION_DAYS).
CREATE TABLE IF NOT EXISTS op_keys (
  project_id text NOT NULL,
  key text NOT NULL,
  op_id text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, key)
);
CREATE INDEX IF NOT EXISTS op_keys_applied_at ON op_keys (applied_at);
