// The stream's replicas on the shared single nats-server: created with the configured count,
// kept on restart, other limits follow the config while an operator's own edits survive,
// and a count a single server cannot hold is refused at start with the variable named (the
// stream left as it was). The R1 -> R3 raise and "never lowered" on a real cluster are in
// test/faults-nats-cluster.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Bus, StreamReplicasError } from '../internal/bus/bus';
import { start } from '../internal/app/runtime';
import { NATS_URL, TestEnv, dropStream, uniqueName } from './support/harness';

async function withBus<T>(namespace: string, o: { replicas?: number; maxAgeHours?: number }, fn: (bus: Bus) => Promise<T>): Promise<T> {
  const bus = await Bus.connect({ url: NATS_URL, namespace, shards: 2, maxAgeHours: o.maxAgeHours ?? 24, streamReplicas: o.replicas });
  try {
    return await fn(bus);
  } finally {
    await bus.drainAndClose();
  }
}

test('single server: R1 by default, kept on restart; the configured limits follow the config, an operator\'s other edits survive', async () => {
  const ns = uniqueName('busrep').replace(/_/g, '-');
  try {
    assert.deepEqual(await withBus(ns, {}, (b) => b.ensureStream()), { action: 'create', replicas: 1 });
    // The operator caps the stream by hand (nats stream edit --max-msgs).
    await withBus(ns, {}, async (b) => {
      await b.jsm.streams.update(b.streamName, { max_msgs: 123_456 });
      await b.publish(b.subjectFor('p', 0), new TextEncoder().encode('{"v":1,"ops":[]}'), 'm1');
    });
    const plan = await withBus(ns, { maxAgeHours: 48 }, (b) => b.ensureStream());
    assert.deepEqual(plan, { action: 'keep', replicas: 1 });
    const info = await withBus(ns, {}, (b) => b.jsm.streams.info(b.streamName));
    assert.equal(info.config.num_replicas, 1);
    assert.equal(info.config.max_age, 48 * 3600 * 1e9, 'max age follows STREAM_MAX_AGE_HOURS');
    assert.equal(info.config.max_msgs, 123_456, 'the operator\'s own limit is kept');
    assert.equal(info.state.messages, 1, 'messages survive the update');
  } finally {
    await dropStream(ns);
  }
});

test('single server: replicas it cannot hold are refused with TIDEMARK_STREAM_REPLICAS named, and an existing stream is left unchanged', async () => {
  const ns = uniqueName('busrep').replace(/_/g, '-');
  try {
    await assert.rejects(withBus(ns, { replicas: 3 }, (b) => b.ensureStream()), (err: Error) => {
      assert.ok(err instanceof StreamReplicasError, err.message);
      assert.match(err.message, /TIDEMARK_STREAM_REPLICAS/);
      assert.match(err.message, /3 replicas/);
      return true;
    });
    assert.equal(await withBus(ns, {}, (b) => b.streamReplicas()), null, 'no stream was created');

    await withBus(ns, {}, async (b) => {
      await b.ensureStream();
      await b.publish(b.subjectFor('p', 1), new TextEncoder().encode('{"v":1,"ops":[]}'), 'm1');
    });
    await assert.rejects(withBus(ns, { replicas: 3 }, (b) => b.ensureStream()), StreamReplicasError);
    const info = await withBus(ns, {}, (b) => b.jsm.streams.info(b.streamName));
    assert.equal(info.config.num_replicas, 1);
    assert.equal(info.state.messages, 1);
  } finally {
    await dropStream(ns);
  }
});

test('shard consumers inherit the stream\'s replicas (num_replicas 0) and keep their state on disk', async () => {
  const ns = uniqueName('busrep').replace(/_/g, '-');
  try {
    await withBus(ns, {}, async (b) => {
      await b.ensureStream();
      await b.openShard(1, 1);
      const ci = await b.jsm.consumers.info(b.streamName, b.consumerName(1));
      assert.equal(ci.config.num_replicas, 0, '0 = as many as the stream, also after the stream is raised');
      assert.ok(!ci.config.mem_storage, 'consumer state on disk');
    });
  } finally {
    await dropStream(ns);
  }
});

test('a process asked for replicas the server cannot hold does not start, and says why', async () => {
  const env = await new TestEnv('busrep').setup();
  try {
    await assert.rejects(start(env.config({ TIDEMARK_STREAM_REPLICAS: '3' }), { api: true, worker: false }), /TIDEMARK_STREAM_REPLICAS.*non-clustered/);
  } finally {
    await env.teardown();
  }
});
