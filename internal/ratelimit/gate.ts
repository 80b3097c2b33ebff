// One Redis round trip per request: revocation check + fixed-window rate limit, and for
// ingest also the device choice across the salt change and the live-visitor update.
import type { Redis, RedisKeys } from '../redis/redis';

const INGEST_SCRIPT = `
if redis.call('SISMEMBER', KEYS[2], ARGV[3]) == 1 then return {-1, 0, 0, ''} end
local limit = tonumber(ARGV[1])
local count = 0
local ttl = 0
if limit > 0 then
  count = redis.call('INCR', KEYS[1])
  if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  ttl = redis.call('PTTL', KEYS[1])
  if count > limit then return {0, count, ttl, ''} end
end
local device = ARGV[7]
if ARGV[8] ~= '' and redis.call('EXISTS', KEYS[4]) == 0 and redis.call('EXISTS', KEYS[5]) == 1 then
  device = ARGV[8]
  redis.call('EXPIRE', KEYS[5], ARGV[10])
elseif ARGV[9] == '1' then
  redis.call('SET', KEYS[4], '1', 'EX', ARGV[10])
end
if ARGV[5] ~= '' then
  local profile = ARGV[4]
  if profile == '' then profile = device end
  redis.call('ZADD', KEYS[3], 'GT', ARGV[5], profile)
  redis.call('PEXPIRE', KEYS[3], 600000)
end
return {1, count, ttl, device}
`;

const READ_SCRIPT = `
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 then return {-1, 0, 0} end
local limit = tonumber(ARGV[1])
if limit <= 0 then return {1, 0, 0} end
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
local ttl = redis.call('PTTL', KEYS[1])
if count > limit then return {0, count, ttl} end
return {1, count, ttl}
`;

export interface RateState {
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

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

export const LIVE_WINDOW_MS = 5 * 60 * 1000;
const SEEN_TTL_SECONDS = 30 * 60;
const DAY_MS = 86_400_000;

/**
 * The salt changes at 00:00 UTC and a visit continues across it for up to 30 minutes of
 * inactivity: devices need marking as seen only in the 30 minutes before midnight, and the
 * previous salt's id only needs trying in the 30 minutes after it.
 */
export function deviceWindow(nowMs: number): { markSeen: boolean; tryPrevious: boolean } {
  const intoDay = ((nowMs % DAY_MS) + DAY_MS) % DAY_MS;
  return { markSeen: intoDay >= DAY_MS - SEEN_TTL_SECONDS * 1000, tryPrevious: intoDay < SEEN_TTL_SECONDS * 1000 };
}

export class Gate {
  constructor(private readonly redis: Redis, private readonly keys: RedisKeys) {
    redis.defineCommand('tmIngestGate', { numberOfKeys: 5, lua: INGEST_SCRIPT });
    redis.defineCommand('tmReadGate', { numberOfKeys: 2, lua: READ_SCRIPT });
  }

  async ingest(i: IngestGateInput): Promise<GateResult> {
    const windowMs = 1000;
    const window = Math.floor(i.nowMs / windowMs);
    const r = (await (this.redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown[]>>).tmIngestGate!(
      this.keys.rate('ingest', i.clientId, window),
      this.keys.revoked,
      this.keys.live(i.projectId),
      this.keys.seen(i.deviceId),
      this.keys.seen(i.previousDeviceId || i.deviceId),
      i.ratePerSecond, windowMs, i.clientId, i.profileId,
      i.liveAtMs === null ? '' : String(i.liveAtMs), i.nowMs, i.deviceId, i.previousDeviceId,
      i.markSeen ? '1' : '0', SEEN_TTL_SECONDS,
    )) as [number, number, number, string];
    return toResult(r, i.ratePerSecond, windowMs, r[3]);
  }

  /** Insights and export: revocation + `limit` requests per `windowMs`. */
  async read(clientId: string, limit: number, windowMs: number, nowMs: number): Promise<GateResult> {
    const window = Math.floor(nowMs / windowMs);
    const r = (await (this.redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown[]>>).tmReadGate!(
      this.keys.rate('read', clientId, window),
      this.keys.revoked,
      limit, clientId, windowMs,
    )) as [number, number, number];
    return toResult(r, limit, windowMs, '');
  }
}

function toResult(r: [number, number, number, ...unknown[]], limit: number, windowMs: number, deviceId: string): GateResult {
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
