// The API's JetStream publish (internal/bus/acked-publish.ts) against the real NATS server:
// an ack only once the stream stored the message, JetStream's duplicate window by message id,
// a fast refusal when no stream listens, a refusal the stream sends, and a timeout when
// something listens but never answers. Bus.publish retries "no responders" (no stream leader
// during an election) until its deadline.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { AckedPublisher, NoRespondersError, PublishRefusedError, PublishTimeoutError } from '../internal/bus/acked-publish';
import { ensureServices, NATS_URL } from './support/harness';

const ns = `ackpub${randomUUID().slice(0, 8)}`;
let nc: NatsConnection;
let jsm: JetStreamManager;
let pub: AckedPublisher;
const data = (s: string) => new TextEncoder().encode(s);

before(async () => {
  ensureServices();
  nc = await connect({ servers: NATS_URL });
  jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: ns, subjects: [`${ns}.s.>`], duplicate_window: 60e9, max_msg_size: 1024 });
  pub = new AckedPublisher(nc);
});

after(async () => {
  pub?.close();
  await jsm?.streams.delete(ns).catch(() => {});
  await nc?.close();
});

test('an ack carries the stream and sequence once the message is stored; the stream holds it', async () => {
  const a = await pub.publish(`${ns}.s.1`, data('{"n":1}'), randomUUID(), 2000);
  const b = await pub.publish(`${ns}.s.2`, data('{"n":2}'), randomUUID(), 2000);
  assert.equal(a.stream, ns);
  assert.equal(a.duplicate, false);
  assert.equal(b.seq, a.seq + 1);
  const stored = await jsm.streams.getMessage(ns, { seq: b.seq });
  assert.equal(stored?.subject, `${ns}.s.2`);
  assert.equal(stored?.string(), '{"n":2}');
  assert.equal(stored?.header.get('Nats-Msg-Id').length > 0, true);
});

test('many publishes in flight at once each get their own ack (no answer goes to another)', async () => {
  const acks = await Promise.all(Array.from({ length: 200 }, (_, i) => pub.publish(`${ns}.s.${i % 7}`, data(`{"i":${i}}`), randomUUID(), 5000)));
  const seqs = acks.map((a) => a.seq);
  assert.equal(new Set(seqs).size, 200);
  for (const [i, a] of acks.entries()) assert.equal((await jsm.streams.getMessage(ns, { seq: a.seq }))?.string(), `{"i":${i}}`);
});

test('the same message id again is acked as a duplicate of the stored message, not stored twice', async () => {
  const id = randomUUID();
  const first = await pub.publish(`${ns}.s.1`, data('{"d":1}'), id, 2000);
  const again = await pub.publish(`${ns}.s.1`, data('{"d":1}'), id, 2000);
  assert.equal(again.duplicate, true);
  assert.equal(again.seq, first.seq);
  const info = await jsm.streams.info(ns);
  assert.equal(info.state.last_seq, first.seq);
});

test('no stream for the subject: NoRespondersError at once, not after the timeout', async () => {
  const t0 = Date.now();
  await assert.rejects(pub.publish(`${ns}.nostream.1`, data('{}'), randomUUID(), 5000), NoRespondersError);
  assert.ok(Date.now() - t0 < 1000, `took ${Date.now() - t0} ms`);
});

test('a message the stream refuses (over its max_msg_size) is rejected with the stream\'s reason', async () => {
  await assert.rejects(pub.publish(`${ns}.s.1`, data('x'.repeat(2048)), randomUUID(), 2000), (err: unknown) => err instanceof PublishRefusedError && /size|large/i.test(err.message));
});

test('something listens but never answers: PublishTimeoutError after about the timeout', async () => {
  const silent = nc.subscribe(`${ns}.silent.>`);
  try {
    const t0 = Date.now();
    await assert.rejects(pub.publish(`${ns}.silent.1`, data('{}'), randomUUID(), 150), PublishTimeoutError);
    const took = Date.now() - t0;
    assert.ok(took >= 150 && took < 1000, `took ${took} ms`);
  } finally {
    silent.unsubscribe();
  }
});

test('a closed publisher refuses what was waiting', async () => {
  const other = new AckedPublisher(nc);
  const silent = nc.subscribe(`${ns}.silent2.>`);
  const waiting = other.publish(`${ns}.silent2.1`, data('{}'), randomUUID(), 5000);
  other.close();
  await assert.rejects(waiting, /closed/);
  silent.unsubscribe();
});
