// API threads (API_THREADS > 1) and npm start's worker thread: the main thread runs start()
// as always, then starts API_THREADS - 1 worker threads that each run the API role alone
// (internal/app/api-thread.ts) on the same port, and, under npm start, one more that runs
// the worker role (enrich, sessionize, write, BullMQ jobs) without an HTTP server, so that a
// worker batch never holds up a producer's 202 on the main thread. uWebSockets.js opens its listen sockets with SO_REUSEPORT, so the kernel
// spreads new connections over the threads; each thread has its own uWS app, NATS, Redis and
// PostgreSQL clients, ingest batcher and caches (everything shared lives in NATS, Redis and
// PostgreSQL already: rate limits, live sets, salts, clients).
//
// The main thread owns the lifecycle: a thread that fails to start fails start(); draining
// drains every thread (each finishes its in-flight requests and flushes its batcher before it
// says it is drained); a thread that dies on its own ends the process (its unanswered requests
// were never acked, so producers retry them; nothing acked is lost). /metrics, on any
// thread, is the sum over all threads (prom-client's AggregatorRegistry).
import { Worker } from 'node:worker_threads';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Config } from '../config/config';
import type { Logger } from '../obs/log';

type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** Main thread -> API thread. */
export type ToThread =
  | { t: 'drain' }
  | { t: 'snapshot'; id: number }
  | { t: 'rendered'; id: number; text: string };

/** API thread -> main thread. */
export type FromThread =
  | { t: 'ready'; port: number }
  | { t: 'failed'; message: string }
  | { t: 'drained' }
  | { t: 'snapshot'; id: number; data: MetricsJson }
  | { t: 'render'; id: number }
  /** The worker thread, every second: why some shard of it cannot be written (null: none). */
  | { t: 'health'; problem: string | null };

export interface ThreadData {
  cfg: Config;
  index: number;
  /** 'api' (default): the API role on the shared port; 'worker': the worker role, no server. */
  role?: 'api' | 'worker';
}

/**
 * The thread's entry: api-thread.ts, through tsx's loader when running from the TypeScript
 * sources (as npm start does; a worker thread does not inherit the parent's --import hooks).
 */
const THREAD_ENTRY = new URL(import.meta.url.endsWith('.ts') ? './api-thread.ts' : './api-thread.js', import.meta.url).href;
const THREAD_BOOT = import.meta.url.endsWith('.ts')
  ? `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(THREAD_ENTRY)}); });`
  : `import(${JSON.stringify(THREAD_ENTRY)});`;

const SNAPSHOT_TIMEOUT_MS = 2_000;
const DRAIN_TIMEOUT_MS = 35_000;

interface Member {
  index: number;
  role: 'api' | 'worker';
  worker: Worker;
  exited: Promise<void>;
  drained: boolean;
}

export class ApiThreads {
  private members: Member[] = [];
  private nextId = 1;
  private pending = new Map<number, (data: MetricsJson | null) => void>();
  private draining = false;
  /** What the worker thread last said of its shards (null: every one can be written). */
  workerProblem: string | null = null;

  private constructor(
    private readonly registry: Registry,
    private readonly log: Logger,
  ) {}

  /**
   * Starts `count` API threads on `port` (the port the main thread listens on); resolves when
   * every one listens, rejects (after stopping the others) when one cannot start.
   */
  static async start(o: { cfg: Config; count: number; worker?: boolean; port: number; registry: Registry; log: Logger; onDied: (err: Error) => void }): Promise<ApiThreads> {
    const threads = new ApiThreads(o.registry, o.log);
    const cfg: Config = { ...o.cfg, PORT: o.port };
    const ready = Array.from({ length: o.count }, (_, i) => threads.spawn(cfg, i + 1, 'api', o.onDied));
    if (o.worker) ready.push(threads.spawn(cfg, o.count + 1, 'worker', o.onDied));
    const results = await Promise.allSettled(ready);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      await threads.drain();
      throw failed.reason;
    }
    return threads;
  }

  /** Extra API threads (the worker thread not counted). */
  get apiCount(): number {
    return this.members.filter((m) => m.role === 'api').length;
  }

  private spawn(cfg: Config, index: number, role: 'api' | 'worker', onDied: (err: Error) => void): Promise<void> {
    const data: ThreadData = { cfg, index, role };
    const worker = new Worker(THREAD_BOOT, { eval: true, workerData: data, name: role === 'api' ? `tidemark-api-${index}` : 'tidemark-worker' });
    let onExit!: () => void;
    const member: Member = { index, role, worker, exited: new Promise<void>((r) => (onExit = r)), drained: false };
    this.members.push(member);
    return new Promise<void>((resolve, reject) => {
      let started = false;
      worker.on('message', (m: FromThread) => {
        switch (m.t) {
          case 'ready':
            started = true;
            resolve();
            break;
          case 'failed':
            reject(new Error(`${role} thread ${index}: ${m.message}`));
            break;
          case 'drained':
            // Its requests answered, its batcher flushed and acked, its sockets and clients
            // closed: the thread exits on its own.
            member.drained = true;
            break;
          case 'snapshot':
            this.pending.get(m.id)?.(m.data);
            break;
          case 'health':
            this.workerProblem = m.problem;
            break;
          case 'render':
            this.render().then(
              (text) => worker.postMessage({ t: 'rendered', id: m.id, text } satisfies ToThread),
              (err: Error) => worker.postMessage({ t: 'rendered', id: m.id, text: `# metrics failed: ${err.message}\n` } satisfies ToThread),
            );
            break;
        }
      });
      worker.on('error', (err) => {
        this.log.error({ err, thread: index, role }, 'thread failed');
        if (!started) reject(err);
      });
      worker.on('exit', (code) => {
        onExit();
        if (!started) reject(new Error(`${role} thread ${index} exited with code ${code} before it started`));
        else if (!this.draining && !member.drained) onDied(new Error(`${role} thread ${index} exited with code ${code}`));
      });
    });
  }

  /** /metrics: this (main) thread's registry plus every API thread's, summed. */
  async render(): Promise<string> {
    const own = await this.registry.getMetricsAsJSON();
    const others = await Promise.all(this.members.map((m) => this.snapshot(m)));
    const all = [own, ...others.filter((d): d is MetricsJson => d !== null)];
    return AggregatorRegistry.aggregate(all as Parameters<typeof AggregatorRegistry.aggregate>[0]).metrics();
  }

  private snapshot(m: Member): Promise<MetricsJson | null> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(null), SNAPSHOT_TIMEOUT_MS);
      const done = (data: MetricsJson | null) => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve(data);
      };
      this.pending.set(id, done);
      try {
        m.worker.postMessage({ t: 'snapshot', id } satisfies ToThread);
      } catch {
        done(null);
      }
    });
  }

  /** Every thread stops accepting, answers what it has in flight, flushes, closes, exits. */
  async drain(): Promise<void> {
    this.draining = true;
    await Promise.all(
      this.members.map(async (m) => {
        try {
          m.worker.postMessage({ t: 'drain' } satisfies ToThread);
        } catch {
          // already gone
        }
        const timedOut = await Promise.race([
          m.exited.then(() => false),
          new Promise<boolean>((r) => setTimeout(() => r(true), DRAIN_TIMEOUT_MS).unref()),
        ]);
        if (timedOut) {
          this.log.error({ thread: m.index, role: m.role }, 'thread did not drain in time; terminating it');
          await m.worker.terminate();
        }
      }),
    );
  }
}
