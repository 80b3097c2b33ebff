// The JetStream message's format without a server: what the API encodes the worker decodes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { QueuedOp } from '../model/event';
import { decodeBatch, encodeBatch, encodeCompressed, ENVELOPE_BYTES, packBatches } from './message';

const op = (i: number): QueuedOp => ({
  kind: 'identify', id: `id-${i}`, projectId: 'p', deviceId: 'd', receivedAt: '2026-01-01T00:00:00Z',
  profileId: `u${i}`, firstName: null, lastName: null, email: null, properties: { name: 'é中😀' },
});

test('a message of ops is their JSON in the v1 envelope; it decodes to the same ops', () => {
  const ops = [op(1), op(2), op(3)];
  const data = encodeBatch(ops.map((o) => JSON.stringify(o)));
  assert.equal(data.toString('utf8'), JSON.stringify({ v: 1, ops }));
  assert.deepEqual(decodeBatch(data), { v: 1, ops });
  assert.equal(encodeBatch([]).length, ENVELOPE_BYTES);
  assert.deepEqual(decodeBatch(new TextEncoder().encode('{"v":1,"ops":[]}')), { v: 1, ops: [] });
});

test('a compressed message starts with a zero byte, is smaller, and decodes to its one op', async () => {
  const big = { ...op(0), properties: { blob: 'x'.repeat(5000) } } as QueuedOp;
  const data = await encodeCompressed(JSON.stringify(big));
  assert.equal(data[0], 0);
  assert.ok(data.length < 5000, `${data.length} bytes`);
  assert.deepEqual(decodeBatch(data), { v: 1, ops: [big] });
});

test('a message read from a view into a larger buffer decodes only its own bytes', () => {
  const data = encodeBatch([JSON.stringify(op(7))]);
  const outer = Buffer.concat([Buffer.from('garbage'), data, Buffer.from('tail')]);
  const view = new Uint8Array(outer.buffer, outer.byteOffset + 7, data.length);
  assert.deepEqual(decodeBatch(view).ops, [op(7)]);
});

test('packBatches: every op once, in order, each message within the byte and op limits', () => {
  const ops = Array.from({ length: 1234 }, (_, i) => JSON.stringify({ kind: 'session_check', id: `check-${i}`, pad: 'x'.repeat(i % 97) }));
  const maxBytes = 4096;
  const messages = packBatches(ops, maxBytes, 100);
  const back = messages.flatMap((m) => {
    assert.ok(m.length <= maxBytes, `${m.length} bytes`);
    const ops = decodeBatch(m).ops;
    assert.ok(ops.length <= 100 && ops.length > 0);
    return ops.map((o) => JSON.stringify(o));
  });
  assert.deepEqual(back, ops);
  assert.equal(packBatches(ops, 10 * 1024 * 1024, 500).length, 3, 'by count alone: 500, 500, 234');
  assert.deepEqual(packBatches([], maxBytes, 100), []);
  const huge = JSON.stringify({ pad: 'y'.repeat(10_000) });
  assert.equal(packBatches(['{}', huge, '{}'], maxBytes, 100).length, 3, 'an op larger than a message travels alone');
});
