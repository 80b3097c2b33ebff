import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequestError } from '../http/errors';
import type { HttpRequest } from '../http/types';
import { dedupeMsgId, dedupeOpId, takeIdempotencyKey } from './idempotency';

const req = (headers: Record<string, string> = {}) => ({ headers }) as unknown as HttpRequest;
const path = ['payload', 'properties'];

test('the header, the property, or both when they agree; the property never stays in properties', () => {
  assert.equal(takeIdempotencyKey(req({ 'idempotency-key': ' order-42 ' }), undefined, path), 'order-42');
  // The IETF draft sends a structured-field string: quotes are not part of the key.
  assert.equal(takeIdempotencyKey(req({ 'idempotency-key': '"8e03978e-40d5-43e8-bc93-6894a57f9324"' }), undefined, path), '8e03978e-40d5-43e8-bc93-6894a57f9324');
  const props: Record<string, unknown> = { plan: 'pro', __idempotencyKey: 'order-42' };
  assert.equal(takeIdempotencyKey(req(), props, path), 'order-42');
  assert.deepEqual(props, { plan: 'pro' });
  const both: Record<string, unknown> = { __idempotencyKey: 'order-42' };
  assert.equal(takeIdempotencyKey(req({ 'idempotency-key': 'order-42' }), both, path), 'order-42');
  assert.deepEqual(both, {});
  assert.equal(takeIdempotencyKey(req(), { a: 1 }, path), null);
  assert.equal(takeIdempotencyKey(req(), { __idempotencyKey: 17 }, path), '17');
});

test('a bad key is a 400 naming where it came from', () => {
  const cases: [Record<string, string>, Record<string, unknown> | undefined, RegExp, string[]][] = [
    [{ 'idempotency-key': '' }, undefined, /1 to 256/, ['headers', 'Idempotency-Key']],
    [{ 'idempotency-key': 'x'.repeat(257) }, undefined, /1 to 256/, ['headers', 'Idempotency-Key']],
    [{}, { __idempotencyKey: { a: 1 } }, /must be a string/, [...path, '__idempotencyKey']],
    [{}, { __idempotencyKey: 'a\u0001b' }, /control characters/, [...path, '__idempotencyKey']],
    [{ 'idempotency-key': 'a' }, { __idempotencyKey: 'b' }, /differ/, [...path, '__idempotencyKey']],
  ];
  for (const [headers, props, message, where] of cases) {
    assert.throws(() => takeIdempotencyKey(req(headers), props, path), (e: unknown) => {
      assert.ok(e instanceof BadRequestError);
      assert.match(e.message, message);
      assert.deepEqual(e.issues[0]!.path, where);
      return true;
    });
  }
});

test('op id: the same for the same project and key (a UUID), different across projects and keys', () => {
  const a = dedupeOpId('shop-1', 'order-42');
  assert.equal(dedupeOpId('shop-1', 'order-42'), a);
  assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.notEqual(dedupeOpId('shop-2', 'order-42'), a);
  assert.notEqual(dedupeOpId('shop-1', 'order-43'), a);
  // The separator keeps (project, key) pairs apart that would concatenate alike.
  assert.notEqual(dedupeOpId('a', 'bc'), dedupeOpId('ab', 'c'));
  assert.equal(dedupeMsgId(a), `dk-${a}`);
});
