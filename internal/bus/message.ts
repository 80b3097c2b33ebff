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

/**
 * `ops` (each already JSON) as few messages as fit: each at most `maxOps` ops and at most
 * `maxBytes` bytes (the server's max_payload less a margin); an op too large for a message of
 * its own still gets one (the publish then refuses it, as it would alone).
 */
export function packBatches(ops: readonly string[], maxBytes: number, maxOps: number): Buffer[] {
  const out: Buffer[] = [];
  let chunk: string[] = [];
  let bytes = ENVELOPE_BYTES;
  for (const op of ops) {
    const size = Buffer.byteLength(op) + 1;
    if (chunk.length && (chunk.length >= maxOps || bytes + size > maxBytes)) {
      out.push(encodeBatch(chunk));
      chunk = [];
      bytes = ENVELOPE_BYTES;
    }
    chunk.push(op);
    bytes += size;
  }
  if (chunk.length) out.push(encodeBatch(chunk));
  return out;
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
