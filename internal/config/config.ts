// Configuration is read once from the environment (zod-validated) by cmd/* and passed down.
import os from 'node:os';
import { z } from 'zod';
import { IP_HEADERS, type IpHeader } from '../ingest/client-ip';
import { DEFAULT_MAX_PAST_DAYS } from '../ingest/ops';
import { defaultMaxPerProject } from '../live/slots';

const intFrom = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

/** TIDEMARK_SHARDS of a new stream when none is set (docs/operating.md "Scaling"). */
export const DEFAULT_SHARDS = 4;

/** Default of TIDEMARK_EXACT_VISITORS_MAX (sessions; see docs/insights-decisions.md). */
export const DEFAULT_EXACT_VISITORS_MAX = 25_000;

const EnvSchema = z.object({
  PORT: intFrom(3000, 0),
  METRICS_PORT: intFrom(9091, 0),
  DATABASE_URL: z.string().url().default('postgres://postgres@127.0.0.1:5432/tidemark'),
  /** One NATS server, or several comma-separated (members of one cluster; the client picks and fails over). */
  NATS_URL: z
    .string()
    .default('nats://127.0.0.1:4222')
    .refine((v) => {
      const servers = v.split(',').map((s) => s.trim());
      return servers.every((s) => s.length > 0 && isServerUrl(s));
    }, 'one NATS server URL, or several comma-separated (nats://host:port,nats://host:port)'),
  REDIS_URL: z.string().default('redis://127.0.0.1:6379'),
  TIDEMARK_NAMESPACE: z
    .string()
    .regex(/^[a-zA-Z0-9_-]{1,32}$/, 'letters, digits, _ and - only (it prefixes NATS subjects and Redis keys)')
    .default('tidemark'),
  /**
   * JetStream subject shards. Recorded in the stream when it is created; unset, a process
   * takes the stream's count (4 for a new stream, 16 for one made before counts were
   * recorded). Set to another count than the stream's, it is refused while the stream holds
   * unprocessed messages (internal/bus/bus.ts, planShards).
   */
  TIDEMARK_SHARDS: intFrom(DEFAULT_SHARDS, 1),
  /** PostgreSQL connections per process (1 for single-connection engines such as PGlite). */
  DATABASE_POOL_MAX: intFrom(20, 1),
  GEOIP_CITY_PATH: z.string().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * Micro-batching of ingest publishes: an op for an idle subject is published at once; ops
   * that arrive while a publish of their subject is in flight share the next message, of at
   * most INGEST_BATCH_MAX ops. INGEST_BATCH_MS > 0 adds a fixed wait on the idle path.
   */
  INGEST_BATCH_MAX: intFrom(256, 1),
  INGEST_BATCH_MS: z.coerce.number().min(0).default(0),
  /** How long the API waits for a JetStream ack before answering 503. */
  INGEST_PUBLISH_TIMEOUT_MS: intFrom(5000, 100),
  /** Max ops a worker commits in one transaction. */
  WORKER_BATCH_MAX: intFrom(2000, 1),
  /**
   * How long a shard's batch smaller than WORKER_BATCH_MAX waits for more events after its
   * first one arrived, so a trickle shares one write transaction (less PostgreSQL CPU per
   * event; events become readable up to this much later). 0: each batch is written at once.
   * 150 by default: bench/RESULTS.md "End to end: notes" (2026-11-28 12:20Z) measured a third
   * to half the CPU per event at 500-2,000 events/s and the same capacity.
   */
  WORKER_LINGER_MS: z.coerce.number().int().min(0).max(10_000).default(150),
  /**
   * Devices whose latest session a worker process keeps in memory, over all its shards (each
   * shard keeps its share, TIDEMARK_SHARDS of them; ~3 KB of heap per device). A device not
   * cached is loaded from PostgreSQL on its next event: the limit costs a query, never a count.
   */
  WORKER_SESSION_CACHE: intFrom(50_000, 16),
  /**
   * Write transactions one worker has open at once (its shards take turns; a shard that
   * waits takes a bigger batch). Fewer, bigger transactions cost PostgreSQL less CPU per event.
   */
  WORKER_COMMITS_MAX: intFrom(2, 1),
  /**
   * Workers write events with COPY (less PostgreSQL CPU per event than INSERT). false: with
   * INSERT, for engines whose wire protocol has no COPY FROM STDIN (the PGlite build the
   * TimescaleDB tests use).
   */
  WORKER_EVENTS_COPY: z.enum(['true', 'false', '1', '0']).default('true').transform((v) => v === 'true' || v === '1'),
  QUERY_TIMEOUT_MS: intFrom(5000, 100),
  /**
   * Read admission (docs/operating.md, "Read admission"). Heavy insights and export
   * statements running in PostgreSQL at once, per API thread; more wait, least-used request first
   * (until their QUERY_TIMEOUT_MS budget ends: 503) so reads never take every core from ingest.
   * Default: the cores less one, at least 1.
   */
  READ_CONCURRENCY: intFrom(defaultReadConcurrency(), 1),
  /**
   * PostgreSQL time (ms) a client's reads may use recently (a sum that halves every 10 s)
   * before the client counts as heavy: from then on each of its read statements waits for
   * one of the READ_CONCURRENCY slots (a statement running past it takes one at once).
   * 0: every read statement waits for a slot.
   */
  READ_HEAVY_AFTER_MS: intFrom(1000, 0),
  /** Insights and export reads one client has running at once (per API thread). */
  READ_CONCURRENCY_PER_CLIENT: intFrom(2, 1),
  /**
   * Reads of one client that wait for one of its READ_CONCURRENCY_PER_CLIENT seats; one more
   * is a 429 with Retry-After. 100, the read rate limit's window (100 requests / 10 s): a
   * burst the rate limit allows (a dashboard's panels, a script's Promise.all) waits for its
   * turn rather than being refused. 0: no waiting.
   */
  READ_QUEUE_PER_CLIENT: intFrom(100, 0),
  /**
   * Insights metrics count unique visitors exactly when the period has at most this many
   * sessions, else (when the hll extension is installed) from HyperLogLog sketches (~0.8%
   * standard error). 0 = always sketches where possible.
   */
  TIDEMARK_EXACT_VISITORS_MAX: intFrom(DEFAULT_EXACT_VISITORS_MAX, 0),
  /** Requests in flight per API thread before new ones are shed with 503. */
  MAX_IN_FLIGHT: intFrom(10000, 1),
  /**
   * Live push (/insights/{projectId}/live): authenticated WebSockets one API thread holds; more
   * are closed with 1013. Sockets still authenticating count against LIVE_MAX_AUTHENTICATING.
   */
  LIVE_MAX_SOCKETS: intFrom(20000, 1),
  /**
   * Authenticated live-push sockets of one project on one API thread (more: 4429), so one
   * tenant never takes every slot. Unset: half of LIVE_MAX_SOCKETS (liveMaxSocketsPerProject).
   */
  LIVE_MAX_SOCKETS_PER_PROJECT: z.coerce.number().int().min(1).optional(),
  /**
   * Live-push sockets not yet authenticated on one API thread (each has 5 s). Past it a newcomer
   * displaces the one that has waited longest for its credentials, or is refused (4430).
   */
  LIVE_MAX_AUTHENTICATING: intFrom(1000, 1),
  /**
   * API threads per process, each a uWebSockets.js app on the same port (the kernel spreads
   * connections, SO_REUSEPORT) with its own NATS, Redis and PostgreSQL clients. 1: the API
   * runs in the main thread only. Set it to the cores the API may use.
   */
  API_THREADS: z.coerce.number().int().min(1).max(64).default(1),
  /**
   * npm start only: the nice value of the worker thread (Linux). Above 0, under CPU
   * contention the thread answering producers runs first, and the worker falls behind
   * instead (lag grows; the producers feel no back-pressure). 0: the same priority.
   */
  WORKER_THREAD_NICE: z.coerce.number().int().min(0).max(19).default(0),
  /**
   * The rollup refresh (every 10 s) recomputes a past hour only once nothing changed it for
   * ROLLUP_REFRESH_QUIET_MS, or once it has waited ROLLUP_REFRESH_MAX_DELAY_MS: a burst of
   * late events (and the session_ends that follow every hour) costs one recompute of the
   * hour, not one per round. Reads stay exact (a waiting hour is read from raw rows). 0: at once.
   */
  ROLLUP_REFRESH_QUIET_MS: z.coerce.number().int().min(0).default(30_000),
  ROLLUP_REFRESH_MAX_DELAY_MS: z.coerce.number().int().min(0).default(300_000),
  /** Days of raw events/sessions to keep; 0 keeps everything. */
  RETENTION_DAYS: intFrom(0, 0),
  /**
   * How far back an event time (`timestamp`, `__timestamp`) may be, in days before receipt;
   * an older one is a 400 naming the field (so is one older than RETENTION_DAYS, when set,
   * or before 1970). About ten years by default: imports of a site's history work, and one
   * write client cannot spread its events over centuries (docs/decisions.md, "Ingest").
   */
  INGEST_MAX_PAST_DAYS: intFrom(DEFAULT_MAX_PAST_DAYS, 1),
  /**
   * The rollup refresh (docs/rollups.md, "Bounds and fairness"): (project, hour) pairs one
   * round takes at most, and one of its transactions (each commits on its own and picks
   * anew, in turn across projects, so one project's backlog of late hours delays another's
   * hour by a transaction or two).
   */
  ROLLUP_REFRESH_ROUND_HOURS: intFrom(240, 1),
  ROLLUP_REFRESH_TRANSACTION_HOURS: intFrom(12, 1),
  /**
   * Replicas of the JetStream stream (and of its shard consumers): 1 for a single
   * nats-server, 3 (or 5) on a NATS cluster so an acknowledged event survives the loss of a
   * node and its disk. An existing stream is raised to it, never lowered.
   */
  TIDEMARK_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  /** JetStream stream max age in hours (how long an unprocessed message is kept). */
  STREAM_MAX_AGE_HOURS: intFrom(168, 1),
  /**
   * ms the stream may be missing while running (deleted, or a NATS node back with an empty
   * store) before the service creates it again; /readyz is 503 meanwhile. The workers start
   * a stream created again from its first message (its creation time differs).
   */
  STREAM_RECREATE_AFTER_MS: intFrom(5000, 0),
  SESSION_TIMEOUT_MINUTES: intFrom(30, 1),
  /**
   * Which request headers may name the client's address (comma list, any of IP_HEADERS, or
   * `none` for the socket address only). Unset: all of them, in OpenPanel's order. Narrow
   * it to what your proxy or CDN sets: a header a client sets itself can claim any address.
   */
  TRUSTED_IP_HEADERS: z
    .string()
    .optional()
    .transform((raw, ctx): IpHeader[] | undefined => {
      const text = raw?.trim().toLowerCase() ?? '';
      if (text === '') return undefined;
      if (text === 'none') return [];
      const names = text.split(',').map((s) => s.trim()).filter(Boolean);
      const unknown = names.filter((n) => !(IP_HEADERS as readonly string[]).includes(n));
      if (unknown.length) {
        ctx.addIssue({ code: 'custom', message: `unknown header ${unknown.join(', ')}; use any of ${IP_HEADERS.join(', ')}, or none` });
        return z.NEVER;
      }
      return names as IpHeader[];
    }),
});

export type Config = z.infer<typeof EnvSchema> & {
  /** TIDEMARK_SHARDS was set (absent: true, as for a Config built by hand). */
  shardsExplicit?: boolean;
};

/** READ_CONCURRENCY's default: leave a core to ingest, NATS and Redis. */
export function defaultReadConcurrency(cores = os.availableParallelism()): number {
  return Math.max(1, cores - 1);
}

/** nats://host:port, tls://host:port or a bare host[:port], as the Node NATS client takes them. */
function isServerUrl(s: string): boolean {
  try {
    const u = new URL(s.includes('://') ? s : `nats://${s}`);
    return ['nats:', 'tls:'].includes(u.protocol) && u.hostname.length > 0 && !/\s/.test(s);
  } catch {
    return false;
  }
}

/** Checks between settings. */
const CheckedSchema = EnvSchema.superRefine((c, ctx) => {
  if (c.API_THREADS > 1 && c.PORT === 0) {
    ctx.addIssue({ code: 'custom', path: ['API_THREADS'], message: 'API_THREADS > 1 needs a fixed PORT (the threads share it)' });
  }
  if (c.LIVE_MAX_SOCKETS_PER_PROJECT !== undefined && c.LIVE_MAX_SOCKETS_PER_PROJECT > c.LIVE_MAX_SOCKETS) {
    ctx.addIssue({ code: 'custom', path: ['LIVE_MAX_SOCKETS_PER_PROJECT'], message: 'at most LIVE_MAX_SOCKETS (a project\'s share of the sockets)' });
  }
});

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = CheckedSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new Error(`invalid configuration: ${lines.join('; ')}`);
  }
  return { ...parsed.data, shardsExplicit: (env.TIDEMARK_SHARDS ?? '').trim() !== '' };
}

/** LIVE_MAX_SOCKETS_PER_PROJECT, or when unset half of LIVE_MAX_SOCKETS (at least 1). */
export function liveMaxSocketsPerProject(c: Pick<Config, 'LIVE_MAX_SOCKETS' | 'LIVE_MAX_SOCKETS_PER_PROJECT'>): number {
  return c.LIVE_MAX_SOCKETS_PER_PROJECT ?? defaultMaxPerProject(c.LIVE_MAX_SOCKETS);
}

/**
 * TIDEMARK_EXACT_VISITORS_MAX alone, for code that is not handed the whole Config (the
 * insights service's default when its caller passes no value).
 */
export function exactVisitorsMaxFrom(env: NodeJS.ProcessEnv = process.env): number {
  const parsed = EnvSchema.shape.TIDEMARK_EXACT_VISITORS_MAX.safeParse(env.TIDEMARK_EXACT_VISITORS_MAX);
  if (!parsed.success) throw new Error(`invalid configuration: TIDEMARK_EXACT_VISITORS_MAX: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  return parsed.data;
}
