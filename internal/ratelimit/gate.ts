// The ingest and read gate: revocation, rate limit, device choice across the salt change and
// the live-visitor update, behind one class (Gate) that wires the parts in the files beside it.
// Why one facade: the ingest handler, the read guard and live push ask one object.
//
// Ingest, once started (start()): the answer normally does not wait for Redis. Revocation is
// read from the thread's mirror of the revoked clients (revocation.ts: loaded from Redis and
// PostgreSQL, kept current by the channel the CLI announces on, seeded into Redis again when
// Redis loses its set, and re-checked by every background call); every path (ingest, reads,
// live) consults it before Redis and it never forgets a client. The rate limit comes from a
// per-client token bucket kept in step with Redis by leases (lease.ts, which states the
// tolerance); the live-set and seen-device updates are sent after the answer
// (background.ts; the scripts in scripts.ts announce a project's new live visitor on its
// channel, live key + ':changed'). Only a request whose device id depends on Redis (in the
// 30 minutes after midnight UTC, when yesterday's salt may continue a visit), or any request
// while the mirror is not in step with Redis, takes the exact path (exact.ts): one Redis call
// that decides it exactly, shared by the requests of the event-loop turn.
//
// Reads: one Redis round trip per request (reads.ts).
//
// The rate limit is a sliding log in a sorted set per (scope, client), one member per admitted
// request, scored by Redis' own clock (scripts.ts): no `limit + 1` requests are ever admitted
// within any window-long span, wherever it starts (a fixed window aligned to the clock admits
// up to 2 x limit across its boundary). Refused requests are not logged. X-RateLimit-Reset
// (and Retry-After) is the time until the oldest admitted request leaves the window, i.e.
// until a refused client is admitted again.
import type { Redis, RedisKeys } from '../redis/redis';
import { BackgroundCalls } from './background';
import { REVOKED_RESULT, type GateOptions, type GateResult, type IngestGateInput, type RateState } from './common';
import { ExactPath } from './exact';
import { LocalBuckets, type TakeResult } from './lease';
import { ProfileDevices } from './profile-device';
import { readGate, readLiveGate } from './reads';
import { RevocationMirror } from './revocation';
import { defineGateCommands, type GateCommands } from './scripts';

export { LIVE_WINDOW_MS, deviceWindow, rateHeaders } from './common';
export type { GateResult, RateState } from './common';
export { REVOKED_CHECK_MS, REVOKED_SEEDED } from './revocation';

export class Gate {
  private readonly cmd: GateCommands;
  private readonly mirror: RevocationMirror;
  private readonly buckets: LocalBuckets;
  private readonly background: BackgroundCalls;
  private readonly exact: ExactPath;
  private readonly profileDevices: ProfileDevices;

  constructor(private readonly redis: Redis, private readonly keys: RedisKeys, opts: GateOptions = {}) {
    this.cmd = defineGateCommands(redis);
    this.buckets = new LocalBuckets((clientId, limit, want) => this.background.lease(clientId, limit, want));
    this.mirror = new RevocationMirror(redis, keys, opts, (clientId) => this.buckets.drop(clientId));
    this.background = new BackgroundCalls(this.cmd, keys, opts, (clientId) => this.mirror.learn(clientId));
    this.exact = new ExactPath(this.cmd, keys);
    this.profileDevices = new ProfileDevices(redis, this.cmd, keys, opts);
  }

  /**
   * Subscribes to revocations and loads the revoked set: from then on ingest answers without
   * waiting for Redis (see the top of this file). Without start() every request takes the
   * exact path. After a lost connection the fast path resumes once the set is reloaded.
   */
  start(): Promise<void> {
    return this.mirror.start();
  }

  /** Stops the revocation subscription (drain). */
  close(): void {
    this.mirror.close();
  }

  /** Whether this thread knows the client is revoked (no Redis call). */
  revokedLocally(clientId: string): boolean {
    return this.mirror.has(clientId);
  }

  /** Whether ingest currently answers without waiting for Redis. */
  get fast(): boolean {
    return this.mirror.ready;
  }

  /**
   * Revocation, rate limit, device choice and live update for one ingest request: at once
   * (no promise) on the fast path, else from Redis (see the top of this file).
   */
  ingest(i: IngestGateInput): GateResult | Promise<GateResult> {
    // A revocation this thread has learnt holds on every path, whatever Redis still has.
    if (this.mirror.has(i.clientId)) return REVOKED_RESULT;
    if (!this.mirror.ready || i.previousDeviceId !== '') return this.exact.decide(i);
    if (i.ratePerSecond <= 0) return this.admitted(i, null);
    const taken = this.buckets.take(i.clientId, i.ratePerSecond);
    return taken instanceof Promise ? taken.then((t) => this.settle(i, t)) : this.settle(i, taken);
  }

  private settle(i: IngestGateInput, t: TakeResult): GateResult {
    if (t.outcome === 'ok') return this.admitted(i, t.rate);
    if (t.outcome === 'revoked') {
      this.mirror.learn(i.clientId);
      return REVOKED_RESULT;
    }
    return t;
  }

  /** An admitted request: its live and seen updates go in the background call. */
  private admitted(i: IngestGateInput, rate: RateState | null): GateResult {
    this.background.effect(i);
    return { outcome: 'ok', rate, deviceId: i.deviceId };
  }

  /** The exact path: the request decided by Redis with the others of its event-loop turn (exact.ts). */
  decide(i: IngestGateInput): Promise<GateResult> {
    return this.exact.decide(i);
  }

  /** Remembers the device of the profile's latest browser event (profile-device.ts), in the background. */
  noteProfileDevice(projectId: string, profileId: string, deviceId: string, eventMs: number, nowMs: number): void {
    this.profileDevices.note(projectId, profileId, deviceId, eventMs, nowMs);
  }

  /** The device of the profile's latest browser event (event time) in the last PROFILE_DEVICE_TTL_SECONDS, or null. */
  profileDevice(projectId: string, profileId: string): Promise<string | null> {
    return this.profileDevices.get(projectId, profileId);
  }

  /** Whether the client is revoked: in the mirror, else in Redis' set (ingest asks only on its error path). */
  async isRevoked(clientId: string): Promise<boolean> {
    if (this.mirror.has(clientId)) return true;
    return (await this.redis.sismember(this.keys.revoked, clientId)) === 1;
  }

  /** Insights and export: revocation (the mirror first, then Redis) + `limit` requests per `windowMs`. */
  async read(clientId: string, limit: number, windowMs: number, nowMs: number): Promise<GateResult> {
    if (this.mirror.has(clientId)) return REVOKED_RESULT;
    return readGate(this.cmd, this.keys, clientId, limit, windowMs, nowMs);
  }

  /**
   * `read` plus the project's live visitors (profiles with an event in the last 5 minutes),
   * in the same Redis call; `live` is null unless the outcome is 'ok'.
   */
  async readLive(clientId: string, limit: number, windowMs: number, nowMs: number, projectId: string): Promise<{ result: GateResult; live: number | null }> {
    if (this.mirror.has(clientId)) return { result: REVOKED_RESULT, live: null };
    return readLiveGate(this.cmd, this.keys, clientId, limit, windowMs, nowMs, projectId);
  }
}
