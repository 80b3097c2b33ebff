// The shard count is the stream's (internal/bus/bus.ts, planShards), on the real nats-server:
// recorded when the stream is created; a process without TIDEMARK_SHARDS takes the recorded
// count, or 16 from a stream made before counts were recorded; asking for another count is
// refused while any message waits, and allowed (and recorded) once the stream is empty of
// unprocessed messages. The last test runs a whole Tidemark without TIDEMARK_SHARDS on a
// stream of 8 shards: its API publishes to all 8 and its worker stores every event.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { Bus, ShardCountError, UNRECORDED_SHARDS } from '../internal/bus/bus';
import { DEFAULT_SHARDS, loadConfig } from '../internal/config/config';
import { start } from '../internal/app/runtime';
import { NATS_URL, TestEnv, dropStream, post, uniqueName, waitFor } from './support/harness';
import { UAS } from './support/sessions-traffic';

async function withBus<T>(namespace: string, shards: number, explicit: boolean, fn: (bus: Bus) => Promise<T>): Promise<T> {
  const bus = await Bus.connect({ url: NATS_URL, namespace, shards, shardsExplicit: explicit, maxAgeHours: 24 });
  try {
    return await fn(bus);
  } finally {
    await bus.drainAndClose();
  }
}

async function description(namespace: string): Promise<string | undefined> {
  const nc = await connect({ servers: NATS_URL });
  try {
    return (await (await jetstreamManager(nc)).streams.info(`${namespace}_events`)).config.description;
  } finally {
    await nc.close();
  }
}

const ns = () => uniqueName('bussh').replace(/_/g, '-');
const body = new TextEncoder().encode('{"v":1,"ops":[]}');

test('a new stream records its count; a process without TIDEMARK_SHARDS takes the recorded one', async () => {
  const a = ns();
  const b = ns();
  try {
    // Unset: the default count, recorded.
    await withBus(a, DEFAULT_SHARDS, false, async (bus) => {
      await bus.ensureStream();
      assert.deepEqual(bus.shardPlan, { action: 'create', shards: DEFAULT_SHARDS });
      assert.equal(bus.shards, DEFAULT_SHARDS);
    });
    assert.match((await description(a)) ?? '', new RegExp(`\\bshards=${DEFAULT_SHARDS}\\b`));
    // Made with 8; a later process without the variable (asking the default) keeps 8.
    await withBus(b, 8, true, (bus) => bus.ensureStream());
    await withBus(b, DEFAULT_SHARDS, false, async (bus) => {
      await bus.ensureStream();
      assert.deepEqual(bus.shardPlan, { action: 'keep', shards: 8 });
      assert.equal(bus.shards, 8);
    });
  } finally {
    await dropStream(a);
    await dropStream(b);
  }
});

test('a stream made before counts were recorded is taken as 16 shards (the old default) and recorded so', async () => {
  const a = ns();
  try {
    const nc = await connect({ servers: NATS_URL });
    await (await jetstreamManager(nc)).streams.add({
      name: `${a}_events`, subjects: [`${a}.events.>`], retention: RetentionPolicy.Limits, storage: StorageType.File,
    });
    await nc.close();
    await withBus(a, DEFAULT_SHARDS, false, async (bus) => {
      await bus.ensureStream();
      assert.deepEqual(bus.shardPlan, { action: 'record', shards: UNRECORDED_SHARDS });
      assert.equal(bus.shards, 16);
    });
    assert.match((await description(a)) ?? '', /\bshards=16\b/);
  } finally {
    await dropStream(a);
  }
});

test('another count is refused while a message waits (unread, then unacknowledged), and taken once the stream is processed', async () => {
  const a = ns();
  try {
    await withBus(a, 2, true, async (bus) => {
      await bus.ensureStream();
      await bus.publish(bus.subjectFor('p', 1), body, 'm1');
    });
    // No worker has read the stream yet.
    await assert.rejects(withBus(a, 4, true, (bus) => bus.ensureStream()), (err: Error) => {
      assert.ok(err instanceof ShardCountError, err.message);
      assert.match(err.message, /has 2 shards and 2 shards that no worker has read yet; TIDEMARK_SHARDS=4/);
      return true;
    });
    assert.match((await description(a)) ?? '', /\bshards=2\b/, 'the stream keeps its count');
    await withBus(a, 2, true, async (bus) => {
      const c0 = await bus.openShard(0, 1);
      const c1 = await bus.openShard(1, 1);
      const m = await c1.next({ expires: 5000 });
      assert.ok(m, 'the message is delivered');
      // Delivered, not acknowledged: still waiting.
      await assert.rejects(withBus(a, 4, true, (other) => other.ensureStream()), /1 messages not yet processed/);
      await m.ackAck();
      assert.equal(await c0.next({ expires: 1000 }), null);
    });
    await withBus(a, 4, true, async (bus) => {
      await bus.ensureStream();
      assert.deepEqual(bus.shardPlan, { action: 'change', from: 2, shards: 4 });
      assert.equal(bus.shards, 4);
    });
    assert.match((await description(a)) ?? '', /\bshards=4\b/);
  } finally {
    await dropStream(a);
  }
});

test('Tidemark without TIDEMARK_SHARDS on a stream of 8 shards publishes to all 8 and stores every event; TIDEMARK_SHARDS=4 there does not start while events wait', async () => {
  const env = await new TestEnv('bussh').setup();
  try {
    await withBus(env.namespace, 8, true, (bus) => bus.ensureStream());
    const vars: Record<string, string> = { ...env.env(), METRICS_PORT: '0', LOG_LEVEL: 'silent' };
    delete vars.TIDEMARK_SHARDS;
    const cfg = loadConfig(vars);
    assert.equal(cfg.shardsExplicit, false);
    const project = await env.project();
    const creds = await env.client(project, 'write');
    const app = await start(cfg, { api: true, worker: false });
    const url = `http://127.0.0.1:${app.port}`;
    try {
      for (let i = 0; i < 40; i++) {
        const r = await post(`${url}/track`, { type: 'track', payload: { name: 'screen_view', properties: { __path: `/d${i}` } } }, creds, { ip: `10.9.0.${i + 1}`, userAgent: UAS.chrome.ua });
        assert.equal(r.status, 202);
      }
    } finally {
      await app.drain();
    }
    const shardsUsed = await withBus(env.namespace, 8, true, async (bus) => {
      const info = await bus.jsm.streams.info(bus.streamName, { subjects_filter: '>' });
      return new Set(Object.keys(info.state.subjects ?? {}).map((s) => Number(s.split('.').pop())));
    });
    assert.ok([...shardsUsed].some((s) => s >= 4), `subjects of shards ${[...shardsUsed].join(',')}: the API mapped devices over 8 shards`);
    // Those events wait: a process asking for 4 shards does not start.
    await assert.rejects(start(env.config({ TIDEMARK_SHARDS: '4' }), { api: false, worker: true }), /TIDEMARK_SHARDS=4 would leave them/);
    // A worker without the variable takes 8 and stores all 40.
    const worker = await start(cfg, { api: false, worker: true });
    try {
      await waitFor(async () => (await env.db.query<{ n: number }>("SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name = 'screen_view'", [project])).rows[0]!.n === 40, { timeoutMs: 20_000, what: 'all 40 events stored' });
    } finally {
      await worker.drain();
    }
  } finally {
    await env.teardown();
  }
});
