-- The worker's one-statement batch (internal/store/writes.ts, commitShardBatch): fails the
-- statement, and so undoes every write in it, when the shard's position was not where the
-- batch started (another worker committed it: SQLSTATE TMF01) or an idempotency key was
-- recorded by another batch (TMK01).
CREATE OR REPLACE FUNCTION tm_batch_check(fenced int, keys_expected int, keys_recorded int) RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
  IF fenced <> 1 THEN
    RAISE EXCEPTION 'shard position moved' USING ERRCODE = 'TMF01';
  END IF;
  IF keys_recorded <> keys_expected THEN
    RAISE EXCEPTION '% idempotency key(s) applied by another batch', keys_expected - keys_recorded USING ERRCODE = 'TMK01';
  END IF;
  RETURN 1;
END
$$;
