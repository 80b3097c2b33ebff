// Revocation, rate limit, device choice across the salt change and the live-visitor update.
//
// Ingest, once started (start()): the answer normally does not wait for Redis. Revocation is
// read from a local mirror of the revoked-clients set (loaded at start, kept current by a
// Redis channel the CLI publishes to, and re-checked by every asynchronous call); the rate
// limit from a per-client token bucket kept in step with Redis by leases (lease.ts, which
// states the tolerance); the live-set and seen-device updates are sent after the answer, in
// one Redis call at a time: those of the requests that arrive while it is in flight go in the
// next (so under load a few hundred calls a second, not one per request). Only a request whose device id depends on Redis (in the
// 30 minutes after midnight UTC, when yesterday's salt may continue a visit), or any request
// while the mirror is not in step with Redis, takes the path below: one Redis call that
// decides it exactly, shared by the requests of the event-loop turn.
//
// Reads: one Redis round trip per request.
//
// The rate limit is a sliding log in a sorted set per (scope, client): one member per admitted
// request, scored by Redis' own clock (TIME, so every API process agrees). A request is
// admitted when fewer than `limit` members are younger than the window; so no `limit + 1`
// requests are ever admitted within any window-long span, wherever it starts (a fixed window
// aligned to the clock admits up to 2 x limit across its boundary). Refused requests are not
// logged. X-RateLimit-Reset (and Retry-After) is the time until the oldest admitted request
// leaves the window, i.e. until a refused client is admitted again.
import { LRUCache } from 'lru-cache';
import type { Redis, RedisKeys } from '../redis/redis';
import { acknowledge } from '../redis/announce';
import { LocalBuckets, RATE_WINDOW_MS, type LeaseAnswer, type RateState, type TakeResult } from './lease';

export type { RateState } from './lease';

// Shared by INGEST_SCRIPT and ASYNC_SCRIPT.
const LIVE_IDENTITY_LUA = `
-- The live member of an event: its profile when it names one, else the profile its device was
-- last identified as in the last 30 minutes (a session's length: the session is that
-- profile's, semantics.md "Identify within a session"), else the device. liveKey .. ':id:' ..
-- device keeps that profile; an anonymous event of the device keeps it for 30 more minutes.
local function identity(liveKey, device, named)
  local idKey = liveKey .. ':id:' .. device
  if named == '' then
    local p = redis.call('GET', idKey)
    if p then
      redis.call('EXPIRE', idKey, 1800)
      return p
    end
    return device
  end
  if named ~= device then redis.call('SET', idKey, named, 'EX', 1800) end
  return named
end
`;

// One call decides a whole batch of ingest requests (all those that arrived in one event-loop
// turn), each exactly as if alone and in arrival order. The batch travels as ONE JSON
// argument (per request: 4 keys, then 7 arguments; what every request shares follows it
// in ARGV) and the answer as one JSON array (4 values per request): encoding and decoding
// ~15 RESP values per request was a quarter of the API's main-thread CPU in the profile,
// cjson in Redis costs a fraction of it. The keys are therefore not declared in KEYS:
// Tidemark uses one Redis server (no Redis Cluster). The two `seen` keys are '' when the
// request cannot use them (no previous-salt id to try and nothing to mark seen).
//   r: 1 rate key, 2 live key, 3 seen(device), 4 seen(previous or device), 5 limit,
//      6 client id, 7 profile id, 8 live-at ms or '', 9 device id, 10 previous device id or '',
//      11 mark seen '1'/'0'
//   ARGV: 1 requests, 2 revoked-clients key, 3 rate window ms, 4 seen TTL seconds,
//         5 sequence key (unique log members across processes: one INCR per call),
//         6 live cutoff ms (now - 5 minutes: a score at or below it is no longer live)
// Live sets are trimmed here too (once per project per call), so they hold the last five
// minutes' visitors even when nobody reads /live. A visitor new to the window (ZADD added a
// member) changes the count: the project's channel (live key + ':changed') hears it once per
// call, and live push (internal/live) re-counts; a returning visitor publishes nothing. An
// event that names its profile also removes its device's own member (the device's anonymous
// events before it: the device is that profile now), and a count that fell is announced too.
const INGEST_SCRIPT = `
${LIVE_IDENTITY_LUA}local reqs = cjson.decode(ARGV[1])
local revoked = ARGV[2]
local windowMs = tonumber(ARGV[3])
local seenTtl = ARGV[4]
local seqKey = ARGV[5]
local liveCutoff = ARGV[6]
local seq = nil
local now = nil
local out = {}
local trimmed = {}
local changed = {}
local changedKeys = {}
for n, r in ipairs(reqs) do
  local code = 1
  local count = 0
  local ttl = 0
  local device = r[9]
  if redis.call('SISMEMBER', revoked, r[6]) == 1 then
    code = -1
    device = ''
  else
    local limit = tonumber(r[5])
    if limit > 0 then
      if now == nil then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        seq = redis.call('INCR', seqKey)
      end
      redis.call('ZREMRANGEBYSCORE', r[1], '-inf', now - windowMs)
      count = redis.call('ZCARD', r[1])
      if count >= limit then
        code = 0
        device = ''
      else
        redis.call('ZADD', r[1], now, seq .. ':' .. n)
        redis.call('PEXPIRE', r[1], windowMs)
        count = count + 1
      end
      local oldest = redis.call('ZRANGE', r[1], 0, 0, 'WITHSCORES')
      ttl = tonumber(oldest[2]) + windowMs - now
    end
    if code == 1 then
      if r[10] ~= '' and redis.call('EXISTS', r[3]) == 0 and redis.call('EXISTS', r[4]) == 1 then
        device = r[10]
        redis.call('EXPIRE', r[4], seenTtl)
      elseif r[11] == '1' then
        redis.call('SET', r[3], '1', 'EX', seenTtl)
      end
      if r[8] ~= '' then
        local liveKey = r[2]
        local profile = identity(liveKey, device, r[7])
        if not trimmed[liveKey] then
          trimmed[liveKey] = true
          redis.call('ZREMRANGEBYSCORE', liveKey, '-inf', liveCutoff)
        end
        local added = redis.call('ZADD', liveKey, 'GT', r[8], profile)
        -- An identified device is its profile (semantics.md): its anonymous presence goes.
        local removed = 0
        if profile ~= device then removed = redis.call('ZREM', liveKey, device) end
        if added ~= removed and not changed[liveKey] then
          changed[liveKey] = true
          changedKeys[#changedKeys + 1] = liveKey
        end
        redis.call('PEXPIRE', liveKey, 600000)
      end
    end
  end
  out[#out + 1] = code
  out[#out + 1] = count
  out[#out + 1] = ttl
  out[#out + 1] = device
end
for _, liveKey in ipairs(changedKeys) do
  redis.call('PUBLISH', liveKey .. ':changed', '1')
end
return cjson.encode(out)
`;

// A profile's browser device (noteProfileDevice): KEYS[1] the profile's key; ARGV 1 device
// id, 2 event time ms, 3 TTL seconds. The value is 'device|event ms'; a device whose event is
// older than the one kept only refreshes the expiry.
const PROFILE_DEVICE_SCRIPT = `
local v = redis.call('GET', KEYS[1])
if v then
  local t = tonumber(string.match(v, '|(%d+)$'))
  if t and t > tonumber(ARGV[2]) then
    redis.call('EXPIRE', KEYS[1], ARGV[3])
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2], 'EX', ARGV[3])
return 1
`;

// Reads: revocation + rate limit; with a third key (a project's live set, /live) also the
// live count, trimmed and counted in the same call: one round trip for the whole request.
// ARGV: 1 limit, 2 client id, 3 window ms, 4 live cutoff ms, 5 sequence key.
const READ_SCRIPT = `
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 then return {-1, 0, 0, -1} end
local limit = tonumber(ARGV[1])
local count = 0
local ttl = 0
if limit > 0 then
  local windowMs = tonumber(ARGV[3])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - windowMs)
  count = redis.call('ZCARD', KEYS[1])
  local admitted = count < limit
  if admitted then
    redis.call('ZADD', KEYS[1], now, redis.call('INCR', ARGV[5]))
    redis.call('PEXPIRE', KEYS[1], windowMs)
    count = count + 1
  end
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  ttl = tonumber(oldest[2]) + windowMs - now
  if not admitted then return {0, count, ttl, -1} end
end
local live = -1
if KEYS[3] then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[4])
  live = redis.call('ZCOUNT', KEYS[3], '(' .. ARGV[4], '+inf')
end
return {1, count, ttl, live}
`;

// The answer-free half of the fast path, one call per event-loop turn: leases (reserve up to
// `want` slots in a client's log) and the effects of admitted requests (live set, seen
// device). Every client id it sees is checked against the revoked set, so a revocation the
// channel missed is learnt within one call. ARGV: 1 JSON {l: [[rate key, client id, limit,
// want], ...], e: [[live key, seen key or '', profile named or '', live-at ms or '', client id, device id], ...]},
// 2 revoked-clients key, 3 window ms, 4 seen TTL seconds, 5 sequence key, 6 live cutoff ms.
// Returns JSON {l: [[code (1 ok, -1 revoked), granted, count, ttl ms], ...], rev: [client
// ids]}. Live sets are trimmed and a new live visitor announced exactly as INGEST_SCRIPT does.
const ASYNC_SCRIPT = `
${LIVE_IDENTITY_LUA}local req = cjson.decode(ARGV[1])
local revokedKey = ARGV[2]
local windowMs = tonumber(ARGV[3])
local seenTtl = ARGV[4]
local seqKey = ARGV[5]
local liveCutoff = ARGV[6]
local trimmed = {}
local changed = {}
local changedKeys = {}
local checked = {}
local function revoked(id)
  local v = checked[id]
  if v == nil then
    v = redis.call('SISMEMBER', revokedKey, id)
    checked[id] = v
  end
  return v == 1
end
for _, e in ipairs(req.e) do
  revoked(e[5])
  if e[2] ~= '' then redis.call('SET', e[2], '1', 'EX', seenTtl) end
  if e[4] ~= '' then
    local liveKey = e[1]
    if not trimmed[liveKey] then
      trimmed[liveKey] = true
      redis.call('ZREMRANGEBYSCORE', liveKey, '-inf', liveCutoff)
    end
    local profile = identity(liveKey, e[6], e[3])
    local added = redis.call('ZADD', liveKey, 'GT', e[4], profile)
    -- An identified device is its profile (semantics.md): its anonymous presence goes.
    local removed = 0
    if profile ~= e[6] then removed = redis.call('ZREM', liveKey, e[6]) end
    if added ~= removed and not changed[liveKey] then
      changed[liveKey] = true
      changedKeys[#changedKeys + 1] = liveKey
    end
    redis.call('PEXPIRE', liveKey, 600000)
  end
end
for _, liveKey in ipairs(changedKeys) do
  redis.call('PUBLISH', liveKey .. ':changed', '1')
end
local leases = {}
local now = nil
local seq = nil
for n, l in ipairs(req.l) do
  if revoked(l[2]) then
    leases[n] = {-1, 0, 0, 0}
  else
    if now == nil then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local limit = tonumber(l[3])
    local want = tonumber(l[4])
    redis.call('ZREMRANGEBYSCORE', l[1], '-inf', now - windowMs)
    local count = redis.call('ZCARD', l[1])
    local granted = limit - count
    if granted > want then granted = want end
    if granted < 0 then granted = 0 end
    if granted > 0 then
      if seq == nil then seq = redis.call('INCR', seqKey) end
      for k = 1, granted do
        redis.call('ZADD', l[1], now, seq .. ':' .. n .. ':' .. k)
      end
      redis.call('PEXPIRE', l[1], windowMs)
      count = count + granted
    end
    local ttl = windowMs
    local oldest = redis.call('ZRANGE', l[1], 0, 0, 'WITHSCORES')
    if oldest[2] then ttl = tonumber(oldest[2]) + windowMs - now end
    leases[n] = {1, granted, count, ttl}
  end
end
local rev = {}
for id, v in pairs(checked) do
  if v == 1 then rev[#rev + 1] = id end
end
return cjson.encode({l = leases, rev = rev})
`;

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
/** How long a profile's browser device is remembered for its server-side events: a session stays open 30 minutes. */
export const PROFILE_DEVICE_TTL_SECONDS = 35 * 60;
const PROFILE_DEVICE_REFRESH_MS = 60_000;
const SEEN_TTL_SECONDS = 30 * 60;
const DAY_MS = 86_400_000;
/** Requests decided by one Redis call at most. */
const MAX_BATCH = 256;
/** A background call in flight this long (ms) no longer holds the next one back. */
const ASYNC_STALL_MS = 250;

interface PendingIngest {
  input: IngestGateInput;
  resolve: (r: GateResult) => void;
  reject: (err: unknown) => void;
}

interface PendingLease {
  clientId: string;
  limit: number;
  want: number;
  resolve: (a: LeaseAnswer) => void;
  reject: (err: unknown) => void;
}

export interface GateOptions {
  /** A background Redis call failed (live or seen update lost, lease refused by the error). */
  onAsyncError?: (err: unknown) => void;
}

const REVOKED_RESULT: GateResult = Object.freeze({ outcome: 'revoked' }) as GateResult;

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
  /** Local mirror of the revoked-clients set (grows only: a revocation is final). */
  private readonly revoked = new Set<string>();
  /** The mirror is in step with Redis (subscribed and loaded): the fast path may be taken. */
  private mirrorReady = false;
  private subscriber: Redis | null = null;
  private readonly buckets = new LocalBuckets((clientId, limit, want) => this.requestLease(clientId, limit, want));
  private leases: PendingLease[] = [];
  private effects: string[][] = [];
  private asyncScheduled = false;
  /** When the background call in flight was sent (ms), 0 when none is. */
  private asyncSentAt = 0;

  constructor(private readonly redis: Redis, private readonly keys: RedisKeys, private readonly opts: GateOptions = {}) {
    redis.defineCommand('tmIngestGate', { numberOfKeys: 0, lua: INGEST_SCRIPT });
    redis.defineCommand('tmIngestAsync', { numberOfKeys: 0, lua: ASYNC_SCRIPT });
    redis.defineCommand('tmReadGate', { numberOfKeys: 2, lua: READ_SCRIPT });
    redis.defineCommand('tmReadLiveGate', { numberOfKeys: 3, lua: READ_SCRIPT });
    redis.defineCommand('tmProfileDevice', { numberOfKeys: 1, lua: PROFILE_DEVICE_SCRIPT });
  }

  /**
   * Subscribes to revocations and loads the revoked set: from then on ingest answers without
   * waiting for Redis (see the top of this file). Without start() every request takes the
   * exact path. After a lost connection the fast path resumes once the set is reloaded.
   */
  async start(): Promise<void> {
    if (this.subscriber) return;
    const sub = this.redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null, lazyConnect: true });
    this.subscriber = sub;
    sub.on('error', () => {});
    sub.on('message', (_channel: string, clientId: string) => {
      this.revoked.add(clientId);
      this.buckets.drop(clientId);
      // `client revoke` returns once every subscriber has said so (internal/redis/announce.ts).
      acknowledge(this.redis, this.keys.revocations, clientId);
    });
    sub.on('close', () => (this.mirrorReady = false));
    // ioredis subscribes again on reconnect; the set is then reloaded before the fast path resumes.
    sub.on('ready', () => {
      if (this.subscriber === sub && sub.status === 'ready' && this.subscribedOnce) void this.reload();
    });
    await sub.connect();
    await sub.subscribe(this.keys.revocations);
    this.subscribedOnce = true;
    await this.reload();
  }

  private subscribedOnce = false;

  private async reload(): Promise<void> {
    try {
      for (const id of await this.redis.smembers(this.keys.revoked)) this.revoked.add(id);
      this.mirrorReady = this.subscriber?.status === 'ready';
    } catch (err) {
      this.opts.onAsyncError?.(err);
    }
  }

  /** Stops the revocation subscription (drain). */
  close(): void {
    this.mirrorReady = false;
    this.subscriber?.disconnect();
    this.subscriber = null;
  }

  /** Whether ingest currently answers without waiting for Redis. */
  get fast(): boolean {
    return this.mirrorReady;
  }

  /**
   * Revocation, rate limit, device choice and live update for one ingest request: at once
   * (no promise) on the fast path, else from Redis (see the top of this file).
   */
  ingest(i: IngestGateInput): GateResult | Promise<GateResult> {
    if (!this.mirrorReady || i.previousDeviceId !== '') return this.decide(i);
    if (this.revoked.has(i.clientId)) return REVOKED_RESULT;
    if (i.ratePerSecond <= 0) return this.admitted(i, null);
    const taken = this.buckets.take(i.clientId, i.ratePerSecond);
    return taken instanceof Promise ? taken.then((t) => this.settle(i, t)) : this.settle(i, taken);
  }

  private settle(i: IngestGateInput, t: TakeResult): GateResult {
    if (t.outcome === 'ok') return this.admitted(i, t.rate);
    if (t.outcome === 'revoked') {
      this.revoked.add(i.clientId);
      return REVOKED_RESULT;
    }
    return t;
  }

  /** An admitted request: its live and seen updates go in the turn's background call. */
  private admitted(i: IngestGateInput, rate: RateState | null): GateResult {
    if (i.liveAtMs !== null || i.markSeen) {
      this.effects.push([
        this.keys.live(i.projectId), i.markSeen ? this.keys.seen(i.deviceId) : '',
        i.profileId, i.liveAtMs === null ? '' : String(i.liveAtMs), i.clientId, i.deviceId,
      ]);
      this.scheduleAsync();
    }
    return { outcome: 'ok', rate, deviceId: i.deviceId };
  }

  private requestLease(clientId: string, limit: number, want: number): Promise<LeaseAnswer> {
    return new Promise<LeaseAnswer>((resolve, reject) => {
      this.leases.push({ clientId, limit, want, resolve, reject });
      this.scheduleAsync();
    });
  }

  /**
   * The background call goes at the end of this event-loop turn, or, while one is in flight,
   * when it settles (what gathers meanwhile shares the next call). A call in flight longer
   * than ASYNC_STALL_MS does not hold the next back.
   */
  private scheduleAsync(): void {
    if (this.asyncScheduled) return;
    if (this.asyncSentAt && Date.now() - this.asyncSentAt < ASYNC_STALL_MS) return;
    this.asyncScheduled = true;
    setImmediate(this.flushAsync);
  }

  private readonly flushAsync = (): void => {
    this.asyncScheduled = false;
    const leases = this.leases;
    const effects = this.effects;
    if (!leases.length && !effects.length) return;
    this.leases = [];
    this.effects = [];
    const sentAt = (this.asyncSentAt = Date.now());
    const settled = () => {
      if (this.asyncSentAt === sentAt) this.asyncSentAt = 0;
      if (this.leases.length || this.effects.length) this.scheduleAsync();
    };
    const l = leases.map((x) => [this.keys.rate('ingest', x.clientId), x.clientId, String(x.limit), String(x.want)]);
    const call = (this.redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>).tmIngestAsync!;
    const liveCutoff = String(Date.now() - LIVE_WINDOW_MS);
    call.call(this.redis, JSON.stringify({ l, e: effects }), this.keys.revoked, String(RATE_WINDOW_MS), String(SEEN_TTL_SECONDS), this.keys.rateSeq, liveCutoff).then(
      (reply) => {
        let r: { l?: unknown; rev?: unknown };
        try {
          r = JSON.parse(String(reply)) as { l?: unknown; rev?: unknown };
        } catch (err) {
          for (const x of leases) x.reject(err);
          return settled();
        }
        // cjson encodes an empty array as {}.
        if (Array.isArray(r.rev)) {
          for (const id of r.rev as string[]) {
            this.revoked.add(id);
            this.buckets.drop(id);
          }
        }
        const answers = Array.isArray(r.l) ? (r.l as number[][]) : [];
        for (let n = 0; n < leases.length; n++) {
          const a = answers[n];
          if (!a) leases[n]!.reject(new Error('lease missing from the Redis answer'));
          else leases[n]!.resolve({ revoked: a[0] === -1, granted: Number(a[1]), count: Number(a[2]), ttlMs: Number(a[3]) });
        }
        settled();
      },
      (err: unknown) => {
        this.opts.onAsyncError?.(err);
        for (const x of leases) x.reject(err);
        settled();
      },
    );
  };

  /**
   * The exact path: revocation, rate limit, device choice and live update decided by Redis.
   * Requests that arrive in the same event-loop turn share one Redis call (flushed on
   * setImmediate or at MAX_BATCH), so the per-request cost is a few array pushes, not a
   * command round trip.
   */
  decide(i: IngestGateInput): Promise<GateResult> {
    return new Promise<GateResult>((resolve, reject) => {
      this.pending.push({ input: i, resolve, reject });
      if (this.pending.length >= MAX_BATCH) this.flush();
      else if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flushSoon);
      }
    });
  }

  private pending: PendingIngest[] = [];
  private flushScheduled = false;
  private readonly flushSoon = (): void => {
    this.flushScheduled = false;
    this.flush();
  };

  private flush(): void {
    const batch = this.pending;
    if (!batch.length) return;
    this.pending = [];
    const windowMs = 1000;
    const reqs: string[][] = new Array(batch.length);
    for (let n = 0; n < batch.length; n++) {
      const i = batch[n]!.input;
      const seen = i.previousDeviceId !== '' || i.markSeen;
      reqs[n] = [
        this.keys.rate('ingest', i.clientId),
        this.keys.live(i.projectId),
        seen ? this.keys.seen(i.deviceId) : '',
        seen ? this.keys.seen(i.previousDeviceId || i.deviceId) : '',
        String(i.ratePerSecond), i.clientId, i.profileId,
        i.liveAtMs === null ? '' : String(i.liveAtMs), i.deviceId, i.previousDeviceId,
        i.markSeen ? '1' : '0',
      ];
    }
    const call = (this.redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>).tmIngestGate!;
    const liveCutoff = String(batch[0]!.input.nowMs - LIVE_WINDOW_MS);
    call.call(this.redis, JSON.stringify(reqs), this.keys.revoked, String(windowMs), String(SEEN_TTL_SECONDS), this.keys.rateSeq, liveCutoff).then(
      (reply) => {
        let r: (number | string)[];
        try {
          r = JSON.parse(String(reply)) as (number | string)[];
        } catch (err) {
          for (const b of batch) b.reject(err);
          return;
        }
        for (let n = 0; n < batch.length; n++) {
          const b = batch[n]!;
          const at = n * 4;
          const row = [Number(r[at]), Number(r[at + 1]), Number(r[at + 2])] as [number, number, number];
          b.resolve(toResult(row, b.input.ratePerSecond, windowMs, String(r[at + 3] ?? '')));
        }
      },
      (err: unknown) => {
        for (const b of batch) b.reject(err);
      },
    );
  }

  /**
   * Remembers `deviceId` as the device of the profile's browser event with the latest event
   * time (`eventMs`), for PROFILE_DEVICE_TTL_SECONDS (longer than a session stays open): a
   * server-side event of the profile is then queued on that device, so that the worker finds
   * its open session. Written in the background, at most about once a minute per profile and
   * device (a local LRU), before the request's 202 goes out (one Redis connection keeps the
   * order of its commands); an event older than the remembered one's (a backfill sent late)
   * only refreshes the expiry.
   */
  noteProfileDevice(projectId: string, profileId: string, deviceId: string, eventMs: number, nowMs: number): void {
    const key = this.keys.profileDevice(projectId, profileId);
    const last = this.profileDevices.get(key);
    if (last && nowMs - last.atMs < PROFILE_DEVICE_REFRESH_MS && (last.deviceId === deviceId ? eventMs - last.eventMs < PROFILE_DEVICE_REFRESH_MS : eventMs < last.eventMs)) return;
    this.profileDevices.set(key, last && eventMs < last.eventMs ? { ...last, atMs: nowMs } : { deviceId, eventMs, atMs: nowMs });
    const call = (this.redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>).tmProfileDevice!;
    call.call(this.redis, key, deviceId, String(eventMs), String(PROFILE_DEVICE_TTL_SECONDS)).catch((err: unknown) => {
      this.profileDevices.delete(key);
      this.opts.onAsyncError?.(err);
    });
  }

  /** The device of the profile's latest browser event (event time) in the last PROFILE_DEVICE_TTL_SECONDS, or null. */
  async profileDevice(projectId: string, profileId: string): Promise<string | null> {
    const v = await this.redis.get(this.keys.profileDevice(projectId, profileId));
    if (v === null) return null;
    const bar = v.lastIndexOf('|');
    return bar < 0 ? v : v.slice(0, bar);
  }

  private readonly profileDevices = new LRUCache<string, { deviceId: string; eventMs: number; atMs: number }>({ max: 50_000 });

  /** Whether the client is in the revocation set (ingest asks only on its error path). */
  async isRevoked(clientId: string): Promise<boolean> {
    return (await this.redis.sismember(this.keys.revoked, clientId)) === 1;
  }

  /** Insights and export: revocation + `limit` requests per `windowMs`. */
  async read(clientId: string, limit: number, windowMs: number, nowMs: number): Promise<GateResult> {
    const r = (await (this.redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown[]>>).tmReadGate!(
      this.keys.rate('read', clientId),
      this.keys.revoked,
      limit, clientId, windowMs, nowMs - LIVE_WINDOW_MS, this.keys.rateSeq,
    )) as [number, number, number];
    return toResult(r, limit, windowMs, '');
  }

  /**
   * `read` plus the project's live visitors (profiles with an event in the last 5 minutes),
   * in the same Redis call; `live` is null unless the outcome is 'ok'.
   */
  async readLive(clientId: string, limit: number, windowMs: number, nowMs: number, projectId: string): Promise<{ result: GateResult; live: number | null }> {
    const r = (await (this.redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown[]>>).tmReadLiveGate!(
      this.keys.rate('read', clientId),
      this.keys.revoked,
      this.keys.live(projectId),
      limit, clientId, windowMs, nowMs - LIVE_WINDOW_MS, this.keys.rateSeq,
    )) as [number, number, number, number];
    const result = toResult(r, limit, windowMs, '');
    return { result, live: result.outcome === 'ok' ? Number(r[3]) : null };
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
