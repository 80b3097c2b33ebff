// The stream-replicas rule on a real three-node NATS cluster (test/support/nats-cluster.ts):
// an R1 stream is raised to R3 when TIDEMARK_STREAM_REPLICAS asks for it, without losing a
// message, and its shard consumers follow; a start with the default (1) never lowers it,
// nor an R3 an operator set by hand (`nats stream edit --replicas 3`); more replicas than
// the cluster has nodes are refused with the variable named, the stream left as it was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Bus, StreamReplicasError } from '../internal/bus/bus';
import { uniqueName, waitFor } from './support/harness';
import { NatsCluster } from './support/nats-cluster';
import { stopAllPrivate } from './support/private-services';

test('cluster: R1 raised to R3 on request (messages and consumers follow), never lowered, an operator\'s R3 kept, R5 on three nodes refused', { timeout: 120_000 }, async (t) => {
  const cluster = await NatsCluster.start(3);
  const buses: Bus[] = [];
  const bus = async (namespace: string, replicas?: number) => {
    const b = await Bus.connect({ url: cluster.url, namespace, shards: 2, maxAgeHours: 24, streamReplicas: replicas });
    buses.push(b);
    return b;
  };
  const payload = new TextEncoder().encode('{"v":1,"ops":[]}');
  try {
    // Raised by Tidemark: an R1 stream with messages and a shard consumer, then a start asking for 3.
    const ns = uniqueName('brc').replace(/_/g, '-');
    const first = await bus(ns);
    assert.deepEqual(await first.ensureStream(), { action: 'create', replicas: 1 });
    for (let i = 0; i < 20; i++) await first.publish(first.subjectFor('p', i % 2), payload, `m${i}`);
    await first.openShard(0, 1);
    assert.deepEqual(await (await bus(ns, 3)).ensureStream(), { action: 'raise', from: 1, replicas: 3 });
    const raised = await cluster.waitStreamHealthy(first.streamName, 3);
    assert.equal(raised.state.messages, 20, 'every message is on the raised stream');
    const consumer = await waitFor(async () => {
      const ci = await first.jsm.consumers.info(first.streamName, first.consumerName(0));
      return (ci.cluster?.replicas?.length ?? 0) === 2 ? ci : null;
    }, { timeoutMs: 30_000, what: 'the shard consumer to follow the stream to 3 replicas' });
    t.diagnostic(`stream leader ${raised.cluster?.leader}, consumer leader ${consumer?.cluster?.leader}`);

    // A start with the default must not shrink it.
    assert.deepEqual(await (await bus(ns)).ensureStream(), { action: 'keep-higher', replicas: 3, wanted: 1 });
    assert.equal((await cluster.streamInfo(first.streamName)).config.num_replicas, 3);

    // More than the cluster can place: refused, the stream stays R3 with its messages.
    await assert.rejects((await bus(ns, 5)).ensureStream(), (err: Error) => err instanceof StreamReplicasError && /TIDEMARK_STREAM_REPLICAS/.test(err.message));
    const after = await cluster.streamInfo(first.streamName);
    assert.equal(after.config.num_replicas, 3);
    assert.equal(after.state.messages, 20);

    // Raised by an operator (nats stream edit --replicas 3): kept by a start with the default.
    const ns2 = uniqueName('brc').replace(/_/g, '-');
    const second = await bus(ns2);
    await second.ensureStream();
    await second.jsm.streams.update(second.streamName, { num_replicas: 3 });
    await cluster.waitStreamHealthy(second.streamName, 3);
    assert.deepEqual(await (await bus(ns2)).ensureStream(), { action: 'keep-higher', replicas: 3, wanted: 1 });
    assert.equal((await cluster.streamInfo(second.streamName)).config.num_replicas, 3);
  } finally {
    await Promise.all(buses.map((b) => b.drainAndClose()));
    await stopAllPrivate();
  }
});
