// The device of a profile's latest browser event, kept in Redis so that a server-side event of
// the profile is queued on that device and the worker finds its open session. Why a local LRU
// in front: the write goes at most about once a minute per profile and device.
import { LRUCache } from 'lru-cache';
import type { Redis, RedisKeys } from '../redis/redis';
import type { GateOptions } from './common';
import type { GateCommands } from './scripts';

/** How long a profile's browser device is remembered for its server-side events: a session stays open 30 minutes. */
const PROFILE_DEVICE_TTL_SECONDS = 35 * 60;
const PROFILE_DEVICE_REFRESH_MS = 60_000;

export class ProfileDevices {
  private readonly written = new LRUCache<string, { deviceId: string; eventMs: number; atMs: number }>({ max: 50_000 });

  constructor(private readonly redis: Redis, private readonly cmd: GateCommands, private readonly keys: RedisKeys, private readonly opts: GateOptions) {}

  /**
   * Remembers `deviceId` as the device of the profile's browser event with the latest event
   * time (`eventMs`), for PROFILE_DEVICE_TTL_SECONDS (longer than a session stays open).
   * Written in the background, at most about once a minute per profile and device (the LRU),
   * before the request's 202 goes out (one Redis connection keeps the order of its commands);
   * an event older than the remembered one's (a backfill sent late) only refreshes the expiry.
   */
  note(projectId: string, profileId: string, deviceId: string, eventMs: number, nowMs: number): void {
    const key = this.keys.profileDevice(projectId, profileId);
    const last = this.written.get(key);
    if (last && nowMs - last.atMs < PROFILE_DEVICE_REFRESH_MS && (last.deviceId === deviceId ? eventMs - last.eventMs < PROFILE_DEVICE_REFRESH_MS : eventMs < last.eventMs)) return;
    this.written.set(key, last && eventMs < last.eventMs ? { ...last, atMs: nowMs } : { deviceId, eventMs, atMs: nowMs });
    this.cmd.tmProfileDevice(key, deviceId, String(eventMs), String(PROFILE_DEVICE_TTL_SECONDS)).catch((err: unknown) => {
      this.written.delete(key);
      this.opts.onAsyncError?.(err);
    });
  }

  /** The device of the profile's latest browser event (event time) in the last PROFILE_DEVICE_TTL_SECONDS, or null. */
  async get(projectId: string, profileId: string): Promise<string | null> {
    const v = await this.redis.get(this.keys.profileDevice(projectId, profileId));
    if (v === null) return null;
    const bar = v.lastIndexOf('|');
    return bar < 0 ? v : v.slice(0, bar);
  }
}
