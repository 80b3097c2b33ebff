// The batch record: built empty, the device's session over the cache, finished into rows.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EventRecord } from '../model/event';
import type { SessionState } from '../sessionize/session';
import { currentSession, deviceKey, finishBatch, newOpBatch } from './op-batch';

const NOW = Date.parse('2024-05-02T12:00:00.000Z');
const noEnrich = { enrich: (event: EventRecord) => ({ ok: true as const, event }) };
const session = (id: string) => ({ id, projectId: 'p', deviceId: 'd' }) as SessionState;

test('newOpBatch: empty collections, wall time and session options from the deps, the loaded states', () => {
  const states = new Map([['k', session('s1')]]);
  const unstorable = () => null;
  const b = newOpBatch({ enricher: noEnrich, cache: new Map(), timeoutMs: 1800_000, unstorable }, NOW, states);
  assert.equal(b.now, NOW);
  assert.equal(b.timeoutMs, 1800_000);
  assert.equal(b.unstorable, unstorable);
  assert.equal(b.states, states);
  assert.equal(b.sessionOptions.nowMs, NOW);
  assert.equal(b.sessionOptions.timeoutMs, 1800_000);
  assert.notEqual(b.sessionOptions.newId(), b.sessionOptions.newId(), 'a fresh session id each time');
  for (const c of [b.events, b.viewDurations, b.profileOps, b.drops, b.setAside, b.held]) assert.deepEqual(c, []);
  for (const c of [b.byId, b.sessions, b.opened, b.reopened]) assert.equal(c.size, 0);
  assert.equal(newOpBatch({ enricher: noEnrich, cache: new Map(), timeoutMs: 1 }, NOW).states.size, 0, 'no states by default');
});

test('currentSession: changed in this batch first, else cached, else none', () => {
  const cache = new Map([['a', session('cached-a')], ['b', session('cached-b')]]);
  const b = newOpBatch({ enricher: noEnrich, cache, timeoutMs: 1 }, NOW, new Map([['a', session('batch-a')]]));
  assert.equal(currentSession(b, 'a')!.id, 'batch-a');
  assert.equal(currentSession(b, 'b')!.id, 'cached-b');
  assert.equal(currentSession(b, 'c'), null);
});

test('finishBatch: the collections as rows (sessions, reopened ids and end checks as arrays, in insertion order)', () => {
  const b = newOpBatch({ enricher: noEnrich, cache: new Map(), timeoutMs: 1 }, NOW);
  b.sessions.set('s2', session('s2')).set('s1', session('s1'));
  b.opened.set('s1', session('s1'));
  b.reopened.add('s0');
  b.drops.push('invalid_name');
  const out = finishBatch(b);
  assert.deepEqual(out.sessions.map((s) => s.id), ['s2', 's1']);
  assert.deepEqual(out.opened.map((s) => s.id), ['s1']);
  assert.deepEqual(out.reopenedSessionIds, ['s0']);
  assert.equal(out.events, b.events);
  assert.equal(out.viewDurations, b.viewDurations);
  assert.equal(out.profileOps, b.profileOps);
  assert.equal(out.states, b.states);
  assert.equal(out.setAside, b.setAside);
  assert.deepEqual(out.drops, ['invalid_name']);
});

test('deviceKey: project and device, unambiguous', () => {
  assert.equal(deviceKey('p', 'd'), 'p\u0000d');
  assert.notEqual(deviceKey('p1', 'd'), deviceKey('p', '1d'));
});
