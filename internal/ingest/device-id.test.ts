// GET /track/device-id's choices without services: the device ids /track computes (today's
// salt; yesterday's only in the 30 minutes after midnight UTC, when the gate picks it), the
// session lookup's three answers (OpenPanel's messages) and its failure or lateness (no session).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Authenticator } from '../auth/auth';
import type { Gate } from '../ratelimit/gate';
import type { HttpRequest, HttpResponse } from '../http/types';
import { deviceIdRoute, type DeviceIdDeps } from './device-id';
import { DeviceIdCache, deviceIdFor, type SaltKeeper } from './identity';
import { DEFAULT_IP_HEADERS } from './client-ip';

const UA = 'Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0';
const IP = '81.2.69.160';
const client = { id: 'c1', projectId: 'p1', mode: 'write' as const, ingestRate: 0 };
const salts = { current: 'salt-today', previous: 'salt-yesterday' };
const TODAY = deviceIdFor(salts.current, UA, IP, 'p1');
const YESTERDAY = deviceIdFor(salts.previous, UA, IP, 'p1');

function request(headers: Record<string, string> = { 'user-agent': UA, 'x-client-ip': IP }): HttpRequest {
  return { method: 'GET', path: '/track/device-id', params: {}, query: new URLSearchParams(), headers, body: Buffer.alloc(0), remoteAddress: '127.0.0.1', requestId: 'r' };
}

/** The route with stub services; `choose` is the gate's device choice from (today's, yesterday's or ''). */
function route(o: { nowMs: number; choose?: (today: string, previous: string) => string; liveSession?: DeviceIdDeps['liveSession'] }) {
  const seen: { previousDeviceId: string }[] = [];
  const lookupErrors: unknown[] = [];
  const gate = {
    ingest: (i: { deviceId: string; previousDeviceId: string }) => {
      seen.push({ previousDeviceId: i.previousDeviceId });
      return { outcome: 'ok', rate: null, deviceId: o.choose ? o.choose(i.deviceId, i.previousDeviceId) : i.deviceId };
    },
    isRevoked: async () => false,
  } as unknown as Gate;
  const r = deviceIdRoute({
    auth: { cachedForIngest: () => client } as unknown as Authenticator,
    gate,
    salts: { heldSalts: () => salts } as unknown as SaltKeeper,
    deviceIds: new DeviceIdCache(100),
    ipHeaders: DEFAULT_IP_HEADERS,
    now: () => o.nowMs,
    liveSession: o.liveSession,
    onSessionLookupError: (err) => lookupErrors.push(err),
  });
  return { call: (req = request()) => r.handler(req), seen, lookupErrors };
}

const NOON = Date.parse('2026-11-20T12:00:00Z');
const AFTER_MIDNIGHT = Date.parse('2026-11-20T00:10:00Z');
const body = (r: HttpResponse) => r.body as { deviceId: string; sessionId: string; message: string };

test('today\'s device id; no session: OpenPanel\'s "No session" answer', async () => {
  const r = route({ nowMs: NOON, liveSession: async () => null });
  const res = await r.call();
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, { deviceId: TODAY, sessionId: '', message: 'No session exists for this device id' });
  assert.deepEqual(r.seen, [{ previousDeviceId: '' }], 'yesterday\'s id is not tried at noon');
});

test('a live session of today\'s device: "current session exists"', async () => {
  const asked: string[] = [];
  const r = route({ nowMs: NOON, liveSession: async (_p, d) => (asked.push(d), 'sess-1') });
  assert.deepEqual(body(await r.call()), { deviceId: TODAY, sessionId: 'sess-1', message: 'current session exists for this device id' });
  assert.deepEqual(asked, [TODAY]);
});

test('after midnight the gate may continue yesterday\'s device: "previous session exists"', async () => {
  const r = route({ nowMs: AFTER_MIDNIGHT, choose: (_t, prev) => prev, liveSession: async (_p, d) => (d === YESTERDAY ? 'sess-y' : null) });
  assert.deepEqual(body(await r.call()), { deviceId: YESTERDAY, sessionId: 'sess-y', message: 'previous session exists for this device id' });
  assert.deepEqual(r.seen, [{ previousDeviceId: YESTERDAY }]);
  // the gate keeps today's: today's is the answer
  const t = route({ nowMs: AFTER_MIDNIGHT, liveSession: async () => 'sess-t' });
  assert.deepEqual(body(await t.call()), { deviceId: TODAY, sessionId: 'sess-t', message: 'current session exists for this device id' });
});

test('a failed or late session lookup answers without a session (as OpenPanel\'s does), and is reported', async () => {
  const failed = route({ nowMs: NOON, liveSession: async () => { throw new Error('PostgreSQL away'); } });
  assert.deepEqual(body(await failed.call()), { deviceId: TODAY, sessionId: '', message: 'No session exists for this device id' });
  assert.equal(failed.lookupErrors.length, 1);
  const late = route({ nowMs: NOON, liveSession: () => new Promise((resolve) => setTimeout(() => resolve('too-late'), 5000).unref()) });
  const started = Date.now();
  assert.equal(body(await late.call()).sessionId, '');
  assert.ok(Date.now() - started < 3000);
  assert.equal(late.lookupErrors.length, 1);
});

test('no user-agent: a 400 naming the header', async () => {
  const r = route({ nowMs: NOON });
  await assert.rejects(r.call(request({ 'x-client-ip': IP })), (err: { status?: number; issues?: { path: string[] }[] }) => {
    assert.equal(err.status, 400);
    assert.deepEqual(err.issues?.[0]?.path, ['headers', 'user-agent']);
    return true;
  });
});
