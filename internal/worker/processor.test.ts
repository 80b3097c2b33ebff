// processOps: one shard batch of queued ops in, the rows of one transaction out, with the
// real enricher and an in-memory session cache / store.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createEnricher, type Enricher } from '../enrich';
import type { EventRecord, QueuedOp, QueuedTrack } from '../model/event';
import type { SessionState } from '../sessionize/session';
import { deviceKey, devicesToLoad, inEventOrder, joinable, processOps, type ProcessDeps, type ProcessedBatch } from './processor';

const MIN = 60_000;
const TIMEOUT = 30 * MIN;
const T0 = Date.parse('2024-05-01T10:00:00.000Z');
const WALL = Date.parse('2024-05-02T12:00:00.000Z');
const PROJECT = 'proj1';
const DEV = 'a'.repeat(32);
const CHROME = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Safari/537.36';
const IPHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1';

let enricher: Enricher;
before(async () => {
  enricher = await createEnricher();
});
after(() => enricher.close());

let n = 0;
const opId = () => `0190c0de-0000-7000-8000-${String(++n).padStart(12, '0')}`;

function track(at: number, name: string, over: Partial<QueuedTrack> = {}): QueuedTrack {
  return {
    kind: 'track', id: opId(), projectId: PROJECT, deviceId: DEV, receivedAt: new Date(WALL).toISOString(),
    name, profileId: DEV, createdAt: new Date(at).toISOString(), properties: {}, groups: [],
    url: null, title: null, referrer: null, ip: '81.2.69.160', userAgent: CHROME, ...over,
  };
}
const view = (at: number, url: string, over: Partial<QueuedTrack> = {}) => track(at, 'screen_view', { url, ...over });

/** An in-memory cache plus a "store" of the latest session per device; records loads. */
class Harness {
  readonly cache = new Map<string, SessionState>();
  readonly store = new Map<string, SessionState>();
  readonly loads: string[][] = [];
  now = WALL;

  deps(): ProcessDeps {
    return {
      enricher,
      cache: this.cache,
      loadSessions: async (keys) => {
        this.loads.push(keys.map((k) => k.deviceId));
        return keys.map((k) => this.store.get(deviceKey(k.projectId, k.deviceId))).filter((s): s is SessionState => !!s);
      },
      timeoutMs: TIMEOUT,
      nowMs: () => this.now,
    };
  }

  /** Processes and "commits": states adopted into the cache and the store, like ShardRunner. */
  async batch(ops: QueuedOp[]): Promise<ProcessedBatch> {
    const out = await processOps(ops, this.deps());
    for (const [k, s] of out.states) {
      this.cache.set(k, s);
      this.store.set(k, s);
    }
    return out;
  }
}

const names = (events: EventRecord[]) => events.map((e) => e.name);

test('the first event of a device gets a session_start row with its time and fields', async () => {
  const h = new Harness();
  const first = view(T0, 'https://shop.example/landing?utm_source=news&utm_medium=email', { referrer: 'https://www.google.com/', title: 'Landing' });
  const out = await h.batch([first, track(T0 + 5000, 'click', { properties: { button: 'buy' } })]);
  assert.deepEqual(names(out.events), ['session_start', 'screen_view', 'click']);
  const [start, sv, click] = out.events as [EventRecord, EventRecord, EventRecord];
  assert.equal(out.sessions.length, 1);
  const s = out.sessions[0]!;
  assert.equal(start.sessionId, s.id);
  assert.equal(sv.sessionId, s.id);
  assert.equal(click.sessionId, s.id);
  assert.equal(start.createdAt.getTime(), T0);
  assert.notEqual(start.id, sv.id);
  assert.deepEqual(start.properties, {});
  assert.equal(start.durationMs, null);
  for (const f of ['origin', 'path', 'referrer', 'referrer_name', 'referrer_type', 'utm_source', 'utm_medium', 'country', 'city', 'device', 'browser', 'os'] as const) {
    assert.equal(start[f], sv[f], `session_start.${f}`);
  }
  assert.equal(sv.origin, 'https://shop.example');
  assert.equal(sv.path, '/landing');
  assert.equal(sv.referrer_name, 'Google');
  assert.equal(sv.utm_source, 'news');
  assert.equal(sv.country, 'GB');
  assert.equal(sv.device, 'desktop');
  assert.equal(sv.browser, 'Chrome');
  assert.equal(sv.durationMs, 5000, 'time on page set in the batch');
  assert.deepEqual(click.properties, { button: 'buy' });
  assert.equal(click.durationMs, null);
  // The session row.
  assert.equal(s.startedAt, T0);
  assert.equal(s.lastEventAt, T0 + 5000);
  assert.equal(s.eventCount, 2);
  assert.equal(s.screenViewCount, 1);
  assert.equal(s.entryPath, '/landing');
  assert.equal(s.dims.country, 'GB');
  assert.equal(s.dims.referrer_type, 'search');
  assert.equal(s.ended, false);
  assert.equal(s.updatedAtMs, WALL);
  assert.deepEqual(out.opened.map((o) => o.id), [s.id], 'its end check is due');
  assert.deepEqual(out.viewDurations, []);
  assert.deepEqual(out.reopenedSessionIds, []);
  assert.deepEqual(out.drops, []);
  assert.equal(out.states.get(deviceKey(PROJECT, DEV))!.id, s.id);
  assert.deepEqual(h.loads, [[DEV]], 'the unknown device was looked up in the store once');
});

test('a 30-minute gap: session_end of the old session at its last event time, then a new session_start', async () => {
  const h = new Harness();
  const out = await h.batch([
    view(T0, 'https://shop.example/a'),
    view(T0 + 60_000, 'https://shop.example/b'),
    track(T0 + 120_000, 'click'),
    view(T0 + 120_000 + TIMEOUT, 'https://shop.example/c', { userAgent: IPHONE, ip: '8.8.8.8' }),
  ]);
  assert.deepEqual(names(out.events), ['session_start', 'screen_view', 'screen_view', 'click', 'session_end', 'session_start', 'screen_view']);
  const ev = out.events;
  const old = ev[0]!.sessionId!;
  const fresh = ev[5]!.sessionId!;
  assert.notEqual(old, fresh);
  assert.equal(ev[4]!.sessionId, old);
  assert.equal(ev[4]!.createdAt.getTime(), T0 + 120_000, 'session_end at the last event of the old session');
  assert.equal(ev[4]!.path, '/b', 'session_end carries the exit page');
  assert.equal(ev[4]!.country, 'GB', 'and the old session dimensions');
  assert.equal(ev[5]!.createdAt.getTime(), T0 + 120_000 + TIMEOUT);
  assert.equal(ev[5]!.country, 'US');
  assert.equal(ev[5]!.device, 'mobile');
  assert.equal(ev[6]!.sessionId, fresh);
  assert.deepEqual(ev.slice(1, 4).map((e) => e.durationMs), [60_000, 60_000, null]);
  assert.equal(ev[6]!.durationMs, null);
  const byId = new Map(out.sessions.map((s) => [s.id, s]));
  assert.equal(byId.get(old)!.ended, true);
  assert.equal(byId.get(old)!.eventCount, 3);
  assert.equal(byId.get(old)!.lastEventAt, T0 + 120_000);
  assert.equal(byId.get(fresh)!.ended, false);
  assert.equal(byId.get(fresh)!.dims.device, 'mobile');
  assert.deepEqual(out.opened.map((s) => s.id), [fresh], 'the ended session needs no end check');
  assert.deepEqual(out.endedOnlySessionIds, [], 'the ended session had events of this batch');
});

test("a session ended by a later event's 30-minute gap, unchanged in the batch before, is ended only", async () => {
  const h = new Harness();
  const first = await h.batch([view(T0, 'https://shop.example/a'), view(T0 + 60_000, 'https://shop.example/b')]);
  const old = first.sessions[0]!.id;
  const out = await h.batch([view(T0 + 60_000 + TIMEOUT, 'https://shop.example/c')]);
  assert.deepEqual(names(out.events), ['session_end', 'session_start', 'screen_view']);
  const ended = out.sessions.find((s) => s.id === old)!;
  assert.equal(ended.ended, true);
  assert.deepEqual({ ...ended, ended: false, updatedAtMs: 0 }, { ...first.sessions[0]!, updatedAtMs: 0 }, 'nothing but its end changed');
  assert.deepEqual(out.endedOnlySessionIds, [old], 'its end is its only change: no session delta to log');
});

test('a session_check op ends an idle session (and only that)', async () => {
  const h = new Harness();
  const first = await h.batch([view(T0, 'https://shop.example/a'), view(T0 + 1000, 'https://shop.example/exit')]);
  const sid = first.sessions[0]!.id;
  const check = (sessionId: string): QueuedOp => ({
    kind: 'session_check', id: `check-${sessionId}`, projectId: PROJECT, deviceId: DEV, receivedAt: new Date().toISOString(), sessionId,
  });
  // Not idle yet (wall time), or another session id: nothing.
  h.now = WALL + TIMEOUT - 1;
  let out = await h.batch([check(sid)]);
  assert.deepEqual(out.events, []);
  assert.deepEqual(out.sessions, []);
  h.now = WALL + TIMEOUT;
  out = await h.batch([check('0190c0de-0000-7000-8000-ffffffffffff')]);
  assert.deepEqual(out.events, []);

  out = await h.batch([check(sid)]);
  assert.deepEqual(names(out.events), ['session_end']);
  assert.equal(out.events[0]!.sessionId, sid);
  assert.equal(out.events[0]!.createdAt.getTime(), T0 + 1000);
  assert.equal(out.events[0]!.path, '/exit');
  assert.equal(out.sessions.length, 1);
  assert.equal(out.sessions[0]!.ended, true);
  assert.equal(out.states.get(deviceKey(PROJECT, DEV))!.ended, true);
  assert.deepEqual(out.opened, []);
  assert.deepEqual(out.endedOnlySessionIds, [sid], 'its end is its only change: no session delta to log');
  // A second check (redelivery) does nothing.
  out = await h.batch([check(sid)]);
  assert.deepEqual(out.events, []);
});

test('a session ended by a check and continued by a later event of the same batch is not ended only', async () => {
  const h = new Harness();
  const first = await h.batch([view(T0, 'https://shop.example/a')]);
  const sid = first.sessions[0]!.id;
  h.now = WALL + TIMEOUT;
  const out = await h.batch([
    { kind: 'session_check', id: 'c1', projectId: PROJECT, deviceId: DEV, receivedAt: new Date(T0 + 5 * MIN).toISOString(), sessionId: sid },
    track(T0 + 20 * MIN, 'click'),
  ]);
  assert.deepEqual(names(out.events), ['click'], 'the end the check wrote goes with the reopen');
  assert.deepEqual(out.reopenedSessionIds, [sid]);
  assert.equal(out.sessions.find((s) => s.id === sid)!.ended, false);
  assert.deepEqual(out.endedOnlySessionIds, []);
});

test('an event within 30 min (event time) of an idle-ended session reopens it', async () => {
  const h = new Harness();
  const first = await h.batch([view(T0, 'https://shop.example/a')]);
  const sid = first.sessions[0]!.id;
  h.now = WALL + TIMEOUT;
  await h.batch([{ kind: 'session_check', id: 'c1', projectId: PROJECT, deviceId: DEV, receivedAt: '', sessionId: sid }]);
  h.now = WALL + TIMEOUT + 1000;
  const out = await h.batch([track(T0 + 20 * MIN, 'click')]);
  assert.deepEqual(names(out.events), ['click']);
  assert.equal(out.events[0]!.sessionId, sid);
  assert.deepEqual(out.reopenedSessionIds, [sid], 'its session_end row goes');
  assert.deepEqual(out.viewDurations.map((v) => v.durationMs), [20 * MIN]);
  assert.equal(out.sessions[0]!.ended, false);
  assert.deepEqual(out.opened.map((s) => s.id), [sid], 'a new end check is due');
});

test('profile operations pass through in order, between the events', async () => {
  const h = new Harness();
  const base = { projectId: PROJECT, deviceId: DEV, receivedAt: new Date(WALL).toISOString() };
  const ops: QueuedOp[] = [
    { ...base, kind: 'identify', id: 'op-1', profileId: 'u1', firstName: 'Ada', lastName: null, email: null, properties: {} },
    view(T0, 'https://shop.example/a'),
    { ...base, kind: 'increment', id: 'op-2', profileId: 'u1', property: 'visits', delta: 1 },
    { ...base, kind: 'group', id: 'op-3', groupId: 'g1', type: 'company', name: 'Acme', properties: {} },
    track(T0 + 1, 'click'),
    { ...base, kind: 'increment', id: 'op-4', profileId: 'u1', property: 'visits', delta: -1 },
    { ...base, kind: 'assign_group', id: 'op-5', profileId: 'u1', groupIds: ['g1'] },
  ];
  const out = await h.batch(ops);
  assert.deepEqual(out.profileOps.map((o) => o.id), ['op-1', 'op-2', 'op-3', 'op-4', 'op-5']);
  assert.deepEqual(out.profileOps, ops.filter((o) => o.kind !== 'track'));
  assert.deepEqual(names(out.events), ['session_start', 'screen_view', 'click']);
});

test("a view from an earlier batch gets its time on page as a viewDurations entry (state from the cache)", async () => {
  const h = new Harness();
  const b1 = await h.batch([track(T0, 'app_open'), view(T0 + 1000, 'https://shop.example/a')]);
  const viewRow = b1.events.find((e) => e.name === 'screen_view')!;
  assert.equal(viewRow.durationMs, null, 'the last event of the batch has no next event yet');
  const loadsBefore = h.loads.length;
  const b2 = await h.batch([track(T0 + 4500, 'click')]);
  assert.equal(h.loads.length, loadsBefore, 'the device was in the cache: no store lookup');
  assert.deepEqual(b2.viewDurations, [{ eventId: viewRow.id, createdAt: T0 + 1000, durationMs: 3500 }]);
  assert.deepEqual(names(b2.events), ['click'], 'no second session_start');
  assert.equal(b2.events[0]!.sessionId, viewRow.sessionId);
  assert.equal(b2.sessions[0]!.eventCount, 3);
  assert.deepEqual(b2.opened, []);
});

test('after a restart (empty cache) the state comes from the store, and gives the same rows', async () => {
  const h = new Harness();
  const b1 = await h.batch([view(T0, 'https://shop.example/a'), view(T0 + 1000, 'https://shop.example/b')]);
  h.cache.clear();
  const b2 = await h.batch([view(T0 + 3000, 'https://shop.example/c'), track(T0 + 4000, 'click')]);
  assert.deepEqual(h.loads, [[DEV], [DEV]]);
  assert.deepEqual(names(b2.events), ['screen_view', 'click']);
  assert.equal(b2.events[0]!.sessionId, b1.sessions[0]!.id);
  assert.equal(b2.events[0]!.durationMs, 1000);
  assert.deepEqual(b2.viewDurations.map((v) => [v.eventId, v.durationMs]), [[b1.events[2]!.id, 2000]]);
  const s = b2.sessions[0]!;
  assert.equal(s.eventCount, 4);
  assert.equal(s.screenViewCount, 3);
  assert.equal(s.exitPath, '/c');
  assert.equal(s.lastEventAt - s.startedAt, 4000);
});

test('the cached state is not changed by processing (the caller adopts it after the commit)', async () => {
  const h = new Harness();
  await h.batch([view(T0, 'https://shop.example/a')]);
  const k = deviceKey(PROJECT, DEV);
  const snapshot = structuredClone(h.cache.get(k));
  const out = await processOps([view(T0 + 1000, 'https://shop.example/b'), view(T0 + 1000 + TIMEOUT, 'https://shop.example/c')], h.deps());
  assert.equal(out.sessions.length, 2);
  assert.deepEqual(h.cache.get(k), snapshot);
});

test('interleaved devices in one batch each get their own session', async () => {
  const h = new Harness();
  const other = 'b'.repeat(32);
  const out = await h.batch([
    view(T0, 'https://shop.example/a'),
    view(T0 + 1000, 'https://shop.example/x', { deviceId: other, profileId: other, userAgent: IPHONE }),
    view(T0 + 2000, 'https://shop.example/b'),
    track(T0 + 9000, 'click', { deviceId: other, profileId: other, userAgent: IPHONE }),
  ]);
  assert.equal(out.sessions.length, 2);
  const rows = out.events.filter((e) => e.name === 'screen_view');
  assert.deepEqual(rows.map((e) => [e.path, e.durationMs]), [['/a', 2000], ['/x', 8000], ['/b', null]]);
  assert.deepEqual(h.loads, [[DEV, other]]);
  assert.equal(out.states.size, 2);
});

test('drops are counted and leave no rows', async () => {
  const h = new Harness();
  const out = await h.batch([
    track(T0, 'click', { profileId: '' }),
    track(T0, 'session_start'),
    track(T0, '  '),
    view(T0 + 1, 'https://shop.example/a'),
  ]);
  assert.deepEqual(out.drops, ['missing_identity', 'invalid_name', 'invalid_name']);
  assert.deepEqual(names(out.events), ['session_start', 'screen_view']);
  assert.equal(out.sessions.length, 1);
  assert.equal(out.sessions[0]!.eventCount, 1);
});

test('a very old late event: a standalone session with both session_start and session_end', async () => {
  const h = new Harness();
  await h.batch([view(T0, 'https://shop.example/a')]);
  const out = await h.batch([track(T0 - 5 * 3600_000, 'click')]);
  assert.deepEqual(names(out.events), ['session_start', 'click', 'session_end']);
  const lone = out.events[1]!.sessionId!;
  assert.ok(out.events.every((e) => e.sessionId === lone));
  assert.equal(out.sessions.length, 1);
  assert.equal(out.sessions[0]!.ended, true);
  assert.deepEqual(out.opened, []);
  assert.notEqual(out.states.get(deviceKey(PROJECT, DEV))!.id, lone, 'the current session stays current');
});

test('reopen then re-end in one batch: the reopened session gets a session_end row in the batch', async () => {
  // The processor's part of the bug shown end to end in test/sessions-end.test.ts: the batch
  // carries both a session_end row for S and "S reopened" (whose commit deletes S's session_end rows).
  const h = new Harness();
  const first = await h.batch([view(T0, 'https://shop.example/a')]);
  const sid = first.sessions[0]!.id;
  h.now = WALL + TIMEOUT;
  await h.batch([{ kind: 'session_check', id: 'c1', projectId: PROJECT, deviceId: DEV, receivedAt: '', sessionId: sid }]);
  const out = await h.batch([track(T0 + 10 * MIN, 'click'), view(T0 + 50 * MIN, 'https://shop.example/b')]);
  assert.deepEqual(out.reopenedSessionIds, [sid]);
  const ends = out.events.filter((e) => e.name === 'session_end');
  assert.deepEqual(ends.map((e) => e.sessionId), [sid]);
  assert.equal(ends[0]!.createdAt.getTime(), T0 + 10 * MIN);
  assert.equal(out.sessions.find((s) => s.id === sid)!.ended, true);
});

test(
  'a session_check that finds the session active again asks for a new end check',
  {},
  async () => {
    const h = new Harness();
    const first = await h.batch([view(T0, 'https://shop.example/a')]);
    const sid = first.sessions[0]!.id;
    h.now = WALL + TIMEOUT - 5000; // an event arrived after the job read the session as idle
    await h.batch([track(T0 + 10 * MIN, 'click')]);
    h.now = WALL + TIMEOUT;
    const out = await h.batch([{ kind: 'session_check', id: 'c1', projectId: PROJECT, deviceId: DEV, receivedAt: '', sessionId: sid }]);
    assert.deepEqual(out.opened.map((s) => s.id), [sid]);
  },
);

test(
  "one device's events out of time order inside a batch (concurrent requests) are sessionized in time order",
  {},
  async () => {
    const h = new Harness();
    const out = await h.batch([track(T0 + 2000, 'click'), view(T0, 'https://shop.example/a?utm_source=news')]);
    const s = out.sessions[0]!;
    assert.equal(s.startedAt, T0);
    assert.equal(s.dims.utm_source, 'news');
    assert.equal(out.events.find((e) => e.name === 'screen_view')!.durationMs, 2000);
  },
);

test('a batch writes each changed session once, however many of its events it holds; a cached device loads nothing', async () => {
  const h = new Harness();
  await h.batch([view(T0, 'https://shop.example/0')]);
  const out = await h.batch(Array.from({ length: 10 }, (_, i) => view(T0 + (i + 1) * 1000, `https://shop.example/${i + 1}`)));
  assert.equal(out.sessions.length, 1);
  assert.equal(out.sessions[0]!.screenViewCount, 11);
  // Only the view of the earlier batch needs an UPDATE; the batch's own views carry theirs.
  assert.equal(out.viewDurations.length, 1);
  assert.deepEqual(out.events.filter((e) => e.name === 'screen_view').map((e) => e.durationMs), [...Array(9).fill(1000), null]);
  assert.deepEqual(h.loads, [[DEV]]);
});

test('a server-side event of the profile joins its open session and changes nothing in it; otherwise it has no session and opens none', async () => {
  const h = new Harness();
  await h.batch([view(T0, 'https://shop.example/a', { profileId: 'u1' })]);
  const before = h.cache.get(deviceKey(PROJECT, DEV))!;
  assert.equal(before.profileId, 'u1');
  const out = await h.batch([
    track(T0 + 5 * MIN, 'purchase', { profileId: 'u1', userAgent: 'node' }), // joins
    track(T0 + 6 * MIN, 'srv', { profileId: 'u2', userAgent: 'node', ownDeviceId: 'own-u2' }), // another profile: none, its own device
    track(T0 + 7 * MIN, 'srv', { profileId: 'u1', userAgent: null }), // no user-agent at all: server-side, joins
  ]);
  assert.deepEqual(names(out.events), ['purchase', 'srv', 'srv'], 'no session_start: server-side events open no session');
  assert.deepEqual(out.events.map((e) => e.sessionId), [before.id, null, before.id]);
  assert.deepEqual(out.events.map((e) => e.deviceId), [DEV, 'own-u2', DEV], 'one that joins nothing keeps the device it was sent with');
  assert.equal(out.sessions.length, 0, 'the session row is not written again');
  assert.equal(out.viewDurations.length, 0, 'no time on page for the view before it');
  const after = h.cache.get(deviceKey(PROJECT, DEV))!;
  assert.deepEqual([after.lastEventAt, after.eventCount, after.screenViewCount], [before.lastEventAt, before.eventCount, before.screenViewCount]);
  // 30 minutes after the session's last event it is no longer open; an app behind okhttp with
  // device overrides is a device: it opens its own session.
  const late = await h.batch([
    track(T0 + 30 * MIN, 'srv', { profileId: 'u1', userAgent: 'okhttp/4.12.0' }),
    track(T0 + 31 * MIN, 'app_open', { deviceId: 'b'.repeat(32), profileId: 'u3', userAgent: 'okhttp/4.12.0', deviceOverrides: { os: 'Android' } }),
  ]);
  assert.deepEqual(names(late.events), ['srv', 'session_start', 'app_open']);
  assert.equal(late.events[0]!.sessionId, null);
  assert.ok(late.events[2]!.sessionId);
});

test('joinable: the profile\'s session, not ended, open at the event\'s time', () => {
  const s = { id: 's', profileId: 'u1', startedAt: T0, lastEventAt: T0 + MIN, ended: false, isBot: false } as SessionState;
  const ev = (at: number, profileId = 'u1') => ({ createdAt: new Date(at), profileId }) as EventRecord;
  assert.equal(joinable(s, ev(T0 + 10 * MIN), TIMEOUT), s);
  assert.equal(joinable(s, ev(T0), TIMEOUT), s, 'at its start');
  assert.equal(joinable(s, ev(T0 - 1), TIMEOUT), null, 'before its start');
  assert.equal(joinable(s, ev(T0 + MIN + TIMEOUT), TIMEOUT), null, '30 minutes after its last event');
  assert.equal(joinable(s, ev(T0 + 10 * MIN, 'u2'), TIMEOUT), null, 'another profile');
  assert.equal(joinable({ ...s, ended: true }, ev(T0 + 10 * MIN), TIMEOUT), null, 'ended');
  assert.equal(joinable(null, ev(T0), TIMEOUT), null);
});

test('a crawler without an OS (Googlebot) is a bot first: it keeps opening its bot session', async () => {
  const h = new Harness();
  const out = await h.batch([view(T0, 'https://shop.example/a', { userAgent: 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)' })]);
  assert.deepEqual(names(out.events), ['session_start', 'screen_view']);
  assert.equal(out.events[1]!.isBot, true);
  assert.ok(out.events[1]!.sessionId);
});

test('a server-side event earlier than the event that identifies its session, in the same batch, joins it', async () => {
  const h = new Harness();
  const out = await h.batch([
    view(T0, 'https://shop.example/a'), // anonymous
    view(T0 + 2 * MIN, 'https://shop.example/b', { profileId: 'zz' }), // identifies the session
    track(T0 + MIN, 'srv', { profileId: 'zz', userAgent: 'node' }), // sent last, timed between
  ]);
  const srv = out.events.find((e) => e.name === 'srv')!;
  const session = h.cache.get(deviceKey(PROJECT, DEV))!;
  assert.equal(session.profileId, 'zz');
  assert.equal(srv.sessionId, session.id);
});

test('the isolating retry: an event the store cannot hold is set aside before it is sessionized; its neighbours are processed as if it were not there', async () => {
  const h = new Harness();
  const ops = [view(T0, 'https://shop.example/a'), track(T0 + 1000, 'bad\u0000'), view(T0 + 2000, 'https://shop.example/b')];
  const out = await processOps(ops, { ...h.deps(), unstorable: (rec) => (rec.name.includes('\u0000') ? 'NUL in the name' : null) });
  assert.deepEqual(out.setAside!.map((f) => [f.opId, f.kind, f.reason]), [[ops[1]!.id, 'track', 'NUL in the name']]);
  assert.equal(out.setAside![0]!.op, ops[1]);
  assert.deepEqual(names(out.events), ['session_start', 'screen_view', 'screen_view']);
  assert.equal(out.sessions[0]!.eventCount, 2);
  // Without the check (the first try) the event is processed like any other.
  assert.deepEqual(names((await new Harness().batch(ops)).events), ['session_start', 'screen_view', 'bad\u0000', 'screen_view']);
});

test('inEventOrder: by event time (receipt time for ops that are not events), stable for equal times', () => {
  const base = { projectId: PROJECT, deviceId: DEV };
  const late = track(T0 + 2000, 'late');
  const tie1 = track(T0, 'tie1');
  const tie2 = track(T0, 'tie2');
  const identify: QueuedOp = { ...base, kind: 'identify', id: 'i', receivedAt: new Date(T0 + 1000).toISOString(), profileId: 'u', firstName: null, lastName: null, email: null, properties: {} };
  const input = [late, tie1, identify, tie2];
  assert.deepEqual(inEventOrder(input), [tie1, tie2, identify, late]);
  assert.deepEqual(input, [late, tie1, identify, tie2], 'the input is not reordered');
});

test('devicesToLoad: each device of an event or session check the cache lacks, once, in op order', () => {
  const cached = 'c'.repeat(32);
  const other = 'b'.repeat(32);
  const cache = new Map([[deviceKey(PROJECT, cached), {} as SessionState]]);
  const ops: QueuedOp[] = [
    track(T0, 'a', { deviceId: other }),
    track(T0, 'b', { deviceId: cached }),
    { kind: 'session_check', id: 'c', projectId: PROJECT, deviceId: DEV, receivedAt: '', sessionId: 's' },
    { kind: 'assign_group', id: 'g', projectId: PROJECT, deviceId: 'd'.repeat(32), receivedAt: '', profileId: 'u', groupIds: [] },
    track(T0, 'c', { deviceId: other }),
  ];
  assert.deepEqual(devicesToLoad(ops, cache), [{ projectId: PROJECT, deviceId: other }, { projectId: PROJECT, deviceId: DEV }]);
  assert.deepEqual(devicesToLoad([], cache), []);
});
