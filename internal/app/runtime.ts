// Builds the clients once from the config, starts the roles asked for, and drains them on
// SIGTERM. cmd/* only call start().
import { Authenticator } from '../auth/auth';
import { watchProjectChanges, type ProjectChangeWatch } from '../auth/project-changes';
import { Bus } from '../bus/bus';
import { StreamWatch } from '../bus/stream-watch';
import { liveMaxSocketsPerProject, type Config } from '../config/config';
import { createEnricher } from '../enrich';
import { HttpServer } from '../http/server';
import { Router } from '../http/router';
import { Batcher } from '../ingest/batcher';
import { ipHeaderOrder } from '../ingest/client-ip';
import { ingestRoutes } from '../ingest/handler';
import { SaltKeeper } from '../ingest/identity';
import { JobRunner } from '../jobs/jobs';
import { createLogger, type Logger } from '../obs/log';
import { createMetrics, type Metrics } from '../obs/metrics';
import { Gate } from '../ratelimit/gate';
import { connectRedis, createRedis, redisKeys, type Redis } from '../redis/redis';
import { createPool, ensureDatabase, ServiceUnreachableError, type Pool } from '../store/db';
import { migrate, pendingMigrations } from '../store/migrate';
import { PartitionKeeper } from '../store/partitions';
import { listRevokedClientIds } from '../store/accounts';
import { refreshRollups } from '../store/rollups';
import { applyVisitorLog } from '../store/visitor-days';
import { pgSaltStore } from '../store/maintenance';
import { liveSessionOf } from '../store/device-session';
import { ShardManager } from '../worker/shard-manager';
import { ShardRunner } from '../worker/shard-runner';
import { Semaphore } from '../worker/semaphore';
import { ClientLimiter, ReadCost, Slots } from '../query/admission';
import { opsRoutes, type Probe } from './ops-routes';
import { readRoutes } from './read-routes';
import { exportRoutes } from '../export/routes';
import { openApiDocument } from './openapi';
import { DashboardPage } from '../dashboard/bundle';
import { ApiThreads } from './threads';
import { livePush, type LivePush } from './live-routes';
import type { SocketRoute } from '../http/types';

export interface Roles {
  api: boolean;
  worker: boolean;
  /**
   * With both roles (npm start): run the worker role (enrich, sessionize, write, jobs) in a
   * worker thread of its own, so that its batches never hold up the thread that answers
   * producers. Default false (both roles on one event loop, as tests start them in-process).
   */
  workerInThread?: boolean;
}

export interface Running {
  port: number;
  metricsPort: number | null;
  log: Logger;
  metrics: Metrics;
  db: Pool;
  redis: Redis;
  bus: Bus;
  shardManager: ShardManager | null;
  /** Updates the sampled gauges (pool, Redis, consumer lag); /metrics does it before rendering. */
  sampleGauges(): Promise<void>;
  /** Stops accepting, finishes in-flight work, commits and acks, closes clients. */
  drain(): Promise<void>;
  isDraining(): boolean;
}

/** Connects everything (database created and migrated, stream ensured); throws ServiceUnreachableError. */
export async function connectAll(cfg: Config, log: Logger): Promise<{ db: Pool; redis: Redis; bus: Bus; timescale: boolean }> {
  await ensureDatabase(cfg.DATABASE_URL);
  const db = createPool(cfg.DATABASE_URL, cfg.DATABASE_POOL_MAX);
  let timescale: boolean;
  try {
    const m = await migrate(db);
    timescale = m.timescale;
    if (m.applied.length) log.info({ applied: m.applied, timescale }, 'migrations applied');
  } catch (err) {
    await db.end();
    if ((err as { code?: string }).code === 'ECONNREFUSED') throw new ServiceUnreachableError('PostgreSQL', cfg.DATABASE_URL, err);
    throw err;
  }
  let redis: Redis;
  try {
    redis = await connectRedis(cfg.REDIS_URL, { failFast: true });
  } catch (err) {
    await db.end();
    throw err;
  }
  let bus: Bus | undefined;
  try {
    bus = await Bus.connect({
      url: cfg.NATS_URL, namespace: cfg.TIDEMARK_NAMESPACE, shards: cfg.TIDEMARK_SHARDS, shardsExplicit: cfg.shardsExplicit, maxAgeHours: cfg.STREAM_MAX_AGE_HOURS,
      publishTimeoutMs: cfg.INGEST_PUBLISH_TIMEOUT_MS, streamReplicas: cfg.TIDEMARK_STREAM_REPLICAS,
    });
    const plan = await bus.ensureStream();
    if (plan.action === 'raise') log.info({ stream: bus.streamName, from: plan.from, replicas: plan.replicas }, 'stream replicas raised (TIDEMARK_STREAM_REPLICAS)');
    const shards = bus.shardPlan;
    if (shards?.action === 'change') log.warn({ stream: bus.streamName, from: shards.from, shards: shards.shards }, 'stream shard count changed (TIDEMARK_SHARDS; nothing was waiting)');
    if (shards?.action === 'record') log.info({ stream: bus.streamName, shards: shards.shards }, 'stream shard count recorded');
    if (plan.action === 'keep-higher') {
      log.info({ stream: bus.streamName, replicas: plan.replicas, TIDEMARK_STREAM_REPLICAS: plan.wanted }, 'stream has more replicas than TIDEMARK_STREAM_REPLICAS; kept (never lowered)');
    }
  } catch (err) {
    await bus?.drainAndClose();
    redis.disconnect();
    await db.end();
    throw err;
  }
  return { db, redis, bus, timescale };
}

/** Set by internal/app/api-thread.ts for the extra API threads (API_THREADS > 1). */
interface ThreadOptions {
  /** 1.. for an extra API thread (0, the default, is the main thread). */
  threadIndex: number;
  /** Renders /metrics over every thread (asks the main thread). */
  renderMetrics: () => Promise<string>;
  /** The worker thread of npm start: no HTTP server (the main thread serves /metrics for it). */
  noServer?: boolean;
}

export async function start(cfg: Config, asked: Roles, thread?: ThreadOptions): Promise<Running> {
  const threadIndex = thread?.threadIndex ?? 0;
  // npm start with the worker in a thread of its own: this thread runs the API role only.
  const workerThread = asked.api && asked.worker && asked.workerInThread === true && !thread;
  const roles: Roles = workerThread ? { api: true, worker: false } : asked;
  const log = createLogger(cfg.LOG_LEVEL, {
    role: asked.api && asked.worker ? 'all' : roles.api ? 'api' : 'worker',
    ...(cfg.API_THREADS > 1 && roles.api ? { thread: threadIndex } : {}),
    ...(thread?.noServer ? { thread: 'worker' } : {}),
  });
  const metrics = createMetrics({ processMetrics: threadIndex === 0 });
  const { db, redis, bus, timescale } = await connectAll(cfg, log);
  // The install's shard count, as the stream records it (planShards); threads started below
  // are handed it.
  cfg = { ...cfg, TIDEMARK_SHARDS: bus.shards, shardsExplicit: true };
  const keys = redisKeys(cfg.TIDEMARK_NAMESPACE);
  const salts = new SaltKeeper(redis, keys, pgSaltStore(db));
  let draining = false;
  let migrationsApplied = true; // connectAll applied every migration this version ships
  // The stream can go while running (deleted, or a NATS node back with an empty store):
  // /readyz says so at once, and the stream is created again after a grace period.
  const streamWatch = new StreamWatch({ bus, log, onRecreated: () => metrics.streamRecreated.inc(), recreateAfterMs: cfg.STREAM_RECREATE_AFTER_MS });
  streamWatch.start();

  // Ingest needs only NATS: an API pod stays in rotation (degraded) while PostgreSQL or
  // Redis is away, so producers keep getting durable 202s. A worker needs PostgreSQL.
  const probes: Probe[] = [
    { name: 'postgres', critical: !roles.api, check: async () => void (await db.query('SELECT 1')) },
    { name: 'redis', critical: false, check: async () => void (await redis.ping()) },
    { name: 'nats', critical: true, check: async () => { if (bus.nc.isClosed()) throw new Error('closed'); await bus.nc.flush(); } },
    { name: 'stream', critical: true, check: async () => { const p = streamWatch.problem(); if (p) throw new Error(p); } },
    // A worker whose batches cannot commit (PostgreSQL away or stalled, no stream): unready
    // for a worker process; with the API role too, the API stays in rotation (degraded), as
    // its 202s are durable without PostgreSQL.
    {
      name: 'worker', critical: !roles.api,
      check: async () => { const p = shardManager?.problem() ?? threads?.workerProblem ?? null; if (p) throw new Error(p); },
    },
    {
      name: 'migrations', critical: true,
      check: async () => {
        if (migrationsApplied) return;
        const p = await pendingMigrations(db);
        if (p.length) throw new Error(`pending: ${p.join(', ')}`);
        migrationsApplied = true;
      },
    },
  ];
  let readSlots: Slots | null = null;
  const sampleGauges = async () => {
    metrics.pgPool.set({ state: 'total' }, db.totalCount);
    metrics.pgPool.set({ state: 'idle' }, db.idleCount);
    metrics.pgPool.set({ state: 'waiting' }, db.waitingCount);
    metrics.redisUp.set(redis.status === 'ready' ? 1 : 0);
    if (readSlots) {
      metrics.readAdmission.set({ state: 'running' }, readSlots.running);
      metrics.readAdmission.set({ state: 'waiting' }, readSlots.waiting);
    }
    for (const shard of shardManager?.ownedShards ?? []) {
      metrics.consumerLag.set({ shard: String(shard) }, await bus.shardLag(shard).catch(() => 0));
    }
  };

  let server: HttpServer | null = null;
  let batcher: Batcher | null = null;
  let shardManager: ShardManager | null = null;
  let jobs: JobRunner | null = null;
  let enricher: Awaited<ReturnType<typeof createEnricher>> | null = null;
  let threads: ApiThreads | null = null;
  let gate: Gate | null = null;
  let live: LivePush | null = null;
  const socketRoutes: SocketRoute[] = [];
  let projectWatch: ProjectChangeWatch | null = null;

  const router = new Router();
  const renderMetrics = thread?.renderMetrics ?? (async () => (threads ? threads.render() : metrics.registry.metrics()));
  for (const r of opsRoutes({ metrics, probes, draining: () => draining, extra: sampleGauges, render: renderMetrics })) router.add(r);

  if (roles.worker) {
    enricher = await createEnricher({
      geoipCityPath: cfg.GEOIP_CITY_PATH,
      onDrop: (reason) => metrics.drops.inc({ reason }),
      onStep: (step, ms) => metrics.enrichStep.observe({ step }, ms / 1000),
    });
    const partitions = new PartitionKeeper(db, timescale);
    // This month's and the next two months' partitions, now and every hour: a month begins
    // with its partition there (creating one waits for a lock on events, see PartitionKeeper).
    await partitions.ensureAhead().catch((err) => log.warn({ err }, 'could not create the coming months\' partitions; retried every hour'));
    jobs = new JobRunner({
      redisUrl: cfg.REDIS_URL, namespace: cfg.TIDEMARK_NAMESPACE, bus, db, salts, log,
      timeoutMs: cfg.SESSION_TIMEOUT_MINUTES * 60_000, retentionDays: cfg.RETENTION_DAYS,
      onChecks: (n) => metrics.sessionEndChecks.inc(n),
      periodic: [
        {
          name: 'rollup-refresh', every: { everyMs: 10_000 },
          run: () => refreshRollups(db, timescale, {
            quietMs: cfg.ROLLUP_REFRESH_QUIET_MS, maxDelayMs: cfg.ROLLUP_REFRESH_MAX_DELAY_MS,
            roundHours: cfg.ROLLUP_REFRESH_ROUND_HOURS, transactionHours: cfg.ROLLUP_REFRESH_TRANSACTION_HOURS,
          }),
        },
        // the visit days behind exact unique visitors (docs/rollups.md, "Unique visitors by days")
        { name: 'visitor-days', every: { everyMs: 5_000 }, run: () => applyVisitorLog(db) },
        { name: 'partitions-ahead', every: { everyMs: 3_600_000 }, run: () => partitions.ensureAhead() },
      ],
    });
    await jobs.start();
    const scheduler = jobs.scheduler;
    const e = enricher;
    const commits = new Semaphore(cfg.WORKER_COMMITS_MAX);
    shardManager = new ShardManager({
      redis, keys, shards: cfg.TIDEMARK_SHARDS, log, metrics,
      start: (shard) => {
        const runner = new ShardRunner(shard, {
          bus, db, enricher: e, partitions, log, metrics,
          timeoutMs: cfg.SESSION_TIMEOUT_MINUTES * 60_000, batchMax: cfg.WORKER_BATCH_MAX, lingerMs: cfg.WORKER_LINGER_MS, commits, copyEvents: cfg.WORKER_EVENTS_COPY,
          cacheMax: Math.ceil(cfg.WORKER_SESSION_CACHE / cfg.TIDEMARK_SHARDS),
          onOpened: (s) => scheduler.schedule(s),
        });
        runner.start();
        return runner;
      },
    });
    shardManager.start();
  }

  if (roles.api) {
    batcher = new Batcher({
      publish: (subject, data, id) => bus.publish(subject, data, id),
      maxOps: cfg.INGEST_BATCH_MAX,
      maxDelayMs: cfg.INGEST_BATCH_MS,
      maxBytes: Math.max(1024, bus.maxPayload - 1024),
      onFlush: (ops, _bytes, seconds, ok) => {
        metrics.publishDuration.observe({ outcome: ok ? 'ok' : 'error' }, seconds);
        metrics.publishBatchOps.observe(ops);
      },
    });
    const auth = new Authenticator(db);
    // A project changed (cli project update): this process drops its cached row at once.
    projectWatch = watchProjectChanges(createRedis(cfg.REDIS_URL), redis, keys, (projectId) => auth.forgetProject(projectId));
    gate = new Gate(redis, keys, {
      onAsyncError: () => metrics.degraded.inc({ dependency: 'redis' }),
      // PostgreSQL holds the revoked state: the mirror loads it at start and seeds Redis' set
      // again when that set lost its data (FLUSHALL, a restart without persistence).
      revokedInStore: () => listRevokedClientIds(db),
      onSeedError: (err) => log.warn({ err: (err as Error).message }, 'revoked clients not reloaded from PostgreSQL into Redis; retrying every second'),
    });
    // Ingest answers without waiting for Redis once the revocation mirror is loaded.
    await gate.start();
    for (const r of ingestRoutes({
      auth, gate, salts, batcher, shards: cfg.TIDEMARK_SHARDS, ipHeaders: ipHeaderOrder(cfg.TRUSTED_IP_HEADERS),
      eventTimeLimits: { maxPastDays: cfg.INGEST_MAX_PAST_DAYS, retentionDays: cfg.RETENTION_DAYS },
      subjectFor: (p, s) => bus.subjectFor(p, s),
      onDegraded: (what, err) => {
        metrics.degraded.inc({ dependency: what });
        log.warn({ err: (err as Error).message }, 'ingest without Redis: no rate limit or live update');
      },
      onRateLimited: (scope) => metrics.rateLimited.inc({ scope }),
      liveSession: (projectId, deviceId, nowMs) => liveSessionOf(db, projectId, deviceId, nowMs, cfg.SESSION_TIMEOUT_MINUTES * 60_000),
      onSessionLookupError: (err) => {
        metrics.degraded.inc({ dependency: 'postgres' });
        log.warn({ err: (err as Error).message }, 'GET /track/device-id answered without its session: PostgreSQL did not answer');
      },
    })) router.add(r);
    readSlots = new Slots(cfg.READ_CONCURRENCY);
    const admission = { clients: new ClientLimiter(cfg.READ_CONCURRENCY_PER_CLIENT, cfg.READ_QUEUE_PER_CLIENT), statements: readSlots, heavyAfterMs: cfg.READ_HEAVY_AFTER_MS, cost: new ReadCost() };
    const readDeps = { db, redis, keys, auth, gate: gate!, log, metrics, queryTimeoutMs: cfg.QUERY_TIMEOUT_MS, exactVisitorsMax: cfg.TIDEMARK_EXACT_VISITORS_MAX, admission };
    for (const r of readRoutes(readDeps)) router.add(r);
    live = livePush({
      redis, redisUrl: cfg.REDIS_URL, keys, auth, gate, log, metrics,
      maxSockets: cfg.LIVE_MAX_SOCKETS, maxSocketsPerProject: liveMaxSocketsPerProject(cfg), maxAuthenticating: cfg.LIVE_MAX_AUTHENTICATING,
    });
    socketRoutes.push(live.route);
    for (const r of exportRoutes(readDeps, { streaming: true })) router.add(r);
    const openapi = JSON.stringify(openApiDocument());
    router.add({
      method: 'GET', pattern: '/openapi.json', family: 'ops',
      handler: async () => ({ status: 200, raw: { contentType: 'application/json', data: openapi } }),
    });
    const dashboard = new DashboardPage();
    router.add({
      method: 'GET', pattern: '/dashboard', family: 'ops',
      handler: async () => ({
        status: 200,
        headers: { 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer' },
        raw: { contentType: 'text/html; charset=utf-8', data: await dashboard.html() },
      }),
    });
  }

  const port = roles.api ? cfg.PORT : cfg.METRICS_PORT;
  const logRequests = log.isLevelEnabled('debug'); // one line per request at LOG_LEVEL=debug
  const threadRequests = metrics.apiThreadRequests.labels(String(threadIndex));
  if (!thread?.noServer) threadRequests.inc(0); // the series exists (at 0) before the first request
  if (!thread?.noServer) server = new HttpServer({
    router,
    port,
    sharedPort: roles.api && cfg.API_THREADS > 1,
    maxInFlight: cfg.MAX_IN_FLIGHT,
    sockets: socketRoutes,
    onResponse: ({ route, method, status, seconds, requestId }) => {
      metrics.httpRequests.inc({ route, method, status: String(status) });
      threadRequests.inc();
      metrics.httpDuration.observe({ route, method }, seconds);
      if (logRequests) log.debug({ requestId, route, method, status, ms: Math.round(seconds * 1e4) / 10 }, 'request');
    },
    onError: (err, req) => log.error({ err, ...req }, 'request failed'),
  });
  let drained: Promise<void> | null = null;
  const drain = () =>
    (drained ??= (async () => {
      draining = true;
      log.info('draining');
      live?.close(); // live sockets get 1001 and reconnect elsewhere
      await Promise.all([server?.drain(), threads?.drain()]);
      projectWatch?.close();
      await batcher?.flushAll();
      gate?.close();
      await streamWatch.close();
      await shardManager?.close();
      await jobs?.close();
      enricher?.close();
      await bus.drainAndClose();
      redis.disconnect();
      await db.end();
      log.info('drained');
    })());

  // Extra API threads and the worker thread first (API threads listen on the same fixed
  // port), the main thread last: once the main thread answers, every thread does.
  if (roles.api && !thread && (cfg.API_THREADS > 1 || workerThread)) {
    try {
      threads = await ApiThreads.start({
        cfg, count: cfg.API_THREADS - 1, worker: workerThread, port: cfg.PORT, registry: metrics.registry, log,
        onDied: (err) => {
          // Its unanswered requests were never acked (producers retry them), and a worker's
          // unacked messages are redelivered: restart the whole process rather than run with
          // fewer threads than configured.
          log.fatal({ err }, 'a thread died; exiting');
          process.exit(1);
        },
      });
    } catch (err) {
      await drain();
      throw err;
    }
  }
  const boundPort = server ? await server.listen() : 0;
  await salts.salts(Date.now());
  log.info(
    { port: boundPort, roles: asked, timescale, shards: cfg.TIDEMARK_SHARDS, namespace: cfg.TIDEMARK_NAMESPACE, apiThreads: roles.api ? (threads?.apiCount ?? 0) + 1 : 0, workerThread },
    thread ? (thread.noServer ? 'worker thread started' : 'API thread started') : 'tidemark started',
  );

  return {
    port: boundPort,
    metricsPort: roles.api ? null : boundPort,
    log, metrics, db, redis, bus, shardManager,
    sampleGauges,
    drain,
    isDraining: () => draining,
  };
}

/** For cmd/*: start, print one clear line when a dependency is unreachable, drain on signals. */
export async function main(cfg: Config, roles: Roles): Promise<void> {
  let running: Running;
  try {
    running = await start(cfg, roles);
  } catch (err) {
    const msg = err instanceof ServiceUnreachableError ? err.message : `start failed: ${(err as Error).message}`;
    process.stderr.write(`tidemark: ${msg}\n`);
    process.exit(1);
  }
  const stop = (signal: string) => {
    running.log.info({ signal }, 'signal received');
    // Whatever holds the drain up (a PostgreSQL connection never given back), the process
    // still ends: the in-flight wait is 25 s, then every connection is closed.
    setTimeout(() => {
      running.log.error({ signal }, 'drain did not finish in 40 s; exiting');
      process.exit(1);
    }, 40_000).unref();
    running.drain().then(
      () => process.exit(0),
      (err) => {
        running.log.error({ err }, 'drain failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
