// The transport-neutral request/response that handlers see. Only internal/http knows uWS.

export type RouteFamily = 'ingest' | 'read' | 'ops';

export interface HttpRequest {
  method: string; // upper case
  /** Path without the query string. */
  path: string;
  /** Named path parameters, e.g. { projectId } for /insights/:projectId/metrics. */
  params: Record<string, string>;
  query: URLSearchParams;
  /** Lower-case header names. */
  headers: Record<string, string>;
  body: Buffer;
  /** Socket peer address as text. */
  remoteAddress: string;
  /** Correlates log lines of one request. */
  requestId: string;
  /** Aborts when the client goes away before the answer is sent (made on first use). */
  readonly signal?: AbortSignal;
}

export interface HttpResponse {
  status: number;
  headers?: Record<string, string>;
  /** JSON-serialised unless `raw` is set. */
  body?: unknown;
  raw?: { contentType: string; data: string | Buffer };
  /** A body written chunk by chunk with backpressure (large exports). */
  stream?: { contentType: string; chunks: AsyncIterable<string | Buffer> };
}

export type Handler = (req: HttpRequest) => Promise<HttpResponse>;
