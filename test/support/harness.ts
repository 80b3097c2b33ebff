// Integration test harness: a real Tidemark (API + worker, in this process or a child
// process) on the real PostgreSQL, Redis and NATS, isolated by its own database and
// namespace, torn down afterwards.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Redis } from 'ioredis';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { loadConfig, type Config } from '../../internal/config/config';
import { connectAll, start, type Roles, type Running } from '../../internal/app/runtime';
import { hashSecret, generateSecret } from '../../internal/auth/secrets';
import { createClient, createProject, type ClientMode } from '../../internal/store/accounts';
import { createPool, ensureDatabase, type Pool } from '../../internal/store/db';
import { migrate } from '../../internal/store/migrate';
import type { Bus } from '../../internal/bus/bus';
import type { Enricher } from '../../internal/enrich';
import type { JobRunner } from '../../internal/jobs/jobs';
import { ShardManager } from '../../internal/worker/shard-manager';
import { ShardRunner, type ShardRunnerDeps } from '../../internal/worker/shard-runner';
import { createEnricher } from '../../internal/enrich';
import { createLogger } from '../../internal/obs/log';
import { createMetrics, type Metrics } from '../../internal/obs/metrics';
import { redisKeys } from '../../internal/redis/redis';
import { PartitionKeeper } from '../../internal/store/partitions';
import { createFromTemplate } from './template-db';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const PG_BASE = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const NATS_URL = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

let servicesChecked = false;
/** Starts any of PostgreSQL, Redis, NATS that is down (test/ensure-services.sh). */
export function ensureServices(): void {
  if (servicesChecked) return;
  execFileSync('bash', [path.join(ROOT, 'test/ensure-services.sh')], { stdio: 'inherit' });
  servicesChecked = true;
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs `fn` over `items` with at most `width` at once; the results in order. */
export async function inPool<T, R>(items: T[], width: number, fn: (x: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  }));
  return out;
}

/** Polls `fn` until it returns a truthy value (returned) or the time runs out (throws with the last value). */
export async function waitFor<T>(fn: () => Promise<T> | T, opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  let last: T | undefined;
  let lastErr: unknown;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (err) {
      lastErr = err;
    }
    await sleep(opts.intervalMs ?? 100);
  }
  throw new Error(`timed out waiting for ${opts.what ?? 'condition'}; last value ${JSON.stringify(last)} ${lastErr ? String(lastErr) : ''}`);
}

export interface Credentials {
  clientId: string;
  clientSecret: string;
}

/** An isolated environment: its own database and namespace. */
export class TestEnv {
  readonly dbName: string;
  readonly namespace: string;
  readonly databaseUrl: string;
  db!: Pool;

  constructor(prefix = 'tm') {
    this.dbName = uniqueName(`${prefix}_test`).toLowerCase();
    this.namespace = uniqueName(prefix).replace(/_/g, '-');
    this.databaseUrl = `${PG_BASE}/${this.dbName}`;
  }

  // Tests see the rollup refresh at once (ROLLUP_REFRESH_QUIET_MS=0), as before it could wait
  // for a past hour to settle; test/rollup-refresh-quiet.test.ts covers the wait itself.
  config(extra: Record<string, string> = {}): Config {
    return loadConfig({
      PORT: '0', METRICS_PORT: '0', DATABASE_URL: this.databaseUrl, NATS_URL, REDIS_URL,
      TIDEMARK_NAMESPACE: this.namespace, LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      TIDEMARK_SHARDS: '4', ROLLUP_REFRESH_QUIET_MS: '0', ...extra,
    });
  }

  env(extra: Record<string, string> = {}): Record<string, string> {
    return {
      PORT: '0', DATABASE_URL: this.databaseUrl, NATS_URL, REDIS_URL, TIDEMARK_NAMESPACE: this.namespace,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn', TIDEMARK_SHARDS: '4', ROLLUP_REFRESH_QUIET_MS: '0', ...extra,
    };
  }

  async setup(): Promise<this> {
    ensureServices();
    // A copy of the migrated template (test/support/template-db.ts); migrate() then finds
    // nothing to apply. Without it, the database is made and migrated as the service does.
    if (!(await createFromTemplate(PG_BASE, this.dbName))) await ensureDatabase(this.databaseUrl);
    this.db = createPool(this.databaseUrl, 4);
    try {
      await migrate(this.db);
    } catch (err) {
      await this.teardown(); // a failed migration must not leave the database behind
      throw err;
    }
    return this;
  }

  async project(opts: { name?: string; timezone?: string; origins?: string[] } = {}): Promise<string> {
    const p = await createProject(this.db, { name: opts.name ?? 'Test', timezone: opts.timezone ?? 'UTC', origins: opts.origins ?? [] });
    return p.id;
  }

  async client(projectId: string, mode: ClientMode, ingestRate = 0): Promise<Credentials> {
    const secret = generateSecret();
    const c = await createClient(this.db, { projectId, mode, secretHash: await hashSecret(secret), ingestRate });
    return { clientId: c.id, clientSecret: secret };
  }

  /** Drops the database, the JetStream stream and the namespace's Redis keys. */
  async teardown(): Promise<void> {
    await this.db?.end().catch(() => {});
    const admin = new pg.Client({ connectionString: `${PG_BASE}/postgres` });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(this.dbName)} WITH (FORCE)`).catch(() => {});
    await admin.end();
    await dropStream(this.namespace);
    const redis = new Redis(REDIS_URL);
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${this.namespace}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
    redis.disconnect();
  }
}

/** Deletes a namespace's JetStream stream (none is fine). */
export async function dropStream(namespace: string): Promise<void> {
  const nc = await connect({ servers: NATS_URL });
  await (await jetstreamManager(nc)).streams.delete(`${namespace}_events`).catch(() => {});
  await nc.close();
}

/** A running in-process Tidemark. */
export async function startApp(env: TestEnv, roles: Roles = { api: true, worker: true }, extra: Record<string, string> = {}): Promise<Running & { url: string }> {
  const running = await start(env.config(extra), roles);
  return Object.assign(running, { url: `http://127.0.0.1:${running.port}` });
}

/**
 * A worker a test builds itself (connectAll, a ShardManager of ShardRunners, maybe a
 * JobRunner) instead of startApp's, to set what the config cannot (a clock, a timeout).
 */
export interface TestWorker { db: Pool; redis: Redis; bus: Bus; manager: ShardManager; enricher: Enricher; jobs?: JobRunner }

type Connections = Awaited<ReturnType<typeof connectAll>>;

/** What a test sets of each ShardRunner it builds (the rest comes from startTestWorker's connections). */
export type TestRunnerDeps = Omit<ShardRunnerDeps, 'bus' | 'db' | 'enricher' | 'partitions' | 'log' | 'metrics'>;

/**
 * The worker side built in the test's process (no API): the real connections, enricher, shard
 * manager and runners, with the runner settings the test gives. `jobs` makes a JobRunner first
 * (the runners' onOpened may use it); `bus` may wrap the bus the runners consume from.
 * Close it with closeWorker().
 */
export async function startTestWorker(env: TestEnv, o: {
  runner: (w: { jobs?: JobRunner }) => TestRunnerDeps;
  tickMs: number;
  jobs?: (c: Connections) => Promise<JobRunner>;
  bus?: (bus: Bus) => Bus;
}): Promise<TestWorker & { timescale: boolean; metrics: Metrics }> {
  const cfg = env.config();
  const log = createLogger('silent');
  const metrics = createMetrics();
  const c = await connectAll(cfg, log);
  const jobs = o.jobs ? await o.jobs(c) : undefined;
  const enricher = await createEnricher();
  const partitions = new PartitionKeeper(c.db, c.timescale);
  const bus = o.bus ? o.bus(c.bus) : c.bus;
  const deps = o.runner({ jobs });
  const manager = new ShardManager({
    redis: c.redis, keys: redisKeys(env.namespace), shards: c.bus.shards, log, metrics, tickMs: o.tickMs,
    start: (shard) => {
      const runner = new ShardRunner(shard, { ...deps, bus, db: c.db, enricher, partitions, log, metrics });
      runner.start();
      return runner;
    },
  });
  manager.start();
  return { ...c, jobs, manager, enricher, metrics };
}

/** Closes a TestWorker (shards, jobs, enricher, bus, Redis, PostgreSQL, in that order); none when `before` failed first. */
export async function closeWorker(worker: TestWorker | undefined): Promise<void> {
  await worker?.manager.close();
  await worker?.jobs?.close();
  worker?.enricher.close();
  await worker?.bus.drainAndClose();
  worker?.redis.disconnect();
  await worker?.db.end();
}

/**
 * A Tidemark in a child process (for SIGTERM / SIGKILL tests). Resolves once it listens. A
 * variable given as '' in `extra` is left unset (e.g. TIDEMARK_SHARDS, to run as a user does).
 */
export async function spawnApp(
  env: TestEnv,
  script: 'all' | 'api' | 'worker',
  extra: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string; port: number; logs: () => string }> {
  // A random port is taken by another test's server now and then: the app then fails to
  // listen (its port is its own, not shared) and starts again on another.
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnAppOnce(env, script, extra);
    } catch (err) {
      if (attempt >= 5 || !/cannot listen/.test((err as Error).message)) throw err;
    }
  }
}

async function spawnAppOnce(
  env: TestEnv,
  script: 'all' | 'api' | 'worker',
  extra: Record<string, string>,
): Promise<{ child: ChildProcess; url: string; port: number; logs: () => string }> {
  // Below the kernel's ephemeral range (32768+), so an outgoing connection never holds it.
  const port = 12000 + Math.floor(Math.random() * 18000);
  // TM_CPU_PROF=DIR: a V8 CPU profile of the app (each thread's) in DIR when it exits, for the
  // benchmarks that spawn it (e.g. `TM_CPU_PROF=/tmp/prof npx tsx bench/floor.ts`).
  const profile = process.env.TM_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.TM_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', path.join(ROOT, `cmd/${script}/main.ts`)], {
    cwd: ROOT,
    env: Object.fromEntries(
      Object.entries({ ...process.env, ...env.env({ PORT: String(port), METRICS_PORT: String(port), LOG_LEVEL: 'info', ...extra }) }).filter(([, v]) => v !== ''),
    ),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const healthy = async () => {
    try {
      return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok;
    } catch {
      return false;
    }
  };
  try {
    await waitFor(async () => child.exitCode !== null || (await healthy()), { timeoutMs: 60_000, what: `${script} to start` });
  } catch (err) {
    child.kill('SIGKILL'); // never leave a half-started child behind
    throw new Error(`${(err as Error).message}\n${out}`);
  }
  if (child.exitCode !== null) throw new Error(`${script} exited: ${out}`);
  return { child, url: `http://127.0.0.1:${port}`, port, logs: () => out };
}

export interface SendOptions {
  headers?: Record<string, string>;
  /** Default BROWSER_UA: an event without a browser's user-agent is server-side (opens no session). */
  userAgent?: string;
  ip?: string;
}

/** A desktop Chrome's user-agent: what tests send unless they name another (fetch's own, `node`, is a server's). */
export const BROWSER_UA = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';

/** POST JSON with write-client credentials. */
export async function post(url: string, body: unknown, creds: Credentials | null, o: SendOptions = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(o.headers ?? {}) };
  if (creds) {
    headers['service-client-id'] = creds.clientId;
    headers['service-client-secret'] = creds.clientSecret;
  }
  if (o.userAgent) headers['user-agent'] = o.userAgent;
  else if (!Object.keys(headers).some((h) => h.toLowerCase() === 'user-agent')) headers['user-agent'] = BROWSER_UA;
  if (o.ip) headers['x-client-ip'] = o.ip;
  const res = await fetch(url, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers };
}

/** GET with read-client credentials. */
export async function get(url: string, creds: Credentials | null, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const h: Record<string, string> = { ...headers };
  if (creds) {
    h['service-client-id'] = creds.clientId;
    h['service-client-secret'] = creds.clientSecret;
  }
  const res = await fetch(url, { headers: h });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers };
}

/** `{type:'track', payload}` for a named event with properties. */
export const track = (name: string, properties: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  type: 'track',
  payload: { name, properties, ...extra },
});
