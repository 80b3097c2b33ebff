// The floor of Tidemark's architecture (bench/floor.ts runs it beside `npm start`): the least
// a durable uWS -> JetStream -> PostgreSQL pipeline does, in a process of its own.
//   API: uWS reads and JSON-parses each POST body (400 if it is not JSON) and queues it; one
//        JetStream publish is in flight at a time, carrying every body queued (a JSON array);
//        its PubAck (the message is in the stream's file store) answers each of them 202.
//   Consumer: a durable pull consumer; up to 500 messages at a time, their events inserted in
//        one INSERT (one statement, one transaction, committed), then the last one acked
//        (AckPolicy.All acks the ones before it).
// Nothing else: no auth, validation, enrichment, sessions, rollups or retries.
//
//   npx tsx bench/floor-server.ts --port 12345 --db postgres://postgres@127.0.0.1:5432/floor_x --stream floor_x
// Creates its stream (file storage, 1 replica) and table; prints "listening <port>".
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import uWS, { type HttpResponse } from 'uWebSockets.js';
import { connect } from '@nats-io/transport-node';
import { AckPolicy, jetstream, jetstreamManager, type JsMsg, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import pg from 'pg';

const { values: o } = parseArgs({
  options: {
    port: { type: 'string' }, db: { type: 'string' }, stream: { type: 'string' },
    nats: { type: 'string', default: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' },
  },
});
// The package falls back to a slow pure-JS server when its binary does not load: refuse that.
if (!Object.keys(createRequire(import.meta.url).cache).some((k) => k.endsWith('.node'))) throw new Error('uWebSockets.js: no native binary loaded');

const stream = o.stream!;
const subject = `${stream}.events`;
const nc = await connect({ servers: o.nats! });
const jsm = await jetstreamManager(nc);
await jsm.streams.add({ name: stream, subjects: [subject], storage: StorageType.File, retention: RetentionPolicy.Limits, num_replicas: 1 });
await jsm.consumers.add(stream, { durable_name: 'floor', ack_policy: AckPolicy.All, max_ack_pending: 10_000, ack_wait: 60e9 });
const js = jetstream(nc);
const db = new pg.Client({ connectionString: o.db! });
await db.connect();
await db.query('CREATE TABLE IF NOT EXISTS floor_events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), properties jsonb)');

// ---- API ----
type Waiting = { res: HttpResponse; aborted: boolean };
let queued: { body: string; w: Waiting }[] = [];
let publishing = false;
const answer = (w: Waiting, status: string, body: string) => {
  if (!w.aborted) w.res.cork(() => w.res.writeStatus(status).writeHeader('Content-Type', 'application/json').end(body));
};
function publishQueued(): void {
  if (publishing || !queued.length) return;
  const batch = queued;
  queued = [];
  publishing = true;
  js.publish(subject, `[${batch.map((q) => q.body).join(',')}]`).then(
    () => { for (const q of batch) answer(q.w, '202 Accepted', '{}'); },
    () => { for (const q of batch) answer(q.w, '503 Service Unavailable', '{}'); },
  ).finally(() => {
    publishing = false;
    publishQueued();
  });
}
const app = uWS.App();
app.post('/*', (res) => {
  const w: Waiting = { res, aborted: false };
  res.onAborted(() => (w.aborted = true));
  let buf: Buffer | null = null;
  res.onData((chunk, isLast) => {
    const part = Buffer.from(chunk);
    buf = buf ? Buffer.concat([buf, part]) : Buffer.from(part); // a copy: uWS reuses the chunk's memory
    if (!isLast) return;
    const text = buf.toString('utf8');
    try {
      JSON.parse(text);
    } catch {
      return answer(w, '400 Bad Request', '{}');
    }
    queued.push({ body: text, w });
    publishQueued();
  });
});
await new Promise<void>((resolve, reject) => app.listen('127.0.0.1', Number(o.port), (s) => (s ? resolve() : reject(new Error(`cannot listen on ${o.port}`)))));

// ---- consumer ----
const pending: JsMsg[] = [];
let inserting = false;
async function insertPending(): Promise<void> {
  if (inserting || !pending.length) return;
  inserting = true;
  try {
    while (pending.length) {
      const msgs = pending.splice(0, 500);
      const names: string[] = [];
      const props: string[] = [];
      for (const m of msgs) {
        for (const e of m.json<{ payload?: { name?: string; properties?: unknown } }[]>()) {
          names.push(String(e.payload?.name ?? ''));
          props.push(JSON.stringify(e.payload?.properties ?? null));
        }
      }
      await db.query('INSERT INTO floor_events (name, properties) SELECT * FROM unnest($1::text[], $2::jsonb[])', [names, props]);
      msgs[msgs.length - 1]!.ack(); // after the commit; AckPolicy.All: acks every earlier one too
    }
  } catch (err) {
    console.error('floor insert failed', err);
    process.exit(1); // unacked: redelivered to the next run's consumer
  } finally {
    inserting = false;
  }
}
const consumer = await js.consumers.get(stream, 'floor');
await consumer.consume({ max_messages: 1000, callback: (m) => { pending.push(m); void insertPending(); } });
console.log(`listening ${o.port}`);
