// Read-side failure classes. They extend the HTTP error types so the one mapper in
// internal/http turns them into responses without knowing about queries.
import { ServiceUnavailableError } from '../http/errors';

/** A read query ran past its statement timeout (PostgreSQL 57014): 503, retry later. */
export class QueryTimeoutError extends ServiceUnavailableError {
  constructor(readonly timeoutMs: number) {
    super(`The query took longer than ${timeoutMs} ms and was cancelled; narrow the period or the filters, or retry later`);
  }
}
