// The shapes that cross process boundaries: what the API publishes to JetStream and
// what the worker writes. Domain code imports these; no transport knows them.

/** One accepted ingest operation, as queued in JetStream (JSON). */
export type QueuedOp = QueuedTrack | QueuedIdentify | QueuedIncrement | QueuedGroup | QueuedAssignGroup | QueuedSessionCheck;

interface QueuedBase {
  /** Unique id of the operation (UUID v7, made by the API); the idempotency key. */
  id: string;
  projectId: string;
  /** 32 hex chars; the device the operation came from (shard key). */
  deviceId: string;
  /** ISO 8601 receipt time at the API. */
  receivedAt: string;
  /**
   * The producer's idempotency key (`Idempotency-Key` header or `__idempotencyKey`), when it
   * sent one; then `id` is derived from (projectId, key). The worker applies at most one op
   * per (projectId, dedupeKey), so a retried request is never counted twice.
   */
  dedupeKey?: string;
}

export interface QueuedTrack extends QueuedBase {
  kind: 'track';
  name: string;
  profileId: string;
  /** ISO 8601 event time, already clamped (future > 60 s becomes receipt time). */
  createdAt: string;
  /** Properties without the reserved `__` keys. */
  properties: Record<string, unknown>;
  groups: string[];
  url: string | null; // __path
  title: string | null; // __title
  referrer: string | null; // __referrer
  ip: string | null;
  userAgent: string | null;
  /**
   * `__os`, `__osVersion`, `__browser`, `__browserVersion`, `__device`, `__brand`, `__model`
   * as sent (mobile SDKs behind an HTTP library's user-agent): they replace what the
   * user-agent gives. Absent when none was sent (and in ops queued before they existed).
   */
  deviceOverrides?: DeviceOverrides;
  /**
   * A server-side event queued on its profile's browser device (`deviceId`) so that it can
   * join that device's open session: the device it has of its own (user-agent + IP, or
   * `__deviceId`). It keeps that device when it joins no session. Absent otherwise.
   */
  ownDeviceId?: string;
}

export interface QueuedIdentify extends QueuedBase {
  kind: 'identify';
  profileId: string;
  firstName: string | null;
  lastName: string | null;
  email: string | null;
  properties: Record<string, unknown>;
}

export interface QueuedIncrement extends QueuedBase {
  kind: 'increment';
  profileId: string;
  property: string;
  /** Signed: decrement is queued as a negative increment. */
  delta: number;
}

export interface QueuedGroup extends QueuedBase {
  kind: 'group';
  groupId: string;
  type: string;
  name: string;
  properties: Record<string, unknown>;
}

export interface QueuedAssignGroup extends QueuedBase {
  kind: 'assign_group';
  profileId: string;
  groupIds: string[];
}

/** Published by the session-end job onto the device's shard so that only the shard owner mutates sessions. */
export interface QueuedSessionCheck extends QueuedBase {
  kind: 'session_check';
  sessionId: string;
}

/** One JetStream message: a micro-batch of ops that share a subject (project + shard). */
export interface QueuedBatch {
  v: 1;
  ops: QueuedOp[];
}

/** Device and technology fields (from the user-agent). Empty string = unknown. */
export interface DeviceFields {
  device: string;
  browser: string;
  browser_version: string;
  os: string;
  os_version: string;
  brand: string;
  model: string;
}

/** Device fields a client sent itself (`__os` ... `__model`); each replaces the user-agent's. */
export type DeviceOverrides = Partial<DeviceFields>;

/**
 * The property key of each device field a client may send itself (read by
 * internal/ingest/device-overrides.ts; named in the storable rules' problems).
 */
export const DEVICE_OVERRIDE_KEYS = {
  __os: 'os',
  __osVersion: 'os_version',
  __browser: 'browser',
  __browserVersion: 'browser_version',
  __device: 'device',
  __brand: 'brand',
  __model: 'model',
} as const satisfies Record<string, keyof DeviceFields>;

/** Geography fields (from the IP). Empty string / null = unknown. */
export interface GeoFields {
  country: string;
  region: string;
  city: string;
  latitude: number | null;
  longitude: number | null;
}

/** Traffic source fields (from the referrer and the page URL's query string). */
export interface SourceFields {
  referrer: string;
  referrer_name: string;
  referrer_type: string;
  utm_source: string;
  utm_medium: string;
  utm_campaign: string;
  utm_term: string;
  utm_content: string;
}

export type BotReason = string;

/** The event record that runs through the enrichment steps and lands in `events`. */
export interface EventRecord extends DeviceFields, GeoFields, SourceFields {
  id: string;
  projectId: string;
  name: string;
  deviceId: string;
  profileId: string;
  createdAt: Date;
  properties: Record<string, unknown>;
  groups: string[];
  ip: string | null;
  userAgent: string | null;
  /** Device fields the client sent (QueuedTrack.deviceOverrides); null when none. */
  deviceOverrides: DeviceOverrides | null;
  /**
   * A server-side event: its user-agent shows no browser and no OS (absent, `node`,
   * `okhttp/4.12.0`, `curl/8.4.0`, ...) and it carries no device override. Such an event
   * opens no session (it joins its profile's open session, or none).
   */
  serverSide: boolean;
  /** Raw page URL as sent (`__path`), absolute or a path. */
  url: string | null;
  origin: string;
  path: string;
  title: string;
  /** Set when a maintained bot list matches the user-agent; bots stay out of insights. */
  isBot: boolean;
  botReason: BotReason | null;
  /** Filled by the sessionizer. */
  sessionId: string | null;
  /** ms to the next event of the same session (screen views); filled later. */
  durationMs: number | null;
}

/** Session-level dimensions, copied from the first event of the session. */
export const SESSION_DIMENSIONS = [
  'referrer', 'referrer_name', 'referrer_type',
  'utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content',
  'country', 'region', 'city',
  'device', 'browser', 'browser_version', 'os', 'os_version', 'brand', 'model',
] as const;
export type SessionDimension = (typeof SESSION_DIMENSIONS)[number];

/** The parent value shown as `prefix` on some breakdowns. */
export const DIMENSION_PREFIX: Partial<Record<SessionDimension, SessionDimension>> = {
  region: 'country',
  city: 'country',
  browser_version: 'browser',
  os_version: 'os',
};

export const RESERVED_EVENT_NAMES = ['session_start', 'session_end'] as const;
export const SCREEN_VIEW = 'screen_view';
