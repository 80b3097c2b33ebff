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
//
// Who may hold a socket is LiveSlots' (./slots.ts): authenticated sockets per thread and per
// project, and a small budget of sockets still authenticating, each of which has authTimeoutMs
// (5 s) from opening to be authenticated.
import type { SocketConnection, SocketHandlers, SocketRequest } from '../http/types';
import { credentialsOf } from '../auth/auth';
import { LIVE_WINDOW_MS } from '../ratelimit/gate';
import { CLOSE, parseCredentialsMessage, refusal, visitorsMessage, type Credentials } from './protocol';
import { defaultMaxPerProject, LiveSlots, type SlotRefusal } from './slots';

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

/**
 * Why a socket was closed for want of room or time (a metric's label): no slot (SlotRefusal),
 * displaced while waiting for its credentials, or not authenticated within authTimeoutMs.
 */
export type LiveRefusalReason = SlotRefusal | 'authenticating_displaced' | 'auth_timeout';

export const LIVE_REFUSAL_REASONS: readonly LiveRefusalReason[] = ['server_full', 'project_full', 'authenticating_full', 'authenticating_displaced', 'auth_timeout'];

/** What the hub holds now (a gauge). */
interface LiveStats {
  /** Sockets open, in any state. */
  sockets: number;
  /** Open and not yet authenticated (the LiveSlots authenticating budget). */
  authenticating: number;
  /** Authenticated and watching their project. */
  watching: number;
  projects: number;
}

const SLOT_CLOSE: Record<SlotRefusal, { code: number; reason: string }> = {
  server_full: { code: CLOSE.tryAgainLater, reason: 'this server holds as many live sockets as it may; retry later' },
  project_full: { code: CLOSE.projectFull, reason: 'this project holds as many live sockets on this server as it may; close some or retry later' },
  authenticating_full: { code: CLOSE.authenticatingFull, reason: 'too many sockets are authenticating on this server; retry later and send credentials at once' },
};

interface LiveHubOptions {
  source: LiveSource;
  authenticate: LiveAuthenticate;
  /** Authenticated sockets this hub holds at most; more are closed with 1013. Default 20,000. */
  maxSockets?: number;
  /** Authenticated sockets of one project at most; more are closed with 4429. Default half of maxSockets. */
  maxSocketsPerProject?: number;
  /**
   * Sockets not yet authenticated at most. Past it a newcomer displaces the socket that has
   * waited longest for its credentials, or is refused when every one is being checked (4430).
   * Default 1,000.
   */
  maxAuthenticating?: number;
  /**
   * Time from opening to being authenticated: a browser that has not sent its credentials by
   * then is closed with 4408, a socket whose credentials are still being checked with 4503.
   * Default 5 s.
   */
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
  onStats?: (stats: LiveStats) => void;
  /** Told of each socket closed for want of a slot or of time (a counter). */
  onRefused?: (reason: LiveRefusalReason) => void;
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
  private readonly slots: LiveSlots<SocketConnection>;
  private readonly o: Required<Omit<LiveHubOptions, 'onError' | 'onStats' | 'onRefused' | 'maxSocketsPerProject'>> & Pick<LiveHubOptions, 'onError' | 'onStats' | 'onRefused'>;

  constructor(opts: LiveHubOptions) {
    const { maxSocketsPerProject, ...rest } = opts;
    // An option given as undefined keeps its default.
    const given = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) as typeof rest;
    this.o = {
      maxSockets: 20_000, maxAuthenticating: 1_000, authTimeoutMs: 5_000, minIntervalMs: 260, resyncMs: 5_000, revocationCheckMs: 2_000, retryMs: 1_000,
      now: Date.now, ...given,
    };
    this.slots = new LiveSlots({
      maxSockets: this.o.maxSockets,
      maxPerProject: maxSocketsPerProject ?? defaultMaxPerProject(this.o.maxSockets),
      maxAuthenticating: this.o.maxAuthenticating,
    });
  }

  /** Sockets open, those authenticating, those watching, and projects watched. */
  stats(): LiveStats {
    return { sockets: this.sockets, authenticating: this.slots.authenticating, watching: this.watching, projects: this.projects.size };
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
        this.slots.release(socket);
        if (timer) clearTimeout(timer);
        timer = null;
        if (watcher) this.unwatch(watcher);
        this.statsChanged();
      },
    };
    const authenticate = (credentials: Credentials) => {
      state = 'authenticating';
      this.slots.credentials(socket);
      this.o.authenticate(credentials, projectId).then(
        ({ clientId }) => {
          if (state !== 'authenticating') return;
          if (this.closed) return close(CLOSE.goingAway, 'server shutting down; reconnect');
          if (timer) clearTimeout(timer);
          timer = null;
          const refused = this.slots.admit(socket, projectId);
          if (refused) return this.refuse(socket, refused);
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
    const fromHeaders = credentialsOf({ headers: req.headers });
    const byHeaders = Boolean(fromHeaders.clientId || fromHeaders.secret);
    if (byHeaders && (!fromHeaders.clientId || !fromHeaders.secret)) {
      close(CLOSE.unauthorized, 'missing client credentials (service-client-id and service-client-secret headers)');
      return handlers;
    }
    const opened = this.slots.open(socket, byHeaders);
    if (opened.refused) {
      this.refuse(socket, opened.refused);
      return handlers;
    }
    if (opened.evicted) {
      this.o.onRefused?.('authenticating_displaced');
      opened.evicted.close(CLOSE.authenticatingFull, 'displaced: too many sockets are waiting for credentials; send them at once after opening');
    }
    this.statsChanged();
    // One deadline from opening to authenticated, whether the credentials are awaited or being checked.
    const seconds = Math.round(this.o.authTimeoutMs / 1000);
    timer = setTimeout(() => {
      timer = null;
      if (state === 'waiting') {
        this.o.onRefused?.('auth_timeout');
        close(CLOSE.authTimeout, `no credentials within ${seconds} s: send {"clientId": "...", "clientSecret": "..."} first`);
      } else if (state === 'authenticating') {
        this.o.onRefused?.('auth_timeout');
        close(CLOSE.unavailable, `the credentials could not be checked within ${seconds} s; retry`);
      }
    }, this.o.authTimeoutMs);
    if (byHeaders) authenticate({ clientId: fromHeaders.clientId!, clientSecret: fromHeaders.secret! });
    return handlers;
  }

  private refuse(socket: SocketConnection, why: SlotRefusal): void {
    this.o.onRefused?.(why);
    const { code, reason } = SLOT_CLOSE[why];
    socket.close(code, reason);
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

  /** Closes the sockets of revoked clients (the source asks the thread's revocation mirror, then Redis' set). */
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
