// Pure request-to-operation logic: reserved keys, event time, and the queued op.
import { randomFillSync } from 'node:crypto';
import { isIP } from 'node:net';
import { v7 as uuidv7 } from 'uuid';
import { BadRequestError } from '../http/errors';
import type { QueuedOp } from '../model/event';
import { parseIsoMs, ReservedProps, RESERVED_KEYS, type EventBodyT, type TrackBodyT } from './schemas';

/**
 * Event ids: UUIDv7 at the event time, its random bits drawn from a 4 KiB pool refilled by
 * the CSPRNG, so the hot path makes one system call per 256 ids instead of one per id.
 */
const RANDOM_POOL = new Uint8Array(4096);
let randomAt = RANDOM_POOL.length;
export function eventId(msecs: number): string {
  if (randomAt + 16 > RANDOM_POOL.length) {
    randomFillSync(RANDOM_POOL);
    randomAt = 0;
  }
  const random = RANDOM_POOL.subarray(randomAt, (randomAt += 16));
  return uuidv7({ msecs, random });
}

/** A time more than this far in the future is replaced by the receipt time. */
export const FUTURE_TOLERANCE_MS = 60_000;

export interface Reserved {
  timestampMs: number | null;
  ip: string | null;
  deviceId: string | null;
  url: string | null;
  title: string | null;
  referrer: string | null;
}

/** Splits reserved `__` keys out of properties; validates them (400 names the key). */
export function splitReserved(props: Record<string, unknown> | undefined, path: string[]): { properties: Record<string, unknown>; reserved: Reserved } {
  const properties: Record<string, unknown> = {};
  const raw: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(props ?? {})) {
    if (RESERVED_KEYS.includes(k)) raw[k] = v;
    else properties[k] = v;
  }
  const parsed = ReservedProps.safeParse(raw);
  if (!parsed.success) throw BadRequestError.fromZod(parsed.error, path);
  const r = parsed.data;
  return {
    properties,
    reserved: {
      timestampMs: r.__timestamp ? parseIsoMs(r.__timestamp) : null,
      ip: r.__ip ?? null,
      deviceId: r.__deviceId ?? null,
      url: r.__path ?? null,
      title: r.__title ?? null,
      referrer: r.__referrer ?? null,
    },
  };
}

/** Event time: the sent time unless it is more than 60 s ahead of receipt. */
export function eventTimeMs(sentMs: number | null, receivedMs: number): number {
  if (sentMs === null || sentMs > receivedMs + FUTURE_TOLERANCE_MS) return receivedMs;
  return sentMs;
}

/** Client IP: x-client-ip, else the socket address; `__ip` overrides both. */
export function clientIp(headers: Record<string, string>, remoteAddress: string, override: string | null): string | null {
  const candidates = [override, headers['x-client-ip']?.split(',')[0]?.trim(), remoteAddress];
  for (const c of candidates) {
    if (!c) continue;
    const ip = c.startsWith('::ffff:') && isIP(c.slice(7)) === 4 ? c.slice(7) : c;
    if (isIP(ip)) return ip;
  }
  return null;
}

export interface OpContext {
  projectId: string;
  receivedMs: number;
  userAgent: string | null;
  ip: string | null;
}

/** What the op needs before the device is known; `build` finishes it once the device id is chosen. */
export interface PlannedOp {
  /** Explicit profile id, or null to use the device id. */
  profileId: string | null;
  /** `__deviceId` override, when given. */
  deviceOverride: string | null;
  ipOverride: string | null;
  /** Event time when this op is a tracked event (for live visitors), else null. */
  eventMs: number | null;
  build(deviceId: string, ip: string | null): QueuedOp;
}

export function planEvent(body: EventBodyT, ctx: OpContext): PlannedOp {
  const { properties, reserved } = splitReserved(body.properties, ['properties']);
  const sent = body.timestamp ? parseIsoMs(body.timestamp) : reserved.timestampMs;
  return planTrack(body.name, properties, reserved, body.profileId ?? null, [], sent, ctx);
}

function planTrack(
  name: string,
  properties: Record<string, unknown>,
  reserved: Reserved,
  profileId: string | null,
  groups: string[],
  sentMs: number | null,
  ctx: OpContext,
): PlannedOp {
  const at = eventTimeMs(sentMs, ctx.receivedMs);
  return {
    profileId,
    deviceOverride: reserved.deviceId,
    ipOverride: reserved.ip,
    eventMs: at,
    build: (deviceId, ip) => ({
      kind: 'track',
      id: eventId(at),
      projectId: ctx.projectId,
      deviceId,
      receivedAt: new Date(ctx.receivedMs).toISOString(),
      name,
      profileId: profileId ?? deviceId,
      createdAt: new Date(at).toISOString(),
      properties,
      groups,
      url: reserved.url,
      title: reserved.title,
      referrer: reserved.referrer,
      ip,
      userAgent: ctx.userAgent,
    }),
  };
}

// Module-level helpers rather than closures made per request (tsx names every closure).
function base(profileId: string | null, build: (deviceId: string) => QueuedOp): PlannedOp {
  return { profileId, deviceOverride: null, ipOverride: null, eventMs: null, build };
}

function commonOf(ctx: OpContext, deviceId: string) {
  return { id: eventId(ctx.receivedMs), projectId: ctx.projectId, deviceId, receivedAt: new Date(ctx.receivedMs).toISOString() };
}

export function planTrackBody(body: TrackBodyT, ctx: OpContext): PlannedOp {
  switch (body.type) {
    case 'track': {
      const p = body.payload;
      const { properties, reserved } = splitReserved(p.properties, ['payload', 'properties']);
      return planTrack(p.name, properties, reserved, p.profileId ?? null, p.groups ?? [], reserved.timestampMs, ctx);
    }
    case 'identify': {
      const p = body.payload;
      const { properties } = splitReserved(p.properties, ['payload', 'properties']);
      if (p.avatar !== undefined) properties.avatar = p.avatar;
      return base(p.profileId, (d) => ({
        ...commonOf(ctx, d), kind: 'identify', profileId: p.profileId,
        firstName: p.firstName ?? null, lastName: p.lastName ?? null, email: p.email ?? null, properties,
      }));
    }
    case 'increment':
    case 'decrement': {
      const p = body.payload;
      const delta = body.type === 'increment' ? p.value : -p.value;
      return base(p.profileId, (d) => ({ ...commonOf(ctx, d), kind: 'increment', profileId: p.profileId, property: p.property, delta }));
    }
    case 'group': {
      const p = body.payload;
      return base(null, (d) => ({
        ...commonOf(ctx, d), kind: 'group', groupId: p.id, type: p.type, name: p.name, properties: p.properties ?? {},
      }));
    }
    case 'assign_group': {
      const p = body.payload;
      return base(p.profileId ?? null, (d) => ({ ...commonOf(ctx, d), kind: 'assign_group', profileId: p.profileId ?? d, groupIds: p.groupIds }));
    }
  }
}
