// Admission control for expensive reads: insights and export queries share the cores
// with ingest, PostgreSQL, NATS and Redis, so how many of them run at once is bounded per client
// (a bounded queue, then 429) and per process (heavy statements wait for a slot, those of the
// requests that used least PostgreSQL time first; transaction control takes none). Pure logic
// plus a pg wrapper; docs/operating.md, "Read admission", states the limits and their reasons.
import type pg from 'pg';
import type { ConnectionSource } from './source';

/** Gives back a slot; idempotent. */
export type Release = () => void;

interface Waiter {
  priority: number;
  grant: (release: Release) => void;
  fail: (err: unknown) => void;
  cleanup: () => void;
}

export class AbortedWaitError extends Error {
  constructor() {
    super('the wait for a read slot was given up');
  }
}

/** At most `limit` holders at once; the rest wait in arrival order, each until granted or aborted. */
export class Slots {
  private active = 0;
  private readonly queue: Waiter[] = [];

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
  }

  get running(): number {
    return this.active;
  }

  get waiting(): number {
    return this.queue.length;
  }

  /** A slot now, or null when all are taken (nothing queued). */
  tryAcquire(): Release | null {
    if (this.active >= this.limit) return null;
    this.active++;
    return this.releaser();
  }

  /**
   * A slot, waiting for it: lower `priority` first, arrival order among equals. `signal`
   * aborting drops the waiter from the queue: the promise rejects with `onAbort()` (default
   * AbortedWaitError).
   */
  acquire(signal?: AbortSignal, onAbort: () => unknown = () => new AbortedWaitError(), priority = 0): Promise<Release> {
    if (signal?.aborted) return Promise.reject(onAbort());
    const now = this.tryAcquire();
    if (now) return Promise.resolve(now);
    return new Promise<Release>((resolve, reject) => {
      const waiter: Waiter = {
        priority,
        grant: (release) => {
          waiter.cleanup();
          resolve(release);
        },
        fail: (err) => {
          waiter.cleanup();
          reject(err);
        },
        cleanup: () => signal?.removeEventListener('abort', abort),
      };
      const abort = () => {
        const i = this.queue.indexOf(waiter);
        if (i >= 0) this.queue.splice(i, 1);
        waiter.fail(onAbort());
      };
      signal?.addEventListener('abort', abort, { once: true });
      let at = this.queue.length;
      while (at > 0 && this.queue[at - 1]!.priority > priority) at--;
      this.queue.splice(at, 0, waiter);
    });
  }

  /** A slot even when all are taken (running may pass the limit; waiters then wait longer). */
  forceAcquire(): Release {
    this.active++;
    return this.releaser();
  }

  private releaser(): Release {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (this.active > this.limit) {
        this.active--; // over the limit (forced): nobody may take this one
        return;
      }
      const next = this.queue.shift();
      // The slot passes straight to the next waiter (active stays the same).
      if (next) next.grant(this.releaser());
      else this.active--;
    };
  }
}

export class ClientQueueFullError extends Error {
  constructor(readonly limit: number, readonly queued: number) {
    super(`too many concurrent reads for this client: ${limit} run at once and ${queued} wait`);
  }
}

/**
 * Per-client limit of reads in flight: `perClient` run at once, `queuePerClient` more wait
 * (in arrival order); beyond that, enter() throws ClientQueueFullError at once. Clients with
 * nothing running or waiting take no memory.
 */
export class ClientLimiter {
  private readonly clients = new Map<string, Slots>();

  constructor(readonly perClient: number, readonly queuePerClient: number) {
    if (!Number.isInteger(perClient) || perClient < 1) throw new RangeError(`perClient must be a positive integer, got ${perClient}`);
    if (!Number.isInteger(queuePerClient) || queuePerClient < 0) throw new RangeError(`queuePerClient must be a non-negative integer, got ${queuePerClient}`);
  }

  /** Clients with a read running or waiting (tests, metrics). */
  get size(): number {
    return this.clients.size;
  }

  async enter(clientId: string, signal?: AbortSignal, onAbort?: () => unknown): Promise<Release> {
    let slots = this.clients.get(clientId);
    if (!slots) {
      slots = new Slots(this.perClient);
      this.clients.set(clientId, slots);
    }
    const s = slots;
    const forget = () => {
      if (s.running === 0 && s.waiting === 0 && this.clients.get(clientId) === s) this.clients.delete(clientId);
    };
    const now = s.tryAcquire();
    if (!now && s.waiting >= this.queuePerClient) {
      forget();
      throw new ClientQueueFullError(this.perClient, s.waiting);
    }
    let release: Release;
    try {
      release = now ?? (await s.acquire(signal, onAbort));
    } catch (err) {
      forget();
      throw err;
    }
    return () => {
      release();
      forget();
    };
  }
}

/** Half-life of a client's recent PostgreSQL time (ReadCost). */
const COST_HALF_LIFE_MS = 10_000;

/**
 * PostgreSQL time each client's reads used recently: a sum that halves every `halfLifeMs`.
 * A client that ran a second of regex a minute ago counts as light again; one that keeps
 * sending slow reads stays heavy. Entries that decayed to nothing are dropped.
 */
export class ReadCost {
  private readonly clients = new Map<string, { ms: number; at: number }>();
  private swept = 0;

  constructor(private readonly halfLifeMs = COST_HALF_LIFE_MS, private readonly now: () => number = Date.now) {}

  get size(): number {
    return this.clients.size;
  }

  get(clientId: string): number {
    const e = this.clients.get(clientId);
    if (!e) return 0;
    return e.ms * 0.5 ** ((this.now() - e.at) / this.halfLifeMs);
  }

  add(clientId: string, ms: number): void {
    const t = this.now();
    this.clients.set(clientId, { ms: this.get(clientId) + ms, at: t });
    if (this.clients.size > 1000 && t - this.swept >= this.halfLifeMs) {
      this.swept = t;
      for (const [id, e] of this.clients) if (e.ms * 0.5 ** ((t - e.at) / this.halfLifeMs) < 1) this.clients.delete(id);
    }
  }
}

/** What a request's statements are charged to: its client's recent PostgreSQL time. */
interface CostAccount {
  /** PostgreSQL ms used recently (decayed), this request's finished statements included. */
  used(): number;
  add(ms: number): void;
}

export function clientAccount(cost: ReadCost, clientId: string): CostAccount {
  return { used: () => cost.get(clientId), add: (ms) => cost.add(clientId, ms) };
}

/** A request's own time only (tests; a source with no client). */
function requestAccount(): CostAccount {
  let ms = 0;
  return { used: () => ms, add: (n) => void (ms += n) };
}

/** Statements that only steer the transaction: no slot. */
const TRANSACTION_CONTROL = /^\s*(BEGIN|START TRANSACTION|COMMIT|END|ROLLBACK|SET\s|RESET\s|SELECT set_config\()/i;

export function isTransactionControl(text: string): boolean {
  return TRANSACTION_CONTROL.test(text);
}

interface CursorLike {
  submit: unknown;
  read: (rows: number, cb?: unknown) => Promise<unknown>;
}

function isCursor(x: unknown): x is CursorLike {
  return typeof x === 'object' && x !== null && typeof (x as CursorLike).submit === 'function' && typeof (x as CursorLike).read === 'function';
}

/**
 * Connections from `pool` whose statements are admitted by `slots`: plain queries (text or
 * config) and every read of a pg-cursor (where the rows are computed). Statement time is
 * charged to `account` (the request's client).
 * - While the account has used less than `heavyAfterMs` recently, a statement starts at
 *   once (a dashboard's cheap reads never queue behind a slow one); one that runs past that
 *   point takes a slot then, even over the limit, so the heavy statements waiting wait longer.
 * - After that the client is heavy: each statement waits for a slot. `signal()` is read at
 *   each wait: when it aborts, the wait ends with `onAbort()` and the statement is never sent.
 * heavyAfterMs 0: every statement waits for a slot.
 */
export function admittedSource(
  pool: ConnectionSource,
  slots: Slots,
  signal: () => AbortSignal | undefined,
  onAbort: () => unknown,
  heavyAfterMs = 0,
  account: CostAccount = requestAccount(),
): ConnectionSource {
  let requestMs = 0;
  const gate = async <T>(run: () => Promise<T>): Promise<T> => {
    const used = account.used();
    // Among waiters, the request that used least goes first: a dashboard's cheap read of a
    // heavy client waits for a running statement, not behind the queued rest of a slow chart.
    let release: Release | null = used >= heavyAfterMs ? await slots.acquire(signal(), onAbort, requestMs) : null;
    const started = performance.now();
    const timer = release ? null : setTimeout(() => (release = slots.forceAcquire()), heavyAfterMs - used);
    try {
      return await run();
    } finally {
      if (timer) clearTimeout(timer);
      const ms = performance.now() - started;
      requestMs += ms;
      account.add(ms);
      (release as Release | null)?.();
    }
  };
  return {
    async connect(): Promise<pg.PoolClient> {
      const client = await pool.connect();
      const query = client.query;
      const release = client.release;
      client.query = ((...args: unknown[]) => {
        const first = args[0];
        if (isCursor(first)) {
          const read = first.read.bind(first);
          first.read = (rows: number, cb?: unknown) => (cb ? read(rows, cb) : gate(() => read(rows)));
          return (query as (...a: unknown[]) => unknown).apply(client, args);
        }
        const text = typeof first === 'string' ? first : (first as { text?: unknown } | null)?.text;
        const hasCallback = args.some((a) => typeof a === 'function');
        if (typeof text !== 'string' || hasCallback || isTransactionControl(text)) {
          return (query as (...a: unknown[]) => unknown).apply(client, args);
        }
        return gate(() => (query as (...a: unknown[]) => Promise<unknown>).apply(client, args));
      }) as typeof client.query;
      client.release = (err?: Error | boolean) => {
        client.query = query;
        client.release = release;
        return release.call(client, err);
      };
      return client;
    },
  };
}
