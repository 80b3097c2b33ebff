import { test } from 'node:test';
import assert from 'node:assert/strict';
import { natsServers, planReplicas, planShards, recordedShards, shardOf, UNRECORDED_SHARDS } from './bus';

test('planReplicas: a new stream gets the replicas asked for', () => {
  assert.deepEqual(planReplicas(1, null), { action: 'create', replicas: 1 });
  assert.deepEqual(planReplicas(3, null), { action: 'create', replicas: 3 });
});

test('planReplicas: an existing stream is raised when more are asked for', () => {
  assert.deepEqual(planReplicas(3, 1), { action: 'raise', from: 1, replicas: 3 });
  assert.deepEqual(planReplicas(5, 3), { action: 'raise', from: 3, replicas: 5 });
});

test('planReplicas: never lowered; an operator\'s higher setting is kept', () => {
  assert.deepEqual(planReplicas(1, 3), { action: 'keep-higher', replicas: 3, wanted: 1 });
  assert.deepEqual(planReplicas(3, 5), { action: 'keep-higher', replicas: 5, wanted: 3 });
  assert.deepEqual(planReplicas(3, 3), { action: 'keep', replicas: 3 });
  assert.deepEqual(planReplicas(1, 1), { action: 'keep', replicas: 1 });
});

test('planReplicas: a stream reported with 0 replicas (the server default) holds 1', () => {
  assert.deepEqual(planReplicas(1, 0), { action: 'keep', replicas: 1 });
  assert.deepEqual(planReplicas(3, 0), { action: 'raise', from: 1, replicas: 3 });
});

test('natsServers: one URL or several comma-separated, spaces and empty entries ignored', () => {
  assert.deepEqual(natsServers('nats://127.0.0.1:4222'), ['nats://127.0.0.1:4222']);
  assert.deepEqual(natsServers('nats://a:4222, nats://b:4222 ,nats://c:4222,'), ['nats://a:4222', 'nats://b:4222', 'nats://c:4222']);
});

test('shardOf: stable and within range', () => {
  for (const id of ['a', 'device-1', 'ffffffffffffffff']) {
    const s = shardOf(id, 16);
    assert.ok(s >= 0 && s < 16);
    assert.equal(shardOf(id, 16), s);
  }
});

test('planShards: a new stream takes the count asked for (set or the default)', () => {
  assert.deepEqual(planShards(4, false, undefined), { action: 'create', shards: 4 });
  assert.deepEqual(planShards(16, true, undefined), { action: 'create', shards: 16 });
});

test('planShards: an existing stream keeps its recorded count unless another is set', () => {
  assert.deepEqual(planShards(4, false, 16), { action: 'keep', shards: 16 });
  assert.deepEqual(planShards(8, true, 8), { action: 'keep', shards: 8 });
  assert.deepEqual(planShards(4, true, 16), { action: 'change', from: 16, shards: 4 });
});

test('planShards: a stream without a recorded count is the old default unless a count is set', () => {
  assert.equal(UNRECORDED_SHARDS, 16);
  assert.deepEqual(planShards(4, false, null), { action: 'record', shards: 16 });
  assert.deepEqual(planShards(8, true, null), { action: 'record', shards: 8 });
});

test('recordedShards: read from the stream description; none without it', () => {
  assert.equal(recordedShards('Tidemark events; shards=4'), 4);
  assert.equal(recordedShards('Tidemark events; shards=16'), 16);
  assert.equal(recordedShards(undefined), null);
  assert.equal(recordedShards('an operator wrote this'), null);
  assert.equal(recordedShards('reshards=3'), null);
});
