// A stream that is lost and created again numbers its messages from 1. The shards' committed
// positions belong to the old instance; a worker that kept them would ack and skip every new
// message at or below them (every 202 lost). These tests lose the stream three ways and
// check that every event answered 202 afterwards is stored, and that /readyz says when the
// stream is missing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { dropStream, get, NATS_URL, post, sleep, startApp, TestEnv, track, waitFor, type Credentials } from './support/harness';
import { PrivateEnv, PrivateNats, stopAllPrivate } from './support/private-services';
import type { Pool } from '../internal/store/db';

/** Sends `n` events named `name` (property i), one request each, as fast as they are answered; returns the statuses. */
async function send(url: string, creds: Credentials, name: string, from: number, n: number): Promise<{ i: number; status: number }[]> {
  const out: { i: number; status: number }[] = [];
  for (let i = from; i < from + n; i++) {
    // One device per event spreads them over every shard.
    const r = await post(`${url}/track`, track(name, { i }), creds, { ip: `203.0.113.${(i % 250) + 1}` });
    out.push({ i, status: r.status });
  }
  return out;
}

async function storedOf(db: Pool, name: string): Promise<number[]> {
  const r = await db.query<{ i: number }>(`SELECT (properties->>'i')::int AS i FROM events WHERE name = $1 ORDER BY 1`, [name]);
  return r.rows.map((x) => x.i);
}

async function positions(db: Pool): Promise<{ shard: number; seq: number; created: string | null }[]> {
  const r = await db.query<{ shard: number; stream_seq: string; stream_created: string | null }>('SELECT shard, stream_seq, stream_created FROM shard_offsets ORDER BY shard');
  return r.rows.map((x) => ({ shard: x.shard, seq: Number(x.stream_seq), created: x.stream_created }));
}

test('stream deleted and the service restarted: 20 of 20 events answered 202 are stored (positions rebased, not skipped)', { timeout: 120_000 }, async () => {
  const env = await new TestEnv('streamid').setup();
  let app: Awaited<ReturnType<typeof startApp>> | null = null;
  try {
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write');
    app = await startApp(env);
    // Positions well above 20 on every shard.
    const before = await send(app.url, writer, 'before', 0, 120);
    assert.ok(before.every((r) => r.status === 202));
    await waitFor(async () => (await storedOf(env.db, 'before')).length === 120, { timeoutMs: 30_000, what: 'the first 120 events stored' });
    const old = await positions(env.db);
    assert.ok(old.every((p) => p.seq > 20 && p.created), `positions above 20 with their instance: ${JSON.stringify(old)}`);
    await app.drain();
    app = null;

    await dropStream(env.namespace); // the operator's mistake
    app = await startApp(env);
    const after = await send(app.url, writer, 'after', 0, 20);
    assert.deepEqual(after.map((r) => r.status), Array(20).fill(202));
    const stored = await waitFor(async () => {
      const s = await storedOf(env.db, 'after');
      return s.length === 20 ? s : null;
    }, { timeoutMs: 30_000, what: '20 events of the new stream stored' });
    assert.deepEqual(stored, Array.from({ length: 20 }, (_, i) => i));
    const now = await positions(env.db);
    for (const p of now) {
      const was = old.find((o) => o.shard === p.shard)!;
      assert.notEqual(p.created, was.created, `shard ${p.shard} counts in the new instance`);
      assert.ok(p.seq <= 20, `shard ${p.shard}'s position is in the new stream: ${p.seq}`);
    }
    assert.equal((await storedOf(env.db, 'before')).length, 120, 'nothing stored twice');
  } finally {
    await app?.drain();
    await env.teardown();
  }
});

test('stream deleted while running: /readyz 503 within 10 s, the stream is created again, and every 202 is stored', { timeout: 120_000 }, async () => {
  const env = await new TestEnv('streamrun').setup();
  let app: Awaited<ReturnType<typeof startApp>> | null = null;
  try {
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write');
    app = await startApp(env, { api: true, worker: true }, { INGEST_PUBLISH_TIMEOUT_MS: '500' });
    assert.equal((await send(app.url, writer, 'before', 0, 80)).filter((r) => r.status === 202).length, 80);
    await waitFor(async () => (await storedOf(env.db, 'before')).length === 80, { timeoutMs: 30_000, what: 'the first events stored' });
    assert.equal((await get(`${app.url}/readyz`, null)).status, 200);

    const nc = await connect({ servers: NATS_URL });
    await (await jetstreamManager(nc)).streams.delete(`${env.namespace}_events`);
    await nc.close();
    const deletedAt = Date.now();
    const unready = await waitFor(async () => {
      const r = await get(`${app!.url}/readyz`, null);
      return r.status === 503 ? r : null;
    }, { timeoutMs: 10_000, intervalMs: 200, what: '/readyz 503 with the stream missing' });
    assert.ok(Date.now() - deletedAt <= 10_000);
    assert.match(unready!.body.checks.stream, /missing/);

    // Send until the stream is back and 20 events were answered 202; a 503 is a refusal, never a loss.
    const answers: { i: number; status: number }[] = [];
    let i = 0;
    while (answers.filter((r) => r.status === 202).length < 20) {
      answers.push(...(await send(app.url, writer, 'after', i++, 1)));
      assert.ok(i < 2000, 'the stream came back');
    }
    assert.ok(answers.every((r) => r.status === 202 || r.status === 503), `only 202 or 503: ${JSON.stringify(answers.filter((r) => r.status !== 202 && r.status !== 503))}`);
    const accepted = answers.filter((r) => r.status === 202).map((r) => r.i);
    await waitFor(async () => {
      const s = new Set(await storedOf(env.db, 'after'));
      return accepted.every((x) => s.has(x));
    }, { timeoutMs: 30_000, what: 'every 202 after the stream came back stored' });
    await waitFor(async () => (await get(`${app!.url}/readyz`, null)).status === 200, { timeoutMs: 10_000, what: '/readyz 200 again' });
    const metrics = await (await fetch(`${app.url}/metrics`)).text();
    assert.match(metrics, /tidemark_stream_recreated_total 1\b/);
  } finally {
    await app?.drain();
    await env.teardown();
  }
});

test('a single NATS node back with an empty store: the running service recreates the stream and stores every 202', { timeout: 150_000 }, async () => {
  const nats = await PrivateNats.start();
  const env = new PrivateEnv('streamnats', { natsUrl: nats.url });
  let app: Awaited<ReturnType<typeof startApp>> | null = null;
  try {
    await env.setup();
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write');
    app = await startApp(env, { api: true, worker: true }, { INGEST_PUBLISH_TIMEOUT_MS: '500' });
    assert.equal((await send(app.url, writer, 'before', 0, 120)).filter((r) => r.status === 202).length, 120);
    await waitFor(async () => (await storedOf(env.db, 'before')).length === 120, { timeoutMs: 30_000, what: 'the first events stored' });

    await nats.kill();
    for (const f of readdirSync(nats.dir)) rmSync(path.join(nats.dir, f), { recursive: true, force: true });
    await nats.start();

    const answers: { i: number; status: number }[] = [];
    let i = 0;
    while (answers.filter((r) => r.status === 202).length < 20) {
      answers.push(...(await send(app.url, writer, 'after', i++, 1)));
      if (answers.at(-1)!.status !== 202) await sleep(50);
      assert.ok(i < 2000, 'ingest recovered');
    }
    assert.ok(answers.every((r) => r.status === 202 || r.status === 503), `only 202 or 503: ${JSON.stringify(answers.filter((r) => r.status !== 202 && r.status !== 503))}`);
    const accepted = answers.filter((r) => r.status === 202).map((r) => r.i);
    await waitFor(async () => {
      const s = new Set(await storedOf(env.db, 'after'));
      return accepted.every((x) => s.has(x));
    }, { timeoutMs: 45_000, what: 'every 202 on the new stream stored' });
  } finally {
    await app?.drain();
    await env.teardown();
    await stopAllPrivate();
  }
});
