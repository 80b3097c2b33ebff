// One read request's time on PostgreSQL: a total deadline that every statement of the
// request shares (QUERY_TIMEOUT_MS from the moment the handler starts), and cancellation
// of whatever runs when the deadline passes or the client goes away.
//
// The request's code sees an ordinary ConnectionSource (`budget.source(pool)`); withTimeout
// (./db.ts) derives each transaction's statement_timeout from what is left. When the budget
// ends, every connection lent through it gets a PostgreSQL CancelRequest (the running
// statement stops at once, not when its own timeout fires) and is discarded instead of
// returned to the pool when released: a cancel that arrives late can then never hit a
// statement of another request.
import net from 'node:net';
import type pg from 'pg';
import type { ConnectionSource } from './source';
import { ClientGoneError, PoolExhaustedError, QueryTimeoutError } from './errors';

type BudgetEnd = 'deadline' | 'client_gone';

interface Lent {
  client: pg.PoolClient;
  cancelled: boolean;
}

/** A ConnectionSource whose connections share one request's budget. */
interface BudgetedSource extends ConnectionSource {
  readonly budget: RequestBudget;
}

export function budgetOf(source: ConnectionSource): RequestBudget | null {
  const b = (source as Partial<BudgetedSource>).budget;
  return b instanceof RequestBudget ? b : null;
}

export class RequestBudget {
  readonly deadline: number;
  private endedBy: BudgetEnd | null = null;
  private detached = false;
  private readonly lent = new Set<Lent>();
  private readonly timer: NodeJS.Timeout;
  private wakeWaiters: (() => void)[] = [];
  private readonly ended$ = new AbortController();
  private readonly onAbort = () => this.end('client_gone');

  /**
   * `totalMs` from now; `signal` aborts when the client goes away. Call close() once the
   * answer is decided (a streamed body then reads on without the deadline).
   */
  constructor(readonly totalMs: number, private readonly signal?: AbortSignal, private readonly now: () => number = Date.now) {
    this.deadline = now() + totalMs;
    this.timer = setTimeout(() => this.end('deadline'), totalMs);
    if (signal?.aborted) this.end('client_gone');
    else signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  /** Aborts when the budget ends (deadline or client gone); never after close(). */
  get endSignal(): AbortSignal {
    return this.ended$.signal;
  }

  /** Why the budget ended, or null while it runs. */
  get ended(): BudgetEnd | null {
    if (this.endedBy === null && !this.detached && this.now() >= this.deadline) return 'deadline';
    return this.endedBy;
  }

  remainingMs(): number {
    return this.detached ? Infinity : Math.max(0, this.deadline - this.now());
  }

  /** Throws the error of an ended budget (QueryTimeoutError or ClientGoneError). */
  check(): void {
    const ended = this.ended;
    if (ended) throw this.errorFor(ended);
  }

  errorFor(ended: BudgetEnd): Error {
    return ended === 'client_gone' ? new ClientGoneError() : new QueryTimeoutError(this.totalMs, true);
  }

  /** Connections from `pool`, lent under this budget. */
  source(pool: ConnectionSource): BudgetedSource {
    return { budget: this, connect: () => this.connect(pool) };
  }

  /** Stops the deadline and the abort listener; connections lent later are ordinary ones. */
  close(): void {
    this.detached = true;
    this.wakeWaiters = [];
    clearTimeout(this.timer);
    this.signal?.removeEventListener('abort', this.onAbort);
  }

  private async connect(pool: ConnectionSource): Promise<pg.PoolClient> {
    if (this.detached) return pool.connect();
    this.check();
    const pending = pool.connect();
    let client: pg.PoolClient | null;
    try {
      client = await Promise.race([pending, new Promise<null>((resolve) => this.wakeWaiters.push(() => resolve(null)))]);
    } catch (err) {
      this.check();
      throw err;
    }
    if (!client) {
      // The budget ended while the pool had no connection to give: whatever it gives later goes straight back.
      pending.then((c) => c.release(), () => {});
      if (this.endedBy === 'client_gone') throw new ClientGoneError();
      throw new PoolExhaustedError(this.totalMs);
    }
    const entry: Lent = { client, cancelled: false };
    const release = client.release;
    const query = client.query;
    // Once the budget has ended, a statement is refused here: a cancel that reached the
    // connection between two statements would otherwise be lost and the next one run on.
    client.query = ((...args: unknown[]) => {
      if (this.endedBy && typeof args[0] === 'string') return Promise.reject(this.errorFor(this.endedBy));
      return (query as (...a: unknown[]) => unknown).apply(client, args);
    }) as typeof client.query;
    client.release = (err?: Error | boolean) => {
      this.lent.delete(entry);
      client.release = release;
      client.query = query;
      // A cancelled connection may still receive the cancel: never lend it to another request.
      return release.call(client, entry.cancelled ? true : err);
    };
    this.lent.add(entry);
    if (this.ended) this.cancel(entry);
    return client;
  }

  private end(by: BudgetEnd): void {
    if (this.endedBy || this.detached) return;
    this.endedBy = by;
    clearTimeout(this.timer);
    for (const wake of this.wakeWaiters.splice(0)) wake();
    for (const entry of this.lent) this.cancel(entry);
    this.ended$.abort();
  }

  private cancel(entry: Lent): void {
    if (entry.cancelled) return;
    entry.cancelled = true;
    sendCancelRequest(entry.client);
  }
}

const CANCEL_REQUEST_CODE = 80877102; // PostgreSQL protocol: CancelRequest (1234 << 16 | 5678)

/**
 * Asks PostgreSQL to cancel what the connection runs: a CancelRequest on a new socket (no
 * authentication, no backend slot; what libpq's PQcancel sends). Fire and forget.
 */
function sendCancelRequest(client: pg.PoolClient): void {
  const c = client as unknown as { processID?: number | null; secretKey?: number | null; host?: string; port?: number };
  if (typeof c.processID !== 'number' || typeof c.secretKey !== 'number' || !c.host || !c.port) return;
  const message = Buffer.alloc(16);
  message.writeInt32BE(16, 0);
  message.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  message.writeInt32BE(c.processID, 8);
  message.writeInt32BE(c.secretKey, 12);
  const sock = c.host.startsWith('/') ? net.connect(`${c.host}/.s.PGSQL.${c.port}`) : net.connect(c.port, c.host);
  sock.setTimeout(5000, () => sock.destroy());
  sock.on('error', () => {});
  sock.on('connect', () => sock.end(message));
}
