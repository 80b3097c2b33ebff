import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Batcher, decodeBatch, OpTooLargeError } from './batcher';
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
