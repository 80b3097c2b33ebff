// Private PostgreSQL, Redis and NATS instances for the fault tests (test/faults-*.test.ts),
// on free ports and temp dirs, so a test can stop, kill and restart them without touching
// the shared services other test files use. Also the steady load and the exact
// reconciliation those tests share.
//
// Every instance is registered when started; `stopAllPrivate()` (call it in `finally`)
// and a process 'exit' / SIGINT / SIGTERM hook stop them and remove their dirs, so a
// failing test leaves nothing behind.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Config } from '../../internal/config/config';
import { createPool, ensureDatabase, type Pool } from '../../internal/store/db';
import { migrate } from '../../internal/store/migrate';
import { BROWSER_UA, TestEnv, sleep, spawnApp, waitFor, type Credentials } from './harness';
import { assertSessionEvents } from './sessions-traffic';

export const NATS_BIN = process.env.TEST_NATS_BIN ?? '/usr/sbin/nats-server';
export const REDIS_BIN = process.env.TEST_REDIS_BIN ?? 'redis-server';
export const PG_BIN = process.env.TEST_PG_BIN ?? '/usr/lib/postgresql/15/bin';

// ---------------------------------------------------------------- ports and processes

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

export function alive(child: ChildProcess | null): child is ChildProcess {
  return !!child && child.exitCode === null && child.signalCode === null;
}

/** Sends `signal` and waits for the exit (SIGKILL after `graceMs`). */
export async function stopChild(child: ChildProcess | null, signal: NodeJS.Signals = 'SIGKILL', graceMs = 15_000): Promise<void> {
  if (!alive(child)) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(t);
}

export interface Service {
  name: string;
  /** Synchronous last-resort cleanup (process exit). */
  killSync(): void;
  destroy(): Promise<void>;
}

/** A server child process on a private port and directory: the lifecycle all three share. */
export abstract class ChildService implements Service {
  abstract readonly name: string;
  child: ChildProcess | null = null;
  protected logs: () => string = () => '';
  /** Signals (and grace ms) for a graceful stop and for a kill. */
  protected stopSignal: [NodeJS.Signals, number?] = ['SIGTERM'];
  protected killSignal: [NodeJS.Signals, number?] = ['SIGKILL'];
  protected constructor(readonly port: number, readonly dir: string) {}

  abstract start(): Promise<void>;

  get running(): boolean {
    return alive(this.child);
  }

  async stop(): Promise<void> {
    await stopChild(this.child, ...this.stopSignal);
  }

  async kill(): Promise<void> {
    await stopChild(this.child, ...this.killSignal);
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  recentLogs(): string {
    return this.logs();
  }

  killSync(): void {
    if (alive(this.child)) this.child.kill(this.killSignal[0]);
    rmSync(this.dir, { recursive: true, force: true });
  }

  async destroy(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

const registry = new Set<Service>();
let hooked = false;
export function register(s: Service): void {
  registry.add(s);
  if (hooked) return;
  hooked = true;
  process.once('exit', () => {
    for (const x of registry) x.killSync();
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      for (const x of registry) x.killSync();
      process.exit(128 + (sig === 'SIGINT' ? 2 : 15));
    });
  }
}

/** Stops every private service still running and removes its files. */
export async function stopAllPrivate(): Promise<void> {
  const all = [...registry];
  registry.clear();
  await Promise.all(all.map((s) => s.destroy().catch(() => s.killSync())));
}

/** Keeps the last `max` characters of a child's output for error messages. */
export function tail(child: ChildProcess, max = 8000): () => string {
  let out = '';
  const add = (d: Buffer) => {
    out += d.toString();
    if (out.length > 2 * max) out = out.slice(-max);
  };
  child.stdout?.on('data', add);
  child.stderr?.on('data', add);
  return () => out.slice(-max);
}

// ---------------------------------------------------------------- NATS

/** nats-server with JetStream on its own port and store dir; restarts keep the store. */
export class PrivateNats extends ChildService {
  readonly name = 'nats';
  private constructor(port: number, dir: string) {
    super(port, dir);
  }

  static async start(): Promise<PrivateNats> {
    const n = new PrivateNats(await freePort(), mkdtempSync(path.join(os.tmpdir(), 'tm-fault-nats-')));
    register(n);
    await n.start();
    return n;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    if (alive(this.child)) return;
    const child = spawn(NATS_BIN, ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    this.logs = tail(child);
    await waitFor(async () => {
      if (!alive(child)) throw new Error(`nats-server exited: ${this.logs()}`);
      return portOpen(this.port);
    }, { timeoutMs: 15_000, intervalMs: 50, what: `nats-server on ${this.port}` });
  }
}

// ---------------------------------------------------------------- Redis

/** One RESP round trip (PING) on a fresh socket: true when Redis answers +PONG. */
function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = '';
    const done = (v: boolean) => {
      sock.destroy();
      resolve(v);
    };
    sock.setTimeout(1000, () => done(false));
    sock.once('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
    });
    sock.once('error', () => done(false));
  });
}

/** redis-server without persistence on its own port: a restart starts empty, as a lost Redis would. */
export class PrivateRedis extends ChildService {
  readonly name = 'redis';
  private constructor(port: number, dir: string) {
    super(port, dir);
  }

  static async start(): Promise<PrivateRedis> {
    const r = new PrivateRedis(await freePort(), mkdtempSync(path.join(os.tmpdir(), 'tm-fault-redis-')));
    register(r);
    await r.start();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    if (alive(this.child)) return;
    const child = spawn(
      REDIS_BIN,
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', this.dir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    this.logs = tail(child);
    await waitFor(async () => {
      if (!alive(child)) throw new Error(`redis-server exited: ${this.logs()}`);
      return redisPing(this.port);
    }, { timeoutMs: 15_000, intervalMs: 50, what: `redis-server on ${this.port}` });
  }
}

// ---------------------------------------------------------------- PostgreSQL

function postgresUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null; // not root: run as ourselves
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const uid = id('-u');
  const gid = id('-g');
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('running as root needs an OS user "postgres" for PostgreSQL');
  return { uid, gid };
}

/**
 * A PostgreSQL 15 cluster (initdb, trust auth) in a temp dir on its own port. PostgreSQL
 * refuses to run as root, so as root initdb and postgres run as the `postgres` OS user
 * (spawned with its uid/gid, the same as `runuser -u postgres --`, but the child is the
 * postmaster itself, so its pid is ours to signal).
 */
export class PrivatePostgres extends ChildService {
  readonly name = 'postgres';
  private readonly user = postgresUser();
  // Fast shutdown (SIGINT) rolls back and cuts connections; immediate (SIGQUIT) skips the
  // checkpoint, so the next start runs crash recovery.
  protected override stopSignal: [NodeJS.Signals, number?] = ['SIGINT', 20_000];
  protected override killSignal: [NodeJS.Signals, number?] = ['SIGQUIT', 10_000];
  private constructor(port: number, dir: string) {
    super(port, dir);
  }

  static async start(): Promise<PrivatePostgres> {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tm-fault-pg-'));
    const p = new PrivatePostgres(await freePort(), dir);
    register(p);
    if (p.user) chownSync(dir, p.user.uid, p.user.gid);
    const init = spawnSync(
      path.join(PG_BIN, 'initdb'),
      ['-D', p.dataDir, '--auth=trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync'],
      { cwd: dir, encoding: 'utf8', ...(p.user ?? {}) },
    );
    if (init.status !== 0) throw new Error(`initdb failed (${init.status}): ${init.stderr}${init.stdout}`);
    await p.start();
    return p;
  }

  get dataDir(): string {
    return path.join(this.dir, 'data');
  }

  /** URL of the server (append `/dbname`). */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    if (alive(this.child)) return;
    const child = spawn(
      path.join(PG_BIN, 'postgres'),
      ['-D', this.dataDir, '-c', 'listen_addresses=127.0.0.1', '-p', String(this.port), '-k', '/tmp',
        // A test cluster: durability against an OS crash is not what is tested here.
        '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off',
        '-c', 'max_connections=200', '-c', 'shared_buffers=64MB'],
      { cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'], ...(this.user ?? {}) },
    );
    this.child = child;
    this.logs = tail(child);
    await waitFor(async () => {
      if (!alive(child)) throw new Error(`postgres exited: ${this.logs()}`);
      const c = new pg.Client({ connectionString: `${this.url}/postgres`, connectionTimeoutMillis: 1000 });
      c.on('error', () => {});
      try {
        await c.connect();
        await c.query('SELECT 1');
        return true;
      } catch {
        return false;
      } finally {
        await c.end().catch(() => {});
      }
    }, { timeoutMs: 30_000, intervalMs: 100, what: `postgres on ${this.port}` });
  }
}

// ---------------------------------------------------------------- an environment on private services

export interface PrivateUrls {
  /** Server URL of a private PostgreSQL (the database name is added). */
  pgBase?: string;
  redisUrl?: string;
  natsUrl?: string;
}

/**
 * A TestEnv whose app config points at the given private services (the others stay the
 * shared ones). With a private PostgreSQL, setup creates and migrates the database there
 * and teardown only closes the pool (the cluster is thrown away with its dir).
 */
export class PrivateEnv extends TestEnv {
  constructor(prefix: string, readonly urls: PrivateUrls) {
    super(prefix);
  }

  get dbUrl(): string {
    return this.urls.pgBase ? `${this.urls.pgBase}/${this.dbName}` : this.databaseUrl;
  }

  private overrides(): Record<string, string> {
    const o: Record<string, string> = {};
    if (this.urls.pgBase) o.DATABASE_URL = this.dbUrl;
    if (this.urls.redisUrl) o.REDIS_URL = this.urls.redisUrl;
    if (this.urls.natsUrl) o.NATS_URL = this.urls.natsUrl;
    return o;
  }

  override config(extra: Record<string, string> = {}): Config {
    return super.config({ ...this.overrides(), ...extra });
  }

  override env(extra: Record<string, string> = {}): Record<string, string> {
    return super.env({ ...this.overrides(), ...extra });
  }

  override async setup(): Promise<this> {
    if (!this.urls.pgBase) return super.setup();
    await ensureDatabase(this.dbUrl);
    this.db = createPool(this.dbUrl, 4);
    await migrate(this.db);
    return this;
  }

  override async teardown(): Promise<void> {
    if (!this.urls.pgBase) return super.teardown();
    await this.db?.end().catch(() => {});
  }
}

// ---------------------------------------------------------------- steady, deterministic load

const MIN = 60_000;
export const SESSION_TIMEOUT_MS = 30 * MIN;
/** Events of one device per session, the gap between them, and the gap between sessions. */
const PER_SESSION = 12;
const IN_SESSION_GAP_MS = 45_000;
const BETWEEN_SESSIONS_MS = 31 * MIN;
/** Event times start three days ago (UTC midnight): always in the past, never "live". */
const BASE_MS = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 3 * 86_400_000;

export const loadDeviceId = (i: number) => createHash('sha256').update(`tidemark-fault-device-${i}`).digest('hex').slice(0, 32);

export interface LoadEvent {
  seq: number;
  device: number;
  deviceId: string;
  /** The device's k-th event. */
  k: number;
  at: number;
  name: 'screen_view' | 'click';
  path: string | null;
}

/**
 * Event `seq` of the load: device `seq % devices`, its k-th event (k = seq / devices);
 * times advance 45 s per event inside a session of 12 and 31 min between sessions, so
 * the sessions of any subset of seqs follow from the seqs alone.
 */
export function loadEvent(seq: number, devices: number): LoadEvent {
  const device = seq % devices;
  const k = Math.floor(seq / devices);
  const session = Math.floor(k / PER_SESSION);
  const at = BASE_MS + device * 1000 + k * IN_SESSION_GAP_MS + session * (BETWEEN_SESSIONS_MS - IN_SESSION_GAP_MS);
  const view = k % 3 === 0;
  return { seq, device, deviceId: loadDeviceId(device), k, at, name: view ? 'screen_view' : 'click', path: view ? `/p/${k % 5}` : null };
}

export function loadBody(e: LoadEvent) {
  const properties: Record<string, unknown> = {
    seq: e.seq, __deviceId: e.deviceId, __timestamp: new Date(e.at).toISOString(),
  };
  if (e.path) properties.__path = `https://fault.example${e.path}`;
  return { type: 'track', payload: { name: e.name, properties } };
}

export type Outcome = number | 'error';

export interface ResponseInfo {
  seq: number;
  status: Outcome;
  headers: Headers | null;
  /** ms since the load started, when the answer came. */
  atMs: number;
  /** ms since the load started, when the request was sent. */
  sentMs: number;
  tookMs: number;
  /** The base URL the request went to (read when it was sent). */
  url: string;
}

export interface LoadOptions {
  url: string;
  /** Several APIs: device d sends to urls[d % urls.length] (instead of `url`). */
  urls?: string[];
  creds: Credentials;
  /** Requests per second over all devices. */
  rate: number;
  devices?: number;
  requestTimeoutMs?: number;
  onResponse?: (r: ResponseInfo) => void;
}

/**
 * One loop per device, each sending its events one after another (so each device's
 * events reach the API in time order) on a fixed schedule: `rate` requests per second in
 * all. Every seq is sent once (no retries); its outcome is recorded.
 */
export class SteadyLoad {
  readonly devices: number;
  readonly outcomes = new Map<number, Outcome>();
  readonly responses: ResponseInfo[] = [];
  url: string;
  private stopped = false;
  private loops: Promise<void> | null = null;
  private t0 = 0;

  constructor(private readonly o: LoadOptions) {
    this.devices = o.devices ?? 30;
    this.url = o.url;
  }

  start(): this {
    this.t0 = Date.now();
    const interval = (1000 * this.devices) / this.o.rate;
    this.loops = Promise.all(Array.from({ length: this.devices }, async (_, d) => {
      // Spread the devices over one interval so the rate is steady.
      let next = this.t0 + (interval * d) / this.devices;
      for (let k = 0; !this.stopped; k++) {
        const wait = next - Date.now();
        if (wait > 0) await sleep(wait);
        if (this.stopped) break;
        next = Math.max(next + interval, Date.now());
        await this.send(k * this.devices + d);
      }
    })).then(() => {});
    return this;
  }

  private async send(seq: number): Promise<void> {
    const e = loadEvent(seq, this.devices);
    const started = Date.now();
    let status: Outcome;
    let headers: Headers | null = null;
    const base = (this.o.urls?.length ? this.o.urls[e.device % this.o.urls.length] : this.url)!;
    try {
      const res = await fetch(`${base}/track`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'service-client-id': this.o.creds.clientId, 'service-client-secret': this.o.creds.clientSecret, 'user-agent': BROWSER_UA },
        body: JSON.stringify(loadBody(e)),
        signal: AbortSignal.timeout(this.o.requestTimeoutMs ?? 20_000),
      });
      await res.arrayBuffer();
      status = res.status;
      headers = res.headers;
    } catch {
      status = 'error';
    }
    this.outcomes.set(seq, status);
    const info: ResponseInfo = { seq, status, headers, atMs: Date.now() - this.t0, sentMs: started - this.t0, tookMs: Date.now() - started, url: base };
    this.responses.push(info);
    this.o.onResponse?.(info);
  }

  /** Stops sending and waits for the requests in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.loops;
  }

  get accepted(): number[] {
    return [...this.outcomes].filter(([, s]) => typeof s === 'number' && s >= 200 && s < 300).map(([seq]) => seq).sort((a, b) => a - b);
  }

  /** Answers with time in [fromMs, toMs) (ms since start). */
  between(fromMs: number, toMs: number): ResponseInfo[] {
    return this.responses.filter((r) => r.atMs >= fromMs && r.atMs < toMs);
  }

  /** Requests sent at or after `fromMs` and answered before `toMs` (ms since start): inside a window. */
  within(fromMs: number, toMs: number): ResponseInfo[] {
    return this.responses.filter((r) => r.sentMs >= fromMs && r.atMs < toMs);
  }

  /** Requests sent in [fromMs, toMs) (ms since start). */
  sentBetween(fromMs: number, toMs: number): ResponseInfo[] {
    return this.responses.filter((r) => r.sentMs >= fromMs && r.sentMs < toMs);
  }

  msSinceStart(): number {
    return Date.now() - this.t0;
  }

  /** {status: count} */
  tally(rs: ResponseInfo[] = this.responses): Record<string, number> {
    const t: Record<string, number> = {};
    for (const r of rs) t[String(r.status)] = (t[String(r.status)] ?? 0) + 1;
    return t;
  }
}

// ---------------------------------------------------------------- reconciliation

export async function seqCounts(db: Pool): Promise<Map<number, number>> {
  const r = await db.query("SELECT (properties->>'seq')::int AS seq, count(*)::int AS n FROM events WHERE properties ? 'seq' GROUP BY 1");
  return new Map(r.rows.map((row) => [row.seq as number, row.n as number]));
}

/** Waits until every accepted seq is stored and the stored set stops changing. */
export async function waitForSettled(db: Pool, load: SteadyLoad, timeoutMs = 45_000): Promise<void> {
  const accepted = load.accepted;
  await waitFor(async () => {
    const c = await seqCounts(db);
    return accepted.every((s) => c.has(s));
  }, { timeoutMs, intervalMs: 250, what: `all ${accepted.length} accepted events stored` });
  let last = -1;
  await waitFor(async () => {
    const r = await db.query("SELECT count(*)::int AS n FROM events");
    const n = r.rows[0].n as number;
    const stable = n === last;
    last = n;
    return stable;
  }, { timeoutMs: 20_000, intervalMs: 1000, what: 'the event count to settle' });
}

interface RefSession {
  device_id: string;
  started_at: number;
  last_event_at: number;
  event_count: number;
  screen_view_count: number;
  entry_path: string;
  exit_path: string;
  ended: boolean;
}

/** The sessions semantics.md gives for exactly the stored load events (runs < 30 min apart). */
export function referenceSessions(storedSeqs: number[], devices: number): RefSession[] {
  const byDevice = new Map<number, LoadEvent[]>();
  for (const seq of storedSeqs) {
    const e = loadEvent(seq, devices);
    if (!byDevice.has(e.device)) byDevice.set(e.device, []);
    byDevice.get(e.device)!.push(e);
  }
  const out: RefSession[] = [];
  for (const events of byDevice.values()) {
    events.sort((a, b) => a.at - b.at);
    const runs: LoadEvent[][] = [];
    for (const e of events) {
      const cur = runs[runs.length - 1];
      if (cur && e.at - cur[cur.length - 1]!.at < SESSION_TIMEOUT_MS) cur.push(e);
      else runs.push([e]);
    }
    runs.forEach((run, i) => {
      const views = run.filter((e) => e.name === 'screen_view');
      out.push({
        device_id: run[0]!.deviceId, started_at: run[0]!.at, last_event_at: run[run.length - 1]!.at,
        event_count: run.length, screen_view_count: views.length,
        entry_path: views[0]?.path ?? '', exit_path: views[views.length - 1]?.path ?? '',
        ended: i < runs.length - 1,
      });
    });
  }
  return out.sort(bySession);
}

const bySession = (a: RefSession, b: RefSession) => (a.device_id < b.device_id ? -1 : a.device_id > b.device_id ? 1 : a.started_at - b.started_at);

async function storedLoadSessions(db: Pool, devices: number): Promise<RefSession[]> {
  const ids = Array.from({ length: devices }, (_, i) => loadDeviceId(i));
  const r = await db.query('SELECT * FROM sessions WHERE device_id = ANY($1::text[])', [ids]);
  return r.rows.map((row) => ({
    device_id: row.device_id, started_at: row.started_at.getTime(), last_event_at: row.last_event_at.getTime(),
    event_count: row.event_count, screen_view_count: row.screen_view_count,
    entry_path: row.entry_path ?? '', exit_path: row.exit_path ?? '', ended: row.ended,
  })).sort(bySession);
}

export interface Reconciliation {
  sent: number;
  accepted: number;
  refusedButStored: number;
  stored: number;
  sessions: number;
}

/**
 * The promise, checked exactly: every seq that got a 2xx is in `events` exactly once, no
 * seq is there twice (whatever its answer), nothing is there that was not sent; sessions
 * are consistent with the events and equal to the reference computed from the stored seqs.
 */
export async function reconcile(db: Pool, load: SteadyLoad): Promise<Reconciliation> {
  const counts = await seqCounts(db);
  const accepted = load.accepted;
  const missing = accepted.filter((s) => !counts.has(s));
  assert.deepEqual(missing.slice(0, 20), [], `${missing.length} of ${accepted.length} accepted (2xx) events are not stored`);
  const twice = [...counts].filter(([, n]) => n !== 1).map(([seq, n]) => ({ seq, n, answer: load.outcomes.get(seq) }));
  assert.deepEqual(twice.slice(0, 20), [], `${twice.length} events stored more than once`);
  const unsent = [...counts.keys()].filter((s) => !load.outcomes.has(s));
  assert.deepEqual(unsent.slice(0, 20), [], 'stored events that were never answered');
  const acceptedSet = new Set(accepted);
  const refusedButStored = [...counts.keys()].filter((s) => !acceptedSet.has(s)).length;

  const c = (await db.query(`
    SELECT (SELECT coalesce(sum(event_count), 0)::int FROM sessions) AS counted,
           (SELECT count(*)::int FROM events WHERE name NOT IN ('session_start', 'session_end')) AS events,
           (SELECT count(*)::int FROM sessions) AS sessions,
           (SELECT count(*)::int FROM events WHERE name = 'session_start') AS starts,
           (SELECT coalesce(sum(screen_view_count), 0)::int FROM sessions) AS views_counted,
           (SELECT count(*)::int FROM events WHERE name = 'screen_view') AS views`)).rows[0];
  assert.equal(c.counted, c.events, `sum(sessions.event_count) ${c.counted} != real events ${c.events}`);
  assert.equal(c.starts, c.sessions, `${c.starts} session_start rows for ${c.sessions} sessions`);
  assert.equal(c.views_counted, c.views, 'sum(sessions.screen_view_count) != screen_view events');
  await assertSessionEvents(db);

  const expected = referenceSessions([...counts.keys()], load.devices);
  const actual = await storedLoadSessions(db, load.devices);
  assert.equal(actual.length, expected.length, 'number of sessions of the load devices');
  for (let i = 0; i < expected.length; i++) assert.deepEqual(actual[i], expected[i], `session #${i}`);
  return { sent: load.outcomes.size, accepted: accepted.length, refusedButStored, stored: counts.size, sessions: actual.length };
}

// ---------------------------------------------------------------- small helpers

/**
 * spawnApp, retried when the random port it picks is taken ("cannot listen": its range
 * 20000-40000 overlaps the kernel's ephemeral ports, so under load a collision happens).
 */
export async function spawnAppRetry(...a: Parameters<typeof spawnApp>): ReturnType<typeof spawnApp> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnApp(...a);
    } catch (err) {
      if (attempt >= 4 || !/cannot listen/.test((err as Error).message)) throw err;
    }
  }
}

/** Value of one Prometheus sample (`name{labels}`), 0 when absent. */
export function metricValue(text: string, sample: string): number {
  for (const line of text.split('\n')) {
    if (line.startsWith(sample + ' ')) return Number(line.slice(sample.length + 1));
  }
  return 0;
}

/** Resolves after `ms` without keeping the process alive. */
export const timer = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());
export const withTimeout = <T>(p: Promise<T>, ms: number) => Promise.race([p, timer(ms)]);
