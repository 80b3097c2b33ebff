// The uWebSockets.js glue: turns uWS requests into HttpRequest, runs the route, writes the
// HttpResponse. Body size limit, CORS preflight, draining and per-route timing live here.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { isIP } from 'node:net';
import { loadNativeUws, type UWS } from './uws';
import { Router } from './router';
import { errorResponse } from './respond';
import { BadRequestError, HttpError, PayloadTooLargeError, ServiceUnavailableError } from './errors';
import type { HttpRequest, HttpResponse, RouteFamily, SocketRoute } from './types';
import { attachSocketRoute, OpenSockets } from './websocket';
import { stringifySliced } from './json';

interface ServerOptions {
  router: Router;
  port: number;
  host?: string;
  maxBodyBytes?: number;
  /** Requests in flight beyond this are shed with 503 + Retry-After (bounded memory under overload). */
  maxInFlight?: number;
  /** Called once per answered request. */
  onResponse?: (info: { route: string; method: string; status: number; seconds: number; requestId: string }) => void;
  onError?: (err: unknown, req: { method: string; path: string; requestId: string }) => void;
  /** WebSocket routes (internal/http/websocket.ts); a plain GET on their path goes to the router. */
  sockets?: SocketRoute[];
  /**
   * Share the port with other listeners (API_THREADS > 1: each thread listens on it and the
   * kernel spreads connections, SO_REUSEPORT). Otherwise the port is this server's alone: a
   * second process on a port in use fails to listen instead of silently taking half of its
   * connections (uWebSockets.js shares ports unless told not to).
   */
  sharedPort?: boolean;
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 202: 'Accepted', 204: 'No Content', 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden',
  404: 'Not Found', 405: 'Method Not Allowed', 413: 'Payload Too Large', 415: 'Unsupported Media Type',
  429: 'Too Many Requests', 500: 'Internal Server Error', 503: 'Service Unavailable',
};

const STATUS_LINE: Record<number, string> = Object.fromEntries(
  Object.entries(STATUS_TEXT).map(([code, text]) => [Number(code), `${code} ${text}`]),
);

const INGEST_CORS_HEADERS = {
  // GET: /track/device-id, which a browser SDK may ask with its client id header.
  'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
  'Access-Control-Allow-Headers':
    'content-type, service-client-id, service-client-secret, openpanel-client-id, openpanel-client-secret, openpanel-sdk-name, openpanel-sdk-version, x-client-ip, user-agent, idempotency-key',
  'Access-Control-Max-Age': '86400',
};

/**
 * Insights and export: any origin (every request needs a client secret, so no origin list
 * applies), so a dashboard in a browser can call them and read the rate-limit headers.
 */
const READ_CORS_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, OPTIONS',
  'Access-Control-Allow-Headers': 'service-client-id, service-client-secret, openpanel-client-id, openpanel-client-secret, content-type, x-request-id',
  'Access-Control-Max-Age': '86400',
};
const READ_EXPOSE_HEADERS = 'X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, x-request-id';

export class HttpServer {
  private app: UWS.TemplatedApp | null = null;
  private listenSocket: UWS.us_listen_socket | null = null;
  private inFlight = 0;
  private draining = false;
  private idleWaiters: (() => void)[] = [];
  private uws = loadNativeUws();
  private readonly openSockets = new OpenSockets();
  /** Request ids: a random per-process prefix and a counter (unique, and cheap on the hot path). */
  private readonly idPrefix = `${randomBytes(4).toString('hex')}-`;
  private requestCounter = 0;
  port = 0;

  constructor(private readonly opts: ServerOptions) {}

  /** WebSocket connections open now. */
  get openSocketCount(): number {
    return this.openSockets.size;
  }

  async listen(): Promise<number> {
    const app = this.uws.App();
    for (const route of this.opts.sockets ?? []) {
      attachSocketRoute(this.uws, app, route, this.openSockets, {
        isDraining: () => this.draining,
        nextRequestId: () => this.nextRequestId(),
        onError: (err, where) => this.opts.onError?.(err, { method: 'GET', ...where }),
      });
    }
    app.any('/*', (res, req) => this.onRequest(res, req));
    this.app = app;
    return new Promise((resolve, reject) => {
      const done = (sock: UWS.us_listen_socket | false) => {
        if (!sock) return reject(new Error(`cannot listen on port ${this.opts.port}`));
        this.listenSocket = sock;
        this.port = this.uws.us_socket_local_port(sock);
        resolve(this.port);
      };
      const host = this.opts.host ?? '0.0.0.0';
      if (this.opts.sharedPort) app.listen(host, this.opts.port, done);
      // (host, port, options, callback) is in the native module, not in its typings; options 1
      // is LIBUS_LISTEN_EXCLUSIVE_PORT (no SO_REUSEPORT).
      else (app as unknown as { listen(h: string, p: number, o: number, cb: typeof done): void }).listen(host, this.opts.port, EXCLUSIVE_PORT, done);
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

  /**
   * Closes the listen socket, then every connection still open (idle keep-alive ones after a
   * drain): a uWS loop with open sockets would keep an API worker thread alive.
   */
  close(): void {
    this.openSockets.closeAll(1001, 'server shutting down; reconnect');
    if (this.listenSocket) this.uws.us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    // Not in the bundled typings, present in the binary.
    (this.app as unknown as { close?: () => void } | null)?.close?.();
  }

  /** Called by an Exchange when its response is complete or the client went away. */
  requestDone(): void {
    this.inFlight--;
    if (this.inFlight === 0 && this.idleWaiters.length) for (const w of this.idleWaiters.splice(0)) w();
  }

  nextRequestId(): string {
    return `${this.idPrefix}${(++this.requestCounter).toString(36)}`;
  }

  private onRequest(res: UWS.HttpResponse, req: UWS.HttpRequest): void {
    // The uWS request object lives only for this call: everything needed is copied now.
    const ex = new Exchange(this, this.opts, res, req);
    this.inFlight++;
    res.onAborted(() => ex.abort());
    if (this.draining) {
      ex.family = this.opts.router.familyOf(ex.path);
      return ex.fail(Object.assign(new ServiceUnavailableError('server is shutting down; retry'), { headers: { Connection: 'close', 'Retry-After': '1' } }));
    }
    if (this.inFlight > (this.opts.maxInFlight ?? 10_000)) {
      ex.family = this.opts.router.familyOf(ex.path);
      return ex.fail(Object.assign(new ServiceUnavailableError('server is over capacity; retry with backoff'), { headers: { 'Retry-After': '1' } }));
    }
    const router = this.opts.router;
    const preflight = ex.method === 'OPTIONS' ? router.preflightOf(ex.path) : null;
    if (preflight) {
      ex.family = preflight;
      ex.routeName = 'preflight';
      return ex.send({ status: 204, headers: preflight === 'ingest' ? INGEST_CORS_HEADERS : READ_CORS_HEADERS });
    }
    let match: ReturnType<Router['match']>;
    try {
      match = router.match(ex.method, ex.path);
    } catch (err) {
      ex.family = router.familyOf(ex.path);
      return ex.fail(err);
    }
    ex.family = match.route.family;
    ex.routeName = match.route.pattern;
    ex.match = match;
    const limit = this.opts.maxBodyBytes ?? 1024 * 1024;
    const declared = Number(ex.headers['content-length'] ?? 0);
    if (declared > limit) return ex.fail(new PayloadTooLargeError(`request body over ${limit} bytes`));
    if (ex.method === 'GET' || ex.method === 'HEAD') return ex.run(EMPTY_BODY);
    res.onData((ab, isLast) => ex.data(ab, isLast, limit));
  }
}

const EMPTY_BODY = Buffer.alloc(0);

/** uWebSockets.js's LIBUS_LISTEN_EXCLUSIVE_PORT listen option. */
const EXCLUSIVE_PORT = 1;

/** Upper-case method names without a new string per request (uWS gives them lower case). */
const METHODS = new Map(['get', 'post', 'put', 'patch', 'delete', 'head', 'options', 'connect', 'trace'].map((m) => [m, m.toUpperCase()]));
const upperMethod = (m: string): string => METHODS.get(m) ?? m.toUpperCase();

/**
 * Header copying without a closure per request: uWS calls `collectHeader` synchronously
 * inside `req.forEach`, while `headerTarget` is the request's header object.
 */
let headerTarget: Record<string, string> = {};
function collectHeader(k: string, v: string): void {
  const headers = headerTarget;
  headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
}

/**
 * Whether the socket address can matter: ingest (the only reader of `remoteAddress`) uses it
 * only when `x-client-ip` is not an IP (internal/ingest/ops.ts clientIp). Reading it costs a
 * getpeername system call and a string, so requests with a valid `x-client-ip` skip it.
 */
function needsRemoteAddress(headers: Record<string, string>): boolean {
  const forwarded = headers['x-client-ip'];
  if (forwarded === undefined) return true;
  const comma = forwarded.indexOf(',');
  const c = (comma < 0 ? forwarded : forwarded.slice(0, comma)).trim();
  if (!c) return true;
  return !isIP(c.startsWith('::ffff:') && isIP(c.slice(7)) === 4 ? c.slice(7) : c);
}

/** The request handlers see; `remoteAddress` is read from the socket when first asked if it was not needed up front. */
class UwsRequest implements HttpRequest {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly params: Record<string, string>,
    readonly query: URLSearchParams,
    readonly headers: Record<string, string>,
    readonly body: Buffer,
    readonly requestId: string,
    private readonly ex: Exchange,
  ) {}

  get remoteAddress(): string {
    return this.ex.remoteAddressNow();
  }

  get signal(): AbortSignal {
    return this.ex.signal;
  }
}

/** The response being written inside `res.cork` (cork runs its callback synchronously). */
let corkEx: Exchange | null = null;
let corkResponse: HttpResponse | null = null;
function writeCorked(): void {
  corkEx!.writeAll(corkResponse!);
}

/**
 * One request/response. A class rather than closures made per request: the hot path
 * allocates one object, and its methods are shared.
 */
class Exchange {
  readonly started = performance.now();
  readonly method: string;
  readonly path: string;
  readonly rawQuery: string;
  readonly headers: Record<string, string> = {};
  readonly requestId: string;
  /** The socket address, null until read (see needsRemoteAddress). */
  private remoteAddress: string | null = null;
  family: RouteFamily;
  routeName = 'unmatched';
  match: ReturnType<Router['match']> | null = null;
  aborted = false;
  done = false;
  private chunks: Buffer[] | null = null;
  private size = 0;
  /** Resolves the wait of a streamed response for a writable socket (set only while waiting). */
  private wakeWriter: (() => void) | null = null;
  /** Made when a handler first asks for the signal (ingest never does). */
  private abortController: AbortController | null = null;

  constructor(
    private readonly server: HttpServer,
    private readonly opts: ServerOptions,
    private readonly res: UWS.HttpResponse,
    req: UWS.HttpRequest,
  ) {
    this.method = upperMethod(req.getMethod());
    this.path = req.getUrl();
    this.rawQuery = req.getQuery() ?? '';
    const headers = this.headers;
    headerTarget = headers;
    req.forEach(collectHeader);
    this.requestId = headers['x-request-id']?.slice(0, 128) || server.nextRequestId();
    if (needsRemoteAddress(headers)) this.remoteAddress = Buffer.from(res.getRemoteAddressAsText()).toString();
    this.family = 'read';
  }

  /**
   * The socket address; read now when it was skipped up front (uWS allows it until the
   * response is ended or aborted; after that there is no socket to ask).
   */
  remoteAddressNow(): string {
    if (this.remoteAddress === null) {
      this.remoteAddress = this.aborted || this.done ? '' : Buffer.from(this.res.getRemoteAddressAsText()).toString();
    }
    return this.remoteAddress;
  }

  /**
   * The client went away, or uWS closed the connection (idle for 10 s: a stalled reader).
   * A streamed response waiting for the socket to drain is woken, so it stops and its
   * iterator releases what it holds (a PostgreSQL connection).
   */
  abort(): void {
    this.aborted = true;
    this.finish();
    const wake = this.wakeWriter;
    this.wakeWriter = null;
    wake?.();
    this.abortController?.abort();
  }

  /** Aborts when the client goes away (reads cancel their queries on it). */
  get signal(): AbortSignal {
    if (!this.abortController) {
      this.abortController = new AbortController();
      if (this.aborted) this.abortController.abort();
    }
    return this.abortController.signal;
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.server.requestDone();
  }

  data(ab: ArrayBuffer, isLast: boolean, limit: number): void {
    if (this.done) return;
    this.size += ab.byteLength;
    if (this.size > limit) return this.fail(new PayloadTooLargeError(`request body over ${limit} bytes`));
    // uWS reuses `ab` after this call: copy it. Copying through a view takes a pooled Buffer
    // for small bodies; ab.slice(0) made a new ArrayBuffer (its own backing store) each time.
    const chunk = Buffer.from(new Uint8Array(ab));
    if (!isLast) (this.chunks ??= []).push(chunk);
    else this.run(this.chunks ? Buffer.concat([...this.chunks, chunk]) : chunk);
  }

  run(body: Buffer): void {
    let query: URLSearchParams;
    try {
      query = new URLSearchParams(this.rawQuery);
    } catch {
      return this.fail(new BadRequestError('malformed query string'));
    }
    const match = this.match!;
    const request = new UwsRequest(this.method, this.path, match.params, query, this.headers, body, this.requestId, this);
    match.route.handler(request).then(
      (r) => this.send(r),
      (err: unknown) => this.fail(err),
    );
  }

  fail(err: unknown): void {
    if (!(err instanceof HttpError)) this.opts.onError?.(err, { method: this.method, path: this.path, requestId: this.requestId });
    this.send(errorResponse(err, this.family));
  }

  send(r: HttpResponse): void {
    if (this.aborted || this.done) return;
    if (r.stream) {
      void this.sendStream(r as HttpResponse & { stream: NonNullable<HttpResponse['stream']> });
      return;
    }
    if (this.family === 'read' && r.body !== undefined && !r.raw) {
      // A big answer (a chart of 100,000s of points) is serialized in slices so that
      // ingest is answered in between (./json.ts); a small one is written at once.
      const text = stringifySliced(r.body);
      if (typeof text !== 'string') {
        text.then(
          (data) => this.send({ status: r.status, headers: r.headers, raw: { contentType: 'application/json', data } }),
          (err: unknown) => this.fail(err),
        );
        return;
      }
      r = { status: r.status, headers: r.headers, raw: { contentType: 'application/json', data: text } };
    }
    corkEx = this;
    corkResponse = r;
    try {
      this.res.cork(writeCorked);
    } finally {
      corkEx = null;
      corkResponse = null;
    }
    this.finish();
    this.observe(r.status);
  }

  /** Status, headers and body of a complete response (inside cork). */
  writeAll(r: HttpResponse): void {
    const res = this.res;
    this.writeHead(r);
    if (r.raw) {
      res.writeHeader('Content-Type', r.raw.contentType);
      res.end(r.raw.data);
    } else if (r.body === undefined) {
      res.end();
    } else {
      res.writeHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(r.body));
    }
  }

  private writeHead(r: HttpResponse): void {
    const res = this.res;
    const origin = this.headers.origin;
    res.writeStatus(STATUS_LINE[r.status] ?? String(r.status));
    res.writeHeader('x-request-id', this.requestId);
    if (this.family === 'ingest' && origin) {
      res.writeHeader('Access-Control-Allow-Origin', origin);
      res.writeHeader('Vary', 'Origin');
    } else if (this.family === 'read' && this.routeName !== 'preflight' && this.routeName !== 'unmatched') {
      res.writeHeader('Access-Control-Allow-Origin', '*');
      res.writeHeader('Access-Control-Expose-Headers', READ_EXPOSE_HEADERS);
    }
    if (r.headers) for (const k in r.headers) res.writeHeader(k, r.headers[k]!);
  }

  private observe(status: number): void {
    this.opts.onResponse?.({
      route: this.routeName, method: this.method, status, requestId: this.requestId,
      seconds: (performance.now() - this.started) / 1000,
    });
  }

  /** Waits until uWS can take more of a streamed body, or the exchange is aborted. */
  private writable(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.wakeWriter = resolve;
      this.res.onWritable(() => {
        this.wakeWriter = null;
        resolve();
        return true;
      });
    });
  }

  private async sendStream(r: HttpResponse & { stream: NonNullable<HttpResponse['stream']> }): Promise<void> {
    const res = this.res;
    const it = r.stream.chunks[Symbol.asyncIterator]();
    // The first chunk decides the status: an error before any byte is sent is a normal error response.
    let pending: IteratorResult<string | Buffer>;
    try {
      pending = await it.next();
    } catch (err) {
      return this.fail(err);
    }
    if (this.aborted) return void (await it.return?.());
    res.cork(() => {
      this.writeHead(r);
      if (!Object.keys(r.headers ?? {}).some((k) => k.toLowerCase() === 'content-type')) res.writeHeader('Content-Type', r.stream.contentType);
    });
    try {
      for (let first = true; ; first = false) {
        const next = first ? pending : await it.next();
        if (this.aborted) break;
        if (next.done) break;
        let ok = true;
        res.cork(() => {
          ok = res.write(next.value);
        });
        if (!ok && !this.aborted) await this.writable();
        if (this.aborted) break;
      }
    } catch (err) {
      this.opts.onError?.(err, { method: this.method, path: this.path, requestId: this.requestId });
      if (!this.aborted) res.close();
      this.aborted = true;
    } finally {
      if (this.aborted) await it.return?.();
    }
    if (!this.aborted && !this.done) res.cork(() => res.end());
    this.finish();
    this.observe(r.status);
  }
}
