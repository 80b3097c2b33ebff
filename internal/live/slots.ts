// Live-push slots of one API thread: who may hold a socket. Pure accounting, no timers and
// no transport (the hub closes the sockets this tells it to).
//
//   - Authenticated sockets hold a slot: at most `maxSockets` in all, at most
//     `maxPerProject` of one project, so one tenant never takes every slot.
//   - Sockets still authenticating (waiting for their credentials message, or with their
//     credentials being checked) hold none of those; they share a small budget of their own,
//     `maxAuthenticating`. When it is full, a newcomer takes the place of the socket that has
//     waited longest for its credentials (a browser sends them one round trip after opening;
//     a socket that sends nothing is the one to go). Sockets whose credentials are being
//     checked are never displaced: when the whole budget is checking, the newcomer is refused.

export type SlotRefusal =
  /** Every authenticated slot of this thread is taken (close 1013). */
  | 'server_full'
  /** The project holds its share of this thread's slots (close 4429). */
  | 'project_full'
  /** Too many sockets are authenticating and none is only waiting (close 4430). */
  | 'authenticating_full';

interface SlotLimits {
  /** Authenticated sockets in all (LIVE_MAX_SOCKETS). */
  maxSockets: number;
  /** Authenticated sockets of one project (LIVE_MAX_SOCKETS_PER_PROJECT). */
  maxPerProject: number;
  /** Sockets not yet authenticated (LIVE_MAX_AUTHENTICATING). */
  maxAuthenticating: number;
}

/** LIVE_MAX_SOCKETS_PER_PROJECT when unset: half of LIVE_MAX_SOCKETS (at least 1). */
export function defaultMaxPerProject(maxSockets: number): number {
  return Math.max(1, Math.floor(maxSockets / 2));
}

type OpenResult<T> = { refused: SlotRefusal } | { refused: null; evicted: T | null };

export class LiveSlots<T> {
  /** Open, no credentials yet; in the order they opened (the first is the longest waiting). */
  private readonly waiting = new Set<T>();
  /** Credentials received, being checked. */
  private readonly checking = new Set<T>();
  /** Authenticated: the project each one counts against. */
  private readonly admitted = new Map<T, string>();
  private readonly perProject = new Map<string, number>();

  constructor(readonly limits: SlotLimits) {
    for (const [k, v] of Object.entries(limits)) {
      if (!Number.isInteger(v) || v < 1) throw new Error(`live slots: ${k} must be a positive integer (got ${v})`);
    }
  }

  get authenticating(): number {
    return this.waiting.size + this.checking.size;
  }

  get authenticated(): number {
    return this.admitted.size;
  }

  ofProject(projectId: string): number {
    return this.perProject.get(projectId) ?? 0;
  }

  /**
   * A socket opened; `hasCredentials` when they came with the upgrade (it starts checking at
   * once). Refused, or let in; letting it in may displace the longest-waiting socket (`evicted`,
   * already forgotten here: the caller closes it).
   */
  open(socket: T, hasCredentials: boolean): OpenResult<T> {
    if (this.has(socket)) throw new Error('live slots: socket opened twice');
    // No slot would be left for it once authenticated: say so now rather than after the check.
    if (this.admitted.size >= this.limits.maxSockets) return { refused: 'server_full' };
    let evicted: T | null = null;
    if (this.authenticating >= this.limits.maxAuthenticating) {
      const oldest = this.waiting.values().next();
      if (oldest.done) return { refused: 'authenticating_full' };
      evicted = oldest.value;
      this.waiting.delete(evicted);
    }
    (hasCredentials ? this.checking : this.waiting).add(socket);
    return { refused: null, evicted };
  }

  /** The socket's credentials arrived: it is checking now and is no longer displaced. */
  credentials(socket: T): void {
    if (this.waiting.delete(socket)) this.checking.add(socket);
  }

  /**
   * Its credentials are good for `projectId`: an authenticated slot, or why not. Either way
   * it leaves the authenticating budget (a refused socket is to be closed; release is a no-op).
   */
  admit(socket: T, projectId: string): SlotRefusal | null {
    if (!this.waiting.delete(socket) && !this.checking.delete(socket)) {
      throw new Error('live slots: admit of a socket that is not authenticating');
    }
    // The project's own cap first: it is the more specific answer (and the one the tenant can act on).
    if (this.ofProject(projectId) >= this.limits.maxPerProject) return 'project_full';
    if (this.admitted.size >= this.limits.maxSockets) return 'server_full';
    this.admitted.set(socket, projectId);
    this.perProject.set(projectId, this.ofProject(projectId) + 1);
    return null;
  }

  /** The socket closed, in whatever state (unknown sockets are ignored). */
  release(socket: T): void {
    if (this.waiting.delete(socket) || this.checking.delete(socket)) return;
    const projectId = this.admitted.get(socket);
    if (projectId === undefined) return;
    this.admitted.delete(socket);
    const n = this.ofProject(projectId) - 1;
    if (n > 0) this.perProject.set(projectId, n);
    else this.perProject.delete(projectId);
  }

  private has(socket: T): boolean {
    return this.waiting.has(socket) || this.checking.has(socket) || this.admitted.has(socket);
  }
}
