// The JetStream message, the contract between the two roles: the API (internal/ingest's
// batcher) encodes ops into it, and so does the worker's session-end job (internal/jobs);
// the worker's shards decode it. A message is
// `{"v":1,"ops":[...]}` (model/event.ts QueuedBatch) as UTF-8 JSON, or, for an op too large
// to share a message, a zero byte followed by that JSON deflated (raw). What in an op
// PostgreSQL can store is the other half of the contract: ./storable.ts.
import { deflateRaw, inflateRawSync } from 'node:zlib';
import { promisify } from 'node:util';
import type { QueuedBatch } from '../model/event';

const HEAD = '{"v":1,"ops":[';
const TAIL = ']}';

/** Bytes of a message around its ops (the commas between them aside). */
export const ENVELOPE_BYTES = HEAD.length + TAIL.length;

/** The message of `ops`, each already JSON (the batcher serialises an op once, as it arrives). */
export function encodeBatch(ops: readonly string[]): Buffer {
  return Buffer.from(`${HEAD}${ops.join(',')}${TAIL}`);
}

const deflate = promisify(deflateRaw);
/** First byte of a compressed message; a JSON message starts with '{'. */
const COMPRESSED_MARK = Buffer.from([0]);

/** The message of one op (its JSON) alone, compressed. */
export async function encodeCompressed(op: string): Promise<Buffer> {
  const packed = await deflate(Buffer.from(`${HEAD}${op}${TAIL}`));
  return Buffer.concat([COMPRESSED_MARK, packed]);
}

export function decodeBatch(data: Uint8Array): QueuedBatch {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const text = buf[0] === 0 ? inflateRawSync(buf.subarray(1)).toString('utf8') : buf.toString('utf8');
  return JSON.parse(text) as QueuedBatch;
}
