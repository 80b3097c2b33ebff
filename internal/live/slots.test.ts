// LiveSlots alone: authenticated slots per thread and per project, the authenticating budget
// (displacing the longest-waiting socket, never one being checked), and, over random
// sequences of events, that no limit is ever exceeded and the counts stay exact.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { defaultMaxPerProject, LiveSlots } from './slots';

test('the per-project default is half the sockets, at least 1', () => {
  assert.equal(defaultMaxPerProject(20_000), 10_000);
  assert.equal(defaultMaxPerProject(201), 100);
  assert.equal(defaultMaxPerProject(1), 1);
  assert.throws(() => new LiveSlots({ maxSockets: 1, maxPerProject: 0, maxAuthenticating: 1 }), /maxPerProject/);
});

test('only authenticated sockets take slots; the project cap is answered before the server cap', () => {
  const slots = new LiveSlots<string>({ maxSockets: 3, maxPerProject: 2, maxAuthenticating: 10 });
  for (const s of ['a', 'b', 'c', 'd', 'e']) assert.deepEqual(slots.open(s, true), { refused: null, evicted: null });
  assert.equal(slots.authenticating, 5);
  assert.equal(slots.authenticated, 0);
  assert.equal(slots.admit('a', 'p'), null);
  assert.equal(slots.admit('b', 'p'), null);
  assert.equal(slots.admit('c', 'p'), 'project_full');
  assert.equal(slots.admit('d', 'q'), null);
  assert.equal(slots.admit('e', 'p'), 'project_full', 'both full: the project answer');
  assert.deepEqual([slots.authenticated, slots.authenticating, slots.ofProject('p'), slots.ofProject('q')], [3, 0, 2, 1]);
  assert.deepEqual(slots.open('f', false), { refused: 'server_full' }, 'full: refused before any check');
  slots.release('c'); // refused ones were forgotten already
  slots.release('a');
  assert.deepEqual([slots.authenticated, slots.ofProject('p')], [2, 1]);
  assert.deepEqual(slots.open('f', false), { refused: null, evicted: null });
  assert.throws(() => slots.open('f', true), /twice/);
  slots.credentials('f');
  assert.equal(slots.admit('f', 'p'), null);
  assert.equal(slots.ofProject('p'), 2);
  slots.release('zzz'); // unknown: ignored
});

test('the authenticating budget displaces the longest-waiting socket, and refuses when all are checking', () => {
  const slots = new LiveSlots<string>({ maxSockets: 100, maxPerProject: 50, maxAuthenticating: 3 });
  slots.open('w1', false);
  slots.open('c1', true);
  slots.open('w2', false);
  assert.deepEqual(slots.open('w3', false), { refused: null, evicted: 'w1' });
  slots.credentials('w2');
  assert.deepEqual(slots.open('c2', true), { refused: null, evicted: 'w3' });
  assert.equal(slots.authenticating, 3);
  assert.deepEqual(slots.open('w4', false), { refused: 'authenticating_full' });
  slots.release('w1'); // already forgotten when displaced
  assert.equal(slots.authenticating, 3);
  assert.equal(slots.admit('c1', 'p'), null);
  assert.deepEqual(slots.open('w4', false), { refused: null, evicted: null });
});

type Op =
  | { t: 'open'; creds: boolean }
  | { t: 'credentials'; pick: number }
  | { t: 'admit'; pick: number; project: number }
  | { t: 'release'; pick: number };

test('random events: no limit is ever exceeded, checking sockets are never displaced, counts stay exact', () => {
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ t: fc.constant('open' as const), creds: fc.boolean() }),
    fc.record({ t: fc.constant('credentials' as const), pick: fc.nat() }),
    fc.record({ t: fc.constant('admit' as const), pick: fc.nat(), project: fc.nat({ max: 3 }) }),
    fc.record({ t: fc.constant('release' as const), pick: fc.nat() }),
  );
  fc.assert(fc.property(
    fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 4 }), fc.array(op, { maxLength: 200 }),
    (maxSockets, maxPerProject, maxAuthenticating, ops) => {
      const slots = new LiveSlots<number>({ maxSockets, maxPerProject, maxAuthenticating });
      // The model: each live socket's state, in opening order.
      const state = new Map<number, 'waiting' | 'checking' | string>();
      let next = 0;
      const pick = (n: number, want?: (s: string) => boolean) => {
        const ids = [...state.keys()].filter((id) => !want || want(state.get(id)!));
        return ids.length ? ids[n % ids.length]! : null;
      };
      for (const o of ops) {
        if (o.t === 'open') {
          const id = next++;
          const r = slots.open(id, o.creds);
          const authed = [...state.values()].filter((s) => s !== 'waiting' && s !== 'checking').length;
          const pending = [...state.values()].filter((s) => s === 'waiting' || s === 'checking').length;
          if (authed >= maxSockets) assert.deepEqual(r, { refused: 'server_full' });
          else if (pending >= maxAuthenticating) {
            const oldestWaiting = pick(0, (s) => s === 'waiting');
            if (oldestWaiting === null) assert.deepEqual(r, { refused: 'authenticating_full' });
            else {
              assert.deepEqual(r, { refused: null, evicted: [...state.keys()].find((k) => state.get(k) === 'waiting') });
              state.delete(oldestWaiting);
            }
          } else assert.deepEqual(r, { refused: null, evicted: null });
          if (!r.refused) state.set(id, o.creds ? 'checking' : 'waiting');
        } else if (o.t === 'credentials') {
          const id = pick(o.pick, (s) => s === 'waiting');
          if (id !== null) {
            slots.credentials(id);
            state.set(id, 'checking');
          }
        } else if (o.t === 'admit') {
          const id = pick(o.pick, (s) => s === 'waiting' || s === 'checking');
          if (id !== null) {
            const project = `p${o.project}`;
            const inProject = [...state.values()].filter((s) => s === project).length;
            const authed = [...state.values()].filter((s) => s !== 'waiting' && s !== 'checking').length;
            const r = slots.admit(id, project);
            assert.equal(r, inProject >= maxPerProject ? 'project_full' : authed >= maxSockets ? 'server_full' : null);
            if (r) state.delete(id);
            else state.set(id, project);
          }
        } else {
          const id = pick(o.pick);
          if (id !== null) {
            slots.release(id);
            state.delete(id);
          }
        }
        const values = [...state.values()];
        const pending = values.filter((s) => s === 'waiting' || s === 'checking').length;
        assert.equal(slots.authenticating, pending);
        assert.equal(slots.authenticated, values.length - pending);
        assert.ok(slots.authenticating <= maxAuthenticating && slots.authenticated <= maxSockets);
        for (let p = 0; p < 4; p++) {
          const n = values.filter((s) => s === `p${p}`).length;
          assert.equal(slots.ofProject(`p${p}`), n);
          assert.ok(n <= maxPerProject);
        }
      }
    },
  ), { numRuns: 300 });
});
