// Maps errors to HTTP in one place. Ingest bodies carry `status`; read bodies carry `message`.
import { BadRequestError, HttpError } from './errors';
import type { HttpResponse, RouteFamily } from './types';

export function errorResponse(err: unknown, family: RouteFamily): HttpResponse {
  if (!(err instanceof HttpError)) {
    return { status: 500, body: { error: 'Internal Server Error', message: 'unexpected error' } };
  }
  const headers = { ...err.headers };
  if (err instanceof BadRequestError) {
    const body: Record<string, unknown> = { error: err.title, message: err.message, details: { issues: err.issues } };
    if (family === 'ingest') body.status = 400;
    return { status: 400, headers, body };
  }
  // semantics.md: ingest 401/403 bodies are exactly {error, status}; the reason ("missing
  // client secret ...") travels in the X-Error-Reason header. Other ingest errors (413, 415,
  // 429, 503) keep a human message in the body.
  if (family === 'ingest' && (err.status === 401 || err.status === 403)) {
    return { status: err.status, headers: { ...headers, 'X-Error-Reason': err.message }, body: { error: err.title, status: err.status } };
  }
  if (family === 'ingest') return { status: err.status, headers, body: { error: err.title, status: err.status, message: err.message } };
  return { status: err.status, headers, body: { error: err.title, message: err.message, ...err.bodyFields } };
}
