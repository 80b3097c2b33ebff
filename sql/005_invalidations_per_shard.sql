-- One invalidation row per (project, hour, shard): each shard's worker touches only its
-- own rows, so shards no longer wait on each other's commits for the current hour's row.
ALTER TABLE rollup_invalidations ADD COLUMN shard integer NOT NULL DEFAULT 0;
ALTER TABLE rollup_invalidations DROP CONSTRAINT rollup_invalidations_pkey;
ALTER TABLE rollup_invalidations ADD PRIMARY KEY (project_id, bucket, shard);
