-- The stream instance each shard's committed position counts in: JetStream's creation time
-- of the stream. A stream deleted and created again numbers its messages from 1; a position
-- kept from the old instance would have the worker skip every new message at or below it.
-- The worker compares this with the stream before it consumes a shard and rebases the
-- position when the stream is another one (internal/worker/stream-position.ts).
-- NULL: recorded before instances were (adopted by the first worker that takes the shard).
ALTER TABLE shard_offsets ADD COLUMN stream_created text;
