// Live push: the sockets watching projects' live visitors, in one API thread. Domain logic
// only: the transport is a SocketConnection (internal/http), the count, the change signal and
// the revocation list come from a LiveSource (Redis, internal/live/source.ts).
//
// Per project, not per socket: one subscription to the project's change channel, one count
// per evaluation shared by all its sockets, one timer. A project is evaluated
//   - when its channel says a visitor entered the window (an accepted event, any API process),
//     at most once per minIntervalMs (260 ms);
//   - when its oldest live visitor leaves the 5-minute window (the count's own next change);
//   - every resyncMs (5 s) anyway (a change published while the subscription was reconnecting).
// A socket gets `{"visitors": N}` at once after it authenticates, then whenever N changes, never
// two messages closer than minIntervalMs (at most 4 a second).
import type { SocketConnection, SocketHandlers, SocketRequest } from '../http/types';
import { credentialsOf } from '../auth/auth';
import { LIVE_WINDOW_MS } from '../ratelimit/gate';
import { CLOSE, parseCredentialsMessage, refusal, visitorsMessage, type Credentials } from './protocol';

export interface LiveCount {
  visitors: number;
  /** Score (event time, ms) of the oldest visitor still in the window; null when none. */
  oldestMs: number | null;
}

export interface LiveSource {
  /** Live visitors of a project at `nowMs` (profiles with an event in the 5 minutes before). */
  count(projectId: string, nowMs: number): Promise<LiveCount>;
  /** Start hearing the project's changes (resolves once subscribed). */
  subscribe(projectId: string): Promise<void>;
  unsubscribe(projectId: string): Promise<void>;
  /** Which of these clients are revoked. */
  revoked(clientIds: string[]): Promise<Set<string>>;
}

/** Checks a socket's credentials for a project: resolves with the client id, or throws an HttpError (401, 403, 404, 503). */
export type LiveAuthenticate = (credentials: Credentials, projectId: string) => Promise<{ clientId: string }>;

export interface LiveHubOptions {
  source: LiveSource;
  authenticate: LiveAuthenticate;
  /** Sockets this hub accepts at most; more are closed with 1013. Default 20,000. */
  maxSockets?: number;
  /** Time a browser has to send its credentials message. Default 5 s. */
  authTimeoutMs?: number;
  /**
   * Least time between two evaluations of a project, and between two messages to one socket.
   * Default 260 ms: at most 4 a second, with room for the network's jitter at the receiver.
   */
  minIntervalMs?: number;
  /** Re-count a watched project at least this often. Default 5 s. */
  resyncMs?: number;
  /** How often the watching clients are checked against the revocation list. Default 2 s. */
  revocationCheckMs?: number;
  /** Retry after a failed count. Default 1 s. */
  retryMs?: number;
  now?: () => number;
  onError?: (err: unknown, what: string) => void;
  /** Told whenever the number of sockets changes (a gauge). */
  onStats?: (stats: { sockets: number; watching: number; projects: number }) => void;
}

interface Watcher {
  socket: SocketConnection;
  clientId: string;
  project: ProjectState;
  /** Last value sent (-1: none yet) and when. */
  sent: number;
  sentAt: number;
}

interface ProjectState {
  id: string;
  watchers: Set<Watcher>;
  subscribed: Promise<void>;
  visitors: number | null;
  evaluatedAt: number;
  /** When the count next changes by itself (the oldest live visitor leaves the window). */
  agesAt: number;
  /** A change was announced since the last evaluation started. */
  dirty: boolean;
  evaluating: boolean;
  timer: NodeJS.Timeout | null;
  timerAt: number;
  closed: boolean;
}

export class LiveHub {
  private readonly projects = new Map<string, ProjectState>();
  private sockets = 0;
  private watching = 0;
  private revocationTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly o: Required<Omit<LiveHubOptions, 'onError' | 'onStats'>> & Pick<LiveHubOptions, 'onError' | 'onStats'>;

  constructor(opts: LiveHubOptions) {
    this.o = {
      maxSockets: 20_000, authTimeoutMs: 5_000, minIntervalMs: 260, resyncMs: 5_000, revocationCheckMs: 2_000, retryMs: 1_000,
      now: Date.now, ...opts,
    };
  }

  /** Sockets open (authenticated or not) and projects watched. */
  stats(): { sockets: number; watching: number; projects: number } {
    return { sockets: this.sockets, watching: this.watching, projects: this.projects.size };
  }

  private statsChanged(): void {
    this.o.onStats?.(this.stats());
  }

  /** The project's channel said its count may have changed. */
  changed(projectId: string): void {
    const p = this.projects.get(projectId);
    if (!p) return;
    p.dirty = true;
    if (!p.evaluating) this.schedule(p, Math.max(this.o.now(), p.evaluatedAt + this.o.minIntervalMs));
  }

  /** A new socket on /insights/{projectId}/live: credentials from its headers, or its first message. */
  connect(req: SocketRequest, socket: SocketConnection): SocketHandlers {
    const projectId = req.params.projectId ?? '';
    let state: 'waiting' | 'authenticating' | 'watching' | 'closed' = 'waiting';
    let watcher: Watcher | null = null;
    let timer: NodeJS.Timeout | null = null;
    this.sockets++;
    this.statsChanged();
    const close = (code: number, reason: string) => socket.close(code, reason);
    const handlers: SocketHandlers = {
      message: (data) => {
        if (state !== 'waiting') return; // nothing is expected after the credentials
        const credentials = parseCredentialsMessage(data);
        if (!credentials) return close(CLOSE.badMessage, 'the first message must be {"clientId": "...", "clientSecret": "..."}');
        authenticate(credentials);
      },
      closed: () => {
        if (state === 'closed') return;
        state = 'closed';
        this.sockets--;
        if (timer) clearTimeout(timer);
        if (watcher) this.unwatch(watcher);
        this.statsChanged();
      },
    };
    const authenticate = (credentials: Credentials) => {
      state = 'authenticating';
      if (timer) clearTimeout(timer);
      this.o.authenticate(credentials, projectId).then(
        ({ clientId }) => {
          if (state !== 'authenticating') return;
          if (this.closed) return close(CLOSE.goingAway, 'server shutting down; reconnect');
          state = 'watching';
          watcher = this.watch(projectId, clientId, socket);
        },
        (err: unknown) => {
          if (state !== 'authenticating') return;
          const r = refusal(err);
          if (r.code === CLOSE.unavailable) this.o.onError?.(err, 'live socket authentication');
          close(r.code, r.reason);
        },
      );
    };

    if (this.closed) {
      close(CLOSE.goingAway, 'server shutting down; reconnect');
      return handlers;
    }
    if (this.sockets > this.o.maxSockets) {
      close(CLOSE.tryAgainLater, 'this server holds as many live sockets as it may; retry later');
      return handlers;
    }
    const fromHeaders = credentialsOf({ headers: req.headers });
    if (fromHeaders.clientId || fromHeaders.secret) {
      if (!fromHeaders.clientId || !fromHeaders.secret) {
        close(CLOSE.unauthorized, 'missing client credentials (service-client-id and service-client-secret headers)');
      } else authenticate({ clientId: fromHeaders.clientId, clientSecret: fromHeaders.secret });
    } else {
      timer = setTimeout(() => {
        if (state === 'waiting') close(CLOSE.authTimeout, `no credentials within ${Math.round(this.o.authTimeoutMs / 1000)} s: send {"clientId": "...", "clientSecret": "..."} first`);
      }, this.o.authTimeoutMs);
    }
    return handlers;
  }

  /** Closes every socket (1001) and stops every timer and subscription. */
  close(): void {
    this.closed = true;
    if (this.revocationTimer) clearInterval(this.revocationTimer);
    this.revocationTimer = null;
    for (const p of [...this.projects.values()]) {
      for (const w of [...p.watchers]) w.socket.close(CLOSE.goingAway, 'server shutting down; reconnect');
    }
  }

  private watch(projectId: string, clientId: string, socket: SocketConnection): Watcher {
    let p = this.projects.get(projectId);
    if (!p) {
      p = {
        id: projectId, watchers: new Set(), subscribed: Promise.resolve(), visitors: null, evaluatedAt: 0,
        agesAt: Infinity, dirty: true, evaluating: false, timer: null, timerAt: Infinity, closed: false,
      };
      const project = p;
      // Subscribed before the first count, so no change falls between the two.
      p.subscribed = this.o.source.subscribe(projectId).catch((err: unknown) => {
        this.o.onError?.(err, 'live subscription');
        project.dirty = true; // counted anyway; the resync covers what the channel misses
      });
      this.projects.set(projectId, p);
    }
    const w: Watcher = { socket, clientId, project: p, sent: -1, sentAt: 0 };
    p.watchers.add(w);
    this.watching++;
    this.statsChanged();
    if (!this.revocationTimer) this.revocationTimer = setInterval(() => this.checkRevocations(), this.o.revocationCheckMs);
    const now = this.o.now();
    const fresh = p.visitors !== null && !p.dirty && !p.evaluating && now < p.agesAt;
    if (fresh) this.sendTo(w, p.visitors!, now);
    else if (!p.evaluating) {
      // Counted now for the newcomer (its first message is due at once); an evaluation in
      // flight answers it when it lands. Sockets already watching still get at most 4 a second.
      if (p.timer) clearTimeout(p.timer);
      p.timer = null;
      p.timerAt = Infinity;
      void this.evaluate(p);
    }
    return w;
  }

  private unwatch(w: Watcher): void {
    const p = w.project;
    if (!p.watchers.delete(w)) return;
    this.watching--;
    if (p.watchers.size === 0) {
      p.closed = true;
      if (p.timer) clearTimeout(p.timer);
      p.timer = null;
      this.projects.delete(p.id);
      this.o.source.unsubscribe(p.id).catch((err: unknown) => this.o.onError?.(err, 'live unsubscribe'));
    }
    if (this.watching === 0 && this.revocationTimer) {
      clearInterval(this.revocationTimer);
      this.revocationTimer = null;
    }
  }

  private schedule(p: ProjectState, at: number): void {
    if (p.closed) return;
    if (p.timer && p.timerAt <= at) return;
    if (p.timer) clearTimeout(p.timer);
    p.timerAt = at;
    p.timer = setTimeout(() => {
      p.timer = null;
      p.timerAt = Infinity;
      this.tick(p);
    }, Math.max(0, at - this.o.now()));
  }

  private tick(p: ProjectState): void {
    if (p.closed || p.evaluating) return;
    const now = this.o.now();
    const due = p.dirty || p.visitors === null || now >= p.agesAt || now >= p.evaluatedAt + this.o.resyncMs;
    if (due) {
      if (now >= p.evaluatedAt + this.o.minIntervalMs) return void this.evaluate(p);
      return this.schedule(p, p.evaluatedAt + this.o.minIntervalMs);
    }
    this.broadcast(p, now); // sockets that were held back by their message spacing
    this.scheduleNext(p, now);
  }

  private async evaluate(p: ProjectState): Promise<void> {
    p.evaluating = true;
    p.dirty = false;
    const startedAt = this.o.now();
    let count: LiveCount;
    try {
      await p.subscribed;
      count = await this.o.source.count(p.id, startedAt);
    } catch (err) {
      p.evaluating = false;
      p.dirty = true;
      this.o.onError?.(err, 'live count');
      this.schedule(p, this.o.now() + this.o.retryMs);
      return;
    }
    p.evaluating = false;
    if (p.closed) return;
    p.evaluatedAt = startedAt;
    p.visitors = count.visitors;
    // A visitor whose last event was at t leaves the window at t + 5 minutes exactly.
    p.agesAt = count.oldestMs === null ? Infinity : count.oldestMs + LIVE_WINDOW_MS + 1;
    const now = this.o.now();
    this.broadcast(p, now);
    if (p.dirty) this.schedule(p, Math.max(now, p.evaluatedAt + this.o.minIntervalMs));
    else this.scheduleNext(p, now);
  }

  /** Sends the project's count to every socket that has not got it and may get a message now. */
  private broadcast(p: ProjectState, now: number): void {
    if (p.visitors === null) return;
    for (const w of p.watchers) {
      if (w.sent !== p.visitors && now - w.sentAt >= this.o.minIntervalMs) this.sendTo(w, p.visitors, now);
    }
  }

  private sendTo(w: Watcher, visitors: number, now: number): void {
    if (w.socket.send(visitorsMessage(visitors))) {
      w.sent = visitors;
      w.sentAt = now;
    }
  }

  /** The next time the project needs its timer: ageing, resync, or a socket held back by its spacing. */
  private scheduleNext(p: ProjectState, now: number): void {
    let at = Math.min(p.agesAt, p.evaluatedAt + this.o.resyncMs);
    for (const w of p.watchers) {
      if (w.sent !== p.visitors) at = Math.min(at, w.sentAt + this.o.minIntervalMs);
    }
    // Never sooner than the spacing allows (clocks of other API processes may run ahead).
    this.schedule(p, Math.max(at, Math.min(now + this.o.minIntervalMs, p.evaluatedAt + this.o.minIntervalMs)));
  }

  private checkingRevocations = false;

  /** Closes the sockets of revoked clients (revocation is a Redis set every API process reads). */
  private async checkRevocations(): Promise<void> {
    if (this.checkingRevocations) return;
    const byClient = new Map<string, Watcher[]>();
    for (const p of this.projects.values()) {
      for (const w of p.watchers) {
        const list = byClient.get(w.clientId);
        if (list) list.push(w);
        else byClient.set(w.clientId, [w]);
      }
    }
    if (!byClient.size) return;
    this.checkingRevocations = true;
    try {
      const revoked = await this.o.source.revoked([...byClient.keys()]);
      for (const id of revoked) {
        for (const w of byClient.get(id) ?? []) w.socket.close(CLOSE.unauthorized, 'client revoked');
      }
    } catch (err) {
      this.o.onError?.(err, 'live revocation check');
    } finally {
      this.checkingRevocations = false;
    }
  }
}
