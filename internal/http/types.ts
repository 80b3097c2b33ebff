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

/** What a WebSocket route sees of the upgrade request (copied before uWS discards it). */
export interface SocketRequest {
  path: string;
  params: Record<string, string>;
  query: URLSearchParams;
  /** Lower-case header names. */
  headers: Record<string, string>;
  remoteAddress: string;
  requestId: string;
}

/** One open WebSocket, as a route uses it. */
export interface SocketConnection {
  /**
   * Sends a text message. False when the socket is closed, or when it was closed now because
   * its peer does not read (more than the route's maxBufferedBytes waiting to be sent).
   */
  send(text: string): boolean;
  /** Closes with a close frame (code, and a reason cut to the 123 bytes the protocol allows). */
  close(code: number, reason: string): void;
  readonly isClosed: boolean;
}

export interface SocketHandlers {
  /** A message from the peer (text, or binary as bytes). */
  message(data: string | Buffer): void;
  /** The socket closed, for whatever reason (peer, timeout, server). Called once. */
  closed(code: number): void;
}

export interface SocketRoute {
  /** uWS pattern with :params, e.g. /insights/:projectId/live (plain GETs fall through to the HTTP routes). */
  pattern: string;
  /** Largest message accepted from the peer; a larger one closes the socket with 1009 and a close frame. Default 4 KiB. */
  maxMessageBytes?: number;
  /**
   * Largest message read to its end, so that one over maxMessageBytes can still be refused with
   * 1009 and a close frame (default maxMessageBytes). uWebSockets.js drops a connection that
   * announces a bigger one at once, without a close frame (the peer sees 1006). A socket may
   * make the server hold up to this much of a message it has not finished sending.
   */
  maxFrameBytes?: number;
  /** Bytes allowed to wait for a peer that does not read before the socket is closed. Default 64 KiB. */
  maxBufferedBytes?: number;
  /** Seconds without any frame (uWS pings the peer before that) before the socket is closed. Default 120. */
  idleTimeoutSeconds?: number;
  /** Called when the socket is open; returns its handlers. */
  accept(req: SocketRequest, socket: SocketConnection): SocketHandlers;
}
