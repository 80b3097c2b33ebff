// Prometheus metrics. One registry per process, built by cmd/* and passed down.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

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
    httpRequests: new Counter({ name: 'tidemark_http_requests_total', help: 'HTTP requests answered', labelNames: ['route', 'method', 'status'], registers: r }),
    apiThreadRequests: new Counter({
      name: 'tidemark_api_thread_requests_total', help: 'HTTP requests answered per API thread (API_THREADS; 0 is the main thread)', labelNames: ['thread'], registers: r,
    }),
    httpDuration: new Histogram({
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
    workerErrors: new Counter({ name: 'tidemark_worker_batch_errors_total', help: 'Worker batches that failed and were retried', labelNames: ['kind'], registers: r }),
    drops: new Counter({ name: 'tidemark_enrich_drops_total', help: 'Events dropped by enrichment, by reason', labelNames: ['reason'], registers: r }),
    enrichStep: new Histogram({
      name: 'tidemark_enrich_step_duration_seconds', help: 'Enrichment step time', labelNames: ['step'],
      buckets: [0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01], registers: r,
    }),
    opFailures: new Counter({ name: 'tidemark_profile_op_failures_total', help: 'Profile operations that could not apply', labelNames: ['kind'], registers: r }),
    pgPool: new Gauge({ name: 'tidemark_pg_pool_clients', help: 'PostgreSQL pool clients by state', labelNames: ['state'], registers: r }),
    redisUp: new Gauge({ name: 'tidemark_redis_up', help: '1 when the Redis connection is ready', registers: r }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
