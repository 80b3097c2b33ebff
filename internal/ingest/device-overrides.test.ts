// Device overrides at ingest: consumed out of properties, carried in the queued op, empty
// or non-string values ignored, an over-long one a 400 that names it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequestError } from '../http/errors';
import type { QueuedTrack } from '../model/event';
import { planEvent, planTrackBody, type OpContext } from './ops';

const ctx: OpContext = { projectId: 'p', receivedMs: Date.parse('2026-11-25T10:00:00Z'), userAgent: 'okhttp/4.12.0', ip: null };
const trackOp = (properties: Record<string, unknown>) =>
  planTrackBody({ type: 'track', payload: { name: 'app_open', properties } }, ctx).build('d'.repeat(32), '8.8.8.8') as QueuedTrack;

test('the seven overrides travel in the op, not in properties', () => {
  const op = trackOp({
    __os: 'Android', __osVersion: '14', __browser: 'WebView', __browserVersion: '124.0', __device: 'mobile', __brand: 'Samsung', __model: 'SM-S918B',
    plan: 'pro', __version: '1.2.0',
  });
  assert.deepEqual(op.deviceOverrides, {
    os: 'Android', os_version: '14', browser: 'WebView', browser_version: '124.0', device: 'mobile', brand: 'Samsung', model: 'SM-S918B',
  });
  // __version is no device field: it stays a property, as in OpenPanel.
  assert.deepEqual(op.properties, { plan: 'pro', __version: '1.2.0' });
});

test('/event takes them too', () => {
  const op = planEvent({ name: 'x', properties: { __os: 'iOS', a: 1 } }, ctx).build('d'.repeat(32), null) as QueuedTrack;
  assert.deepEqual(op.deviceOverrides, { os: 'iOS' });
  assert.deepEqual(op.properties, { a: 1 });
});

test('no override: the op has no deviceOverrides field at all', () => {
  const op = trackOp({ a: 1 });
  assert.equal('deviceOverrides' in op, false);
});

test('empty, null, boolean or object values are ignored (and still consumed); numbers count as text; strings are trimmed', () => {
  const op = trackOp({ __os: '', __osVersion: 17.4, __brand: null, __model: { x: 1 }, __device: true, __browser: '  Chrome  ' });
  assert.deepEqual(op.deviceOverrides, { os_version: '17.4', browser: 'Chrome' });
  assert.deepEqual(op.properties, {});
  const none = trackOp({ __os: '   ', __brand: null });
  assert.equal('deviceOverrides' in none, false);
  assert.deepEqual(none.properties, {});
});

test('a value over 256 characters is a 400 naming the key', () => {
  assert.throws(
    () => trackOp({ __model: 'x'.repeat(257) }),
    (err: unknown) => err instanceof BadRequestError && JSON.stringify(err.issues).includes('"payload","properties","__model"'),
  );
  assert.equal(trackOp({ __model: 'x'.repeat(256) }).deviceOverrides?.model, 'x'.repeat(256));
});

test('identify consumes them too: they never become profile properties', () => {
  const op = planTrackBody({ type: 'identify', payload: { profileId: 'u1', properties: { __os: 'iOS', tier: 'gold' } } }, ctx).build('d'.repeat(32), null);
  assert.equal(op.kind, 'identify');
  assert.deepEqual(op.kind === 'identify' && op.properties, { tier: 'gold' });
});
