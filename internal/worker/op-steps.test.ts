// Each op step alone, on a batch record with a stub enricher (no server, no geo database).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blankEventRecord, type StepResult } from '../enrich';
import { SESSION_DIMENSIONS, type EventRecord, type QueuedOp, type QueuedSessionCheck, type QueuedTrack } from '../model/event';
import type { SessionState, StepResult as SessionStep } from '../sessionize/session';
import type { ProfileOp } from '../store/writes';
import { deviceKey, newOpBatch, type OpBatch } from './op-batch';
import {
  applyOp, checkSessionEnd, endLoneSession, endPrevious, enrichEvent, holdServerSide, joinable, joinServerSide, keepSession,
  OP_STEPS, putEvent, putViewDuration, queueProfileOp, recordFromOp, reopenSession, SESSION_ROWS, sessionEvent, sessionize,
  setAsideUnstorable, startNew, trackEvent,
} from './op-steps';

const MIN = 60_000;
const TIMEOUT = 30 * MIN;
const T0 = Date.parse('2024-05-01T10:00:00.000Z');
const NOW = Date.parse('2024-05-02T12:00:00.000Z');
const K = deviceKey('p', 'd');

function batch(over: { enrich?: (e: EventRecord) => StepResult; unstorable?: (e: EventRecord) => string | null; cache?: Map<string, SessionState> } = {}): OpBatch {
  const enrich = over.enrich ?? ((event: EventRecord) => ({ ok: true as const, event }));
  return newOpBatch({ enricher: { enrich }, cache: over.cache ?? new Map(), timeoutMs: TIMEOUT, unstorable: over.unstorable }, NOW);
}

const track = (over: Partial<QueuedTrack> = {}): QueuedTrack => ({
  kind: 'track', id: 'e1', projectId: 'p', deviceId: 'd', receivedAt: new Date(NOW).toISOString(), name: 'click', profileId: 'd',
  createdAt: new Date(T0).toISOString(), properties: { a: 1 }, groups: ['g'], url: null, title: null, referrer: null, ip: null, userAgent: null, ...over,
});
const rec = (over: Partial<EventRecord> = {}) => blankEventRecord({ id: 'e1', projectId: 'p', deviceId: 'd', profileId: 'd', name: 'click', createdAt: new Date(T0), ...over });

function session(over: Partial<SessionState> = {}): SessionState {
  return {
    id: 's1', projectId: 'p', deviceId: 'd', profileId: 'd', startedAt: T0, lastEventAt: T0 + MIN, screenViewCount: 1, eventCount: 2,
    entryOrigin: 'https://a.example', entryPath: '/in', exitOrigin: 'https://a.example', exitPath: '/out', isBot: false,
    dims: { ...(Object.fromEntries(SESSION_DIMENSIONS.map((d) => [d, ''])) as SessionState['dims']), country: 'GB' }, ended: false, updatedAtMs: NOW - MIN, lastEvent: null,
    stepNames: [], stepFirstAt: null, stepLastAt: null, ...over,
  };
}
const step = (over: Partial<SessionStep> = {}): SessionStep => {
  const s = over.session ?? session();
  return { current: s, session: s, touched: [s], started: [], ended: [], viewDuration: null, reopened: null, ...over };
};
const names = (b: OpBatch) => b.events.map((e) => `${e.name}:${e.sessionId}`);

test('recordFromOp: the op as a blank record (no title/referrer: empty; no device overrides: null)', () => {
  const r = recordFromOp(track({ url: 'https://a.example/x', ownDeviceId: 'own' }));
  assert.deepEqual([r.id, r.projectId, r.deviceId, r.profileId, r.name], ['e1', 'p', 'd', 'd', 'click']);
  assert.equal(r.createdAt.getTime(), T0);
  assert.deepEqual([r.properties, r.groups, r.url, r.title, r.referrer, r.deviceOverrides], [{ a: 1 }, ['g'], 'https://a.example/x', '', '', null]);
  assert.equal(r.sessionId, null);
});

test('sessionEvent: session_start takes the event\'s fields, its own id and time; session_end the exit page and session dims', () => {
  const s = session();
  const template = rec({ name: 'screen_view', path: '/in', title: 'In', country: 'US', properties: { x: 1 }, durationMs: 5 });
  const start = sessionEvent('session_start', s, template);
  assert.equal(start.name, 'session_start');
  assert.notEqual(start.id, template.id);
  assert.deepEqual([start.createdAt.getTime(), start.sessionId, start.path, start.title, start.country], [T0, 's1', '/in', 'In', 'GB']);
  assert.deepEqual([start.properties, start.groups, start.durationMs], [{}, [], null]);
  assert.equal(template.name, 'screen_view', 'the template is not changed');
  const end = sessionEvent('session_end', s, null);
  assert.deepEqual([end.createdAt.getTime(), end.sessionId, end.origin, end.path, end.title, end.country], [T0 + MIN, 's1', 'https://a.example', '/out', '', 'GB']);
});

test('enrichEvent: the enriched record; a drop counts its reason and returns null', () => {
  const enriched = rec({ country: 'GB' });
  let b = batch({ enrich: () => ({ ok: true, event: enriched }) });
  assert.equal(enrichEvent(b, track()), enriched);
  assert.deepEqual(b.drops, []);
  b = batch({ enrich: () => ({ ok: false, reason: 'invalid_name' }) });
  assert.equal(enrichEvent(b, track()), null);
  assert.deepEqual(b.drops, ['invalid_name']);
});

test('setAsideUnstorable: only with the isolating retry\'s check, only when it gives a reason', () => {
  const op = track();
  assert.equal(setAsideUnstorable(batch(), op, rec()), false);
  const clean = batch({ unstorable: () => null });
  assert.equal(setAsideUnstorable(clean, op, rec()), false);
  assert.deepEqual(clean.setAside, []);
  const b = batch({ unstorable: () => 'NUL in the name' });
  assert.equal(setAsideUnstorable(b, op, rec()), true);
  assert.deepEqual(b.setAside, [{ opId: 'e1', projectId: 'p', kind: 'track', reason: 'NUL in the name', op }]);
  assert.equal(b.setAside[0]!.op, op);
});

test('holdServerSide: a server-side event (not a bot) is held with the session of its time and its row added', () => {
  const s = session();
  const b = batch({ cache: new Map([[K, s]]) });
  assert.equal(holdServerSide(b, rec(), K, undefined), false, 'a browser event');
  assert.equal(holdServerSide(b, rec({ serverSide: true, isBot: true }), K, undefined), false, 'a bot without an OS');
  assert.deepEqual(b.held, []);
  const r = rec({ serverSide: true });
  assert.equal(holdServerSide(b, r, K, 'own'), true);
  assert.deepEqual(b.held, [{ rec: r, k: K, atItsTime: s, own: 'own' }]);
  assert.deepEqual(b.events, [r]);
  assert.equal(b.byId.get('e1'), r);
  assert.equal(r.sessionId, null, 'its session is decided after the batch');
});

test('sessionize: the first event of a device opens a session with a session_start before it', () => {
  const b = batch();
  const r = rec();
  sessionize(b, r, K);
  const s = b.states.get(K)!;
  assert.ok(s.id);
  assert.deepEqual(names(b), [`session_start:${s.id}`, `click:${s.id}`]);
  assert.deepEqual([...b.sessions.keys()], [s.id]);
  assert.deepEqual([...b.opened.keys()], [s.id]);
  assert.equal(s.updatedAtMs, NOW);
});

test('trackEvent: dropped, set aside, held or sessionized', () => {
  let b = batch({ enrich: () => ({ ok: false, reason: 'missing_identity' }) });
  trackEvent(b, track());
  assert.deepEqual([b.drops, b.events], [['missing_identity'], []]);
  b = batch({ unstorable: () => 'too long' });
  trackEvent(b, track());
  assert.deepEqual([b.setAside.length, b.events, b.states.size], [1, [], 0]);
  b = batch({ enrich: (e) => ({ ok: true, event: { ...e, serverSide: true } }) });
  trackEvent(b, track({ ownDeviceId: 'own' }));
  assert.deepEqual([b.held.length, b.held[0]!.own, names(b), b.states.size], [1, 'own', ['click:null'], 0]);
  b = batch();
  trackEvent(b, track());
  assert.deepEqual(b.events.map((e) => e.name), ['session_start', 'click']);
  assert.equal(b.states.size, 1);
});

test('endPrevious: a session_end row per session the event ended, which needs no end check any more', () => {
  const old = session({ id: 'old', ended: true });
  const b = batch();
  b.opened.set('old', old);
  endPrevious(b, step({ session: session({ id: 'new' }), ended: [old] }));
  assert.deepEqual(names(b), ['session_end:old']);
  assert.equal(b.opened.size, 0);
  const none = batch();
  endPrevious(none, step());
  assert.deepEqual(none.events, []);
});

test('startNew: a session_start row per session started, with the event\'s fields; an open one is due an end check', () => {
  const b = batch();
  const open = session({ id: 'open' });
  const lone = session({ id: 'lone', ended: true });
  startNew(b, step({ started: [open, lone] }), rec({ path: '/p' }));
  assert.deepEqual(names(b), ['session_start:open', 'session_start:lone']);
  assert.equal(b.events[0]!.path, '/p');
  assert.deepEqual([...b.opened.keys()], ['open']);
});

test('putEvent: the event\'s row, with the id of the session it was counted in', () => {
  const b = batch();
  const r = rec();
  putEvent(b, step(), r);
  assert.equal(r.sessionId, 's1');
  assert.deepEqual(b.events, [r]);
  assert.equal(b.byId.get('e1'), r);
});

test('endLoneSession: a session_end only for a standalone session this event started and ended', () => {
  const lone = session({ id: 'lone', ended: true });
  const b = batch();
  endLoneSession(b, step({ session: lone, started: [lone] }));
  assert.deepEqual(names(b), ['session_end:lone']);
  const c = batch();
  endLoneSession(c, step({ session: lone }));
  endLoneSession(c, step({ started: [session()] }));
  assert.deepEqual(c.events, []);
});

test('putViewDuration: on the view\'s row when it is in the batch, else an UPDATE entry; nothing without one', () => {
  const b = batch();
  const view = rec({ id: 'v1', name: 'screen_view' });
  b.byId.set('v1', view);
  putViewDuration(b, step({ viewDuration: { eventId: 'v1', createdAt: T0, durationMs: 4000 } }));
  assert.equal(view.durationMs, 4000);
  assert.deepEqual(b.viewDurations, []);
  putViewDuration(b, step({ viewDuration: { eventId: 'v0', createdAt: T0 - MIN, durationMs: MIN } }));
  putViewDuration(b, step());
  assert.deepEqual(b.viewDurations, [{ eventId: 'v0', createdAt: T0 - MIN, durationMs: MIN }]);
});

test('reopenSession: the continued session\'s session_end rows of this batch go, it is reopened and due an end check', () => {
  const b = batch();
  b.events.push(sessionEvent('session_end', session({ id: 's1' }), null), rec({ id: 'x', sessionId: 's1' }), sessionEvent('session_end', session({ id: 's2' }), null));
  reopenSession(b, step());
  assert.deepEqual(names(b), ['session_end:s1', 'click:s1', 'session_end:s2'], 'nothing reopened: nothing changes');
  const current = session();
  reopenSession(b, step({ current, reopened: session({ ended: true }) }));
  assert.deepEqual(names(b), ['click:s1', 'session_end:s2']);
  assert.deepEqual([...b.reopened], ['s1']);
  assert.equal(b.opened.get('s1'), current);
});

test('keepSession: every touched session once, the device\'s state after the event', () => {
  const b = batch();
  const a = session({ id: 'a' });
  const a2 = session({ id: 'a', eventCount: 9 });
  keepSession(b, step({ touched: [a] }), rec(), K);
  keepSession(b, step({ current: a2, touched: [session({ id: 'b' }), a2] }), rec(), K);
  assert.deepEqual([...b.sessions.keys()], ['a', 'b']);
  assert.equal(b.sessions.get('a'), a2);
  assert.equal(b.states.get(K), a2);
});

test('SESSION_ROWS: the rows of one sessionized event, in this order', () => {
  assert.deepEqual(SESSION_ROWS.map((f) => f.name), ['endPrevious', 'startNew', 'putEvent', 'endLoneSession', 'putViewDuration', 'reopenSession', 'keepSession']);
});

test('checkSessionEnd: an idle session ends (row, session, state); active again: another check; another id: nothing', () => {
  const check = (sessionId: string): QueuedSessionCheck => ({ kind: 'session_check', id: 'c', projectId: 'p', deviceId: 'd', receivedAt: '', sessionId });
  const idle = session({ updatedAtMs: NOW - TIMEOUT });
  let b = batch({ cache: new Map([[K, idle]]) });
  b.opened.set('s1', idle);
  checkSessionEnd(b, check('s1'));
  assert.deepEqual(names(b), ['session_end:s1']);
  assert.equal(b.sessions.get('s1')!.ended, true);
  assert.equal(b.states.get(K)!.ended, true);
  assert.equal(idle.ended, false, 'the cached state is not changed');
  assert.equal(b.opened.size, 0);
  const active = session({ updatedAtMs: NOW - 1 });
  b = batch({ cache: new Map([[K, active]]) });
  checkSessionEnd(b, check('s1'));
  assert.deepEqual([b.events, b.sessions.size, b.opened.get('s1')], [[], 0, active]);
  b = batch({ cache: new Map([[K, idle]]) });
  checkSessionEnd(b, check('other'));
  checkSessionEnd(batch(), check('s1'));
  assert.deepEqual([b.events, b.opened.size, b.states.size], [[], 0, 0]);
});

test('queueProfileOp: profile and group ops wait for the commit, in order', () => {
  const b = batch();
  const ops: ProfileOp[] = [
    { kind: 'identify', id: 'o1', projectId: 'p', deviceId: 'd', receivedAt: '', profileId: 'u', firstName: null, lastName: null, email: null, properties: {} },
    { kind: 'increment', id: 'o2', projectId: 'p', deviceId: 'd', receivedAt: '', profileId: 'u', property: 'n', delta: -1 },
  ];
  for (const op of ops) queueProfileOp(b, op);
  assert.deepEqual(b.profileOps, ops);
});

test('OP_STEPS: a named step for every op kind; applyOp runs the op through it (an unknown kind goes with the profile ops)', () => {
  assert.deepEqual(Object.fromEntries(Object.entries(OP_STEPS).map(([k, f]) => [k, f.name])), {
    track: 'trackEvent', session_check: 'checkSessionEnd',
    identify: 'queueProfileOp', increment: 'queueProfileOp', group: 'queueProfileOp', assign_group: 'queueProfileOp',
  });
  const b = batch();
  const group: QueuedOp = { kind: 'group', id: 'g', projectId: 'p', deviceId: 'd', receivedAt: '', groupId: 'g1', type: 't', name: 'n', properties: {} };
  const future = { kind: 'alias', id: 'f', projectId: 'p', deviceId: 'd', receivedAt: '' } as unknown as QueuedOp;
  for (const op of [track(), group, future]) applyOp(b, op);
  assert.deepEqual(b.events.map((e) => e.name), ['session_start', 'click']);
  assert.deepEqual(b.profileOps, [group, future]);
});

test('joinable: the profile\'s session, not ended nor a bot\'s, open at the event\'s time', () => {
  const s = session();
  const ev = (at: number, profileId = 'd') => rec({ createdAt: new Date(at), profileId });
  assert.equal(joinable(s, ev(T0 + 10 * MIN), TIMEOUT), s);
  assert.equal(joinable(s, ev(T0 - 1), TIMEOUT), null);
  assert.equal(joinable(s, ev(T0 + MIN + TIMEOUT), TIMEOUT), null);
  assert.equal(joinable(s, ev(T0, 'u2'), TIMEOUT), null);
  assert.equal(joinable({ ...s, isBot: true }, ev(T0), TIMEOUT), null);
  assert.equal(joinable(null, ev(T0), TIMEOUT), null);
});

test('joinServerSide: the session as the batch leaves it, else the one at the event\'s time, else none and its own device', () => {
  const b = batch();
  const now = session({ id: 'now', profileId: 'u1' });
  b.states.set(K, now);
  const joinsNow = rec({ id: 'a', profileId: 'u1', serverSide: true });
  const joinsThen = rec({ id: 'b', profileId: 'u2', serverSide: true });
  const joinsNone = rec({ id: 'c', profileId: 'u3', serverSide: true });
  const noOwn = rec({ id: 'd', profileId: 'u3', serverSide: true });
  b.held.push(
    { rec: joinsNow, k: K, atItsTime: null, own: 'own-a' },
    { rec: joinsThen, k: K, atItsTime: session({ id: 'then', profileId: 'u2' }), own: 'own-b' },
    { rec: joinsNone, k: K, atItsTime: null, own: 'own-c' },
    { rec: noOwn, k: K, atItsTime: null, own: undefined },
  );
  joinServerSide(b);
  assert.deepEqual([joinsNow, joinsThen, joinsNone, noOwn].map((r) => [r.sessionId, r.deviceId]), [['now', 'd'], ['then', 'd'], [null, 'own-c'], [null, 'd']]);
});
