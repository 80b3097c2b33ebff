// The only module that knows NATS. One stream per namespace; subjects
// <ns>.events.<projectId>.<shard>; one durable pull consumer per shard.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type Consumer,
} from '@nats-io/jetstream';
import { ServiceUnreachableError } from '../store/db';

export interface BusOptions {
  url: string;
  namespace: string;
  shards: number;
  /** Hours an unprocessed message is kept. */
  maxAgeHours: number;
  /** ms to wait for a JetStream ack before answering 503. */
  publishTimeoutMs?: number;
  name?: string;
}

export interface PublishAck {
  seq: number;
  duplicate: boolean;
}

export type BusMessage = JsMsg;

export class Bus {
  readonly streamName: string;
  readonly subjectPrefix: string;
  private constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
    readonly opts: BusOptions,
  ) {
    this.streamName = `${opts.namespace}_events`;
    this.subjectPrefix = `${opts.namespace}.events`;
  }

  static async connect(opts: BusOptions): Promise<Bus> {
    let nc: NatsConnection;
    try {
      nc = await connect({
        servers: opts.url,
        name: opts.name ?? 'tidemark',
        reconnect: true,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        timeout: 3000,
        // Without this, every publish captures an Error stack for async traces: about 6 us of
        // the API's main thread per /track request (measured A/B). Errors keep their message.
        noAsyncTraces: true,
      });
    } catch (err) {
      throw new ServiceUnreachableError('NATS', opts.url, err);
    }
    const jsm = await jetstreamManager(nc);
    return new Bus(nc, jetstream(nc, { timeout: opts.publishTimeoutMs ?? 5000 }), jsm, opts);
  }

  /** Largest message the server accepts. */
  get maxPayload(): number {
    return this.nc.info?.max_payload ?? 1024 * 1024;
  }

  subjectFor(projectId: string, shard: number): string {
    return `${this.subjectPrefix}.${projectId}.${shard}`;
  }

  shardFilter(shard: number): string {
    return `${this.subjectPrefix}.*.${shard}`;
  }

  /** Creates the stream, or updates its limits. */
  async ensureStream(): Promise<void> {
    const cfg = {
      name: this.streamName,
      subjects: [`${this.subjectPrefix}.>`],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      max_age: this.opts.maxAgeHours * 3600 * 1e9,
      duplicate_window: 120 * 1e9,
      num_replicas: 1,
    };
    try {
      await this.jsm.streams.info(this.streamName);
      await this.jsm.streams.update(this.streamName, cfg);
    } catch (err) {
      if (!/not found/i.test((err as Error).message)) throw err;
      await this.jsm.streams.add(cfg);
    }
  }

  async publish(subject: string, data: Uint8Array, msgId: string): Promise<PublishAck> {
    const ack = await this.js.publish(subject, data, { msgID: msgId, timeout: this.opts.publishTimeoutMs ?? 5000 });
    return { seq: ack.seq, duplicate: ack.duplicate };
  }

  consumerName(shard: number): string {
    return `${this.opts.namespace}-shard-${shard}`;
  }

  /**
   * (Re)creates the shard's durable consumer so that it delivers from `startSeq`, in
   * order. Called when a worker takes a shard: pending deliveries of a previous owner
   * are dropped with the old consumer, so nothing newer overtakes a redelivery.
   */
  async openShard(shard: number, startSeq: number): Promise<Consumer> {
    const name = this.consumerName(shard);
    await this.jsm.consumers.delete(this.streamName, name).catch(() => false);
    await this.jsm.consumers.add(this.streamName, {
      durable_name: name,
      filter_subject: this.shardFilter(shard),
      ack_policy: AckPolicy.Explicit,
      deliver_policy: startSeq > 1 ? DeliverPolicy.StartSequence : DeliverPolicy.All,
      ...(startSeq > 1 ? { opt_start_seq: startSeq } : {}),
      ack_wait: 60 * 1e9,
      max_ack_pending: 10_000,
      max_deliver: -1,
    });
    return this.js.consumers.get(this.streamName, name);
  }

  /** Messages of the shard not yet delivered (consumer lag). */
  async shardLag(shard: number): Promise<number> {
    const info = await this.jsm.consumers.info(this.streamName, this.consumerName(shard));
    return info.num_pending + info.num_ack_pending;
  }

  /** Publishes a message outside the ingest batcher (e.g. the session-end check). */
  async publishJson(subject: string, value: unknown, msgId: string): Promise<PublishAck> {
    return this.publish(subject, new TextEncoder().encode(JSON.stringify(value)), msgId);
  }

  async drainAndClose(): Promise<void> {
    if (this.nc.isClosed()) return;
    await this.nc.drain().catch(() => this.nc.close());
  }
}

/** FNV-1a over the device id: the shard a device's operations always go to. */
export function shardOf(deviceId: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < deviceId.length; i++) {
    h ^= deviceId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}
