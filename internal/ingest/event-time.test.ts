// The accepted event-time range (docs/decisions.md, "Ingest"): from INGEST_MAX_PAST_DAYS (or
// RETENTION_DAYS, when shorter) before receipt, never before 1970; a later time than 60 s
// ahead becomes the receipt time, as before. Anything older is a 400 naming the field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequestError } from '../http/errors';
import { DEFAULT_MAX_PAST_DAYS, earliestEventMs, eventTimeProblem, planEvent, planTrackBody, type EventTimeLimits, type OpContext } from './ops';
import type { QueuedTrack } from '../model/event';

const DAY = 86_400_000;
const received = Date.parse('2026-11-29T12:00:00.000Z');
const ctx = (limits?: EventTimeLimits): OpContext => ({ projectId: 'p', receivedMs: received, userAgent: null, ip: null, ...(limits ? { limits } : {}) });
const iso = (ms: number) => new Date(ms).toISOString();

/** The 400's issues of planning `fn`, or null when it plans. */
function refusal(fn: () => unknown): BadRequestError | null {
  try {
    fn();
    return null;
  } catch (err) {
    assert.ok(err instanceof BadRequestError, String(err));
    return err;
  }
}

const trackAt = (ts: string, limits?: EventTimeLimits) =>
  planTrackBody({ type: 'track', payload: { name: 'x', properties: { __timestamp: ts } } }, ctx(limits));

test('the default window is about ten years back; its first millisecond is accepted, the one before is not', () => {
  assert.equal(DEFAULT_MAX_PAST_DAYS, 3660);
  const earliest = earliestEventMs(received);
  assert.equal(earliest, received - 3660 * DAY);
  assert.equal(eventTimeProblem(earliest, received), null);
  assert.match(eventTimeProblem(earliest - 1, received) ?? '', /too far in the past: event times are accepted up to 3660 days before receipt \(INGEST_MAX_PAST_DAYS\), so from 2016-11-/);
  const op = trackAt(iso(earliest)).build('d', null) as QueuedTrack;
  assert.equal(op.createdAt, iso(earliest), 'a time inside the window is kept as sent');
});

test('far-past times (the years 0100, 1000, 1600, 1800, 1969) are a 400 naming payload.properties.__timestamp', () => {
  for (const ts of ['0100-06-01T00:00:00Z', '1000-01-01T00:00:00Z', '1600-03-01T00:00:00Z', '1800-01-01T00:00:00Z', '1969-12-31T23:59:59Z', '2010-01-01']) {
    const err = refusal(() => trackAt(ts));
    assert.ok(err, `${ts} accepted`);
    assert.deepEqual(err.issues.map((i) => i.path), [['payload', 'properties', '__timestamp']], ts);
    assert.match(err.message, /^payload\.properties\.__timestamp: .* is too far in the past/, ts);
  }
});

test('/event names the field the time came from: timestamp, or properties.__timestamp', () => {
  const fromBody = refusal(() => planEvent({ name: 'x', timestamp: '1800-01-01T00:00:00Z', properties: { __timestamp: '2026-11-29T00:00:00Z' } }, ctx()));
  assert.deepEqual(fromBody?.issues.map((i) => i.path), [['timestamp']]);
  const fromProps = refusal(() => planEvent({ name: 'x', properties: { __timestamp: '1800-01-01T00:00:00Z' } }, ctx()));
  assert.deepEqual(fromProps?.issues.map((i) => i.path), [['properties', '__timestamp']]);
  // timestamp wins over __timestamp: a good timestamp with a far-past __timestamp is accepted.
  assert.equal(refusal(() => planEvent({ name: 'x', timestamp: '2026-11-29T00:00:00Z', properties: { __timestamp: '1800-01-01T00:00:00Z' } }, ctx())), null);
});

test('the future is unchanged: more than 60 s ahead becomes the receipt time, never a 400', () => {
  for (const ahead of [61_000, 3_600_000, Date.parse('9999-12-31T23:59:59Z') - received]) {
    const op = trackAt(iso(received + ahead)).build('d', null) as QueuedTrack;
    assert.equal(op.createdAt, iso(received), `+${ahead} ms`);
  }
  const near = trackAt(iso(received + 30_000)).build('d', null) as QueuedTrack;
  assert.equal(near.createdAt, iso(received + 30_000));
  // No time sent: the receipt time.
  const none = planTrackBody({ type: 'track', payload: { name: 'x' } }, ctx()).build('d', null) as QueuedTrack;
  assert.equal(none.createdAt, iso(received));
});

test('a shorter RETENTION_DAYS narrows the window (an older event would be deleted within the hour); a longer one does not widen it', () => {
  const limits = { maxPastDays: 3660, retentionDays: 90 };
  assert.equal(earliestEventMs(received, limits), received - 90 * DAY);
  const err = refusal(() => trackAt(iso(received - 91 * DAY), limits));
  assert.match(err?.message ?? '', /up to 90 days before receipt \(RETENTION_DAYS: older events are deleted\)/);
  assert.equal(refusal(() => trackAt(iso(received - 89 * DAY), limits)), null);
  assert.equal(earliestEventMs(received, { maxPastDays: 30, retentionDays: 365 }), received - 30 * DAY);
});

test('a window reaching before 1970 stops at 1970-01-01 (event ids are UUIDv7: milliseconds since then)', () => {
  const limits = { maxPastDays: 100_000, retentionDays: 0 };
  assert.equal(earliestEventMs(received, limits), 0);
  assert.equal(refusal(() => trackAt('1970-01-01T00:00:00Z', limits)), null);
  const err = refusal(() => trackAt('1969-12-31T23:59:59Z', limits));
  assert.match(err?.message ?? '', /event times start at 1970-01-01T00:00:00Z, so from 1970-01-01T00:00:00\.000Z/);
});

test('ops that carry no event time (identify, increment, group, assign_group) are never refused for it', () => {
  const old = { ...ctx(), receivedMs: received };
  assert.equal(refusal(() => planTrackBody({ type: 'identify', payload: { profileId: 'u', properties: { __timestamp: '1800-01-01T00:00:00Z' } } }, old)), null);
  assert.equal(refusal(() => planTrackBody({ type: 'increment', payload: { profileId: 'u', property: 'n', value: 1 } }, old)), null);
});
