// Which stream instance a shard's committed position belongs to. A stream that is deleted
// and created again (an operator's mistake, a single NATS node back with an empty store)
// numbers its messages from 1 again: a position kept from the old instance would make the
// worker ack and skip every new message at or below it. So a position is recorded with the
// instance it counts in (the stream's creation time), and checked against the stream before
// the shard's consumer is opened.

/** A shard's position as PostgreSQL holds it; `created` null: recorded before instances were. */
interface StoredPosition {
  seq: number;
  created: string | null;
}

/** The stream as JetStream describes it now. */
interface StreamInstance {
  /** The stream's creation time (JetStream's `created`): a new instance has a new one. */
  created: string;
  /** The last sequence the stream assigned (0 when it never held a message). */
  lastSeq: number;
}

interface PositionPlan {
  /** The committed position to consume after. */
  seq: number;
  /** Why the position moved (null: kept). */
  rebased: string | null;
  /** The stored row must be written (a move, or the instance recorded). */
  write: boolean;
}

/**
 * The position to resume from. Another instance: its messages are all new to PostgreSQL, so
 * from its start (0). The same instance holding fewer messages than the position (its tail
 * lost): from its last message, so that what it numbers next is consumed. A position
 * recorded before instances were: kept when the stream reaches it, else it was another
 * instance. Nothing acknowledged on the stream is ever skipped, and events that were already
 * stored are stored once (their ids).
 */
export function planPosition(stored: StoredPosition, stream: StreamInstance): PositionPlan {
  if (stored.created === stream.created) {
    if (stored.seq <= stream.lastSeq) return { seq: stored.seq, rebased: null, write: false };
    return {
      seq: stream.lastSeq,
      rebased: `the stream's last message is ${stream.lastSeq}, below the committed position ${stored.seq} (its tail was lost)`,
      write: true,
    };
  }
  if (stored.created === null) {
    if (stored.seq <= stream.lastSeq) return { seq: stored.seq, rebased: null, write: true };
    return {
      seq: 0,
      rebased: `the stream's last message is ${stream.lastSeq}, below the committed position ${stored.seq} (a new stream)`,
      write: true,
    };
  }
  if (stored.seq === 0) return { seq: 0, rebased: null, write: true };
  return {
    seq: 0,
    rebased: `the stream was created again (${stored.created} -> ${stream.created}); the committed position ${stored.seq} belonged to the old one`,
    write: true,
  };
}
