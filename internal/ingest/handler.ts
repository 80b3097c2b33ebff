// POST /event and POST /track: validate, authorize, choose the device, publish, answer 202
// only after the JetStream ack. Never blocks on PostgreSQL (clients are cached).
import type { ZodType } from 'zod';
import { LRUCache } from 'lru-cache';
import { detectBot } from '../enrich/bot';
import type { Authenticator } from '../auth/auth';
import { BadRequestError, PayloadTooLargeError, ServiceUnavailableError, TooManyRequestsError, UnauthorizedError, UnsupportedMediaTypeError } from '../http/errors';
import type { Route } from '../http/router';
import type { HttpRequest, HttpResponse } from '../http/types';
import { shardOf } from '../bus/bus';
import { deviceWindow, rateHeaders, type Gate, type GateResult } from '../ratelimit/gate';
import { OpTooLargeError, type Batcher } from './batcher';
import { DeviceIdCache, type SaltKeeper } from './identity';
import { clientIp, planEvent, planTrackBody, type OpContext, type PlannedOp } from './ops';
import { EventBody, TrackBody } from './schemas';

export interface IngestDeps {
  auth: Authenticator;
  gate: Gate;
  salts: SaltKeeper;
  batcher: Batcher;
  subjectFor: (projectId: string, shard: number) => string;
  shards: number;
  now?: () => number;
  /** Redis could not be asked: the request goes on without rate limit and live update. */
  onDegraded?: (what: string, err: unknown) => void;
  onRateLimited?: (scope: string) => void;
}

const MAX_DEPTH = 64;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Throws a 400 for a value PostgreSQL could not store or that is nested too deep. */
function checkStorable(value: unknown): void {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v)) throw new BadRequestError('strings must be well-formed Unicode (no lone surrogates)');
    } else if (v && typeof v === 'object') {
      if (depth >= MAX_DEPTH) throw new BadRequestError(`JSON nested deeper than ${MAX_DEPTH} levels`);
      for (const [k, child] of Array.isArray(v) ? v.entries() : Object.entries(v)) {
        if (typeof k === 'string' && LONE_SURROGATE.test(k)) throw new BadRequestError('keys must be well-formed Unicode (no lone surrogates)');
        stack.push([child, depth + 1]);
      }
    }
  }
}

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
  const parsed = schema.safeParse(data);
  if (!parsed.success) throw BadRequestError.fromZod(parsed.error);
  return parsed.data;
}

export function ingestRoutes(deps: IngestDeps): Route[] {
  const now = deps.now ?? Date.now;
  const botVerdicts = new LRUCache<string, boolean>({ max: 10_000 });
  const deviceIds = new DeviceIdCache(50_000);
  const isBotUa = (ua: string | null) => {
    const key = ua ?? '';
    let v = botVerdicts.get(key);
    if (v === undefined) botVerdicts.set(key, (v = detectBot(ua).isBot));
    return v;
  };

  async function accept(req: HttpRequest, plan: (ctx: OpContext) => PlannedOp, projectId: string, client: { id: string; ingestRate: number }): Promise<HttpResponse> {
    const receivedMs = now();
    const userAgent = req.headers['user-agent'] ?? null;
    const ctx: OpContext = { projectId, receivedMs, userAgent, ip: null };
    const planned = plan(ctx);
    const ip = clientIp(req.headers, req.remoteAddress, planned.ipOverride);
    let deviceId: string;
    let previousDeviceId = '';
    const window = deviceWindow(receivedMs);
    if (planned.deviceOverride) deviceId = planned.deviceOverride;
    else {
      const salts = await deps.salts.salts(receivedMs).catch((err) => {
        throw Object.assign(new ServiceUnavailableError('device salts unavailable (Redis); retry'), { cause: err });
      });
      deviceId = deviceIds.get(salts.current, userAgent ?? '', ip ?? '', projectId);
      if (window.tryPrevious) previousDeviceId = deviceIds.get(salts.previous, userAgent ?? '', ip ?? '', projectId);
    }
    // Live visitors: recent, non-bot events only (a backfilled event is not live).
    const live = planned.eventMs !== null && planned.eventMs > receivedMs - 5 * 60_000 && !isBotUa(userAgent) ? planned.eventMs : null;
    let gate: GateResult;
    try {
      gate = await deps.gate.ingest({
        clientId: client.id, ratePerSecond: client.ingestRate, projectId, deviceId, previousDeviceId,
        markSeen: window.markSeen && !planned.deviceOverride,
        profileId: planned.profileId ?? '', liveAtMs: live, nowMs: receivedMs,
      });
    } catch (err) {
      deps.onDegraded?.('redis', err);
      gate = { outcome: 'ok', rate: null, deviceId };
    }
    if (gate.outcome === 'revoked') throw new UnauthorizedError('invalid client credentials');
    if (gate.outcome === 'limited') {
      deps.onRateLimited?.('ingest');
      const e = new TooManyRequestsError(`rate limit of ${gate.rate.limit} requests per second exceeded`);
      e.headers = rateHeaders(gate.rate, true);
      throw e;
    }
    const op = planned.build(gate.deviceId, ip);
    try {
      await deps.batcher.add(deps.subjectFor(projectId, shardOf(gate.deviceId, deps.shards)), op);
    } catch (err) {
      if (err instanceof OpTooLargeError) throw new PayloadTooLargeError(err.message);
      throw Object.assign(new ServiceUnavailableError('event could not be stored; retry with backoff'), { cause: err });
    }
    return { status: 202, headers: rateHeaders(gate.rate), body: { deviceId: gate.deviceId } };
  }

  /**
   * The body, or its 4xx. The client may have been revoked since it was cached: the
   * revocation check normally rides with the rate limit in the gate, after parsing, so a
   * refused body asks Redis first and answers 401 for a revoked client (Redis away: the 4xx).
   */
  async function bodyOf<T>(req: HttpRequest, schema: ZodType<T>, clientId: string): Promise<T> {
    try {
      return parseJsonBody(req, schema);
    } catch (err) {
      if (await deps.gate.isRevoked(clientId).catch(() => false)) throw new UnauthorizedError('invalid client credentials');
      throw err;
    }
  }

  return [
    {
      method: 'POST', pattern: '/event', family: 'ingest', cors: true,
      handler: async (req) => {
        const client = await deps.auth.forIngest(req);
        const body = await bodyOf(req, EventBody, client.id);
        return accept(req, (ctx) => planEvent(body, ctx), client.projectId, client);
      },
    },
    {
      method: 'POST', pattern: '/track', family: 'ingest', cors: true,
      handler: async (req) => {
        const client = await deps.auth.forIngest(req);
        const body = await bodyOf(req, TrackBody, client.id);
        return accept(req, (ctx) => planTrackBody(body, ctx), client.projectId, client);
      },
    },
  ];
}
