// The guard of every read route (insights, /projects, export): read-client auth, the shared
// 100 req / 10 s rate limit with its headers, the project check, read admission and the
// request's query budget; the route's handler then gets a ReadContext. Insights' routes are
// internal/app/read-routes.ts, export's internal/export/routes.ts.
import type { Authenticator, AuthedClient } from '../auth/auth';
import { NotFoundError, TooManyRequestsError, UnauthorizedError } from '../http/errors';
import type { HttpRequest, HttpResponse } from '../http/types';
import type { Logger } from '../obs/log';
import type { Metrics } from '../obs/metrics';
import { admittedSource, clientAccount, ClientQueueFullError, type ClientLimiter, type ReadCost, type Release, type Slots } from '../query/admission';
import { RequestBudget } from '../query/budget';
import { ClientGoneError, readError } from '../query/errors';
import type { ConnectionSource } from '../query/source';
import { rateHeaders, type Gate, type GateResult, type RateState } from '../ratelimit/gate';
import type { Redis, RedisKeys } from '../redis/redis';
import type { Pool } from '../store/db';

const READ_RATE_LIMIT = 100;
const READ_RATE_WINDOW_MS = 10_000;

export interface ReadDeps {
  db: Pool;
  redis: Redis;
  keys: RedisKeys;
  auth: Authenticator;
  gate: Gate;
  log: Logger;
  metrics: Metrics;
  queryTimeoutMs: number;
  /** TIDEMARK_EXACT_VISITORS_MAX (insights unique visitors; default from the environment). */
  exactVisitorsMax?: number;
  /**
   * Admission control of expensive reads (internal/query/admission.ts): per-client reads in
   * flight (READ_CONCURRENCY_PER_CLIENT, READ_QUEUE_PER_CLIENT) and read statements running
   * in PostgreSQL at once (READ_CONCURRENCY). Absent: no limit.
   */
  admission?: ReadAdmission;
}

interface ReadAdmission {
  clients: ClientLimiter;
  statements: Slots;
  /** READ_HEAVY_AFTER_MS: a client's recent PostgreSQL time before its statements wait for a slot. */
  heavyAfterMs: number;
  /** Each client's recent PostgreSQL time. */
  cost: ReadCost;
}

export interface ReadContext {
  client: AuthedClient;
  projectId: string;
  /**
   * The database for this request: every statement shares one budget of `queryTimeoutMs`
   * (internal/query/budget.ts) and is cancelled when the client goes away.
   */
  db: ConnectionSource;
  rate: RateState | null;
  /** Live visitors, when the guard was asked for them (answered with the rate limit). */
  live: number | null;
}

export interface GuardOptions {
  /** Count the path project's live visitors in the rate-limit call (/live: one Redis round trip). */
  live?: boolean;
  /**
   * Whether the route's queries go through read admission (default true). Off for the cheap
   * ones that only look up what auth already cached or Redis (/live, /projects).
   */
  admit?: boolean;
}

/**
 * Auth, rate limit and project existence for a read path; the handler gets a context.
 * `projectOf` reads which project the request names (path or query), if any; a read client
 * that names none gets its own.
 */
export function readGuard(deps: ReadDeps, handler: (req: HttpRequest, ctx: ReadContext) => Promise<unknown>, projectOf: (req: HttpRequest) => string | undefined, options: GuardOptions = {}) {
  const guarded = guard(deps, handler, projectOf, options);
  // Credentials and the project are read from PostgreSQL too: its failures map the same way.
  return (req: HttpRequest): Promise<HttpResponse> => guarded(req).catch((err: unknown) => Promise.reject(readError(err)));
}

function guard(deps: ReadDeps, handler: (req: HttpRequest, ctx: ReadContext) => Promise<unknown>, projectOf: (req: HttpRequest) => string | undefined, options: GuardOptions) {
  return async (req: HttpRequest): Promise<HttpResponse> => {
    const requested = projectOf(req);
    const client = await deps.auth.forRead(req, requested);
    let rate: RateState | null = null;
    let live: number | null = null;
    try {
      let g: GateResult;
      if (options.live) {
        const both = await deps.gate.readLive(client.id, READ_RATE_LIMIT, READ_RATE_WINDOW_MS, Date.now(), requested ?? client.projectId);
        g = both.result;
        live = both.live;
      } else {
        g = await deps.gate.read(client.id, READ_RATE_LIMIT, READ_RATE_WINDOW_MS, Date.now());
      }
      if (g.outcome === 'revoked') throw new UnauthorizedError('invalid client credentials');
      if (g.outcome === 'limited') {
        deps.metrics.rateLimited.inc({ scope: 'read' });
        const e = new TooManyRequestsError(`rate limit of ${READ_RATE_LIMIT} requests per 10 seconds exceeded`);
        e.headers = rateHeaders(g.rate, true);
        throw e;
      }
      rate = g.rate;
    } catch (err) {
      if (err instanceof UnauthorizedError || err instanceof TooManyRequestsError) throw err;
      deps.metrics.degraded.inc({ dependency: 'redis' });
      deps.log.warn({ err: (err as Error).message }, 'read rate limit unavailable (Redis)');
    }
    const projectId = requested ?? client.projectId;
    if (projectId.includes('\u0000') || !(await deps.auth.project(projectId))) {
      const e = new NotFoundError(`project ${projectId} not found`);
      e.headers = rateHeaders(rate);
      throw e;
    }
    const budget = new RequestBudget(deps.queryTimeoutMs, req.signal);
    const admission = options.admit === false ? undefined : deps.admission;
    let leave: Release | null = null;
    try {
      let db: ConnectionSource = deps.db;
      if (admission) {
        // Waits end with the budget (its 503) or when the client leaves (never run).
        const gone = () => (budget.ended ? budget.errorFor(budget.ended) : new ClientGoneError());
        leave = await enterClient(deps, admission, client.id, budget.endSignal, gone);
        // After the answer is decided (a streamed export reads on), only the client leaving ends a wait.
        const signal = req.signal ? AbortSignal.any([budget.endSignal, req.signal]) : budget.endSignal;
        db = admittedSource(deps.db, admission.statements, () => signal, gone, admission.heavyAfterMs, clientAccount(admission.cost, client.id));
      }
      const body = await handler(req, { client, projectId, rate, live, db: budget.source(db) });
      return { status: 200, headers: rateHeaders(rate), body };
    } catch (caught) {
      const err = readError(caught);
      if (err && typeof err === 'object' && 'headers' in err) Object.assign((err as { headers: object }).headers, rateHeaders(rate));
      throw err;
    } finally {
      budget.close();
      leave?.();
    }
  };
}

/** The per-client seat of a read: at once, after a wait in the client's queue, or a 429. */
async function enterClient(deps: ReadDeps, admission: ReadAdmission, clientId: string, signal: AbortSignal, gone: () => Error): Promise<Release> {
  try {
    return await admission.clients.enter(clientId, signal, gone);
  } catch (err) {
    if (!(err instanceof ClientQueueFullError)) throw err;
    deps.metrics.rateLimited.inc({ scope: 'read_concurrency' });
    const e = new TooManyRequestsError(
      `concurrent read limit exceeded: this client has ${err.limit} reads running and ${err.queued} waiting `
      + `(READ_CONCURRENCY_PER_CLIENT=${err.limit}, READ_QUEUE_PER_CLIENT=${admission.clients.queuePerClient}); wait for an answer before sending more`,
    );
    e.headers = { 'Retry-After': '1' };
    throw e;
  }
}
