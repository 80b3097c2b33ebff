// Shared pieces of the fuzz and security suites (test/fuzz-*.test.ts, test/security-*.test.ts):
// an HTTP client with a hard timeout that never throws on odd bodies, the response
// properties every answer must have (never 5xx, JSON bodies, the exact 400 shape), raw TCP
// requests for what fetch refuses to send, and a tiny concurrency pool.
import assert from 'node:assert/strict';
import net from 'node:net';
import type { Credentials } from './harness';

/** How many fast-check runs a suite does: FUZZ_SCALE=2 doubles them (default 1). */
export const FUZZ_SCALE = Math.max(0.1, Number(process.env.FUZZ_SCALE ?? 1) || 1);
export const runs = (n: number) => Math.max(1, Math.round(n * FUZZ_SCALE));

export interface Answer {
  status: number;
  contentType: string;
  text: string;
  /** Parsed JSON, or undefined when the body is not JSON. */
  json: unknown;
  headers: Headers;
  ms: number;
}

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** A request that takes longer is a hang: the promise rejects. */
  timeoutMs?: number;
}

/** Requests sent again after a connection reset (see request()). */
export const resets = { retried: 0 };

/**
 * One HTTP request with a client timeout; a timeout or connection error rejects with a message
 * naming the request. fetch keeps connections alive and reuses them; one the server has just
 * closed (uWS closes a connection idle for 10 s; a loaded machine may hold back the close
 * notice past fetch's own 4 s) is reset when reused (one CI run in many: ECONNRESET 4 ms into a
 * request). Such a request is sent once more and counted in `resets`; a server that resets a
 * request by itself resets it again, and the error is reported.
 */
export async function request(url: string, o: RequestOptions = {}): Promise<Answer> {
  const started = performance.now();
  let res: Response;
  const send = () => fetch(url, {
    method: o.method ?? 'GET',
    headers: o.headers,
    body: o.body,
    signal: AbortSignal.timeout(o.timeoutMs ?? 10_000),
  });
  try {
    try {
      res = await send();
    } catch (err) {
      const code = (err as { cause?: { code?: string } }).cause?.code;
      if (code !== 'ECONNRESET' && code !== 'UND_ERR_SOCKET') throw err;
      resets.retried++;
      res = await send();
    }
  } catch (err) {
    throw new Error(`${o.method ?? 'GET'} ${url.slice(0, 300)} failed after ${Math.round(performance.now() - started)} ms: ${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? '')}`);
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text, json, headers: res.headers, ms: performance.now() - started };
}

export const credHeaders = (c: Credentials): Record<string, string> => ({
  'service-client-id': c.clientId,
  'service-client-secret': c.clientSecret,
});

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The exact 400 body: ingest adds `status: 400`, read routes do not. */
export function assertBadRequestShape(body: unknown, family: 'ingest' | 'read', what = ''): void {
  assert.ok(isObject(body), `${what} 400 body is not an object: ${JSON.stringify(body)}`);
  const keys = Object.keys(body).sort();
  assert.deepEqual(keys, family === 'ingest' ? ['details', 'error', 'message', 'status'] : ['details', 'error', 'message'], `${what} 400 keys: ${JSON.stringify(body)}`);
  assert.equal(body.error, 'Bad Request', what);
  assert.equal(typeof body.message, 'string', what);
  if (family === 'ingest') assert.equal(body.status, 400, what);
  const details = body.details;
  assert.ok(isObject(details), `${what} details: ${JSON.stringify(body)}`);
  assert.deepEqual(Object.keys(details), ['issues'], `${what} details keys: ${JSON.stringify(body)}`);
  const issues = details.issues;
  assert.ok(Array.isArray(issues) && issues.length > 0, `${what} issues: ${JSON.stringify(body)}`);
  for (const issue of issues) {
    assert.ok(isObject(issue), `${what} issue: ${JSON.stringify(issue)}`);
    assert.deepEqual(Object.keys(issue).sort(), ['message', 'path'], `${what} issue keys: ${JSON.stringify(issue)}`);
    assert.ok(Array.isArray(issue.path) && issue.path.every((p) => typeof p === 'string'), `${what} issue path: ${JSON.stringify(issue)}`);
    assert.equal(typeof issue.message, 'string', `${what} issue message: ${JSON.stringify(issue)}`);
  }
}

export interface SaneOptions {
  family: 'ingest' | 'read' | 'ops';
  /** Read routes: a 503 is allowed when it is the statement timeout's clear message. */
  allowQueryTimeout?: boolean;
  what?: string;
}

/** The property every answer has: 2xx or 4xx (never 5xx), a JSON body (except 204), the exact 400 shape. */
export function assertSane(a: Answer, o: SaneOptions): void {
  const what = `${o.what ?? ''} -> ${a.status} ${a.text.slice(0, 400)}`;
  if (a.status === 503 && o.allowQueryTimeout) {
    assert.ok(isObject(a.json) && a.json.error === 'Service Unavailable' && /took longer than \d+ ms/.test(String(a.json.message)), `503 without the query timeout message: ${what}`);
    return;
  }
  assert.ok((a.status >= 200 && a.status < 300) || (a.status >= 400 && a.status < 500), `status ${a.status} (never 5xx): ${what}`);
  if (a.status === 204) return;
  if (a.contentType.includes('application/x-ndjson')) {
    for (const line of a.text.split('\n').filter(Boolean)) JSON.parse(line);
    return;
  }
  assert.match(a.contentType, /application\/json/, `content type: ${what}`);
  assert.notEqual(a.json, undefined, `body is not JSON: ${what}`);
  if (a.status === 400 && o.family !== 'ops') assertBadRequestShape(a.json, o.family, what);
  if (a.status >= 400 && a.status !== 400) {
    assert.ok(isObject(a.json) && typeof a.json.error === 'string', `error body: ${what}`);
    if (o.family === 'ingest') assert.equal((a.json as Record<string, unknown>).status, a.status, `ingest error carries status: ${what}`);
    else assert.equal(typeof (a.json as Record<string, unknown>).message, 'string', `read error carries message: ${what}`);
  }
}

/** Runs `fn` over `items` with at most `width` at a time; results in order. */
export async function pool<T, R>(items: readonly T[], width: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return out;
}

export interface RawAnswer {
  /** Everything the server sent. */
  data: Buffer;
  /** The status of the first response line, or null when none came. */
  status: number | null;
  /** How the exchange ended. */
  end: 'closed' | 'timeout' | 'error';
  ms: number;
}

/** Sends raw bytes over TCP and collects the answer until the server closes, `waitMs` passes, or one full response arrived (`untilResponse`). */
export function rawRequest(port: number, data: Buffer | string, o: { waitMs?: number; untilResponse?: boolean } = {}): Promise<RawAnswer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const sock = net.connect(port, '127.0.0.1');
    let settled = false;
    const done = (end: RawAnswer['end']) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      const all = Buffer.concat(chunks);
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(all.toString('latin1'));
      resolve({ data: all, status: m ? Number(m[1]) : null, end, ms: performance.now() - started });
    };
    const timer = setTimeout(() => done('timeout'), o.waitMs ?? 15_000);
    sock.on('data', (d) => {
      chunks.push(d);
      if (o.untilResponse && responseComplete(Buffer.concat(chunks))) done('closed');
    });
    sock.on('close', () => done('closed'));
    sock.on('error', () => done('error'));
    sock.write(data);
  });
}

/** True when `buf` holds a whole HTTP/1.1 response with a Content-Length body. */
function responseComplete(buf: Buffer): boolean {
  const text = buf.toString('latin1');
  const head = text.indexOf('\r\n\r\n');
  if (head < 0) return false;
  const m = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, head));
  return m ? buf.length - (head + 4) >= Number(m[1]) : true;
}

/** The JSON body of a raw response (after the head), or undefined. */
export function rawJson(a: RawAnswer): unknown {
  const text = a.data.toString('utf8');
  const head = text.indexOf('\r\n\r\n');
  if (head < 0) return undefined;
  try {
    return JSON.parse(text.slice(head + 4));
  } catch {
    return undefined;
  }
}

/** Counts cases per suite for the t.diagnostic summary. */
export class CaseCounter {
  private readonly counts = new Map<string, number>();
  add(kind: string, n = 1): void {
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + n);
  }
  get total(): number {
    let t = 0;
    for (const n of this.counts.values()) t += n;
    return t;
  }
  summary(): string {
    return [...this.counts].map(([k, n]) => `${k}=${n}`).join(' ');
  }
}
