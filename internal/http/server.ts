// The uWebSockets.js glue: turns uWS requests into HttpRequest, runs the route, writes the
// HttpResponse. Body size limit, CORS preflight, draining and per-route timing live here.
import { randomBytes } from 'node:crypto';
import { loadNativeUws, type UWS } from './uws';
import { Router } from './router';
import { errorResponse } from './respond';
import { BadRequestError, HttpError, PayloadTooLargeError, ServiceUnavailableError } from './errors';
import type { HttpRequest, HttpResponse, RouteFamily } from './types';

export interface ServerOptions {
  router: Router;
  port: number;
  host?: string;
  maxBodyBytes?: number;
  /** Requests in flight beyond this are shed with 503 + Retry-After (bounded memory under overload). */
  maxInFlight?: number;
  /** Called once per answered request. */
  onResponse?: (info: { route: string; method: string; status: number; seconds: number; requestId: string }) => void;
  onError?: (err: unknown, req: { method: string; path: string; requestId: string }) => void;
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 202: 'Accepted', 204: 'No Content', 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden',
  404: 'Not Found', 405: 'Method Not Allowed', 413: 'Payload Too Large', 415: 'Unsupported Media Type',
  429: 'Too Many Requests', 500: 'Internal Server Error', 503: 'Service Unavailable',
};

export const INGEST_CORS_HEADERS = {
  'Access-Control-Allow-Methods': 'POST, OPTIONS',
  'Access-Control-Allow-Headers':
    'content-type, service-client-id, service-client-secret, openpanel-client-id, openpanel-client-secret, openpanel-sdk-name, openpanel-sdk-version, x-client-ip, user-agent',
  'Access-Control-Max-Age': '86400',
};

export class HttpServer {
  private app: UWS.TemplatedApp | null = null;
  private listenSocket: UWS.us_listen_socket | null = null;
  private inFlight = 0;
  private draining = false;
  private idleWaiters: (() => void)[] = [];
  private uws = loadNativeUws();
  /** Request ids: a random per-process prefix and a counter (unique, and cheap on the hot path). */
  private readonly idPrefix = `${randomBytes(4).toString('hex')}-`;
  private requestCounter = 0;
  port = 0;

  constructor(private readonly opts: ServerOptions) {}

  get isDraining(): boolean {
    return this.draining;
  }

  async listen(): Promise<number> {
    const app = this.uws.App();
    app.any('/*', (res, req) => this.onRequest(res, req));
    this.app = app;
    return new Promise((resolve, reject) => {
      app.listen(this.opts.host ?? '0.0.0.0', this.opts.port, (sock) => {
        if (!sock) return reject(new Error(`cannot listen on port ${this.opts.port}`));
        this.listenSocket = sock;
        this.port = this.uws.us_socket_local_port(sock);
        resolve(this.port);
      });
    });
  }

  /** Stops accepting new requests (they get 503), waits for in-flight ones, closes the socket. */
  async drain(timeoutMs = 25_000): Promise<void> {
    this.draining = true;
    if (this.inFlight > 0) {
      await Promise.race([
        new Promise<void>((r) => this.idleWaiters.push(r)),
        new Promise<void>((r) => setTimeout(r, timeoutMs).unref()),
      ]);
    }
    this.close();
  }

  close(): void {
    if (this.listenSocket) this.uws.us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
  }

  private onRequest(res: UWS.HttpResponse, req: UWS.HttpRequest): void {
    const started = process.hrtime.bigint();
    const method = req.getMethod().toUpperCase();
    const path = req.getUrl();
    const rawQuery = req.getQuery() ?? '';
    const headers: Record<string, string> = {};
    req.forEach((k, v) => {
      headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
    });
    const requestId = headers['x-request-id']?.slice(0, 128) || `${this.idPrefix}${(++this.requestCounter).toString(36)}`;
    const remoteAddress = Buffer.from(res.getRemoteAddressAsText()).toString();
    const state = { aborted: false, done: false };
    res.onAborted(() => {
      state.aborted = true;
      finish();
    });
    this.inFlight++;
    const finish = () => {
      if (state.done) return;
      state.done = true;
      this.inFlight--;
      if (this.inFlight === 0 && this.idleWaiters.length) for (const w of this.idleWaiters.splice(0)) w();
    };
    let family: RouteFamily = this.opts.router.familyOf(path);
    let routeName = 'unmatched';
    const writeHead = (r: HttpResponse) => {
      const origin = headers.origin;
      res.writeStatus(`${r.status} ${STATUS_TEXT[r.status] ?? ''}`.trim());
      res.writeHeader('x-request-id', requestId);
      if (family === 'ingest' && origin) {
        res.writeHeader('Access-Control-Allow-Origin', origin);
        res.writeHeader('Vary', 'Origin');
      }
      for (const [k, v] of Object.entries(r.headers ?? {})) res.writeHeader(k, v);
    };
    const observe = (status: number) =>
      this.opts.onResponse?.({ route: routeName, method, status, requestId, seconds: Number(process.hrtime.bigint() - started) / 1e9 });
    const sendStream = async (r: HttpResponse & { stream: NonNullable<HttpResponse['stream']> }) => {
      const it = r.stream.chunks[Symbol.asyncIterator]();
      // The first chunk decides the status: an error before any byte is sent is a normal error response.
      let pending: IteratorResult<string | Buffer>;
      try {
        pending = await it.next();
      } catch (err) {
        return fail(err);
      }
      if (state.aborted) return void (await it.return?.());
      res.cork(() => {
        writeHead(r);
        if (!Object.keys(r.headers ?? {}).some((k) => k.toLowerCase() === 'content-type')) res.writeHeader('Content-Type', r.stream.contentType);
      });
      try {
        for (let first = true; ; first = false) {
          const next = first ? pending : await it.next();
          if (state.aborted) break;
          if (next.done) break;
          let ok = true;
          res.cork(() => {
            ok = res.write(next.value);
          });
          if (!ok) {
            await new Promise<void>((resolve) => res.onWritable(() => (resolve(), true)));
          }
          if (state.aborted) break;
        }
      } catch (err) {
        this.opts.onError?.(err, { method, path, requestId });
        if (!state.aborted) res.close();
        state.aborted = true;
      } finally {
        if (state.aborted) await it.return?.();
      }
      if (!state.aborted && !state.done) res.cork(() => res.end());
      finish();
      observe(r.status);
    };
    const send = (r: HttpResponse) => {
      if (state.aborted || state.done) return;
      if (r.stream) {
        void sendStream(r as HttpResponse & { stream: NonNullable<HttpResponse['stream']> });
        return;
      }
      res.cork(() => {
        writeHead(r);
        if (r.raw) {
          res.writeHeader('Content-Type', r.raw.contentType);
          res.end(r.raw.data);
        } else if (r.body === undefined) {
          res.end();
        } else {
          res.writeHeader('Content-Type', 'application/json');
          res.end(JSON.stringify(r.body));
        }
      });
      finish();
      observe(r.status);
    };
    const fail = (err: unknown) => {
      if (!(err instanceof HttpError)) this.opts.onError?.(err, { method, path, requestId });
      send(errorResponse(err, family));
    };

    if (this.draining) {
      return fail(Object.assign(new ServiceUnavailableError('server is shutting down; retry'), { headers: { Connection: 'close', 'Retry-After': '1' } }));
    }
    if (this.inFlight > (this.opts.maxInFlight ?? 10_000)) {
      return fail(Object.assign(new ServiceUnavailableError('server is over capacity; retry with backoff'), { headers: { 'Retry-After': '1' } }));
    }
    if (method === 'OPTIONS' && this.opts.router.corsPath(path)) {
      family = 'ingest';
      routeName = 'preflight';
      return send({ status: 204, headers: INGEST_CORS_HEADERS });
    }
    let match;
    try {
      match = this.opts.router.match(method, path);
    } catch (err) {
      return fail(err);
    }
    family = match.route.family;
    routeName = match.route.pattern;
    const limit = this.opts.maxBodyBytes ?? 1024 * 1024;
    const declared = Number(headers['content-length'] ?? 0);
    if (declared > limit) return fail(new PayloadTooLargeError(`request body over ${limit} bytes`));

    const run = (body: Buffer) => {
      let query: URLSearchParams;
      try {
        query = new URLSearchParams(rawQuery);
      } catch {
        return fail(new BadRequestError('malformed query string'));
      }
      const request: HttpRequest = { method, path, params: match.params, query, headers, body, remoteAddress, requestId };
      match.route.handler(request).then(send, fail);
    };
    if (method === 'GET' || method === 'HEAD') return run(Buffer.alloc(0));

    const chunks: Buffer[] = [];
    let size = 0;
    res.onData((ab, isLast) => {
      if (state.done) return;
      size += ab.byteLength;
      if (size > limit) return fail(new PayloadTooLargeError(`request body over ${limit} bytes`));
      chunks.push(Buffer.from(ab.slice(0)));
      if (isLast) run(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    });
  }
}
