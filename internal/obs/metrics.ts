// Prometheus metrics. One registry per process, built by cmd/* and passed down.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type CounterConfiguration, type HistogramConfiguration } from 'prom-client';

/**
 * The per-request series (HTTP requests and latency) are updated once per request with a
 * fresh labels object; prom-client then builds a string key from the labels, validates
 * them and (histogram) makes a closure, every time. These subclasses remember, per label
 * values, the very value object prom-client keeps for that series and update it as
 * prom-client would; anything else (other label shapes, exemplars, a value object replaced
 * by reset/remove/zero) takes prom-client's own path. The exposition is unchanged
 * (metrics.test.ts compares it with plain prom-client metrics).
 */
interface SeriesRef<E> {
  map: Record<string, E>;
  hash: string;
  entry: E;
}

/** label values (in labelNames order) → remembered value object. */
type RefTree<E> = Map<unknown, RefTree<E> | SeriesRef<E>>;

/** The label values in `names` order, when `labels` holds exactly those labels with defined values. */
function exactLabelValues(labels: unknown, names: readonly string[], out: unknown[]): boolean {
  if (labels === null || typeof labels !== 'object') return false;
  let n = 0;
  for (const k in labels) {
    if (!Object.prototype.hasOwnProperty.call(labels, k)) return false;
    n++;
  }
  if (n !== names.length) return false;
  for (let i = 0; i < names.length; i++) {
    const v = (labels as Record<string, unknown>)[names[i]!];
    if (v === undefined || !Object.prototype.hasOwnProperty.call(labels, names[i]!)) return false;
    out[i] = v;
  }
  return true;
}

class SeriesRefs<E> {
  private root: RefTree<E> = new Map();
  private readonly values: unknown[] = [];
  constructor(private readonly names: readonly string[]) {}

  /** The remembered series of these labels, if still the one `map` holds. */
  find(labels: unknown, map: Record<string, E>): SeriesRef<E> | undefined {
    if (!exactLabelValues(labels, this.names, this.values)) return undefined;
    let node: RefTree<E> | SeriesRef<E> | undefined = this.root;
    for (let i = 0; i < this.names.length && node; i++) node = (node as RefTree<E>).get(this.values[i]);
    const ref = node as SeriesRef<E> | undefined;
    return ref && ref.map === map && map[ref.hash] === ref.entry ? ref : undefined;
  }

  /** Remembers the value object prom-client now holds for these labels. */
  remember(labels: unknown, map: Record<string, E>, match: (e: E) => boolean): void {
    if (!exactLabelValues(labels, this.names, this.values)) return;
    for (const hash of Object.keys(map)) {
      const entry = map[hash]!;
      if (!match(entry)) continue;
      let node = this.root;
      for (let i = 0; i < this.names.length - 1; i++) {
        let next = node.get(this.values[i]) as RefTree<E> | undefined;
        if (!next) node.set(this.values[i], (next = new Map()));
        node = next;
      }
      node.set(this.values[this.names.length - 1], { map, hash, entry });
      return;
    }
  }

  forget(): void {
    this.root = new Map();
  }
}

const sameLabels = (names: readonly string[], labels: Record<string, unknown>, entryLabels: Record<string, unknown> | undefined): boolean =>
  !!entryLabels && names.every((n) => String(entryLabels[n]) === String(labels[n]));

interface CounterEntry { value: number; labels: Record<string, unknown> }
interface HistogramEntry { labels: Record<string, unknown>; bucketValues: Record<number, number>; sum: number; count: number }
interface CounterInternals { hashMap: Record<string, CounterEntry>; labelNames: string[] }
interface HistogramInternals { hashMap: Record<string, HistogramEntry>; labelNames: string[]; upperBounds: number[] }

export class FastCounter<T extends string> extends Counter<T> {
  private readonly refs: SeriesRefs<CounterEntry>;
  constructor(config: CounterConfiguration<T>) {
    super(config);
    const self = this as unknown as CounterInternals & { enableExemplars?: boolean };
    this.refs = new SeriesRefs(self.labelNames);
    if (self.enableExemplars || typeof self.hashMap !== 'object' || self.labelNames.length === 0) return;
    const slow = this.inc.bind(this) as (labels?: unknown, value?: unknown) => void;
    (this as { inc: unknown }).inc = (labels?: unknown, value?: unknown): void => {
      if (value === undefined) {
        const ref = this.refs.find(labels, self.hashMap);
        if (ref) {
          ref.entry.value += 1;
          return;
        }
      }
      slow(labels, value);
      if (value === undefined) this.refs.remember(labels, self.hashMap, (e) => sameLabels(self.labelNames, labels as Record<string, unknown>, e.labels));
    };
  }
  override reset(): void {
    this.refs?.forget();
    super.reset();
  }
  override remove(...values: string[]): void;
  override remove(labels: Partial<Record<T, string | number>>): void;
  override remove(...args: unknown[]): void {
    this.refs.forget();
    (super.remove as (...a: unknown[]) => void).apply(this, args);
  }
}

export class FastHistogram<T extends string> extends Histogram<T> {
  private readonly refs: SeriesRefs<HistogramEntry>;
  constructor(config: HistogramConfiguration<T>) {
    super(config);
    const self = this as unknown as HistogramInternals & { enableExemplars?: boolean };
    this.refs = new SeriesRefs(self.labelNames);
    if (self.enableExemplars || typeof self.hashMap !== 'object' || !Array.isArray(self.upperBounds) || self.labelNames.length === 0) return;
    const bounds = self.upperBounds;
    const slow = this.observe.bind(this) as (labels: unknown, value?: unknown) => void;
    (this as { observe: unknown }).observe = (labels: unknown, value?: unknown): void => {
      if (typeof value === 'number' && Number.isFinite(value)) {
        const ref = this.refs.find(labels, self.hashMap);
        if (ref) {
          // prom-client's observe: the first bound >= value (-1 past the last), sum, count.
          const e = ref.entry;
          let b = -1;
          for (let i = 0; i < bounds.length; i++) {
            if (value <= bounds[i]!) {
              b = bounds[i]!;
              break;
            }
          }
          e.sum += value;
          e.count += 1;
          if (Object.prototype.hasOwnProperty.call(e.bucketValues, b)) e.bucketValues[b]! += 1;
          return;
        }
      }
      slow(labels, value);
      if (typeof value === 'number') this.refs.remember(labels, self.hashMap, (e) => sameLabels(self.labelNames, labels as Record<string, unknown>, e.labels));
    };
  }
  override reset(): void {
    this.refs?.forget();
    super.reset();
  }
  override remove(...values: string[]): void;
  override remove(labels: Partial<Record<T, string | number>>): void;
  override remove(...args: unknown[]): void {
    this.refs.forget();
    (super.remove as (...a: unknown[]) => void).apply(this, args);
  }
  override zero(labels: Parameters<Histogram<T>['zero']>[0]): void {
    this.refs?.forget();
    super.zero(labels);
  }
}

/**
 * `processMetrics: false` for the extra API threads: the process-wide default metrics (CPU,
 * memory, event loop of the main thread) come from the main thread only, so that the sum over
 * threads on /metrics counts them once.
 */
export function createMetrics(o: { processMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (o.processMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'tidemark_process_' });
  const r = [registry];
  return {
    registry,
    httpRequests: new FastCounter({ name: 'tidemark_http_requests_total', help: 'HTTP requests answered', labelNames: ['route', 'method', 'status'], registers: r }),
    apiThreadRequests: new Counter({
      name: 'tidemark_api_thread_requests_total', help: 'HTTP requests answered per API thread (API_THREADS; 0 is the main thread)', labelNames: ['thread'], registers: r,
    }),
    httpDuration: new FastHistogram({
      name: 'tidemark_http_request_duration_seconds', help: 'HTTP request latency by route', labelNames: ['route', 'method'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers: r,
    }),
    publishDuration: new Histogram({
      name: 'tidemark_jetstream_publish_duration_seconds', help: 'JetStream publish round trip (one micro-batch)', labelNames: ['outcome'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5], registers: r,
    }),
    publishBatchOps: new Histogram({
      name: 'tidemark_jetstream_publish_batch_ops', help: 'Ops per published message', buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512], registers: r,
    }),
    rateLimited: new Counter({ name: 'tidemark_rate_limit_rejections_total', help: 'Requests refused by a rate limit', labelNames: ['scope'], registers: r }),
    degraded: new Counter({ name: 'tidemark_degraded_total', help: 'Requests served without a dependency', labelNames: ['dependency'], registers: r }),
    consumerLag: new Gauge({ name: 'tidemark_jetstream_consumer_lag', help: 'Messages of a shard not yet processed', labelNames: ['shard'], registers: r }),
    shardsOwned: new Gauge({ name: 'tidemark_worker_shards_owned', help: 'Shards this worker owns', registers: r }),
    workerBatchOps: new Histogram({
      name: 'tidemark_worker_batch_ops', help: 'Ops per committed worker batch', buckets: [1, 10, 50, 100, 250, 500, 1000, 2000, 5000], registers: r,
    }),
    workerCommitDuration: new Histogram({
      name: 'tidemark_worker_commit_duration_seconds', help: 'Worker batch transaction time',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers: r,
    }),
    workerEvents: new Counter({ name: 'tidemark_worker_events_total', help: 'Events written by workers', registers: r }),
    sessionEndChecks: new Counter({ name: 'tidemark_session_end_checks_total', help: 'Checks of idle sessions published by the session-end sweeps', registers: r }),
    streamRecreated: new Counter({ name: 'tidemark_stream_recreated_total', help: 'Times this process found the JetStream stream missing and created it again', registers: r }),
    positionsRebased: new Counter({ name: 'tidemark_shard_positions_rebased_total', help: 'Shard positions moved because the stream is another instance or lost its tail', registers: r }),
    workerErrors: new Counter({ name: 'tidemark_worker_batch_errors_total', help: 'Worker batches that failed and were retried', labelNames: ['kind'], registers: r }),
    drops: new Counter({ name: 'tidemark_enrich_drops_total', help: 'Events dropped by enrichment, by reason', labelNames: ['reason'], registers: r }),
    enrichStep: new Histogram({
      name: 'tidemark_enrich_step_duration_seconds', help: 'Enrichment step time (one event in 16 is timed)', labelNames: ['step'],
      buckets: [0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01], registers: r,
    }),
    opFailures: new Counter({ name: 'tidemark_profile_op_failures_total', help: 'Profile operations that could not apply', labelNames: ['kind'], registers: r }),
    pgPool: new Gauge({ name: 'tidemark_pg_pool_clients', help: 'PostgreSQL pool clients by state', labelNames: ['state'], registers: r }),
    readAdmission: new Gauge({ name: 'tidemark_read_statements', help: 'Heavy read statements by state: running (holding a READ_CONCURRENCY slot) or waiting for one', labelNames: ['state'], registers: r }),
    redisUp: new Gauge({ name: 'tidemark_redis_up', help: '1 when the Redis connection is ready', registers: r }),
    liveSockets: new Gauge({ name: 'tidemark_live_sockets', help: 'Live-push WebSockets open, by state: authenticating (not yet authenticated) or watching (authenticated)', labelNames: ['state'], registers: r }),
    liveRefusals: new Counter({
      name: 'tidemark_live_socket_refusals_total',
      help: 'Live-push WebSockets closed for want of a slot or of time, by reason: server_full (1013), project_full (4429), authenticating_full or authenticating_displaced (4430), auth_timeout (4408, or 4503 while checking)',
      labelNames: ['reason'], registers: r,
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
