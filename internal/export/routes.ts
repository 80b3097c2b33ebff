// The export routes: GET /export/events and GET /export/charts behind readGuard (read or
// root client, a read client only for its own project -> 403, the shared 100 req / 10 s
// rate limit with X-RateLimit-* headers, 404 for an unknown project).
//
// The project is the `projectId` (or `project_id`) query parameter. A read client may
// leave it out (its own project); a root client must give it (400).
//
// NDJSON streaming: the handler produces the body as an AsyncIterable<string> of chunks. With
// `{ streaming: true }` (the runtime's) they go to the server as the response's `stream`;
// otherwise they are collected into one `raw` body of at most `maxBufferedBytes` (a larger
// export is a 400 that points to narrower start/end or pagination).
import { BadRequestError, HttpError } from '../http/errors';
import type { Route } from '../http/router';
import type { HttpRequest, HttpResponse } from '../http/types';
import { readError } from '../query/errors';
import { readGuard, type ReadContext, type ReadDeps } from '../read/guard';
import { getChart } from './charts';
import { getEventsPage, streamEvents } from './events';
import { parseChartParams, parseEventsParams, requestedProject } from './params';

const NDJSON_CONTENT_TYPE = 'application/x-ndjson';
const DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024;

/** A response whose body may be `stream`ed (HttpResponse has it). */
export type StreamingHttpResponse = HttpResponse;

export interface ExportRouteOptions {
  /** The server writes `stream` responses; NDJSON is then never buffered. Default false. */
  streaming?: boolean;
  /** Largest buffered NDJSON body while streaming is off (default 64 MiB). */
  maxBufferedBytes?: number;
  /** Reference instant for chart ranges (tests). */
  now?: () => Date;
}

class NdjsonBody {
  constructor(readonly chunks: AsyncIterable<string>) {}
}

/**
 * The body's chunks with the read side's error mapping (a database that went away before
 * the first line is a 503 with Retry-After, not a 500). Stopping it stops the source.
 */
async function* mapReadErrors(chunks: AsyncIterable<string>): AsyncIterable<string> {
  try {
    yield* chunks;
  } catch (err) {
    throw readError(err);
  }
}

function requireProjectParam(req: HttpRequest, ctx: ReadContext): void {
  if (ctx.client.mode === 'root' && requestedProject(req.query) === undefined) {
    throw new BadRequestError('projectId: required for a root client', [
      { path: ['projectId'], message: 'projectId (or project_id) is required for a root client' },
    ]);
  }
}

async function bufferNdjson(res: HttpResponse, body: NdjsonBody, maxBytes: number): Promise<HttpResponse> {
  const parts: string[] = [];
  let bytes = 0;
  try {
    for await (const chunk of body.chunks) {
      bytes += Buffer.byteLength(chunk);
      if (bytes > maxBytes) {
        // Leaving the loop stops the iterator: its connection is released.
        const message = `The export is larger than ${maxBytes} bytes; narrow start/end or event, or page through it with format=json`;
        throw new BadRequestError(`format: ${message}`, [{ path: ['format'], message }]);
      }
      parts.push(chunk);
    }
  } catch (caught) {
    const err = readError(caught);
    // Errors after readGuard (too large, statement timeout) keep the rate limit headers.
    if (err instanceof HttpError) Object.assign(err.headers, res.headers ?? {});
    throw err;
  }
  return { status: res.status, headers: res.headers ?? {}, raw: { contentType: NDJSON_CONTENT_TYPE, data: parts.join('') } };
}

/** The export routes, for the lead to add to the router next to readRoutes(). */
export function exportRoutes(deps: ReadDeps, options: ExportRouteOptions = {}): Route[] {
  const opts = { statementTimeoutMs: deps.queryTimeoutMs, exactVisitorsMax: deps.exactVisitorsMax };
  const now = options.now ?? (() => new Date());
  const maxBuffered = options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
  const projectOf = (req: HttpRequest) => requestedProject(req.query);

  const events = readGuard(
    deps,
    async (req, ctx) => {
      requireProjectParam(req, ctx);
      const params = parseEventsParams(req.query);
      if (params.format === 'ndjson') return new NdjsonBody(await streamEvents(ctx.db, ctx.projectId, params, opts));
      return getEventsPage(ctx.db, ctx.projectId, params, opts);
    },
    projectOf,
  );

  const charts = readGuard(
    deps,
    async (req, ctx) => {
      requireProjectParam(req, ctx);
      return getChart(ctx.db, ctx.projectId, parseChartParams(req.query), now(), opts);
    },
    projectOf,
  );

  return [
    {
      method: 'GET',
      pattern: '/export/events',
      family: 'read',
      handler: async (req): Promise<HttpResponse> => {
        const res = await events(req);
        if (!(res.body instanceof NdjsonBody)) return res;
        if (!options.streaming) return bufferNdjson(res, res.body, maxBuffered);
        const streamed: StreamingHttpResponse = {
          status: res.status,
          headers: { ...(res.headers ?? {}), 'Content-Type': NDJSON_CONTENT_TYPE },
          stream: { contentType: NDJSON_CONTENT_TYPE, chunks: mapReadErrors(res.body.chunks) },
        };
        return streamed;
      },
    },
    { method: 'GET', pattern: '/export/charts', family: 'read', handler: charts },
  ];
}
