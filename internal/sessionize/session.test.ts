// The session state machine (semantics.md "Page views and sessions") on plain data: no
// store, no clock but the one passed in.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blankEventRecord } from '../enrich/record';
import type { EventRecord } from '../model/event';
import { applyEvent, checkEnd, isBounce, MAX_STEP_ENTRIES, sessionDurationMs, type SessionOptions, type SessionState, type StepResult } from './session';

const MIN = 60_000;
const TIMEOUT = 30 * MIN;
const T0 = Date.parse('2024-05-01T10:00:00.000Z');
const WALL = Date.parse('2024-05-02T12:00:00.000Z');

let seq = 0;
function opts(nowMs = WALL): SessionOptions {
  return { timeoutMs: TIMEOUT, nowMs, newId: () => `s${++seq}` };
}

let evSeq = 0;
function ev(at: number, over: Partial<EventRecord> = {}): EventRecord {
  return blankEventRecord({
    id: `e${++evSeq}`,
    projectId: 'p1',
    name: 'click',
    deviceId: 'dev-a',
    profileId: 'dev-a',
    createdAt: new Date(at),
    country: 'DE',
    device: 'desktop',
    browser: 'Firefox',
    referrer_name: 'Google',
    referrer_type: 'search',
    utm_source: 'news',
    ...over,
  });
}
const view = (at: number, path: string, over: Partial<EventRecord> = {}) =>
  ev(at, { name: 'screen_view', origin: 'https://a.example', path, ...over });

/** Feeds events of one device in order; returns every step. */
function run(events: EventRecord[], start: SessionState | null = null, o = opts()): { steps: StepResult[]; current: SessionState | null } {
  let current = start;
  const steps: StepResult[] = [];
  for (const e of events) {
    const step = applyEvent(current, e, o);
    steps.push(step);
    current = step.current;
  }
  return { steps, current };
}

test('the first event opens a session with its time and fields', () => {
  const e = view(T0, '/home', { referrer: 'https://www.google.com', country: 'FR', device: 'mobile' });
  const step = applyEvent(null, e, opts());
  const s = step.current;
  assert.equal(step.session, s);
  assert.deepEqual(step.started, [s]);
  assert.deepEqual(step.touched, [s]);
  assert.deepEqual(step.ended, []);
  assert.equal(step.viewDuration, null);
  assert.equal(step.reopened, null);
  assert.equal(s.startedAt, T0);
  assert.equal(s.lastEventAt, T0);
  assert.equal(s.eventCount, 1);
  assert.equal(s.screenViewCount, 1);
  assert.equal(s.ended, false);
  assert.equal(s.updatedAtMs, WALL);
  assert.equal(s.projectId, 'p1');
  assert.equal(s.deviceId, 'dev-a');
  assert.equal(s.profileId, 'dev-a');
  assert.equal(s.dims.referrer, 'https://www.google.com');
  assert.equal(s.dims.country, 'FR');
  assert.equal(s.dims.device, 'mobile');
  assert.equal(s.dims.utm_source, 'news');
  assert.equal(s.entryPath, '/home');
  assert.equal(s.exitPath, '/home');
  assert.equal(s.entryOrigin, 'https://a.example');
  assert.deepEqual(s.lastEvent, { id: e.id, createdAt: T0, isScreenView: true });
});

test('a gap of 29:59.999 stays in the session', () => {
  const { steps, current } = run([view(T0, '/a'), view(T0 + TIMEOUT - 1, '/b')]);
  assert.equal(steps[1]!.session.id, steps[0]!.session.id);
  assert.deepEqual(steps[1]!.started, []);
  assert.deepEqual(steps[1]!.ended, []);
  assert.equal(current!.eventCount, 2);
  assert.equal(sessionDurationMs(current!), TIMEOUT - 1);
});

for (const [label, gap] of [['exactly 30:00', TIMEOUT], ['30:00.001', TIMEOUT + 1]] as const) {
  test(`a gap of ${label} starts a new session and reports the old one ended`, () => {
    const { steps, current } = run([view(T0, '/a'), ev(T0 + 5 * MIN), view(T0 + 5 * MIN + gap, '/b', { country: 'US' })]);
    const first = steps[0]!.session;
    const step = steps[2]!;
    assert.notEqual(step.session.id, first.id);
    assert.equal(current!.id, step.session.id);
    assert.equal(step.started.length, 1);
    assert.equal(step.started[0]!.id, step.session.id);
    assert.equal(step.ended.length, 1);
    const old = step.ended[0]!;
    assert.equal(old.id, first.id);
    assert.equal(old.ended, true);
    assert.equal(old.lastEventAt, T0 + 5 * MIN, 'the old session keeps its last event time');
    assert.equal(old.eventCount, 2);
    // The ended old session is written too (its row gets ended = true).
    assert.ok(step.touched.some((t) => t.id === first.id && t.ended));
    assert.equal(step.viewDuration, null, 'the last view of a session has no time on page');
    // The new session takes its fields from its own first event.
    assert.equal(current!.startedAt, T0 + 5 * MIN + gap);
    assert.equal(current!.eventCount, 1);
    assert.equal(current!.dims.country, 'US');
    assert.equal(current!.entryPath, '/b');
  });
}

test('a session crossing midnight (UTC) is one session', () => {
  const late = Date.parse('2024-05-01T23:50:00Z');
  const { steps, current } = run([view(late, '/a'), view(late + 15 * MIN, '/b'), ev(late + 40 * MIN)]);
  assert.equal(new Set(steps.map((s) => s.session.id)).size, 1);
  assert.equal(current!.startedAt, late);
  assert.equal(sessionDurationMs(current!), 40 * MIN);
});

test('duration is last minus first; screen views, bounce, entry and exit pages', () => {
  const { current: one } = run([view(T0, '/only'), ev(T0 + 10_000, { name: 'click' }), ev(T0 + 20_000, { name: 'scroll' })]);
  assert.equal(sessionDurationMs(one!), 20_000);
  assert.equal(one!.screenViewCount, 1);
  assert.equal(one!.eventCount, 3);
  assert.equal(isBounce(one!), true, 'one screen view is a bounce, other events do not count');
  assert.equal(one!.entryPath, '/only');
  assert.equal(one!.exitPath, '/only', 'custom events do not move the exit page');

  const { current: none } = run([ev(T0), ev(T0 + 1000)]);
  assert.equal(none!.screenViewCount, 0);
  assert.equal(isBounce(none!), true, 'no screen view at all is a bounce too');
  assert.equal(none!.entryPath, '');
  assert.equal(none!.exitPath, '');

  const { current: three } = run([
    ev(T0, { name: 'app_opened' }),
    view(T0 + 1000, '/first', { origin: 'https://b.example' }),
    view(T0 + 2000, '/second'),
    ev(T0 + 3000),
    view(T0 + 4000, '/third', { origin: 'https://c.example' }),
    ev(T0 + 9000),
  ]);
  assert.equal(three!.screenViewCount, 3);
  assert.equal(isBounce(three!), false);
  assert.equal(three!.entryOrigin, 'https://b.example');
  assert.equal(three!.entryPath, '/first', 'the entry page is the first screen view, not the first event');
  assert.equal(three!.exitOrigin, 'https://c.example');
  assert.equal(three!.exitPath, '/third');
  assert.equal(sessionDurationMs(three!), 9000);
  assert.equal(three!.dims.utm_source, 'news');
});

test('time on page: a screen view lasts until the next event of any name; the last view has none', () => {
  const a = view(T0, '/a');
  const click = ev(T0 + 7000, { name: 'click' });
  const b = view(T0 + 12_000, '/b');
  const c = view(T0 + 12_000, '/c'); // same millisecond: 0 ms on /b
  const { steps } = run([a, click, b, c]);
  assert.equal(steps[0]!.viewDuration, null);
  assert.deepEqual(steps[1]!.viewDuration, { eventId: a.id, createdAt: T0, durationMs: 7000 });
  assert.equal(steps[2]!.viewDuration, null, 'a custom event has no time on page');
  assert.deepEqual(steps[3]!.viewDuration, { eventId: b.id, createdAt: T0 + 12_000, durationMs: 0 });
  // /c is the last: no duration yet, and none when the next event is in another session.
  const next = applyEvent(steps[3]!.current, view(T0 + 12_000 + TIMEOUT, '/d'), opts());
  assert.equal(next.viewDuration, null);
});

test('interleaved devices each keep their own session state', () => {
  const states = new Map<string, SessionState | null>();
  const sessionsOf = new Map<string, Set<string>>();
  const feed = (e: EventRecord) => {
    const step = applyEvent(states.get(e.deviceId) ?? null, e, opts());
    states.set(e.deviceId, step.current);
    if (!sessionsOf.has(e.deviceId)) sessionsOf.set(e.deviceId, new Set());
    sessionsOf.get(e.deviceId)!.add(step.session.id);
    return step;
  };
  // A: every 20 min (one session); B: 10:05 then 10:50 (two sessions); C: one event.
  feed(view(T0, '/a1', { deviceId: 'A' }));
  feed(view(T0 + 5 * MIN, '/b1', { deviceId: 'B' }));
  feed(view(T0 + 6 * MIN, '/c1', { deviceId: 'C' }));
  feed(view(T0 + 20 * MIN, '/a2', { deviceId: 'A' }));
  feed(view(T0 + 40 * MIN, '/a3', { deviceId: 'A' }));
  const bSecond = feed(view(T0 + 50 * MIN, '/b2', { deviceId: 'B' }));
  const aLast = feed(view(T0 + 55 * MIN, '/a4', { deviceId: 'A' }));
  assert.equal(sessionsOf.get('A')!.size, 1);
  assert.equal(sessionsOf.get('B')!.size, 2);
  assert.equal(sessionsOf.get('C')!.size, 1);
  assert.equal(bSecond.ended.length, 1);
  assert.equal(aLast.viewDuration!.durationMs, 15 * MIN, "A's view duration is to A's next event, not B's");
  assert.equal(states.get('A')!.screenViewCount, 4);
  assert.equal(sessionDurationMs(states.get('A')!), 55 * MIN);
  assert.equal(states.get('C')!.eventCount, 1);
});

test('a late event inside the session span is counted but does not move lastEventAt', () => {
  const { current } = run([view(T0, '/a'), view(T0 + 10 * MIN, '/b')]);
  const late = view(T0 + 4 * MIN, '/late');
  const step = applyEvent(current, late, opts());
  assert.equal(step.session.id, current!.id);
  assert.deepEqual(step.started, []);
  assert.deepEqual(step.ended, []);
  assert.equal(step.viewDuration, null);
  assert.equal(step.current.eventCount, 3);
  assert.equal(step.current.screenViewCount, 3);
  assert.equal(step.current.lastEventAt, T0 + 10 * MIN);
  assert.equal(step.current.exitPath, '/b', 'a late view is not the exit page');
  assert.equal(step.current.lastEvent!.createdAt, T0 + 10 * MIN);
  assert.equal(sessionDurationMs(step.current), 10 * MIN);
  // The next in-order event still measures from the latest event.
  const next = applyEvent(step.current, ev(T0 + 11 * MIN), opts());
  assert.equal(next.viewDuration!.durationMs, MIN);
});

test('a very old late event becomes a standalone ended session; the current one is untouched', () => {
  const { current } = run([view(T0, '/a'), view(T0 + 10 * MIN, '/b')]);
  const old = view(T0 - 3 * 3600_000, '/old', { country: 'JP' });
  const step = applyEvent(current, old, opts());
  assert.equal(step.current.id, current!.id);
  assert.equal(step.current.eventCount, 2);
  assert.notEqual(step.session.id, current!.id);
  assert.equal(step.session.ended, true);
  assert.equal(step.session.startedAt, old.createdAt.getTime());
  assert.equal(step.session.eventCount, 1);
  assert.equal(step.session.dims.country, 'JP');
  assert.deepEqual(step.started.map((s) => s.id), [step.session.id]);
  assert.deepEqual(step.ended.map((s) => s.id), [step.session.id]);
  assert.deepEqual(step.touched.map((s) => s.id), [step.session.id]);
});

test('a backfilled day of one device, in order, gives the expected sessions', () => {
  const day = Date.parse('2024-04-30T00:00:00Z');
  const at = (h: number, m: number, s = 0) => day + h * 3600_000 + m * MIN + s * 1000;
  const events = [
    view(at(8, 0), '/'), ev(at(8, 1), { name: 'signup_click' }), view(at(8, 2), '/pricing'), // 1: 08:00-08:02
    view(at(9, 30), '/blog'), // 2: bounce (88 min later)
    view(at(13, 0), '/'), view(at(13, 29, 59), '/docs'), view(at(13, 59, 58), '/docs/api'), ev(at(14, 20)), // 3: chain of <30 min gaps
    ev(at(23, 55), { name: 'ping' }), view(at(23, 59), '/late'), // 4: no view first
  ];
  const { steps } = run(events, null, opts(Date.parse('2024-05-01T09:00:00Z')));
  const ids = steps.map((s) => s.session.id);
  assert.deepEqual(
    ids.map((id) => [...new Set(ids)].indexOf(id)),
    [0, 0, 0, 1, 2, 2, 2, 2, 3, 3],
  );
  const finals = new Map<string, SessionState>();
  for (const s of steps) for (const t of s.touched) finals.set(t.id, t);
  const list = [...finals.values()].sort((a, b) => a.startedAt - b.startedAt);
  assert.deepEqual(
    list.map((s) => [s.startedAt - day, sessionDurationMs(s), s.screenViewCount, s.eventCount, isBounce(s), s.entryPath, s.exitPath, s.ended]),
    [
      [at(8, 0) - day, 2 * MIN, 2, 3, false, '/', '/pricing', true],
      [at(9, 30) - day, 0, 1, 1, true, '/blog', '/blog', true],
      [at(13, 0) - day, at(14, 20) - at(13, 0), 3, 4, false, '/', '/docs/api', true],
      [at(23, 55) - day, 4 * MIN, 1, 2, true, '/late', '/late', false],
    ],
  );
  // Every session but the last was ended by the one that followed it, once each.
  const endedIds = steps.flatMap((s) => s.ended.map((e) => e.id));
  assert.deepEqual(endedIds, list.slice(0, 3).map((s) => s.id));
  assert.deepEqual(steps.flatMap((s) => s.started.map((e) => e.id)), list.map((s) => s.id));
});

test('checkEnd ends only the current session, only after the idle timeout of wall time', () => {
  const { current } = run([view(T0, '/a')], null, opts(WALL));
  const s = current!;
  assert.equal(checkEnd(null, s.id, WALL + TIMEOUT, TIMEOUT), null);
  assert.equal(checkEnd(s, 'another-session', WALL + TIMEOUT, TIMEOUT), null, 'not the current session');
  assert.equal(checkEnd(s, s.id, WALL + TIMEOUT - 1, TIMEOUT), null, 'not idle long enough');
  // Event time does not matter: the event is from long ago, yet it was processed just now.
  assert.equal(checkEnd(s, s.id, WALL + 1000, TIMEOUT), null);
  const ended = checkEnd(s, s.id, WALL + TIMEOUT, TIMEOUT);
  assert.ok(ended);
  assert.equal(ended.ended, true);
  assert.equal(ended.id, s.id);
  assert.equal(ended.lastEventAt, s.lastEventAt);
  assert.equal(s.ended, false, 'the input state is not mutated');
  assert.equal(checkEnd(ended, s.id, WALL + 2 * TIMEOUT, TIMEOUT), null, 'already ended');
});

test('an idle-ended session that gets an event within 30 min of event time is reopened', () => {
  const { current } = run([view(T0, '/a')], null, opts(WALL));
  const ended = checkEnd(current, current!.id, WALL + TIMEOUT, TIMEOUT)!;
  const step = applyEvent(ended, ev(T0 + 29 * MIN), opts(WALL + TIMEOUT + 5000));
  assert.equal(step.session.id, ended.id);
  assert.equal(step.reopened?.id, ended.id);
  assert.equal(step.current.ended, false);
  assert.deepEqual(step.started, []);
  assert.deepEqual(step.ended, []);
  assert.equal(step.current.eventCount, 2);
  assert.equal(step.current.updatedAtMs, WALL + TIMEOUT + 5000);
  assert.equal(step.viewDuration!.durationMs, 29 * MIN);

  // 30 min or more after it: a new session, and no second end for the idle-ended one.
  const later = applyEvent(ended, ev(T0 + TIMEOUT), opts(WALL + TIMEOUT + 5000));
  assert.notEqual(later.session.id, ended.id);
  assert.equal(later.reopened, null);
  assert.deepEqual(later.ended, [], 'an idle-ended session is not reported ended twice');
  assert.equal(later.started.length, 1);
});

// Out of the time-order contract of semantics.md ("as long as one device's events arrive
// in time order"): a late event just before the start is counted in the session, and the
// session keeps its start, duration and entry page (docs/decisions.md, Sessions).
test('a late event just before the session start is counted without moving the start', () => {
  const { current } = run([view(T0, '/a'), view(T0 + 10 * MIN, '/b')]);
  const step = applyEvent(current, view(T0 - 5 * MIN, '/before'), opts());
  assert.equal(step.session.id, current!.id);
  assert.equal(step.current.startedAt, T0);
  assert.equal(step.current.eventCount, 3);
  assert.equal(step.current.screenViewCount, 3);
  assert.equal(sessionDurationMs(step.current), 10 * MIN);
  assert.equal(step.current.entryPath, '/a');
});

test('identify within a session: an event naming a profile gives it the whole session; a later anonymous one does not take it back', () => {
  const { steps, current } = run([
    view(T0, '/a'),
    view(T0 + MIN, '/b', { profileId: 'alice' }),
    view(T0 + 2 * MIN, '/c'),
  ]);
  assert.equal(steps[0]!.session.profileId, 'dev-a', 'anonymous: the device');
  assert.equal(steps[1]!.session.id, steps[0]!.session.id);
  assert.equal(steps[1]!.session.profileId, 'alice');
  assert.equal(current!.profileId, 'alice');
  const bob = run([view(T0 + 3 * MIN, '/d', { profileId: 'bob' })], current).current!;
  assert.equal(bob.profileId, 'bob', 'a later event naming another profile');
  // A late event inside the span, naming a profile, identifies the session it is counted in.
  const late = run([view(T0 + 30 * 1000, '/late', { profileId: 'carol' })], current).steps[0]!;
  assert.equal(late.session.id, current!.id);
  assert.equal(late.session.profileId, 'carol');
});

test('a session keeps its funnel steps: non-bot events other than screen views, in time order, ties marked', () => {
  const { current, steps } = run([
    view(T0, '/home'),
    ev(T0 + MIN, { name: 'click' }),
    ev(T0 + 2 * MIN, { name: 'add_to_cart' }),
    ev(T0 + 2 * MIN, { name: 'coupon' }), // the same instant as add_to_cart
    view(T0 + 3 * MIN, '/cart'),
    ev(T0 + 4 * MIN, { name: 'purchase' }),
  ]);
  assert.deepEqual(current!.stepNames, ['click', 'add_to_cart', '', 'coupon', 'purchase']);
  assert.equal(current!.stepFirstAt, T0 + MIN);
  assert.equal(current!.stepLastAt, T0 + 4 * MIN);
  // states are shared: an earlier step's session still holds the names it had then
  assert.deepEqual(steps[2]!.current.stepNames, ['click', 'add_to_cart']);
  // a session of screen views alone has none
  const views = run([view(T0, '/a'), view(T0 + MIN, '/b')]).current!;
  assert.deepEqual(views.stepNames, []);
  assert.equal(views.stepFirstAt, null);
  assert.equal(views.stepLastAt, null);
});

test("a bot's events are no steps; one before the latest step leaves the names unknown, its times still counted", () => {
  const bot = run([ev(T0, { name: 'click', isBot: true })]).current!;
  assert.deepEqual(bot.stepNames, []);
  assert.equal(bot.stepFirstAt, null);
  const { current } = run([ev(T0 + 5 * MIN, { name: 'click' }), ev(T0 + 2 * MIN, { name: 'signup' }), ev(T0 + 9 * MIN, { name: 'purchase' })]);
  assert.equal(current!.stepNames, null); // signup came after click but happened before it
  assert.equal(current!.stepFirstAt, T0 + 2 * MIN);
  assert.equal(current!.stepLastAt, T0 + 9 * MIN);
});

test('steps past the limit (entries or bytes) are unknown rather than cut', () => {
  const many = run(Array.from({ length: MAX_STEP_ENTRIES + 1 }, (_, i) => ev(T0 + i * 1000, { name: 'tick' }))).current!;
  assert.equal(many.stepNames, null);
  const exactly = run(Array.from({ length: MAX_STEP_ENTRIES }, (_, i) => ev(T0 + i * 1000, { name: 'tick' }))).current!;
  assert.equal(exactly.stepNames!.length, MAX_STEP_ENTRIES);
  const long = run([ev(T0, { name: 'x'.repeat(600) }), ev(T0 + 1000, { name: 'y'.repeat(600) })]).current!;
  assert.equal(long.stepNames, null);
});
