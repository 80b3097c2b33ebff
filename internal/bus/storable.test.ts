// The storable rules without a server; byte counts by hand (é is 2 bytes of UTF-8, 中 3, 😀 4).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { blankEventRecord } from '../enrich/record';
import type { QueuedTrack } from '../model/event';
import { eventRecordProblem, propertiesProblem, queuedOpProblem } from './storable';

const track = (over: Partial<QueuedTrack> = {}): QueuedTrack => ({
  kind: 'track', id: '0190f5c2-0000-7000-8000-000000000000', projectId: 'p', deviceId: 'd'.repeat(32), receivedAt: '2026-01-01T00:00:00.000Z',
  name: 'page', profileId: 'd'.repeat(32), createdAt: '2026-01-01T00:00:00.000Z', properties: {}, groups: [],
  url: null, title: null, referrer: null, ip: null, userAgent: null, ...over,
});

describe('queuedOpProblem', () => {
  it('accepts an ordinary event', () => {
    assert.equal(queuedOpProblem(track({ url: 'https://a.example/x?utm_source=news&utm_medium=mail', title: 'Home', referrer: 'https://www.google.com/', properties: { plan: 'pro', n: 3, nested: { a: [1, 'b'] } } })), null);
  });

  it('event names: 512 bytes of UTF-8 at most', () => {
    assert.equal(queuedOpProblem(track({ name: '中'.repeat(170) })), null); // 510 bytes
    assert.deepEqual(queuedOpProblem(track({ name: '中'.repeat(171) }))?.path, ['payload', 'name']); // 513
    assert.equal(queuedOpProblem(track({ name: '😀'.repeat(128) })), null); // 512
  });

  it('the page URL: its stored path is percent-encoded; utm values are checked after decoding', () => {
    // 113 CJK characters in a path become 113 x 9 = 1017 bytes of %XX: accepted; 114 = 1026: refused.
    assert.equal(queuedOpProblem(track({ url: `https://a.example/${'中'.repeat(113)}` })), null);
    const p = queuedOpProblem(track({ url: `https://a.example/${'中'.repeat(114)}` }));
    assert.deepEqual(p?.path, ['payload', 'properties', '__path']);
    assert.match(p!.message, /1027 bytes/); // '/' + 1026
    // A bare path is kept as sent: 512 x 2 = 1024 bytes is the limit.
    assert.equal(queuedOpProblem(track({ url: `/${'é'.repeat(511)}?q=1` })), null); // 1 + 1022
    assert.match(queuedOpProblem(track({ url: `/${'é'.repeat(512)}` }))!.message, /1025 bytes/);
    assert.match(queuedOpProblem(track({ url: 'https://a.example/?utm_term=%00' }))!.message, /utm_term .*NUL/);
    assert.match(queuedOpProblem(track({ url: 'https://a.example/?ref=a%00' }))!.message, /ref .*NUL/);
    assert.equal(queuedOpProblem(track({ url: 'https://a.example/?other=%00' })), null, 'a parameter the worker does not decode is not stored');
    const utm = `https://a.example/?utm_content=${'%C3%A9'.repeat(513)}`; // decodes to 1026 bytes
    assert.match(queuedOpProblem(track({ url: utm }))!.message, /utm_content .*1026 bytes/);
  });

  it('title, referrer, group ids, property keys: 1024 bytes; other op kinds', () => {
    assert.equal(queuedOpProblem(track({ title: 'é'.repeat(512) })), null);
    assert.deepEqual(queuedOpProblem(track({ title: 'é'.repeat(513) }))?.path, ['payload', 'properties', '__title']);
    assert.deepEqual(queuedOpProblem(track({ referrer: 'r'.repeat(1025) }))?.path, ['payload', 'properties', '__referrer']);
    assert.deepEqual(queuedOpProblem(track({ properties: { ['k'.repeat(1025)]: 1 } }))?.path, ['payload', 'properties', 'k'.repeat(1025)]);
    assert.equal(queuedOpProblem(track({ properties: { ['k'.repeat(1024)]: 1 } })), null);
    assert.deepEqual(queuedOpProblem(track({ title: 'é'.repeat(513) }), [])?.path, ['properties', '__title'], 'POST /event has no payload level');
    const base = { id: 'x', projectId: 'p', deviceId: 'd', receivedAt: '' };
    assert.deepEqual(queuedOpProblem({ ...base, kind: 'identify', profileId: 'u', firstName: null, lastName: null, email: null, properties: { score: '1'.repeat(1001) } })?.path, ['payload', 'properties', 'score']);
    assert.equal(queuedOpProblem({ ...base, kind: 'identify', profileId: 'u', firstName: null, lastName: null, email: null, properties: { id: 'a'.repeat(5000), score: '1'.repeat(1000) } }), null, 'long text that is no number is fine');
    assert.deepEqual(queuedOpProblem({ ...base, kind: 'increment', profileId: 'u', property: 'n', delta: Infinity })?.path, ['payload', 'value']);
    assert.deepEqual(queuedOpProblem({ ...base, kind: 'group', groupId: 'g', type: 't', name: 'n', properties: { deep: [{ x: `${'1'.repeat(998)}e99` }] } })?.path, ['payload', 'properties', 'deep', '0', 'x']);
    assert.equal(queuedOpProblem({ ...base, kind: 'assign_group', profileId: 'u', groupIds: ['a', 'b'] }), null);
  });

  it('device overrides (__os ... __model) are held to the same limit', () => {
    assert.deepEqual(queuedOpProblem(track({ deviceOverrides: { os_version: 'o'.repeat(1025) } }))?.path, ['payload', 'properties', '__osVersion']);
    assert.equal(queuedOpProblem(track({ deviceOverrides: { os: 'iOS', model: 'iPhone' } })), null);
  });
});

describe('propertiesProblem', () => {
  it('names the first fault with its path; deep nesting does not grow the stack', () => {
    let deep: unknown = 'ok';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    assert.equal(propertiesProblem({ deep }, ['properties']), null);
    assert.deepEqual(propertiesProblem({ a: { b: ['x', 'y\u0000'] } }, ['p'])?.path, ['p', 'a', 'b', '1']);
    assert.match(propertiesProblem({ a: '\ud800' }, [])!.message, /lone surrogates/);
  });
});

describe('eventRecordProblem', () => {
  const record = (over = {}) => blankEventRecord({ id: 'x', projectId: 'p', name: 'page', deviceId: 'd', profileId: 'd', createdAt: new Date(0), ...over });
  it('checks every text column that may become an index key, after enrichment', () => {
    assert.equal(eventRecordProblem(record({ path: '/a', utm_source: 'news', browser_version: '124.0' })), null);
    assert.deepEqual(eventRecordProblem(record({ utm_source: 'a\u0000b' }))?.path, ['utm_source']);
    assert.deepEqual(eventRecordProblem(record({ model: 'm'.repeat(1025) }))?.path, ['model']);
    assert.deepEqual(eventRecordProblem(record({ referrer_name: '\udc00' }))?.path, ['referrer_name']);
    assert.deepEqual(eventRecordProblem(record({ latitude: NaN }))?.path, ['latitude']);
    assert.deepEqual(eventRecordProblem(record({ createdAt: new Date(NaN) }))?.path, ['createdAt']);
    assert.deepEqual(eventRecordProblem(record({ properties: { v: '9'.repeat(1001) } }))?.path, ['properties', 'v']);
  });
});
