// GET /track/device-id: OpenPanel's answer to "which device am I": the device id the caller's
// user-agent and address get on /track now, and the live session a /track event would join.
// Same credentials, revocation and rate limit as /track (the ingest gate); it stores nothing.
import type { Authenticator } from '../auth/auth';
import { BadRequestError, ServiceUnavailableError, UnauthorizedError } from '../http/errors';
import type { Route } from '../http/router';
import type { HttpRequest, HttpResponse } from '../http/types';
import { deviceWindow, rateHeaders, type Gate } from '../ratelimit/gate';
import { settleGate } from './gate-outcome';
import type { IpHeaderOrder } from './client-ip';
import type { DeviceIdCache, SaltKeeper } from './identity';
import { clientIpOf } from './ops';

/** The session a device's next event would join (PostgreSQL's sessions), or null. */
export type LiveSessionLookup = (projectId: string, deviceId: string, nowMs: number) => Promise<string | null>;

export interface DeviceIdDeps {
  auth: Authenticator;
  gate: Gate;
  salts: SaltKeeper;
  /** The ids /track computes (shared with it: the same cache). */
  deviceIds: DeviceIdCache;
  ipHeaders: IpHeaderOrder;
  now: () => number;
  liveSession?: LiveSessionLookup;
  onDegraded?: (what: string, err: unknown) => void;
  onRateLimited?: (scope: string) => void;
  /** The session lookup failed or took longer than SESSION_LOOKUP_MS: answered without a session. */
  onSessionLookupError?: (err: unknown) => void;
}

/** How long the answer waits for the session lookup before it goes without one (as OpenPanel's does when its lookup fails). */
const SESSION_LOOKUP_MS = 1000;

/** OpenPanel's messages (its track.controller.ts fetchDeviceId), word for word. */
const CURRENT = 'current session exists for this device id';
const PREVIOUS = 'previous session exists for this device id';
const NONE = 'No session exists for this device id';

function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export function deviceIdRoute(deps: DeviceIdDeps): Route {
  async function handler(req: HttpRequest): Promise<HttpResponse> {
    const client = deps.auth.cachedForIngest(req) ?? (await deps.auth.forIngest(req));
    const projectId = client.projectId;
    // OpenPanel needs both (400 'Missing header: user-agent', 'Missing ip address'); the id
    // is a hash of them, so without one it would name no device the caller's events get.
    const userAgent = req.headers['user-agent'];
    const ip = clientIpOf(req, null, deps.ipHeaders);
    const missing = !userAgent
      ? { path: ['headers', 'user-agent'], message: 'missing header user-agent: the device id is computed from the user-agent and the client address' }
      : ip === null
        ? { path: ['headers', 'x-client-ip'], message: 'missing client address: the device id is computed from the user-agent and the client address' }
        : null;
    if (missing) {
      if (await deps.gate.isRevoked(client.id).catch(() => false)) throw new UnauthorizedError('invalid client credentials');
      throw new BadRequestError(`${missing.path.join('.')}: ${missing.message}`, [missing]);
    }
    const nowMs = deps.now();
    const salts = deps.salts.heldSalts(nowMs) ?? (await deps.salts.salts(nowMs).catch((err) => {
      throw Object.assign(new ServiceUnavailableError('device salts unavailable (Redis); retry'), { cause: err });
    }));
    // As /track (handler.ts): today's salt, and in the 30 minutes after midnight UTC
    // yesterday's too, which the gate picks when that device was seen before midnight.
    const deviceId = deps.deviceIds.get(salts.current, userAgent!, ip!, projectId);
    const previousDeviceId = deviceWindow(nowMs).tryPrevious ? deps.deviceIds.get(salts.previous, userAgent!, ip!, projectId) : '';
    const gate = await settleGate(deps.gate.ingest({
      clientId: client.id, ratePerSecond: client.ingestRate, projectId, deviceId, previousDeviceId,
      markSeen: false, profileId: '', liveAtMs: null, nowMs,
    }), deviceId, deps);
    const chosen = gate.deviceId;
    let sessionId: string | null = null;
    if (deps.liveSession) {
      try {
        sessionId = await within(deps.liveSession(projectId, chosen, nowMs), SESSION_LOOKUP_MS);
      } catch (err) {
        deps.onSessionLookupError?.(err);
      }
    }
    const message = sessionId === null ? NONE : previousDeviceId !== '' && chosen === previousDeviceId && chosen !== deviceId ? PREVIOUS : CURRENT;
    return { status: 200, headers: rateHeaders(gate.rate), body: { deviceId: chosen, sessionId: sessionId ?? '', message } };
  }
  return { method: 'GET', pattern: '/track/device-id', family: 'ingest', cors: true, handler };
}
