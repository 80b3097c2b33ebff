// Read-side failure classes. They extend the HTTP error types so the one mapper in
// internal/http turns them into responses without knowing about queries; readError() is
// the one place where what PostgreSQL (or the pool) threw becomes one of them, by the
// SQLSTATE classification below.
import { BadRequestError, HttpError, ServiceUnavailableError } from '../http/errors';

/** PostgreSQL SQLSTATE codes the read side maps to HTTP errors. */
export const PG_QUERY_CANCELED = '57014';
export const PG_INVALID_REGULAR_EXPRESSION = '2201B';

/** The SQLSTATE of a pg error, or undefined for anything else. */
export function pgErrorCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = (err as { code: unknown }).code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

/** SQLSTATE classes and codes of a database that cannot serve now (not of a bad request). */
const UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', '53300', '53400']); // shutdown, crash, starting, too many connections
const UNAVAILABLE_SYSCALL = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);
// node-postgres' own words for a lost connection or a pool that gave none in time.
const UNAVAILABLE_MESSAGE = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed|Cannot use a pool after calling end)/;

/** Whether `err` says PostgreSQL is unreachable, restarting or out of connections. */
export function isDatabaseUnavailable(err: unknown): boolean {
  const code = pgErrorCode(err);
  if (code && (code.startsWith('08') || UNAVAILABLE_CODES.has(code) || UNAVAILABLE_SYSCALL.has(code))) return true;
  return err instanceof Error && UNAVAILABLE_MESSAGE.test(err.message);
}

/**
 * A read ran past its time (PostgreSQL 57014): 503. `budget`: the request's whole budget
 * (QUERY_TIMEOUT_MS, shared by all its statements) was spent; otherwise one statement's timeout.
 */
export class QueryTimeoutError extends ServiceUnavailableError {
  constructor(readonly timeoutMs: number, readonly budget = false) {
    super(budget
      ? `The request's queries took longer than ${timeoutMs} ms, its query budget (QUERY_TIMEOUT_MS), and were cancelled; narrow the period or the filters, or simplify the regular expressions`
      : `The query took longer than ${timeoutMs} ms and was cancelled; narrow the period or the filters, or retry later`);
  }
}

/**
 * The request's budget ran out while the pool had no connection to give (every connection
 * busy): a 503 that names the budget, with Retry-After as the database is saturated.
 */
export class PoolExhaustedError extends QueryTimeoutError {
  constructor(budgetMs: number) {
    super(budgetMs, true);
    this.message = `The request took longer than ${budgetMs} ms, its query budget (QUERY_TIMEOUT_MS), waiting for a database connection (all were busy); retry in ${DatabaseUnavailableError.RETRY_AFTER_S} s`;
    this.headers = { 'Retry-After': String(DatabaseUnavailableError.RETRY_AFTER_S) };
  }
}

/** PostgreSQL cannot be reached or has no connection to give (down, restarting, pool exhausted): 503, retry. */
export class DatabaseUnavailableError extends ServiceUnavailableError {
  static readonly RETRY_AFTER_S = 2;
  constructor(detail: string) {
    super(`The database is unavailable (${detail}); retry in ${DatabaseUnavailableError.RETRY_AFTER_S} s`);
    this.headers = { 'Retry-After': String(DatabaseUnavailableError.RETRY_AFTER_S) };
  }
}

/** The client closed the connection: its queries were cancelled and nothing is sent. */
export class ClientGoneError extends ServiceUnavailableError {
  constructor() {
    super('the client closed the request; its queries were cancelled');
  }
}

/**
 * PostgreSQL refusing a value the request carried (an impossible date in a cursor, NUL in
 * an id, text that is not a number) is the request's fault: a 400, never a 500.
 */
const DATA_ERRORS: Record<string, string> = {
  '22007': 'invalid date or time', '22008': 'date or time out of range', '22021': 'invalid character',
  '22P02': 'invalid value', '22003': 'number out of range', '22012': 'division by zero',
};

/**
 * What a read threw, as the HTTP error it stands for: the request's bad values are a 400,
 * an unreachable or exhausted database a 503 with Retry-After; a 503 of the service itself
 * (a client row that cannot be read) gets a Retry-After too. Anything else passes through (500).
 */
export function readError(err: unknown): unknown {
  if (err instanceof HttpError) {
    if (err instanceof ServiceUnavailableError && !(err instanceof QueryTimeoutError) && !err.headers['Retry-After']) {
      err.headers['Retry-After'] = String(DatabaseUnavailableError.RETRY_AFTER_S);
    }
    return err;
  }
  const code = pgErrorCode(err);
  if (code && DATA_ERRORS[code]) return new BadRequestError(`request has an ${DATA_ERRORS[code]}: ${(err as Error).message}`);
  if (isDatabaseUnavailable(err)) return Object.assign(new DatabaseUnavailableError((err as Error).message || String(code)), { cause: err });
  return err;
}
