import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { EventRow } from './analytics-api';
import { eventTitle, eventsPeriod, propertySummary, sessionEvents } from './sessions';
import { profileName, initials, propertyEntries } from './profiles';
import { ago, dateTime, localDay, offset, timeOfDay } from './times';

const ev = (id: string, session_id: string, created_at: string) => ({ id, session_id, created_at, name: 'x' }) as EventRow;

test("a session's events: only its own, each once, oldest first (ties by id)", () => {
  const byProfile = [ev('e4', 's1', '2026-11-20T10:03:00.000Z'), ev('e9', 's2', '2026-11-20T10:02:30.000Z'), ev('e2', 's1', '2026-11-20T10:01:00.000Z'), ev('e1', 's1', '2026-11-20T10:01:00.000Z')];
  const byDevice = [ev('e2', 's1', '2026-11-20T10:01:00.000Z'), ev('e0', 's1', '2026-11-20T10:00:00.000Z')];
  assert.deepEqual(sessionEvents([byProfile, byDevice], 's1').map((e) => e.id), ['e0', 'e1', 'e2', 'e4']);
  assert.deepEqual(sessionEvents([byProfile], 'none'), []);
});

test('the days whose events hold a session: its start day and the next, never after today', () => {
  assert.deepEqual(eventsPeriod('2026-11-20', '2026-11-25'), { startDate: '2026-11-20', endDate: '2026-11-21' });
  assert.deepEqual(eventsPeriod('2026-11-25', '2026-11-25'), { startDate: '2026-11-25', endDate: '2026-11-25' });
  assert.deepEqual(eventsPeriod('2026-12-31', '2027-01-05'), { startDate: '2026-12-31', endDate: '2027-01-01' });
});

test('events, properties and profiles as people read them', () => {
  assert.equal(eventTitle({ name: 'screen_view' }), 'Page view');
  assert.equal(eventTitle({ name: 'signup' }), 'signup');
  assert.equal(propertySummary({ plan: 'pro', amount: 49, nested: { a: 1 } }), 'plan: pro · amount: 49 · nested: {"a":1}');
  assert.equal(propertySummary({ a: 1, b: 2, c: 3, d: 4, e: 5, f: 6 }), 'a: 1 · b: 2 · c: 3 · d: 4 · +2 more');
  assert.equal(propertySummary({}), '');
  const p = { id: 'user-42', first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' };
  assert.equal(profileName(p), 'Ada Lovelace');
  assert.equal(profileName({ ...p, first_name: '', last_name: '' }), 'ada@example.com');
  assert.equal(profileName({ ...p, first_name: '', last_name: '', email: '' }), 'user-42');
  assert.deepEqual([initials(p), initials({ ...p, first_name: '', last_name: '', email: '' }), initials({ ...p, first_name: 'Zoë', last_name: '' })], ['AL', 'US', 'ZO']);
  assert.deepEqual(propertyEntries({ plan: 'pro', avatar: 'https://x', age: 36, tags: ['a'] }), [['age', '36'], ['plan', 'pro'], ['tags', '["a"]']]);
});

test("times in the project's timezone, offsets from a session's start, and how long ago", () => {
  const iso = '2026-03-01T23:30:05.000Z';
  assert.equal(dateTime(iso, 'UTC'), '1 Mar 2026, 23:30');
  assert.equal(dateTime(iso, 'Europe/Berlin'), '2 Mar 2026, 00:30');
  assert.equal(timeOfDay(iso, 'America/Los_Angeles'), '15:30:05');
  assert.equal(localDay(iso, 'Europe/Berlin'), '2026-03-02');
  assert.equal(localDay(iso, 'UTC'), '2026-03-01');
  assert.deepEqual([0, 5_000, 65_400, 3_723_000, -10].map(offset), ['+0:00', '+0:05', '+1:05', '+1:02:03', '+0:00']);
  const now = Date.parse(iso);
  assert.deepEqual([10, 300, 7200, 86_400, 3 * 86_400].map((s) => ago(new Date(now - s * 1000).toISOString(), now)), ['just now', '5 min ago', '2 h ago', '1 day ago', '3 days ago']);
});
