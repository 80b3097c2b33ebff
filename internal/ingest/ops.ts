// Pure request-to-operation logic: reserved keys, event time, and the queued op.
import { randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { BadRequestError } from '../http/errors';
import type { DeviceOverrides, QueuedOp, QueuedTrack } from '../model/event';
import { asIp, DEFAULT_IP_HEADERS, ipFromHeaders, type IpHeaderOrder } from './client-ip';
import { DEVICE_OVERRIDE_KEY_LIST, DeviceOverrideProps, deviceOverridesFast, deviceOverridesOf } from './device-overrides';
import { ISO_DATE_TIME, parseIsoMs, ReservedProps, RESERVED_KEYS, type EventBodyT, type IdentifyPayloadT, type IncrementPayloadT, type TrackBodyT } from './schemas';

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

/**
 * `new Date(ms).toISOString()`, remembered for the last two instants: under load many
 * requests share a millisecond (receipt time, and the event time when none is sent), and
 * formatting a date is one of the larger costs of building an op.
 */
let isoMs1 = NaN;
let iso1 = '';
let isoMs2 = NaN;
let iso2 = '';
export function isoTime(ms: number): string {
  if (ms === isoMs1) return iso1;
  if (ms === isoMs2) return iso2;
  const iso = new Date(ms).toISOString();
  isoMs2 = isoMs1;
  iso2 = iso1;
  isoMs1 = ms;
  iso1 = iso;
  return iso;
}

/** A time more than this far in the future is replaced by the receipt time. */
const FUTURE_TOLERANCE_MS = 60_000;

/**
 * INGEST_MAX_PAST_DAYS' default: about ten years, so an import of a site's history still
 * works, while one write client cannot spread its events over centuries (every month of
 * event time is a partition of `events`, every hour a unit of rollup work: docs/decisions.md).
 */
export const DEFAULT_MAX_PAST_DAYS = 3660;
const DAY_MS = 86_400_000;

/** How far back an event time may be (docs/decisions.md, "Ingest"). */
export interface EventTimeLimits {
  /** INGEST_MAX_PAST_DAYS: days before receipt. */
  maxPastDays: number;
  /** RETENTION_DAYS (0: none): an older event would be deleted within the hour, so it is refused too. */
  retentionDays: number;
}

export const DEFAULT_EVENT_TIME_LIMITS: EventTimeLimits = { maxPastDays: DEFAULT_MAX_PAST_DAYS, retentionDays: 0 };

/**
 * The earliest event time accepted at `receivedMs`: `maxPastDays` before it (or
 * `retentionDays`, when shorter), and never before 1970-01-01 (event ids are UUIDv7, whose
 * time part counts milliseconds since then).
 */
export function earliestEventMs(receivedMs: number, limits: EventTimeLimits = DEFAULT_EVENT_TIME_LIMITS): number {
  return Math.max(0, receivedMs - pastDays(limits) * DAY_MS);
}

const byRetention = (l: EventTimeLimits): boolean => l.retentionDays > 0 && l.retentionDays < l.maxPastDays;
const pastDays = (l: EventTimeLimits): number => (byRetention(l) ? l.retentionDays : l.maxPastDays);

/** What is wrong with a sent event time, or null when it is accepted (a future one is: it becomes the receipt time). */
export function eventTimeProblem(sentMs: number, receivedMs: number, limits: EventTimeLimits = DEFAULT_EVENT_TIME_LIMITS): string | null {
  const window = receivedMs - pastDays(limits) * DAY_MS;
  if (sentMs >= window && sentMs >= 0) return null;
  const rule = window < 0
    ? 'event times start at 1970-01-01T00:00:00Z'
    : byRetention(limits)
      ? `event times are accepted up to ${limits.retentionDays} days before receipt (RETENTION_DAYS: older events are deleted)`
      : `event times are accepted up to ${limits.maxPastDays} days before receipt (INGEST_MAX_PAST_DAYS)`;
  return `${new Date(sentMs).toISOString()} is too far in the past: ${rule}, so from ${new Date(Math.max(0, window)).toISOString()}`;
}

interface Reserved {
  timestampMs: number | null;
  ip: string | null;
  deviceId: string | null;
  url: string | null;
  title: string | null;
  referrer: string | null;
  /** `__os` ... `__model` (device-overrides.ts); null when none applies. */
  device: DeviceOverrides | null;
}

/** Every `__` key that is consumed: the reserved keys and the device overrides (one zod object, one 400). */
export const ConsumedProps = ReservedProps.extend(DeviceOverrideProps.shape);
export const CONSUMED_KEYS: readonly string[] = [...RESERVED_KEYS, ...DEVICE_OVERRIDE_KEY_LIST];
const CONSUMED_SET = new Set(CONSUMED_KEYS);
const OVERRIDE_SET = new Set<string>(DEVICE_OVERRIDE_KEY_LIST);

/**
 * The reserved values ReservedProps would accept, as it would output them, without running
 * zod (the common case: plain strings within their limits); null when any value needs zod
 * to decide (it then gives the answer, issues included).
 */
function reservedFast(raw: Record<string, unknown>, overrideKeys: readonly string[] | null): Reserved | null {
  const ts = raw.__timestamp;
  const ipRaw = raw.__ip;
  const deviceRaw = raw.__deviceId;
  const url = raw.__path;
  const title = raw.__title;
  const referrer = raw.__referrer;
  let timestampMs: number | null = null;
  if (ts !== undefined) {
    if (typeof ts !== 'string' || !ISO_DATE_TIME.test(ts)) return null;
    timestampMs = parseIsoMs(ts);
    if (Number.isNaN(timestampMs)) return null;
  }
  let ip: string | null = null;
  if (ipRaw !== undefined) {
    if (typeof ipRaw !== 'string') return null;
    ip = ipRaw.trim();
    if (ip.length < 1 || ip.length > 64) return null;
  }
  let deviceId: string | null = null;
  if (deviceRaw !== undefined) {
    if (typeof deviceRaw !== 'string') return null;
    deviceId = deviceRaw.trim();
    if (deviceId.length < 1 || deviceId.length > 128) return null;
  }
  if (url !== undefined && (typeof url !== 'string' || url.length > 8192)) return null;
  if (title !== undefined && (typeof title !== 'string' || title.length > 2048)) return null;
  if (referrer !== undefined && (typeof referrer !== 'string' || referrer.length > 8192)) return null;
  const device = overrideKeys ? deviceOverridesFast(raw, overrideKeys) : null;
  if (device === undefined) return null;
  return {
    timestampMs, ip, deviceId,
    url: (url as string | undefined) ?? null,
    title: (title as string | undefined) ?? null,
    referrer: (referrer as string | undefined) ?? null,
    device,
  };
}

/** Splits reserved `__` keys out of properties; validates them (400 names the key). */
export function splitReserved(props: Record<string, unknown> | undefined, path: string[]): { properties: Record<string, unknown>; reserved: Reserved } {
  const properties: Record<string, unknown> = {};
  const raw: Record<string, unknown> = {};
  let overrideKeys: string[] | null = null;
  if (props) {
    for (const k of Object.keys(props)) {
      if (CONSUMED_SET.has(k)) {
        raw[k] = props[k];
        if (OVERRIDE_SET.has(k)) (overrideKeys ??= []).push(k);
      } else properties[k] = props[k];
    }
  }
  const fast = reservedFast(raw, overrideKeys);
  if (fast) return { properties, reserved: fast };
  const parsed = ConsumedProps.safeParse(raw);
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
      device: deviceOverridesOf(r),
    },
  };
}

/** Event time: the sent time unless it is more than 60 s ahead of receipt. */
function eventTimeMs(sentMs: number | null, receivedMs: number): number {
  if (sentMs === null || sentMs > receivedMs + FUTURE_TOLERANCE_MS) return receivedMs;
  return sentMs;
}

/**
 * Client IP: `__ip`, else the first address the trusted headers name (client-ip.ts: the
 * single-address headers in order, then the first public x-forwarded-for entry), else the
 * socket address.
 */
export function clientIp(headers: Record<string, string>, remoteAddress: string, override: string | null, order: IpHeaderOrder = DEFAULT_IP_HEADERS): string | null {
  return clientIpOf({ headers, remoteAddress }, override, order);
}

/** `clientIp` of a request; reads `remoteAddress` only when neither `__ip` nor a header names an IP. */
export function clientIpOf(
  req: { readonly headers: Record<string, string>; readonly remoteAddress: string },
  override: string | null,
  order: IpHeaderOrder = DEFAULT_IP_HEADERS,
): string | null {
  return asIp(override?.trim()) ?? ipFromHeaders(req.headers, order) ?? asIp(req.remoteAddress);
}

export interface OpContext {
  projectId: string;
  receivedMs: number;
  userAgent: string | null;
  ip: string | null;
  /** How far back an event time may be; default DEFAULT_EVENT_TIME_LIMITS. */
  limits?: EventTimeLimits;
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

const EVENT_TIMESTAMP = ['timestamp'];
const EVENT_PROPS_TIMESTAMP = ['properties', '__timestamp'];
const TRACK_TIMESTAMP = ['payload', 'properties', '__timestamp'];

export function planEvent(body: EventBodyT, ctx: OpContext): PlannedOp {
  const { properties, reserved } = splitReserved(body.properties, ['properties']);
  const sent = body.timestamp ? parseIsoMs(body.timestamp) : reserved.timestampMs;
  return planTrack(body.name, properties, reserved, body.profileId ?? null, [], sent, ctx, body.timestamp ? EVENT_TIMESTAMP : EVENT_PROPS_TIMESTAMP);
}

function planTrack(
  name: string,
  properties: Record<string, unknown>,
  reserved: Reserved,
  profileId: string | null,
  groups: string[],
  sentMs: number | null,
  ctx: OpContext,
  timePath: readonly string[],
): PlannedOp {
  if (sentMs !== null) {
    // Too far in the past: a 400 naming the field (the future is replaced by the receipt time).
    const problem = eventTimeProblem(sentMs, ctx.receivedMs, ctx.limits);
    if (problem) throw new BadRequestError(`${timePath.join('.')}: ${problem}`, [{ path: [...timePath], message: problem }]);
  }
  return new PlannedTrack(name, properties, reserved, profileId, groups, eventTimeMs(sentMs, ctx.receivedMs), ctx);
}

/** A planned track event: a class rather than an object with a closure (tsx names every closure it makes, per request). */
class PlannedTrack implements PlannedOp {
  readonly deviceOverride: string | null;
  readonly ipOverride: string | null;
  constructor(
    private readonly name: string,
    private readonly properties: Record<string, unknown>,
    private readonly reserved: Reserved,
    readonly profileId: string | null,
    private readonly groups: string[],
    readonly eventMs: number,
    private readonly ctx: OpContext,
  ) {
    this.deviceOverride = reserved.deviceId;
    this.ipOverride = reserved.ip;
  }

  build(deviceId: string, ip: string | null): QueuedOp {
    const at = this.eventMs;
    const reserved = this.reserved;
    const op: QueuedTrack = {
      kind: 'track',
      id: eventId(at),
      projectId: this.ctx.projectId,
      deviceId,
      receivedAt: isoTime(this.ctx.receivedMs),
      name: this.name,
      profileId: this.profileId ?? deviceId,
      createdAt: isoTime(at),
      properties: this.properties,
      groups: this.groups,
      url: reserved.url,
      title: reserved.title,
      referrer: reserved.referrer,
      ip,
      userAgent: this.ctx.userAgent,
    };
    // Only when sent: the queued JSON of the common event stays as it was.
    if (reserved.device) op.deviceOverrides = reserved.device;
    return op;
  }
}

// Module-level helpers rather than closures made per request (tsx names every closure).
function base(profileId: string | null, build: (deviceId: string) => QueuedOp): PlannedOp {
  return { profileId, deviceOverride: null, ipOverride: null, eventMs: null, build };
}

function commonOf(ctx: OpContext, deviceId: string) {
  return { id: eventId(ctx.receivedMs), projectId: ctx.projectId, deviceId, receivedAt: isoTime(ctx.receivedMs) };
}

const TRACK_PROPERTIES = ['payload', 'properties'];

/**
 * identify (/track's `identify` and POST /profile): the profile's fields and its properties
 * without the reserved keys; `propertiesPath` is where the body holds them (a 400 names it).
 */
export function planIdentify(p: IdentifyPayloadT, ctx: OpContext, propertiesPath: string[]): PlannedOp {
  const { properties } = splitReserved(p.properties, propertiesPath);
  if (p.avatar !== undefined) properties.avatar = p.avatar;
  return base(p.profileId, (d) => ({
    ...commonOf(ctx, d), kind: 'identify', profileId: p.profileId,
    firstName: p.firstName ?? null, lastName: p.lastName ?? null, email: p.email ?? null, properties,
  }));
}

/** increment (sign 1) or decrement (sign -1, queued as a negative increment): /track's and /profile/*'s. */
export function planIncrement(p: IncrementPayloadT, sign: 1 | -1, ctx: OpContext): PlannedOp {
  const delta = sign * p.value;
  return base(p.profileId, (d) => ({ ...commonOf(ctx, d), kind: 'increment', profileId: p.profileId, property: p.property, delta }));
}

export function planTrackBody(body: TrackBodyT, ctx: OpContext): PlannedOp {
  switch (body.type) {
    case 'track': {
      const p = body.payload;
      const { properties, reserved } = splitReserved(p.properties, ['payload', 'properties']);
      return planTrack(p.name, properties, reserved, p.profileId ?? null, p.groups ?? [], reserved.timestampMs, ctx, TRACK_TIMESTAMP);
    }
    case 'identify':
      return planIdentify(body.payload, ctx, TRACK_PROPERTIES);
    case 'increment':
    case 'decrement':
      return planIncrement(body.payload, body.type === 'increment' ? 1 : -1, ctx);
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
