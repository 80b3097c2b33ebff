// Idempotent retries: a producer may name an event with a key of its own, so that a retry
// after a 503, a timeout or a lost connection cannot count it twice. OpenPanel's SDKs send no
// such key (its server only drops identical payloads within 100 ms), so Tidemark takes the
// IETF draft's `Idempotency-Key` header, and, for SDKs that cannot set a header per event,
// the reserved property `__idempotencyKey` (consumed, never kept in properties).
//
// From the key, scoped by project, the API derives the op id (UUIDv5, so the same request
// with the same key always gets the same id) and, for an op that travels alone in its
// JetStream message, the message id, so that JetStream's duplicate window (2 minutes) drops
// a retried copy before any worker sees it. The op also carries the key (`dedupeKey`): the
// worker applies at most one op per (project, key), however late the retry comes.
import { v5 as uuidv5 } from 'uuid';
import { BadRequestError } from '../http/errors';
import type { HttpRequest } from '../http/types';

const IDEMPOTENCY_HEADER = 'idempotency-key';
const IDEMPOTENCY_PROPERTY = '__idempotencyKey';
const IDEMPOTENCY_KEY_MAX = 256;

/** Namespace of the op ids derived from idempotency keys (a fixed random UUID). */
const OP_ID_NAMESPACE = '4c5d8f0e-7a63-4d7e-9b1f-2f6b0d9c3a51';

/** A key as sent: trimmed; the draft's structured-field form `"..."` is unquoted. */
function normalise(raw: string, where: string[]): string {
  let key = raw.trim();
  if (key.length >= 2 && key.startsWith('"') && key.endsWith('"')) key = key.slice(1, -1);
  if (key.length < 1 || key.length > IDEMPOTENCY_KEY_MAX) {
    throw new BadRequestError(`idempotency key must be 1 to ${IDEMPOTENCY_KEY_MAX} characters`, [{ path: where, message: `must be 1 to ${IDEMPOTENCY_KEY_MAX} characters` }]);
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(key)) {
    throw new BadRequestError('idempotency key must not contain control characters', [{ path: where, message: 'must not contain control characters' }]);
  }
  return key;
}

/**
 * The request's idempotency key, or null. Takes `__idempotencyKey` out of `properties` (the
 * parsed body's own object) whether or not the header is there too; a header and a property
 * that disagree are a 400.
 */
export function takeIdempotencyKey(req: HttpRequest, properties: Record<string, unknown> | undefined, propertiesPath: string[]): string | null {
  const header = req.headers[IDEMPOTENCY_HEADER];
  const fromHeader = header === undefined ? null : normalise(header, ['headers', 'Idempotency-Key']);
  let fromBody: string | null = null;
  if (properties && Object.prototype.hasOwnProperty.call(properties, IDEMPOTENCY_PROPERTY)) {
    const v = properties[IDEMPOTENCY_PROPERTY];
    delete properties[IDEMPOTENCY_PROPERTY];
    const where = [...propertiesPath, IDEMPOTENCY_PROPERTY];
    if (typeof v === 'string') fromBody = normalise(v, where);
    else if (typeof v === 'number' && Number.isFinite(v)) fromBody = String(v);
    else throw new BadRequestError(`${IDEMPOTENCY_PROPERTY} must be a string`, [{ path: where, message: 'must be a string' }]);
  }
  if (fromHeader !== null && fromBody !== null && fromHeader !== fromBody) {
    throw new BadRequestError('the Idempotency-Key header and __idempotencyKey differ', [{ path: [...propertiesPath, IDEMPOTENCY_PROPERTY], message: 'differs from the Idempotency-Key header' }]);
  }
  return fromHeader ?? fromBody;
}

/** The op id of a keyed request: the same for the same project and key, on every API process. */
export function dedupeOpId(projectId: string, key: string): string {
  return uuidv5(`${projectId}\n${key}`, OP_ID_NAMESPACE);
}

/** The JetStream message id of a keyed op that travels alone. */
export function dedupeMsgId(opId: string): string {
  return `dk-${opId}`;
}
