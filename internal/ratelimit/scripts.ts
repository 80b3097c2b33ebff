// The gate's Lua scripts, composed from pieces each written once here: Redis' clock and the
// sliding log (RATE_LUA), the live set (LIVE_LUA), the arguments and revocation check of the
// two batched ingest scripts (BATCH_LUA); and the scripts as typed commands of a connection.
// Why: the exact path, the background call and the reads must apply the same rules to the
// same keys, so each rule has one text.
//
// The rate limit is a sliding log in a sorted set per (scope, client): one member per admitted
// request (or leased slot), scored by Redis' own clock (TIME, so every API process agrees).
// Members older than the window leave; a slot is logged while fewer than `limit` members are
// younger than the window, so no `limit + 1` are ever logged within any window-long span.
// Refused requests are not logged.
//
// The batched scripts take their batch as ONE JSON argument and answer with one JSON value:
// encoding and decoding ~15 RESP values per request was a quarter of the API's main-thread
// CPU in the profile, cjson in Redis costs a fraction of it. Their keys are therefore not
// declared in KEYS: Tidemark uses one Redis server (no Redis Cluster).
import type { Redis } from '../redis/redis';

// Redis' clock, read at most once per call, and the sliding log of one client.
const RATE_LUA = `
local nowMs = nil
local function now()
  if nowMs == nil then
    local t = redis.call('TIME')
    nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return nowMs
end
-- One INCR of the sequence key per call (log members unique across processes), on the
-- first slot logged.
local seq = nil
-- Trims the log at key to the window, then logs up to want slots while it holds fewer than
-- limit members; tag (a request's place in the call) keeps the call's members apart. Returns
-- the slots logged, the members then, and ms until the oldest leaves the window.
local function reserve(key, limit, want, windowMs, seqKey, tag)
  local t = now()
  redis.call('ZREMRANGEBYSCORE', key, '-inf', t - windowMs)
  local count = redis.call('ZCARD', key)
  local granted = limit - count
  if granted > want then granted = want end
  if granted < 0 then granted = 0 end
  if granted > 0 then
    if seq == nil then seq = redis.call('INCR', seqKey) end
    for k = 1, granted do
      redis.call('ZADD', key, t, seq .. ':' .. tag .. ':' .. k)
    end
    redis.call('PEXPIRE', key, windowMs)
    count = count + granted
  end
  local ttl = windowMs
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if oldest[2] then ttl = tonumber(oldest[2]) + windowMs - t end
  return granted, count, ttl
end
`;

// The live set of a project (profiles and anonymous devices with an event in the last five
// minutes, scored by event time).
const LIVE_LUA = `
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
local trimmed = {}
local changed = {}
local changedKeys = {}
-- An event live at ms at: its identity() into the set, which is first trimmed (once per
-- project per call) of scores at or below cutoff, so it holds the last five minutes' visitors
-- even when nobody reads /live. A visitor new to the window (ZADD added a member) changes the
-- count, and so does an identified device's anonymous member leaving (the device is that
-- profile now): announce() then tells the project's channel, once per call.
local function live(liveKey, cutoff, device, named, at)
  if not trimmed[liveKey] then
    trimmed[liveKey] = true
    redis.call('ZREMRANGEBYSCORE', liveKey, '-inf', cutoff)
  end
  local profile = identity(liveKey, device, named)
  local added = redis.call('ZADD', liveKey, 'GT', at, profile)
  local removed = 0
  if profile ~= device then removed = redis.call('ZREM', liveKey, device) end
  if added ~= removed and not changed[liveKey] then
    changed[liveKey] = true
    changedKeys[#changedKeys + 1] = liveKey
  end
  redis.call('PEXPIRE', liveKey, 600000)
end
-- Live push (internal/live) re-counts a project whose channel hears this.
local function announce()
  for _, liveKey in ipairs(changedKeys) do
    redis.call('PUBLISH', liveKey .. ':changed', '1')
  end
end
`;

// The arguments of both batched ingest scripts. ARGV: 1 the batch (JSON), 2 revoked-clients
// key, 3 rate window ms, 4 seen TTL seconds, 5 sequence key, 6 live cutoff ms (now - 5
// minutes: a score at or below it is no longer live). revoked() asks the set once per client
// per call; checked keeps the answers.
const BATCH_LUA = `
local req = cjson.decode(ARGV[1])
local revokedKey = ARGV[2]
local windowMs = tonumber(ARGV[3])
local seenTtl = ARGV[4]
local seqKey = ARGV[5]
local liveCutoff = ARGV[6]
local checked = {}
local function revoked(id)
  local v = checked[id]
  if v == nil then
    v = redis.call('SISMEMBER', revokedKey, id)
    checked[id] = v
  end
  return v == 1
end
`;

// The exact path: one call decides a whole batch of ingest requests (all those that arrived
// in one event-loop turn), each exactly as if alone and in arrival order. The batch: per
// request 4 keys, then 7 arguments; the answer: one JSON array, 4 values per request (code,
// log count, ttl ms, device id). The two `seen` keys are '' when the request cannot use them
// (no previous-salt id to try and nothing to mark seen).
//   r: 1 rate key, 2 live key, 3 seen(device), 4 seen(previous or device), 5 limit,
//      6 client id, 7 profile id, 8 live-at ms or '', 9 device id, 10 previous device id or '',
//      11 mark seen '1'/'0'
const INGEST_SCRIPT = `${RATE_LUA}${LIVE_LUA}${BATCH_LUA}
local out = {}
for n, r in ipairs(req) do
  local code = 1
  local count = 0
  local ttl = 0
  local device = r[9]
  if revoked(r[6]) then
    code = -1
    device = ''
  else
    local limit = tonumber(r[5])
    if limit > 0 then
      local granted
      granted, count, ttl = reserve(r[1], limit, 1, windowMs, seqKey, n)
      if granted == 0 then
        code = 0
        device = ''
      end
    end
    if code == 1 then
      if r[10] ~= '' and redis.call('EXISTS', r[3]) == 0 and redis.call('EXISTS', r[4]) == 1 then
        device = r[10]
        redis.call('EXPIRE', r[4], seenTtl)
      elseif r[11] == '1' then
        redis.call('SET', r[3], '1', 'EX', seenTtl)
      end
      if r[8] ~= '' then live(r[2], liveCutoff, device, r[7], r[8]) end
    end
  end
  out[#out + 1] = code
  out[#out + 1] = count
  out[#out + 1] = ttl
  out[#out + 1] = device
end
announce()
return cjson.encode(out)
`;

// The answer-free half of the fast path, one call per event-loop turn: the effects of admitted
// requests (live set, seen device) and leases (reserve up to `want` slots in a client's log).
// Every client id it sees is checked against the revoked set, so a revocation the channel
// missed is learnt within one call. The batch: {l: [[rate key, client id, limit, want], ...],
// e: [[live key, seen key or '', profile named or '', live-at ms or '', client id, device id],
// ...]}. Returns JSON {l: [[code (1 ok, -1 revoked), granted, count, ttl ms], ...], rev:
// [client ids]}.
const ASYNC_SCRIPT = `${RATE_LUA}${LIVE_LUA}${BATCH_LUA}
for _, e in ipairs(req.e) do
  revoked(e[5])
  if e[2] ~= '' then redis.call('SET', e[2], '1', 'EX', seenTtl) end
  if e[4] ~= '' then live(e[1], liveCutoff, e[6], e[3], e[4]) end
end
announce()
local leases = {}
for n, l in ipairs(req.l) do
  if revoked(l[2]) then
    leases[n] = {-1, 0, 0, 0}
  else
    local granted, count, ttl = reserve(l[1], tonumber(l[3]), tonumber(l[4]), windowMs, seqKey, n)
    leases[n] = {1, granted, count, ttl}
  end
end
local rev = {}
for id, v in pairs(checked) do
  if v == 1 then rev[#rev + 1] = id end
end
return cjson.encode({l = leases, rev = rev})
`;

// Reads: revocation + rate limit; with a third key (a project's live set, /live) also the
// live count, trimmed and counted in the same call: one round trip for the whole request.
// KEYS: 1 rate key, 2 revoked-clients key, 3 live key (optional). ARGV: 1 limit, 2 client id,
// 3 window ms, 4 live cutoff ms, 5 sequence key. Returns {code, count, ttl ms, live or -1}.
const READ_SCRIPT = `${RATE_LUA}
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 then return {-1, 0, 0, -1} end
local limit = tonumber(ARGV[1])
local count = 0
local ttl = 0
if limit > 0 then
  local granted
  granted, count, ttl = reserve(KEYS[1], limit, 1, tonumber(ARGV[3]), ARGV[5], 1)
  if granted == 0 then return {0, count, ttl, -1} end
end
local live = -1
if KEYS[3] then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[4])
  live = redis.call('ZCOUNT', KEYS[3], '(' .. ARGV[4], '+inf')
end
return {1, count, ttl, live}
`;

// A profile's browser device (profile-device.ts): KEYS[1] the profile's key; ARGV 1 device
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

/** The scripts as commands of one connection (ioredis: EVALSHA, the script loaded once). */
export interface GateCommands {
  tmIngestGate(reqs: string, revokedKey: string, windowMs: string, seenTtl: string, seqKey: string, liveCutoff: string): Promise<unknown>;
  tmIngestAsync(req: string, revokedKey: string, windowMs: string, seenTtl: string, seqKey: string, liveCutoff: string): Promise<unknown>;
  tmReadGate(rateKey: string, revokedKey: string, limit: number, clientId: string, windowMs: number, liveCutoff: number, seqKey: string): Promise<unknown[]>;
  tmReadLiveGate(rateKey: string, revokedKey: string, liveKey: string, limit: number, clientId: string, windowMs: number, liveCutoff: number, seqKey: string): Promise<unknown[]>;
  tmProfileDevice(key: string, deviceId: string, eventMs: string, ttlSeconds: string): Promise<unknown>;
}

/** Defines the scripts on `redis`; the same connection, typed with its new commands. */
export function defineGateCommands(redis: Redis): GateCommands {
  redis.defineCommand('tmIngestGate', { numberOfKeys: 0, lua: INGEST_SCRIPT });
  redis.defineCommand('tmIngestAsync', { numberOfKeys: 0, lua: ASYNC_SCRIPT });
  redis.defineCommand('tmReadGate', { numberOfKeys: 2, lua: READ_SCRIPT });
  redis.defineCommand('tmReadLiveGate', { numberOfKeys: 3, lua: READ_SCRIPT });
  redis.defineCommand('tmProfileDevice', { numberOfKeys: 1, lua: PROFILE_DEVICE_SCRIPT });
  return redis as unknown as GateCommands;
}
