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
  if (family === 'ingest') return { status: err.status, headers, body: { error: err.title, status: err.status, message: err.message } };
  return { status: err.status, headers, body: { error: err.title, message: err.message } };
}
