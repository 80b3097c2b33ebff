// WebSocket routes on the uWS app. The upgrade copies what the route needs (path params,
// query, headers, address) and upgrades at once; the route then gets a transport-neutral
// SocketConnection (internal/http/types.ts) and decides everything else (authentication
// included), so nothing outside internal/http knows uWS.
import type { UWS } from './uws';
import type { SocketConnection, SocketHandlers, SocketRequest, SocketRoute } from './types';

interface SocketData {
  request: SocketRequest;
  connection: UwsSocket | null;
  handlers: SocketHandlers | null;
  /** The close code when the route closed the socket inside accept() (its handlers did not exist yet). */
  closedInAccept: number | null;
}

interface SocketGlueOptions {
  isDraining: () => boolean;
  nextRequestId: () => string;
  onError?: (err: unknown, where: { path: string; requestId: string }) => void;
}

const CLOSE_REASON_BYTES = 123;
const EMPTY: Record<string, string> = Object.freeze({}) as Record<string, string>;
const NO_QUERY = new URLSearchParams();

/** A close reason the protocol accepts: at most 123 bytes of UTF-8, cut on a character boundary. */
export function closeReason(reason: string): string {
  if (Buffer.byteLength(reason) <= CLOSE_REASON_BYTES) return reason;
  let out = '';
  for (const ch of reason) {
    if (Buffer.byteLength(out + ch) > CLOSE_REASON_BYTES) break;
    out += ch;
  }
  return out;
}

class UwsSocket implements SocketConnection {
  isClosed = false;

  constructor(
    private readonly ws: UWS.WebSocket<SocketData>,
    private readonly maxBufferedBytes: number,
  ) {}

  send(text: string): boolean {
    if (this.isClosed) return false;
    // A peer that does not read: drop it rather than buffer without bound.
    if (this.ws.getBufferedAmount() > this.maxBufferedBytes) {
      this.close(1008, 'messages are not being read; closed (reconnect and read faster)');
      return false;
    }
    const status = this.ws.send(text, false, false);
    if (status === 2) {
      this.close(1008, 'messages are not being read; closed (reconnect and read faster)');
      return false;
    }
    return true;
  }

  close(code: number, reason: string): void {
    if (this.isClosed) return;
    this.isClosed = true;
    // end() runs the close handler at once, which tells the route.
    this.ws.end(code, closeReason(reason));
  }

  /** The uWS close handler ran (peer, timeout, end() or the app closing). */
  markClosed(): void {
    this.isClosed = true;
  }
}

/** Every open socket of one server, so a shutdown can close them with a close frame. */
export class OpenSockets {
  private readonly open = new Set<UwsSocket>();

  add(s: UwsSocket): void {
    this.open.add(s);
  }

  delete(s: UwsSocket): void {
    this.open.delete(s);
  }

  get size(): number {
    return this.open.size;
  }

  closeAll(code: number, reason: string): void {
    for (const s of [...this.open]) s.close(code, reason);
  }
}

function safeDecode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

export function attachSocketRoute(uws: typeof UWS, app: UWS.TemplatedApp, route: SocketRoute, sockets: OpenSockets, o: SocketGlueOptions): void {
  const paramNames = route.pattern.split('/').filter((s) => s.startsWith(':')).map((s) => s.slice(1));
  const maxBufferedBytes = route.maxBufferedBytes ?? 64 * 1024;
  const maxMessageBytes = route.maxMessageBytes ?? 4096;
  const tooBig = closeReason(`message too big: at most ${maxMessageBytes} bytes`);
  app.ws<SocketData>(route.pattern, {
    compression: uws.DISABLED,
    // uWS closes a connection announcing a message over maxPayloadLength without a close frame
    // (1006 for the peer): it reads up to maxFrameBytes so that the check below answers 1009.
    maxPayloadLength: Math.max(maxMessageBytes, route.maxFrameBytes ?? 0),
    // uWS keeps at most this much per socket; ours closes the socket before it is reached.
    maxBackpressure: maxBufferedBytes * 2,
    idleTimeout: route.idleTimeoutSeconds ?? 120,
    sendPingsAutomatically: true,
    upgrade: (res, req, context) => {
      const headers: Record<string, string> = {};
      req.forEach((k, v) => (headers[k] = k in headers ? `${headers[k]}, ${v}` : v));
      const path = req.getUrl();
      const params: Record<string, string> = {};
      let badParam = false;
      paramNames.forEach((name, i) => {
        const v = safeDecode(req.getParameter(i));
        if (v === null) badParam = true;
        else params[name] = v;
      });
      const requestId = headers['x-request-id']?.slice(0, 128) || o.nextRequestId();
      const refuse = (status: string, body: object, extra: Record<string, string> = {}): void =>
        void res.cork(() => {
          res.writeStatus(status).writeHeader('x-request-id', requestId).writeHeader('Content-Type', 'application/json');
          for (const k in extra) res.writeHeader(k, extra[k]!);
          res.end(JSON.stringify(body));
        });
      if (o.isDraining()) {
        return refuse('503 Service Unavailable', { error: 'Service Unavailable', message: 'server is shutting down; retry' }, { 'Retry-After': '1' });
      }
      if (badParam) return refuse('400 Bad Request', { error: 'Bad Request', message: 'malformed path parameter', details: { issues: [{ path: [], message: 'malformed path parameter' }] } });
      let query: URLSearchParams;
      try {
        query = new URLSearchParams(req.getQuery() ?? '');
      } catch {
        query = new URLSearchParams();
      }
      const request: SocketRequest = {
        path, params, query, headers, requestId,
        remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
      };
      // A client may offer several subprotocols; answering with the whole list would fail its handshake.
      const protocol = (headers['sec-websocket-protocol'] ?? '').split(',')[0]!.trim();
      res.upgrade<SocketData>({ request, connection: null, handlers: null, closedInAccept: null }, headers['sec-websocket-key'] ?? '', protocol, headers['sec-websocket-extensions'] ?? '', context);
    },
    open: (ws) => {
      const data = ws.getUserData();
      const connection = new UwsSocket(ws, maxBufferedBytes);
      data.connection = connection;
      sockets.add(connection);
      let handlers: SocketHandlers;
      try {
        handlers = route.accept(data.request, connection);
      } catch (err) {
        o.onError?.(err, { path: data.request.path, requestId: data.request.requestId });
        connection.close(1011, 'internal error');
        return;
      }
      // The route copied what it needs: an idle socket keeps no headers or query.
      data.request = { path: data.request.path, requestId: data.request.requestId, params: EMPTY, query: NO_QUERY, headers: EMPTY, remoteAddress: '' };
      if (data.closedInAccept !== null) handlers.closed(data.closedInAccept);
      else data.handlers = handlers;
    },
    message: (ws, message, isBinary) => {
      const data = ws.getUserData();
      if (message.byteLength > maxMessageBytes) {
        data.connection?.close(1009, tooBig);
        return;
      }
      // The ArrayBuffer is valid only during this call: copy (binary) or decode (text) now.
      const bytes = Buffer.from(new Uint8Array(message));
      try {
        data.handlers?.message(isBinary ? bytes : bytes.toString('utf8'));
      } catch (err) {
        o.onError?.(err, { path: data.request.path, requestId: data.request.requestId });
        data.connection?.close(1011, 'internal error');
      }
    },
    close: (ws, code) => {
      const data = ws.getUserData();
      if (data.connection) {
        data.connection.markClosed();
        sockets.delete(data.connection);
      }
      const handlers = data.handlers;
      if (!handlers) data.closedInAccept = code;
      data.handlers = null;
      try {
        handlers?.closed(code);
      } catch (err) {
        o.onError?.(err, { path: data.request.path, requestId: data.request.requestId });
      }
    },
  });
}
