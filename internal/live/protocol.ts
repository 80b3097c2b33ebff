// The live-push WebSocket protocol (docs/api.md "Live push"): the credentials message, the
// visitors message and the close codes. Pure functions, no transport.
import { HttpError } from '../http/errors';

/**
 * Close codes. A refusal is 4000 + the HTTP status the same request would get (4401 bad
 * credentials, 4403 wrong mode or project, 4404 unknown project, 4400 a first message that is
 * not credentials, 4408 no credentials in time, 4503 a store the check needs is away or too
 * slow, 4429 the project holds its share of the thread's sockets); 4430 too many sockets
 * authenticating; otherwise the standard codes (1009, a message over 4 KiB, comes from
 * internal/http/websocket.ts).
 */
export const CLOSE = {
  badMessage: 4400,
  unauthorized: 4401,
  forbidden: 4403,
  notFound: 4404,
  authTimeout: 4408,
  unavailable: 4503,
  /** The server is shutting down (RFC 6455 "going away"). */
  goingAway: 1001,
  /** This API thread holds LIVE_MAX_SOCKETS authenticated sockets (RFC 6455 "try again later"). */
  tryAgainLater: 1013,
  /** The project holds LIVE_MAX_SOCKETS_PER_PROJECT authenticated sockets on this API thread. */
  projectFull: 4429,
  /** LIVE_MAX_AUTHENTICATING sockets are authenticating on this API thread (refused, or displaced while waiting). */
  authenticatingFull: 4430,
  internal: 1011,
} as const;

export interface Credentials {
  clientId: string;
  clientSecret: string;
}

const MAX_FIELD = 512;

/** The browser's first message: `{"clientId": "...", "clientSecret": "..."}`; null when it is anything else. */
export function parseCredentialsMessage(data: string | Buffer): Credentials | null {
  if (typeof data !== 'string' || data.length > 4 * MAX_FIELD) return null;
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch {
    return null;
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
  const { clientId, clientSecret } = v as Record<string, unknown>;
  if (typeof clientId !== 'string' || typeof clientSecret !== 'string') return null;
  const id = clientId.trim();
  const secret = clientSecret.trim();
  if (!id || !secret || id.length > MAX_FIELD || secret.length > MAX_FIELD) return null;
  return { clientId: id, clientSecret: secret };
}

/** The close code and reason for a refused authentication. */
export function refusal(err: unknown): { code: number; reason: string } {
  if (err instanceof HttpError && err.status >= 400 && err.status < 600) return { code: 4000 + err.status, reason: err.message };
  return { code: CLOSE.unavailable, reason: 'live visitors are unavailable right now; retry' };
}

export const visitorsMessage = (visitors: number): string => `{"visitors":${visitors}}`;
