// The only module that knows NATS. One stream per namespace; subjects
// <ns>.events.<projectId>.<shard>; one durable pull consumer per shard.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type Consumer,
  type StreamInfo,
} from '@nats-io/jetstream';
import { ServiceUnreachableError } from '../store/db';
import { AckedPublisher, NoRespondersError } from './acked-publish';

interface BusOptions {
  /** One NATS URL, or several comma-separated (members of one cluster). */
  url: string;
  namespace: string;
  /**
   * Replicas the stream is created with, and the least it is kept at: an existing stream
   * with fewer is raised, one with more (an operator's choice) is left as it is. Default 1.
   */
  streamReplicas?: number;
  /** TIDEMARK_SHARDS: what the stream is created with, or asked of an existing one (planShards). */
  shards: number;
  /** TIDEMARK_SHARDS was set (default true); unset, an existing stream's recorded count is taken. */
  shardsExplicit?: boolean;
  /** Hours an unprocessed message is kept. */
  maxAgeHours: number;
  /** ms to wait for a JetStream ack before answering 503. */
  publishTimeoutMs?: number;
  name?: string;
}

interface PublishAck {
  seq: number;
  duplicate: boolean;
}

export type BusMessage = JsMsg;

/** What ensureStream does with the stream's replicas. */
type ReplicaPlan =
  | { action: 'create'; replicas: number }
  | { action: 'keep'; replicas: number }
  | { action: 'raise'; from: number; replicas: number }
  | { action: 'keep-higher'; replicas: number; wanted: number };

/**
 * The replicas rule: a stream is created with `wanted`; an existing one is never lowered
 * (a restart with a smaller or default setting must not shrink what an operator raised),
 * and raised when `wanted` is higher.
 */
export function planReplicas(wanted: number, existing: number | null): ReplicaPlan {
  if (existing === null) return { action: 'create', replicas: wanted };
  const current = Math.max(1, existing); // JetStream reports 0 for "default", which is 1
  if (wanted > current) return { action: 'raise', from: current, replicas: wanted };
  if (wanted < current) return { action: 'keep-higher', replicas: current, wanted };
  return { action: 'keep', replicas: current };
}

/**
 * The shard count of a stream made before counts were recorded: every earlier version's
 * TIDEMARK_SHARDS default.
 */
export const UNRECORDED_SHARDS = 16;

/** What ensureStream does with the shard count. */
type ShardPlan =
  | { action: 'create'; shards: number }
  | { action: 'keep'; shards: number }
  /** A stream made before counts were recorded: its count is written down. */
  | { action: 'record'; shards: number }
  /** TIDEMARK_SHARDS asks for another count than the stream's: allowed once nothing is left unprocessed. */
  | { action: 'change'; from: number; shards: number };

/**
 * The shard count rule. A device's shard is its id's hash modulo the count, and each worker
 * consumes the shards below the count, so every process of an install must use the same
 * count, and a count changed while messages wait would leave them on shards no worker
 * reads. So the count is recorded in the stream (its description) when it is created; a
 * process without TIDEMARK_SHARDS takes the recorded one (16 for a stream made before
 * counts were recorded), one with another count asks for a change (refused by ensureStream
 * while the stream holds unprocessed messages).
 * `recorded`: undefined when there is no stream, null when it has no recorded count.
 */
export function planShards(asked: number, explicit: boolean, recorded: number | null | undefined): ShardPlan {
  if (recorded === undefined) return { action: 'create', shards: asked };
  if (recorded === null) return { action: 'record', shards: explicit ? asked : UNRECORDED_SHARDS };
  if (!explicit || asked === recorded) return { action: 'keep', shards: recorded };
  return { action: 'change', from: recorded, shards: asked };
}

const SHARDS_NOTE = /\bshards=(\d+)\b/;

/** The shard count recorded in a stream's description, or null. */
export function recordedShards(description: string | undefined): number | null {
  const m = SHARDS_NOTE.exec(description ?? '');
  return m ? Number(m[1]) : null;
}

/** TIDEMARK_SHARDS asks for another count than the stream's while messages wait. */
export class ShardCountError extends Error {
  constructor(readonly stream: string, readonly from: number, readonly shards: number, readonly waiting: string) {
    super(
      `stream ${stream} has ${from} shards and ${waiting}; TIDEMARK_SHARDS=${shards} would leave them on shards ` +
        `no worker reads. Unset TIDEMARK_SHARDS (or set it to ${from}) to keep the stream's count; to change it, stop ` +
        `every API process, let the workers empty the stream (consumer lag 0), then start everything with the new count ` +
        `(docs/operating.md, "Scaling").`,
    );
  }
}

/** NATS_URL as the server list connect() takes: comma-separated, blanks ignored. */
export function natsServers(url: string): string[] {
  return url.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
}

/** JetStream refused the replicas asked for (e.g. R3 on a single server, or too few cluster nodes). */
export class StreamReplicasError extends Error {
  constructor(readonly stream: string, readonly replicas: number, cause: unknown) {
    super(
      `JetStream cannot hold stream ${stream} with ${replicas} replicas (TIDEMARK_STREAM_REPLICAS): ` +
        `${cause instanceof Error ? cause.message : String(cause)}. ` +
        `A single nats-server holds 1 replica; a cluster holds at most as many as it has JetStream nodes.`,
    );
  }
}

export class Bus {
  readonly streamName: string;
  readonly subjectPrefix: string;
  private readonly publisher: AckedPublisher;
  /** What the last ensureStream() did with the shard count. */
  shardPlan: ShardPlan | null = null;
  private constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly jsm: JetStreamManager,
    readonly opts: BusOptions,
  ) {
    this.streamName = `${opts.namespace}_events`;
    this.subjectPrefix = `${opts.namespace}.events`;
    this.publisher = new AckedPublisher(nc);
  }

  /** The install's shard count: TIDEMARK_SHARDS until ensureStream() settles it (planShards). */
  get shards(): number {
    return this.shardPlan?.shards ?? this.opts.shards;
  }

  static async connect(opts: BusOptions): Promise<Bus> {
    let nc: NatsConnection;
    try {
      nc = await connect({
        servers: natsServers(opts.url),
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

  /**
   * Creates the stream, or updates its limits; its replicas follow planReplicas() (never
   * lowered), its shard count planShards() (`shards` afterwards). Throws StreamReplicasError
   * when JetStream cannot hold the replicas asked for, ShardCountError when TIDEMARK_SHARDS
   * asks to change the count while messages wait.
   */
  async ensureStream(): Promise<ReplicaPlan> {
    const wanted = this.opts.streamReplicas ?? 1;
    const base = {
      name: this.streamName,
      subjects: [`${this.subjectPrefix}.>`],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      max_age: this.opts.maxAgeHours * 3600 * 1e9,
      duplicate_window: 120 * 1e9,
    };
    // Two processes starting together: the one whose create loses the race updates instead.
    for (let attempt = 1; ; attempt++) {
      const existing = await this.streamInfo();
      const plan = planReplicas(wanted, existing?.config.num_replicas ?? null);
      // Once settled, the count stays this process's (a stream created again while running
      // records the count every process of the install uses, not this one's default).
      const shardPlan = this.shardPlan
        ? planShards(this.shardPlan.shards, true, existing ? recordedShards(existing.config.description) : undefined)
        : planShards(this.opts.shards, this.opts.shardsExplicit ?? true, existing ? recordedShards(existing.config.description) : undefined);
      if (shardPlan.action === 'change') {
        const waiting = await this.unprocessed(shardPlan.from, existing!);
        if (waiting) throw new ShardCountError(this.streamName, shardPlan.from, shardPlan.shards, waiting);
      }
      const cfg = { ...base, description: `Tidemark events; shards=${shardPlan.shards}` };
      // A single server refuses to create R3 but accepts raising a stream to it (and then
      // reports R3 while holding one copy): refused here the same way.
      if (plan.action === 'raise' && !existing?.cluster) {
        throw new StreamReplicasError(this.streamName, plan.replicas, new Error('replicas > 1 not supported in non-clustered mode'));
      }
      try {
        if (plan.action === 'create') await this.jsm.streams.add({ ...cfg, num_replicas: plan.replicas });
        else await this.jsm.streams.update(this.streamName, { ...cfg, num_replicas: plan.replicas });
        this.shardPlan = shardPlan;
        return plan;
      } catch (err) {
        const msg = (err as Error).message;
        if (plan.action === 'create' && attempt < 3 && /already in use/i.test(msg)) continue;
        if (/replicas|peers|placement|insufficient resources/i.test(msg)) throw new StreamReplicasError(this.streamName, plan.replicas, err);
        throw err;
      }
    }
  }

  /**
   * What of the stream's `shards` shards is not yet processed, as words ('' when nothing):
   * each shard's consumer's undelivered and unacknowledged messages; a shard without a
   * consumer counts as unprocessed when the stream holds any message (which shard a message
   * is on is not looked up).
   */
  private async unprocessed(shards: number, info: StreamInfo): Promise<string> {
    let pending = 0;
    let unread = 0;
    for (let shard = 0; shard < shards; shard++) {
      try {
        const c = await this.jsm.consumers.info(this.streamName, this.consumerName(shard));
        pending += c.num_pending + c.num_ack_pending;
      } catch (err) {
        if (!/not found/i.test((err as Error).message)) throw err;
        if (info.state.messages > 0) unread++;
      }
    }
    const parts = [];
    if (pending) parts.push(`${pending} messages not yet processed`);
    if (unread) parts.push(`${unread} shards that no worker has read yet`);
    return parts.join(' and ');
  }

  /**
   * The stream instance (its creation time, which a stream created again does not share, and
   * the last sequence it assigned), or null when there is no stream.
   */
  async streamInstance(): Promise<{ created: string; lastSeq: number } | null> {
    const info = await this.streamInfo();
    return info ? { created: info.created, lastSeq: info.state.last_seq } : null;
  }

  /** The stream's replicas, or null when it does not exist. */
  async streamReplicas(): Promise<number | null> {
    return (await this.streamInfo())?.config.num_replicas ?? null;
  }

  private async streamInfo(): Promise<StreamInfo | null> {
    try {
      return await this.jsm.streams.info(this.streamName);
    } catch (err) {
      if (/not found/i.test((err as Error).message)) return null;
      throw err;
    }
  }

  /**
   * Publishes and waits for the stream's ack, within publishTimeoutMs in all. While the
   * stream has no leader (an election after a node is lost: seconds on a cluster) the
   * server answers "no responders" at once; that is retried until the time is up, so the
   * caller gets a late ack instead of an early refusal. The msgID makes a publish that
   * landed twice one message (the stream's duplicate window).
   */
  async publish(subject: string, data: Uint8Array, msgId: string): Promise<PublishAck> {
    const deadline = Date.now() + (this.opts.publishTimeoutMs ?? 5000);
    for (let attempt = 0; ; attempt++) {
      try {
        const ack = await this.publisher.publish(subject, data, msgId, Math.max(1, deadline - Date.now()));
        return { seq: ack.seq, duplicate: ack.duplicate };
      } catch (err) {
        const pause = Math.min(250, 10 * 2 ** attempt);
        if (!isNoResponders(err) || Date.now() + pause >= deadline) throw err;
        await sleep(pause);
      }
    }
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
    // A consumer that could not be deleted (no leader yet, say) must not be taken over: its
    // delivered state would go on from where it was, not from startSeq. The caller retries.
    await this.jsm.consumers.delete(this.streamName, name).catch((err) => {
      if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound)) throw err;
    });
    await this.jsm.consumers.add(this.streamName, {
      durable_name: name,
      filter_subject: this.shardFilter(shard),
      ack_policy: AckPolicy.Explicit,
      deliver_policy: startSeq > 1 ? DeliverPolicy.StartSequence : DeliverPolicy.All,
      ...(startSeq > 1 ? { opt_start_seq: startSeq } : {}),
      ack_wait: 60 * 1e9,
      max_ack_pending: 10_000,
      max_deliver: -1,
      // 0: the consumer's state has as many replicas as the stream, now and after the stream
      // is raised (a fixed count would stay behind), so the shard's position survives a node.
      num_replicas: 0,
      mem_storage: false,
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

/** No stream answered the publish: no leader right now (or no stream at all). */
function isNoResponders(err: unknown): boolean {
  return err instanceof NoRespondersError;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** FNV-1a over the device id: the shard a device's operations always go to. */
export function shardOf(deviceId: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < deviceId.length; i++) {
    h ^= deviceId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}
