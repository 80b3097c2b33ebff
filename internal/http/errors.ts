// One error type per failure class; internal/http/respond.ts maps them to HTTP in one place.
import type { ZodError } from 'zod';

export interface Issue {
  path: string[];
  message: string;
}

export abstract class HttpError extends Error {
  abstract readonly status: number;
  abstract readonly title: string;
  /** Extra response headers (rate limit state, Retry-After, Allow). */
  headers: Record<string, string> = {};
  /** Fields a read error's JSON body carries beside `error` and `message` (OpenPanel's own bodies, e.g. `profileId`). */
  bodyFields: Record<string, unknown> = {};
}

export class BadRequestError extends HttpError {
  readonly status = 400;
  readonly title = 'Bad Request';
  constructor(message: string, readonly issues: Issue[] = [{ path: [], message }]) {
    super(message);
  }
  static fromZod(err: ZodError, prefix: string[] = []): BadRequestError {
    const issues = err.issues.map((i) => ({
      path: [...prefix, ...i.path.map((p) => String(p))],
      message: i.message,
    }));
    const first = issues[0];
    const where = first && first.path.length ? `${first.path.join('.')}: ` : '';
    const message = first ? `${where}${first.message}` : 'Invalid request';
    return new BadRequestError(message, issues);
  }
}

export class UnauthorizedError extends HttpError {
  readonly status = 401;
  readonly title = 'Unauthorized';
}

export class ForbiddenError extends HttpError {
  readonly status = 403;
  readonly title = 'Forbidden';
}

export class NotFoundError extends HttpError {
  readonly status = 404;
  readonly title = 'Not Found';
}

export class MethodNotAllowedError extends HttpError {
  readonly status = 405;
  readonly title = 'Method Not Allowed';
  constructor(allowed: string[]) {
    super(`Method not allowed; use ${allowed.join(', ')}`);
    this.headers = { Allow: allowed.join(', ') };
  }
}

export class PayloadTooLargeError extends HttpError {
  readonly status = 413;
  readonly title = 'Payload Too Large';
}

export class UnsupportedMediaTypeError extends HttpError {
  readonly status = 415;
  readonly title = 'Unsupported Media Type';
}

export class TooManyRequestsError extends HttpError {
  readonly status = 429;
  readonly title = 'Too Many Requests';
}

export class ServiceUnavailableError extends HttpError {
  readonly status = 503;
  readonly title = 'Service Unavailable';
}
