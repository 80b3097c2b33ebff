import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stat } from 'node:fs';
import { decodeBatch } from '../bus/message';
import { Batcher, OpTooLargeError } from './batcher';
import type { QueuedOp } from '../model/event';

const op = (i: number): QueuedOp => ({
  kind: 'identify', id: `id-${i}`, projectId: 'p', deviceId: 'd', receivedAt: '2026-01-01T00:00:00Z',
  profileId: `u${i}`, firstName: null, lastName: null, email: null, properties: {},
});

test('ops of one subject share one message; each add resolves after the publish', async () => {
  const published: { subject: string; ops: QueuedOp[] }[] = [];
  const b = new Batcher({
    maxOps: 3, maxDelayMs: 5, maxBytes: 1 << 20,
    publish: async (subject, data) => { published.push({ subject, ops: decodeBatch(data).ops }); },
  });
  await Promise.all([b.add('s1', op(1)), b.add('s1', op(2)), b.add('s1', op(3)), b.add('s1', op(4)), b.add('s2', op(5))]);
  assert.equal(published.length, 3);
  assert.deepEqual(published.map((p) => p.ops.length).sort(), [1, 1, 3]);
  assert.deepEqual(published.find((p) => p.ops.length === 3)!.ops.map((o) => o.id), ['id-1', 'id-2', 'id-3']);
});

test('a failed publish rejects every request of its message', async () => {
  const b = new Batcher({ maxOps: 10, maxDelayMs: 1, maxBytes: 1 << 20, publish: async () => { throw new Error('nats down'); } });
  const results = await Promise.allSettled([b.add('s', op(1)), b.add('s', op(2))]);
  assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected']);
});

test('messages stay under maxBytes; a large op travels alone, compressed; one too large even so is refused', async () => {
  const messages: Uint8Array[] = [];
  const b = new Batcher({ maxOps: 1000, maxDelayMs: 1, maxBytes: 2000, publish: async (_s, d) => { messages.push(d); } });
  await Promise.all(Array.from({ length: 20 }, (_, i) => b.add('s', op(i))));
  assert.ok(messages.length > 1 && messages.every((m) => m.length <= 2000), `sizes ${messages.map((m) => m.length)}`);
  messages.length = 0;
  const big = { ...op(0), properties: { blob: 'x'.repeat(5000) } } as QueuedOp;
  await b.add('s', big);
  assert.equal(messages.length, 1);
  assert.ok(messages[0]!.length < 2000, 'compressed below the limit');
  assert.deepEqual(decodeBatch(messages[0]!).ops, [big]);
  const random = { ...op(1), properties: { blob: Array.from({ length: 4000 }, () => String.fromCharCode(33 + Math.floor(Math.random() * 90))).join('') } } as QueuedOp;
  await assert.rejects(b.add('s', random), OpTooLargeError);
});

/** A publish function whose acks the test releases by hand. */
function manualPublish() {
  const calls: { subject: string; ops: QueuedOp[]; msgId: string; ack: () => void; fail: (e: Error) => void }[] = [];
  const publish = (subject: string, data: Uint8Array, msgId: string) =>
    new Promise<void>((resolve, reject) => calls.push({ subject, ops: decodeBatch(data).ops, msgId, ack: resolve, fail: reject }));
  return { calls, publish };
}

const tick = () => new Promise((r) => setImmediate(r));

/** A wait cap no test run reaches: tests of the in-flight rule must not depend on how long a tick takes on a loaded CI box
 *  (with the 5 ms default, a slow tick let the cap publish early and failed CI once). */
const NO_CAP = 60_000;

test('an op for an idle subject is published at the end of the turn, with no timer: ops of the same turn share its message; ops that arrive while it is in flight share the next', async () => {
  const m = manualPublish();
  const b = new Batcher({ maxOps: 100, maxDelayMs: 0, maxBytes: 1 << 20, maxWaitBehindMs: NO_CAP, publish: m.publish });
  const first = b.add('s', op(1));
  const sameTurn = b.add('s', op(2));
  const other = b.add('t', op(5)); // another subject: its own message, the same turn
  assert.equal(m.calls.length, 0, 'nothing yet: the turn is not over');
  await tick(); // setImmediate: no timer
  assert.equal(m.calls.length, 2);
  assert.deepEqual(m.calls[0]!.ops.map((o) => o.id), ['id-1', 'id-2']);
  assert.equal(m.calls[1]!.subject, 't');
  const later = [b.add('s', op(3)), b.add('s', op(4))];
  await tick();
  assert.equal(m.calls.length, 2, 'nothing more is published while the first is in flight (within the wait cap)');
  m.calls[0]!.ack();
  await Promise.all([first, sameTurn]);
  await tick();
  assert.equal(m.calls.length, 3, 'the gathered ops go the moment the publish in flight settles');
  assert.deepEqual(m.calls[2]!.ops.map((o) => o.id), ['id-3', 'id-4']);
  m.calls[2]!.ack();
  m.calls[1]!.ack();
  await Promise.all([...later, other]);
});

test('an op that arrives in an I/O callback (as a request does) is published before any timer, even one of 0 ms', async () => {
  const m = manualPublish();
  const b = new Batcher({ maxOps: 100, maxDelayMs: 0, maxBytes: 1 << 20, maxWaitBehindMs: NO_CAP, publish: m.publish });
  // From an I/O callback, the loop's check phase (setImmediate) comes before its timers.
  const seen = await new Promise<{ callsWhenTimerFired: number; one: Promise<void> }>((resolve) => {
    stat('.', () => {
      const one = b.add('s', op(1));
      setTimeout(() => resolve({ callsWhenTimerFired: m.calls.length, one }), 0);
    });
  });
  assert.equal(seen.callsWhenTimerFired, 1, 'published before a 0 ms timer set in the same callback');
  m.calls[0]!.ack();
  await seen.one;
});

test('the size cap still applies while a publish is in flight; a failed publish releases the ops gathered behind it', async () => {
  const m = manualPublish();
  const b = new Batcher({ maxOps: 2, maxDelayMs: 0, maxBytes: 1 << 20, maxWaitBehindMs: NO_CAP, publish: m.publish });
  const first = b.add('s', op(1));
  await tick();
  assert.equal(m.calls.length, 1);
  const gathered = [b.add('s', op(2)), b.add('s', op(3))];
  assert.equal(m.calls.length, 2, 'a full message is published without waiting');
  assert.deepEqual(m.calls[1]!.ops.map((o) => o.id), ['id-2', 'id-3']);
  const fourth = b.add('s', op(4));
  m.calls[0]!.fail(new Error('nats down'));
  await assert.rejects(first);
  await tick();
  assert.equal(m.calls.length, 3, 'the failed publish settled: the fourth goes');
  assert.deepEqual(m.calls[2]!.ops.map((o) => o.id), ['id-4']);
  m.calls[1]!.ack();
  m.calls[2]!.ack();
  await Promise.all([...gathered, fourth]);
});

test('a full message in the turn goes at once; what follows it in the same turn waits behind it', async () => {
  const m = manualPublish();
  const b = new Batcher({ maxOps: 2, maxDelayMs: 0, maxBytes: 1 << 20, maxWaitBehindMs: NO_CAP, publish: m.publish });
  const full = [b.add('s', op(1)), b.add('s', op(2))];
  assert.equal(m.calls.length, 1, 'full: published without waiting for the turn to end');
  const third = b.add('s', op(3));
  await tick();
  assert.equal(m.calls.length, 1, 'the third waits behind the full message in flight');
  m.calls[0]!.ack();
  await Promise.all(full);
  await tick();
  assert.equal(m.calls.length, 2);
  assert.deepEqual(m.calls[1]!.ops.map((o) => o.id), ['id-3']);
  m.calls[1]!.ack();
  await third;
});

test('an op alone in its message uses the message id it was given; a shared message gets a random one', async () => {
  const m = manualPublish();
  const b = new Batcher({ maxOps: 100, maxDelayMs: 0, maxBytes: 1 << 20, maxWaitBehindMs: NO_CAP, publish: m.publish });
  const a = b.add('s', op(1), 'lone-1');
  await tick();
  const c = [b.add('s', op(2), 'lone-2'), b.add('s', op(3), 'lone-3')];
  m.calls[0]!.ack();
  await a;
  await tick();
  assert.equal(m.calls[0]!.msgId, 'lone-1');
  assert.notEqual(m.calls[1]!.msgId, 'lone-2');
  assert.match(m.calls[1]!.msgId, /^[0-9a-f-]{36}$/);
  m.calls[1]!.ack();
  await Promise.all(c);
});

test('flushAll waits for the ops gathered behind a publish in flight too (drain)', async () => {
  let published = 0;
  const b = new Batcher({
    maxOps: 100, maxDelayMs: 0, maxBytes: 1 << 20,
    publish: (_s, d) => new Promise<void>((r) => setTimeout(() => { published += decodeBatch(d).ops.length; r(); }, 5)),
  });
  const all = [b.add('s', op(1)), b.add('s', op(2)), b.add('s', op(3))];
  await b.flushAll();
  assert.equal(published, 3);
  await Promise.all(all);
});

test('ops gathered behind a publish that does not settle go after maxWaitBehindMs, so each times out on its own clock', async () => {
  const m = manualPublish();
  const b = new Batcher({ maxOps: 100, maxDelayMs: 0, maxBytes: 1 << 20, maxWaitBehindMs: 200, publish: m.publish });
  const stuck = b.add('s', op(1));
  await tick();
  const behind = b.add('s', op(2));
  await tick();
  assert.equal(m.calls.length, 1);
  await new Promise((r) => setTimeout(r, 600));
  assert.equal(m.calls.length, 2, 'published although the first is still in flight');
  assert.deepEqual(m.calls[1]!.ops.map((o) => o.id), ['id-2']);
  m.calls[1]!.fail(new Error('timeout'));
  await assert.rejects(behind);
  m.calls[0]!.ack();
  await stuck;
});
