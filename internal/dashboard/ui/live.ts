// The live visitor count over the WebSocket (docs/api.md "Live push"): credentials as the first
// message, reconnection with exponential backoff and jitter, and a state the page shows.

export type LiveState =
  | { kind: 'connecting' }
  | { kind: 'live'; visitors: number }
  | { kind: 'down'; retryInSeconds: number }
  | { kind: 'refused'; reason: string };

/** Delay before reconnection attempt `attempt` (0-based): 1 s, 2 s, 4 s … 30 s, ±20%. */
export function backoffMs(attempt: number, random = Math.random): number {
  const base = Math.min(30_000, 1000 * 2 ** Math.min(attempt, 10));
  return Math.round(base * (0.8 + 0.4 * random()));
}

/** Close codes after which reconnecting cannot help (the credentials or the project are wrong). */
export const FINAL_CODES = new Set([4400, 4401, 4403, 4404]);

export class LiveConnection {
  private ws: WebSocket | null = null;
  private attempt = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private countdown: ReturnType<typeof setInterval> | null = null;
  private stopped = false;

  constructor(
    private readonly url: string,
    private readonly credentials: { clientId: string; clientSecret: string },
    private readonly onState: (s: LiveState) => void,
  ) {
    this.connect();
  }

  private connect(): void {
    if (this.stopped) return;
    this.onState({ kind: 'connecting' });
    let ws: WebSocket;
    try {
      ws = new WebSocket(this.url);
    } catch {
      return this.retry();
    }
    this.ws = ws;
    ws.onopen = () => ws.send(JSON.stringify(this.credentials));
    ws.onmessage = (e) => {
      try {
        const { visitors } = JSON.parse(String(e.data)) as { visitors: number };
        if (typeof visitors === 'number') {
          this.attempt = 0;
          this.onState({ kind: 'live', visitors });
        }
      } catch {}
    };
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.stopped) return;
      if (FINAL_CODES.has(e.code)) return this.onState({ kind: 'refused', reason: e.reason || `closed (${e.code})` });
      this.retry();
    };
  }

  private retry(): void {
    const delay = backoffMs(this.attempt++);
    let left = Math.ceil(delay / 1000);
    this.onState({ kind: 'down', retryInSeconds: left });
    this.countdown = setInterval(() => {
      left = Math.max(0, left - 1);
      this.onState({ kind: 'down', retryInSeconds: left });
    }, 1000);
    this.timer = setTimeout(() => {
      if (this.countdown) clearInterval(this.countdown);
      this.countdown = null;
      this.connect();
    }, delay);
  }

  /** Reconnects at once (the person asked to). */
  retryNow(): void {
    if (this.ws || this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    if (this.countdown) clearInterval(this.countdown);
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.countdown) clearInterval(this.countdown);
    this.ws?.close(1000, 'closed by the page');
    this.ws = null;
  }
}
