// keepFirstPerKey: at most one op per (project, idempotency key), whatever else differs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { QueuedOp } from '../model/event';
import { keyOf } from '../store/writes';
import { keepFirstPerKey, keyedOf } from './keys';

const op = (id: string, projectId: string, dedupeKey?: string, createdAt = '2026-11-25T10:00:00.000Z'): QueuedOp => ({
  kind: 'track', id, projectId, deviceId: 'd'.repeat(32), receivedAt: createdAt, createdAt, name: 'purchase',
  profileId: '', properties: {}, groups: [], ip: '', userAgent: '', url: '', title: '', referrer: '', ...(dedupeKey === undefined ? {} : { dedupeKey }),
}) as QueuedOp;

test('a retried copy in the same batch is dropped even with another time; unkeyed ops all stay', () => {
  const ops = [op('a', 'p1', 'order-1'), op('b', 'p1'), op('a', 'p1', 'order-1', '2026-11-25T10:00:05.000Z'), op('c', 'p1'), op('b', 'p1')];
  const r = keepFirstPerKey(ops, new Set());
  assert.deepEqual(r.ops.map((o) => o.id), ['a', 'b', 'c', 'b']);
  const first = r.ops[0]!;
  assert.equal(first.kind === 'track' && first.createdAt, '2026-11-25T10:00:00.000Z', 'the first attempt wins');
  assert.deepEqual(r.keys, [{ projectId: 'p1', key: 'order-1', opId: 'a' }]);
  assert.equal(r.dropped, 1);
});

test('a key an earlier batch applied drops the op; the same key in another project is another event', () => {
  const ops = [op('a', 'p1', 'order-1'), op('x', 'p2', 'order-1'), op('y', 'p1', 'order-2')];
  assert.deepEqual(keyedOf(ops), [{ projectId: 'p1', key: 'order-1' }, { projectId: 'p2', key: 'order-1' }, { projectId: 'p1', key: 'order-2' }]);
  const r = keepFirstPerKey(ops, new Set([keyOf('p1', 'order-1')]));
  assert.deepEqual(r.ops.map((o) => o.id), ['x', 'y']);
  assert.deepEqual(r.keys.map((k) => `${k.projectId}/${k.key}`), ['p2/order-1', 'p1/order-2']);
});
