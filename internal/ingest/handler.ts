// POST /event and POST /track (and OpenPanel's older /profile routes, profile-routes.ts):
// validate, authorize, choose the device, publish, answer 202 only after the JetStream ack.
// Never blocks on PostgreSQL (clients are cached). GET /track/device-id (device-id.ts) shares
// the device ids computed here.
import type { ZodType } from 'zod';
import { detectBot } from '../enrich/bot';
import { hasDeviceOverride, parseUserAgentInfo } from '../enrich/user-agent';
import type { Authenticator } from '../auth/auth';
import { BadRequestError, PayloadTooLargeError, ServiceUnavailableError, UnauthorizedError, UnsupportedMediaTypeError } from '../http/errors';
import type { Route } from '../http/router';
import type { HttpRequest, HttpResponse } from '../http/types';
import { shardOf } from '../bus/bus';
import { queuedOpProblem } from '../bus/storable';
import type { QueuedTrack } from '../model/event';
import { deviceWindow, rateHeaders, type Gate } from '../ratelimit/gate';
import { settleGate } from './gate-outcome';
import { OpTooLargeError, type Batcher } from './batcher';
import { DEFAULT_IP_HEADERS, type IpHeaderOrder } from './client-ip';
import { GenerationalCache } from './cache';
import { DeviceIdCache, type SaltKeeper } from './identity';
import { deviceIdRoute, type LiveSessionLookup } from './device-id';
import { profileRoutes, type Ingest } from './profile-routes';
import { dedupeMsgId, dedupeOpId, takeIdempotencyKey } from './idempotency';
import { clientIpOf, DEFAULT_EVENT_TIME_LIMITS, planEvent, planTrackBody, type EventTimeLimits, type OpContext, type PlannedOp } from './ops';
import { EventBody, TrackBody, trackBodyFast, type EventBodyT, type TrackBodyT } from './schemas';

export interface IngestDeps {
  auth: Authenticator;
  gate: Gate;
  salts: SaltKeeper;
  batcher: Batcher;
  subjectFor: (projectId: string, shard: number) => string;
  shards: number;
  /** Headers that may name the client's address (TRUSTED_IP_HEADERS); default all of client-ip.ts IP_HEADERS. */
  ipHeaders?: IpHeaderOrder;
  now?: () => number;
  /** How far back an event time may be (INGEST_MAX_PAST_DAYS, RETENTION_DAYS); default ops.ts DEFAULT_EVENT_TIME_LIMITS. */
  eventTimeLimits?: EventTimeLimits;
  /** Redis could not be asked: the request goes on without rate limit and live update. */
  onDegraded?: (what: string, err: unknown) => void;
  onRateLimited?: (scope: string) => void;
  /** GET /track/device-id's live session of a device (PostgreSQL); without it the answer names none. */
  liveSession?: LiveSessionLookup;
  /** That lookup failed or was late: the answer names no session (as OpenPanel's does then). */
  onSessionLookupError?: (err: unknown) => void;
}

const MAX_DEPTH = 64;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** Any surrogate at all: a quick scan; only a string that has one is checked for a lone one. */
const ANY_SURROGATE = /[\uD800-\uDFFF]/;
const hasLoneSurrogate = (s: string): boolean => ANY_SURROGATE.test(s) && LONE_SURROGATE.test(s);

/**
 * Throws a 400 for a value PostgreSQL could not store or that is nested too deep. Visits
 * the value depth first, an object's keys before its children and its children last to
 * first, so that of several faults the one reported is the same as ever.
 */
export function checkStorable(value: unknown): void {
  visitStorable(value, 0);
}

function visitStorable(v: unknown, depth: number): void {
  if (typeof v === 'string') {
    if (hasLoneSurrogate(v)) throw new BadRequestError('strings must be well-formed Unicode (no lone surrogates)');
  } else if (v && typeof v === 'object') {
    if (depth >= MAX_DEPTH) throw new BadRequestError(`JSON nested deeper than ${MAX_DEPTH} levels`);
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) visitStorable(v[i], depth + 1);
    } else {
      const o = v as Record<string, unknown>;
      const keys = Object.keys(o);
      for (let i = 0; i < keys.length; i++) {
        if (hasLoneSurrogate(keys[i]!)) throw new BadRequestError('keys must be well-formed Unicode (no lone surrogates)');
      }
      for (let i = keys.length - 1; i >= 0; i--) visitStorable(o[keys[i]!], depth + 1);
    }
  }
}

/** Schemas with a hand-written answer for their common input (zod decides the rest). */
const FAST_PATHS = new Map<ZodType<unknown>, (data: unknown) => unknown>([[TrackBody, trackBodyFast]]);

/** Strict UTF-8 (invalid bytes throw); one decoder for every request. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

export function parseJsonBody<T>(req: HttpRequest, schema: ZodType<T>): T {
  const type = (req.headers['content-type'] ?? '').toLowerCase();
  if (type && !type.includes('json') && !type.startsWith('text/plain')) {
    throw new UnsupportedMediaTypeError(`content-type must be application/json, got ${type.split(';')[0]}`);
  }
  if (req.body.length === 0) throw new BadRequestError('request body is empty; expected a JSON object');
  let text: string;
  let data: unknown;
  try {
    text = UTF8.decode(req.body);
    data = JSON.parse(text);
  } catch {
    throw new BadRequestError('request body is not valid UTF-8 JSON');
  }
  // PostgreSQL text and jsonb cannot hold NUL or lone surrogates, and a value nested too
  // deep cannot be queued: refused here rather than failing in the worker.
  if (text.includes('\\u0000')) throw new BadRequestError('strings must not contain NUL (\\u0000) characters');
  checkStorable(data);
  const fast = FAST_PATHS.get(schema)?.(data);
  if (fast !== undefined) return fast as T;
  const parsed = schema.safeParse(data);
  if (!parsed.success) throw BadRequestError.fromZod(parsed.error);
  return parsed.data;
}

/** Where a body's properties are (for `__idempotencyKey`). */
const eventProperties = (b: EventBodyT): [Record<string, unknown> | undefined, string[]] => [b.properties, ['properties']];
const trackProperties = (b: TrackBodyT): [Record<string, unknown> | undefined, string[]] =>
  [(b.payload as { properties?: Record<string, unknown> }).properties, ['payload', 'properties']];

/** Response headers of a 202 without a rate limit (never mutated). */
const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;

export function ingestRoutes(deps: IngestDeps): Route[] {
  const now = deps.now ?? Date.now;
  const ipHeaders = deps.ipHeaders ?? DEFAULT_IP_HEADERS;
  const limits = deps.eventTimeLimits ?? DEFAULT_EVENT_TIME_LIMITS;
  const deviceIds = new DeviceIdCache(50_000);
  // What a user-agent says, once per distinct string: a bot (isbot), and a server (no browser,
  // no OS: absent, node, okhttp/..., curl/...), which the worker's enrich step decides the same
  // from the same string (internal/enrich/user-agent.ts).
  const uaVerdicts = new GenerationalCache<string, { bot: boolean; server: boolean }>(10_000);
  const verdictOf = (ua: string | null) => {
    const key = ua ?? '';
    let v = uaVerdicts.get(key);
    if (v === undefined) uaVerdicts.set(key, (v = { bot: detectBot(ua).isBot, server: parseUserAgentInfo(ua).isServer }));
    return v;
  };

  /**
   * One request, start to 202: auth, body, plan, device, gate, publish. One async function
   * per request (the cached client and the day's salts are taken without a promise), so the
   * hot path awaits only the gate's Redis call and the JetStream ack.
   */
  const ingest: Ingest = async function ingest<B>(
    req: HttpRequest,
    schema: ZodType<B>,
    plan: (body: B, ctx: OpContext) => PlannedOp,
    propertiesOf: (body: B) => [Record<string, unknown> | undefined, string[]],
  ): Promise<HttpResponse> {
    const client = deps.auth.cachedForIngest(req) ?? (await deps.auth.forIngest(req));
    // The client may have been revoked since it was cached: the revocation check normally
    // rides with the rate limit in the gate, after parsing, so a refused body asks Redis
    // first and answers 401 for a revoked client (Redis away: the 4xx).
    let body: B;
    try {
      body = parseJsonBody(req, schema);
    } catch (err) {
      if (await deps.gate.isRevoked(client.id).catch(() => false)) throw new UnauthorizedError('invalid client credentials');
      throw err;
    }
    const [properties, propertiesPath] = propertiesOf(body);
    const idempotencyKey = takeIdempotencyKey(req, properties, propertiesPath);
    const projectId = client.projectId;
    const receivedMs = now();
    const userAgent = req.headers['user-agent'] ?? null;
    const ctx: OpContext = { projectId, receivedMs, userAgent, ip: null, limits };
    const planned = plan(body, ctx);
    const ip = clientIpOf(req, planned.ipOverride, ipHeaders);
    let deviceId: string;
    let previousDeviceId = '';
    const window = deviceWindow(receivedMs);
    if (planned.deviceOverride) deviceId = planned.deviceOverride;
    else {
      const salts = deps.salts.heldSalts(receivedMs) ?? (await deps.salts.salts(receivedMs).catch((err) => {
        throw Object.assign(new ServiceUnavailableError('device salts unavailable (Redis); retry'), { cause: err });
      }));
      deviceId = deviceIds.get(salts.current, userAgent ?? '', ip ?? '', projectId);
      if (window.tryPrevious) previousDeviceId = deviceIds.get(salts.previous, userAgent ?? '', ip ?? '', projectId);
    }
    // What PostgreSQL could not store or index is refused now, never after a 202 (internal/bus/storable.ts).
    let op = planned.build(deviceId, ip);
    const problem = queuedOpProblem(op, propertiesPath.slice(0, -1)); // the op's fields are one level above its properties
    if (problem) {
      if (await deps.gate.isRevoked(client.id).catch(() => false)) throw new UnauthorizedError('invalid client credentials');
      throw new BadRequestError(`${problem.path.join('.')}: ${problem.message}`, [problem]);
    }
    // A server-side event (semantics.md, "OpenPanel fidelity": no browser, no OS, no device
    // override) opens no session and is no visitor. With a profileId, it goes to the device of
    // the profile's latest browser event (even with __deviceId), so that the worker, which
    // keeps sessions by device and shard, finds the session it joins when it is open.
    // A crawler without an OS (Googlebot) is a bot first: it keeps its bot sessions, as the
    // worker decides from the same detector.
    const ua = verdictOf(userAgent);
    const serverSide = op.kind === 'track' && ua.server && !ua.bot && !hasDeviceOverride(op.deviceOverrides);
    let joined = false;
    let ownDeviceId: string | null = null;
    if (serverSide && planned.profileId) {
      const browserDevice = await deps.gate.profileDevice(projectId, planned.profileId).catch((err: unknown) => {
        deps.onDegraded?.('redis', err);
        return null;
      });
      if (browserDevice && browserDevice !== deviceId) {
        joined = true;
        ownDeviceId = deviceId;
        deviceId = browserDevice;
        previousDeviceId = '';
        op = planned.build(deviceId, ip);
        (op as QueuedTrack).ownDeviceId = ownDeviceId;
      }
    }
    // Live visitors: recent, non-bot, browser events only (a backfilled event is not live).
    const live = !serverSide && planned.eventMs !== null && planned.eventMs > receivedMs - 5 * 60_000 && !ua.bot ? planned.eventMs : null;
    // Usually decided at once (local revocation mirror and token bucket); a promise only when
    // Redis must answer first (Gate.ingest in internal/ratelimit/gate.ts; the exact path is
    // internal/ratelimit/exact.ts).
    const decided = settleGate(deps.gate.ingest({
      clientId: client.id, ratePerSecond: client.ingestRate, projectId, deviceId, previousDeviceId,
      markSeen: window.markSeen && !planned.deviceOverride && !joined,
      profileId: planned.profileId ?? '', liveAtMs: live, nowMs: receivedMs,
    }), deviceId, deps);
    const gate = decided instanceof Promise ? await decided : decided;
    if (gate.deviceId !== deviceId) op = planned.build(gate.deviceId, ip); // (never for a routed server-side event: no previous id to try)
    // Every browser event's profile (the deviceId when it names none: semantics.md) and device.
    if (op.kind === 'track' && !serverSide) deps.gate.noteProfileDevice(projectId, planned.profileId || gate.deviceId, gate.deviceId, planned.eventMs ?? receivedMs, receivedMs);
    let msgId: string | undefined;
    if (idempotencyKey !== null) {
      op.id = dedupeOpId(projectId, idempotencyKey);
      op.dedupeKey = idempotencyKey;
      msgId = dedupeMsgId(op.id);
    }
    try {
      await deps.batcher.add(deps.subjectFor(projectId, shardOf(gate.deviceId, deps.shards)), op, msgId);
    } catch (err) {
      if (err instanceof OpTooLargeError) throw new PayloadTooLargeError(err.message);
      // A publish that timed out may still have been stored: never a 2xx for an unknown
      // outcome; a retry with the same idempotency key cannot count it twice.
      const e = Object.assign(
        new ServiceUnavailableError('event not confirmed stored (it may or may not have been); retry with backoff, with the same Idempotency-Key to avoid counting it twice'),
        { cause: err },
      );
      e.headers = { 'Retry-After': '1' };
      throw e;
    }
    // A routed server-side event answers with its own device (the one it keeps unless it joins).
    return { status: 202, headers: gate.rate ? rateHeaders(gate.rate) : NO_HEADERS, body: { deviceId: ownDeviceId ?? gate.deviceId } };
  };

  return [
    {
      method: 'POST', pattern: '/event', family: 'ingest', cors: true,
      handler: (req) => ingest<EventBodyT>(req, EventBody, planEvent, eventProperties),
    },
    {
      method: 'POST', pattern: '/track', family: 'ingest', cors: true,
      handler: (req) => ingest<TrackBodyT>(req, TrackBody, planTrackBody, trackProperties),
    },
    ...profileRoutes(ingest),
    deviceIdRoute({
      auth: deps.auth, gate: deps.gate, salts: deps.salts, deviceIds, ipHeaders, now,
      liveSession: deps.liveSession, onDegraded: deps.onDegraded, onRateLimited: deps.onRateLimited,
      onSessionLookupError: deps.onSessionLookupError,
    }),
  ];
}
