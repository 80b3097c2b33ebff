// Event ids drawn from the pooled random source: still unique UUIDv7s carrying the event time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { eventId } from './ops';

test('event ids are unique version-7 UUIDs whose first 48 bits are the event time, across pool refills', () => {
  const at = Date.parse('2026-11-22T03:04:05.678Z');
  const ids = Array.from({ length: 1000 }, () => eventId(at)); // ~4 refills of the 256-id pool
  assert.equal(new Set(ids).size, ids.length);
  for (const id of ids) {
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(parseInt(id.slice(0, 8) + id.slice(9, 13), 16), at);
  }
});
