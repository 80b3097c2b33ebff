// A small open-loop HTTP/1.1 load generator for the end-to-end benchmark (bench/e2e.ts):
// requests are due on a fixed schedule (`rate` per second) whether or not earlier ones were
// answered; each goes out on an idle one of `connections` keep-alive sockets (one request in
// flight per socket: uWebSockets.js closes a connection that pipelines a request behind an
// unanswered asynchronous one), waiting in a queue here when every socket is busy. Each
// latency is measured from the request's scheduled time, so a server that falls behind shows
// it in its latencies, queueing included (no coordinated omission). Also a closed-loop
// sequential mode (one request at a time on one socket) for producer latency.
import net from 'node:net';
import { performance } from 'node:perf_hooks';

export interface LoadResult {
  /** Requests sent / answered 2xx / answered otherwise / lost to socket errors or the end timeout. */
  sent: number;
  ok: number;
  non2xx: number;
  errors: number;
  /** Latencies (ms) of every answered request, in answer order. */
  latencies: number[];
  /** performance.now() of every 2xx answer, in answer order. */
  okTimes: number[];
  statuses: Record<string, number>;
  startedAt: number;
  /** When the last request was scheduled (the offered load stopped). */
  stoppedAt: number;
  /** Answers still missing when the end timeout passed. */
  unanswered: number;
}

interface Conn {
  sock: net.Socket;
  buf: Buffer;
  /** Scheduled times of the requests in flight on this socket, oldest first. */
  inFlight: number[];
  dead: boolean;
}

/** Parses as many complete responses as `c.buf` holds; returns their status codes. */
function parseResponses(c: Conn, onAnswer: (status: number, scheduled: number) => void): void {
  for (;;) {
    const head = c.buf.indexOf('\r\n\r\n');
    if (head === -1) return;
    const headText = c.buf.toString('latin1', 0, head);
    const status = Number(headText.slice(9, 12));
    const m = /\r\ncontent-length:\s*(\d+)/i.exec(headText);
    const len = m ? Number(m[1]) : 0;
    if (c.buf.length < head + 4 + len) return;
    c.buf = c.buf.subarray(head + 4 + len);
    const scheduled = c.inFlight.shift();
    if (scheduled !== undefined) onAnswer(status, scheduled);
  }
}

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1', noDelay: true });
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

export interface OpenLoopOptions {
  port: number;
  /** Raw requests (full HTTP/1.1 text), sent round robin. */
  requests: Buffer[];
  rate: number;
  seconds: number;
  connections: number;
  /** How long to wait for the last answers after the schedule ends. */
  endTimeoutMs?: number;
  /** Called with the result object as soon as the load starts (it fills as answers come). */
  onStart?: (live: LoadResult) => void;
}

export async function openLoop(o: OpenLoopOptions): Promise<LoadResult> {
  const r: LoadResult = { sent: 0, ok: 0, non2xx: 0, errors: 0, latencies: [], okTimes: [], statuses: {}, startedAt: 0, stoppedAt: 0, unanswered: 0 };
  const conns: Conn[] = [];
  const onAnswer = (status: number, scheduled: number) => {
    const now = performance.now();
    r.latencies.push(now - scheduled);
    r.statuses[status] = (r.statuses[status] ?? 0) + 1;
    if (status >= 200 && status < 300) {
      r.ok++;
      r.okTimes.push(now);
    } else r.non2xx++;
  };
  /** Due requests waiting for an idle socket: [scheduled time, request index]. */
  const queue: [number, number][] = [];
  let queueHead = 0;
  const idle: Conn[] = [];
  const sendOn = (c: Conn) => {
    if (queueHead >= queue.length) {
      idle.push(c);
      return;
    }
    const [scheduled, n] = queue[queueHead++]!;
    if (queueHead > 4096 && queueHead * 2 > queue.length) {
      queue.splice(0, queueHead);
      queueHead = 0;
    }
    c.inFlight.push(scheduled);
    c.sock.write(o.requests[n % o.requests.length]!);
  };
  for (let i = 0; i < o.connections; i++) {
    const sock = await connect(o.port);
    const c: Conn = { sock, buf: Buffer.alloc(0), inFlight: [], dead: false };
    sock.on('data', (d: Buffer) => {
      c.buf = c.buf.length ? Buffer.concat([c.buf, d]) : d;
      parseResponses(c, onAnswer);
      if (!c.inFlight.length && !c.dead) sendOn(c);
    });
    const die = () => {
      if (c.dead) return;
      c.dead = true;
      r.errors += c.inFlight.length;
      c.inFlight = [];
      const at = idle.indexOf(c);
      if (at !== -1) idle.splice(at, 1);
    };
    sock.on('error', die);
    sock.on('close', die);
    conns.push(c);
    idle.push(c);
  }
  const total = Math.round(o.rate * o.seconds);
  const intervalMs = 1000 / o.rate;
  r.startedAt = performance.now();
  o.onStart?.(r);
  let next = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      const due = Math.min(total, Math.floor((now - r.startedAt) / intervalMs) + 1);
      while (next < due) {
        queue.push([r.startedAt + next * intervalMs, next]);
        next++;
        r.sent++;
      }
      while (idle.length && queueHead < queue.length) sendOn(idle.pop()!);
      if (!conns.some((c) => !c.dead)) {
        r.errors += queue.length - queueHead;
        queueHead = queue.length;
      }
      if (next >= total) {
        r.stoppedAt = performance.now();
        return resolve();
      }
      setTimeout(tick, 1);
    };
    tick();
  });
  const deadline = performance.now() + (o.endTimeoutMs ?? 15_000);
  while (r.ok + r.non2xx + r.errors < r.sent && performance.now() < deadline) await new Promise((res) => setTimeout(res, 5));
  r.unanswered = r.sent - (r.ok + r.non2xx + r.errors);
  for (const c of conns) c.sock.destroy();
  return r;
}

/** One request at a time on one keep-alive socket: producer latency without queueing. */
export async function sequential(o: { port: number; requests: Buffer[]; count: number }): Promise<LoadResult> {
  const r: LoadResult = { sent: 0, ok: 0, non2xx: 0, errors: 0, latencies: [], okTimes: [], statuses: {}, startedAt: performance.now(), stoppedAt: 0, unanswered: 0 };
  const sock = await connect(o.port);
  const c: Conn = { sock, buf: Buffer.alloc(0), inFlight: [], dead: false };
  let wake: (() => void) | null = null;
  sock.on('data', (d: Buffer) => {
    c.buf = c.buf.length ? Buffer.concat([c.buf, d]) : d;
    parseResponses(c, (status, scheduled) => {
      const now = performance.now();
      r.latencies.push(now - scheduled);
      r.statuses[status] = (r.statuses[status] ?? 0) + 1;
      if (status >= 200 && status < 300) {
        r.ok++;
        r.okTimes.push(now);
      } else r.non2xx++;
      wake?.();
    });
  });
  sock.on('error', () => wake?.());
  for (let i = 0; i < o.count; i++) {
    const answered = new Promise<void>((res) => (wake = res));
    c.inFlight.push(performance.now());
    sock.write(o.requests[i % o.requests.length]!);
    r.sent++;
    await answered;
  }
  r.stoppedAt = performance.now();
  sock.destroy();
  return r;
}

export function percentile(values: number[], p: number): number {
  if (!values.length) return NaN;
  const s = Float64Array.from(values).sort();
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}
