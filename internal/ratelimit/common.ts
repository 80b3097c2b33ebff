// What the gate's parts share: the request and answer shapes, the gate's options, the windows
// (live set, seen devices, the salt change) and the turning of a script's reply into an answer.
// Why here: every part (gate.ts, exact.ts, background.ts, reads.ts, revocation.ts) needs them,
// and none of those may import another around a loop.
import type { RateState } from './lease';

export type { RateState } from './lease';

export type GateResult =
  | { outcome: 'revoked' }
  | { outcome: 'limited'; rate: RateState }
  | { outcome: 'ok'; rate: RateState | null; deviceId: string };

export interface IngestGateInput {
  clientId: string;
  /** Requests per second; 0 = no limit. */
  ratePerSecond: number;
  projectId: string;
  /** Device id with today's salt, and with yesterday's ('' when it cannot matter: see deviceWindow). */
  deviceId: string;
  previousDeviceId: string;
  /** Remember the device as seen (only needed shortly before a salt change). */
  markSeen: boolean;
  /** The explicit profile id, or '' to use the chosen device id. */
  profileId: string;
  /** Event time in ms when the event counts as live now, else null. */
  liveAtMs: number | null;
  nowMs: number;
}

export interface GateOptions {
  /** A background Redis call failed (live or seen update lost, lease refused by the error). */
  onAsyncError?: (err: unknown) => void;
  /**
   * The ids of the revoked clients as PostgreSQL has them (the authoritative record): loaded
   * at start and whenever Redis' revoked set is found to have lost its data, which it is then
   * seeded with again. Without it the mirror is loaded from Redis only.
   */
  revokedInStore?: () => Promise<string[]>;
  /** Loading or seeding the revoked clients from PostgreSQL failed (reported once per run of failures; retried every REVOKED_CHECK_MS). */
  onSeedError?: (err: unknown) => void;
}

export const LIVE_WINDOW_MS = 5 * 60 * 1000;
export const SEEN_TTL_SECONDS = 30 * 60;
const DAY_MS = 86_400_000;

export const REVOKED_RESULT: GateResult = Object.freeze({ outcome: 'revoked' }) as GateResult;

/**
 * The salt changes at 00:00 UTC and a visit continues across it for up to 30 minutes of
 * inactivity: devices need marking as seen only in the 30 minutes before midnight, and the
 * previous salt's id only needs trying in the 30 minutes after it.
 */
export function deviceWindow(nowMs: number): { markSeen: boolean; tryPrevious: boolean } {
  const intoDay = ((nowMs % DAY_MS) + DAY_MS) % DAY_MS;
  return { markSeen: intoDay >= DAY_MS - SEEN_TTL_SECONDS * 1000, tryPrevious: intoDay < SEEN_TTL_SECONDS * 1000 };
}

/** A script's [code (1 ok, 0 limited, -1 revoked), log count, ms until the oldest entry leaves] as an answer. */
export function toResult(r: [number, number, number, ...unknown[]], limit: number, windowMs: number, deviceId: string): GateResult {
  const [code, count, ttl] = r;
  if (code === -1) return { outcome: 'revoked' };
  const rate: RateState | null =
    limit > 0
      ? { limit, remaining: Math.max(0, limit - count), resetSeconds: Math.max(1, Math.ceil((ttl > 0 ? ttl : windowMs) / 1000)) }
      : null;
  if (code === 0) return { outcome: 'limited', rate: rate! };
  return { outcome: 'ok', rate, deviceId };
}

export function rateHeaders(rate: RateState | null, limited = false): Record<string, string> {
  if (!rate) return {};
  const h: Record<string, string> = {
    'X-RateLimit-Limit': String(rate.limit),
    'X-RateLimit-Remaining': String(rate.remaining),
    'X-RateLimit-Reset': String(rate.resetSeconds),
  };
  if (limited) h['Retry-After'] = String(rate.resetSeconds);
  return h;
}
