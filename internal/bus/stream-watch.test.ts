import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger } from '../obs/log';
import { StreamWatch } from './stream-watch';

/** A stream that can be removed, fail to answer, and be created again, on a hand-moved clock. */
function fixture() {
  const state = { exists: true, failing: false, created: 0, now: 1_000_000 };
  const bus = {
    streamName: 'tm_events',
    streamInstance: async () => {
      if (state.failing) throw new Error('timeout');
      return state.exists ? { created: 'c', lastSeq: 0 } : null;
    },
    ensureStream: async () => {
      state.exists = true;
      state.created++;
      return { action: 'create' as const, replicas: 1 };
    },
  };
  let recreated = 0;
  const watch = new StreamWatch({ bus, log: createLogger('silent'), recreateAfterMs: 5000, unansweredAfterMs: 3000, now: () => state.now, onRecreated: () => recreated++ });
  return { state, watch, recreated: () => recreated };
}

test('a present stream is no problem', async () => {
  const { watch } = fixture();
  await watch.check();
  assert.equal(watch.problem(), null);
});

test('a missing stream is a problem at once, and is created again only after the grace period', async () => {
  const f = fixture();
  f.state.exists = false;
  await f.watch.check();
  assert.match(f.watch.problem()!, /tm_events is missing/);
  f.state.now += 4000;
  await f.watch.check();
  assert.equal(f.state.created, 0, 'not created again within the grace period');
  assert.match(f.watch.problem()!, /missing/);
  f.state.now += 1000;
  await f.watch.check();
  assert.equal(f.state.created, 1);
  assert.equal(f.recreated(), 1);
  assert.equal(f.watch.problem(), null);
});

test('a stream that comes back by itself within the grace period is not created again', async () => {
  const f = fixture();
  f.state.exists = false;
  await f.watch.check();
  f.state.exists = true;
  f.state.now += 2000;
  await f.watch.check();
  assert.equal(f.state.created, 0);
  assert.equal(f.watch.problem(), null);
});

test('JetStream failing to describe the stream counts only once it lasts', async () => {
  const f = fixture();
  f.state.failing = true;
  await f.watch.check();
  assert.equal(f.watch.problem(), null, 'one failure (an election) is not yet unready');
  f.state.now += 3000;
  await f.watch.check();
  assert.match(f.watch.problem()!, /cannot be described by JetStream: timeout/);
  f.state.failing = false;
  await f.watch.check();
  assert.equal(f.watch.problem(), null);
});
