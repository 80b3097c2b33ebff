// The rows OpenPanel's raw-row insights routes answer (events, sessions, profiles): OpenPanel
// sends its ClickHouse rows as they are, snake_case (IClickhouseEvent, IClickhouseSession,
// IClickhouseProfile in its packages/db/src/services/), so these are too, field for field, with
// Tidemark's values: dates in ISO 8601, durations in seconds, properties as stored. Fields
// Tidemark does not keep have OpenPanel's empty value ('' / null / [] / {}); events also carry
// Tidemark's `title` and `utm_*`. docs/insights-decisions.md lists each difference.
import { z } from 'zod';
import { HttpError } from '../http/errors';

type Row = Record<string, unknown>;

const iso = (v: unknown): string => (v instanceof Date ? v : new Date(String(v))).toISOString();
const isoOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : iso(v));
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number => (v === null || v === undefined ? 0 : Number(v));
const seconds = (ms: unknown): number => num(ms) / 1000;
const orNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/**
 * The revenue of an event row (alias `a`), as OpenPanel's worker takes it: a `revenue` event's
 * `__revenue` property when it is a number or a decimal text, else 0.
 */
export function revenueSql(a: string): string {
  const v = `(${a}.properties ->> '__revenue')`;
  return `(CASE WHEN ${a}.name = 'revenue' THEN CASE
      WHEN jsonb_typeof(${a}.properties -> '__revenue') = 'number' THEN ${v}::float8
      WHEN ${v} ~ '^\\s*[+-]?[0-9]{1,30}([.][0-9]{0,30})?\\s*$' THEN trim(${v})::float8
      ELSE 0 END ELSE 0 END)`;
}

/** The columns an event row is built from (alias `e`). */
export const EVENT_COLUMNS_SQL = [
  'e.id', 'e.name', 'e.device_id', 'e.profile_id', 'e.project_id', 'e.session_id', 'e.path', 'e.origin', 'e.title',
  'e.referrer', 'e.referrer_name', 'e.referrer_type', 'e.duration_ms::float8 AS duration_ms', 'e.properties', 'e.created_at',
  'e.country', 'e.city', 'e.region', 'e.longitude', 'e.latitude', 'e.os', 'e.os_version', 'e.browser', 'e.browser_version',
  'e.device', 'e.brand', 'e.model', 'e.groups', 'e.utm_source', 'e.utm_medium', 'e.utm_campaign', 'e.utm_term', 'e.utm_content',
  `${revenueSql('e')} AS revenue`,
].join(', ');

/** An event as OpenPanel's IClickhouseEvent (in its column order), plus title and utm_*. */
export function eventRow(r: Row) {
  return {
    id: r.id as string,
    name: r.name as string,
    sdk_name: '',
    sdk_version: '',
    device_id: r.device_id as string,
    profile_id: r.profile_id as string,
    project_id: r.project_id as string,
    session_id: str(r.session_id),
    path: r.path as string,
    origin: r.origin as string,
    referrer: r.referrer as string,
    referrer_name: r.referrer_name as string,
    referrer_type: r.referrer_type as string,
    duration: seconds(r.duration_ms),
    properties: (r.properties ?? {}) as Record<string, unknown>,
    created_at: iso(r.created_at),
    country: r.country as string,
    city: r.city as string,
    region: r.region as string,
    longitude: orNull(r.longitude),
    latitude: orNull(r.latitude),
    os: r.os as string,
    os_version: r.os_version as string,
    browser: r.browser as string,
    browser_version: r.browser_version as string,
    device: r.device as string,
    brand: r.brand as string,
    model: r.model as string,
    imported_at: null,
    revenue: num(r.revenue),
    groups: (r.groups ?? []) as string[],
    title: r.title as string,
    utm_source: r.utm_source as string,
    utm_medium: r.utm_medium as string,
    utm_campaign: r.utm_campaign as string,
    utm_term: r.utm_term as string,
    utm_content: r.utm_content as string,
  };
}

/**
 * The columns a session row is built from (alias `s`), its revenue summed from its `revenue`
 * events (events_session_idx; the time bounds let PostgreSQL skip the other partitions).
 */
export const SESSION_COLUMNS_SQL = `s.*, s.duration_ms::float8 AS duration_ms_f, (
    SELECT coalesce(sum(${revenueSql('r')}), 0) FROM events r
    WHERE r.session_id = s.id AND r.project_id = s.project_id AND r.name = 'revenue' AND NOT r.is_bot
      AND r.created_at >= s.started_at AND r.created_at <= s.last_event_at
  ) AS revenue`;

/** A session as OpenPanel's IClickhouseSession (in its column order; no sign, no version). */
export function sessionRow(r: Row) {
  return {
    id: r.id as string,
    project_id: r.project_id as string,
    profile_id: r.profile_id as string,
    device_id: r.device_id as string,
    created_at: iso(r.started_at),
    ended_at: iso(r.last_event_at),
    is_bounce: r.is_bounce as boolean,
    entry_origin: r.entry_origin as string,
    entry_path: r.entry_path as string,
    exit_origin: r.exit_origin as string,
    exit_path: r.exit_path as string,
    screen_view_count: num(r.screen_view_count),
    revenue: num(r.revenue),
    event_count: num(r.event_count),
    duration: seconds(r.duration_ms_f),
    country: r.country as string,
    region: r.region as string,
    city: r.city as string,
    longitude: null,
    latitude: null,
    device: r.device as string,
    brand: r.brand as string,
    model: r.model as string,
    browser: r.browser as string,
    browser_version: r.browser_version as string,
    os: r.os as string,
    os_version: r.os_version as string,
    utm_medium: r.utm_medium as string,
    utm_source: r.utm_source as string,
    utm_campaign: r.utm_campaign as string,
    utm_content: r.utm_content as string,
    utm_term: r.utm_term as string,
    referrer: r.referrer as string,
    referrer_name: r.referrer_name as string,
    referrer_type: r.referrer_type as string,
    properties: {},
    groups: [] as string[],
  };
}

/** What a profile row is built from. */
export interface ProfileSource {
  id: string;
  project_id: string;
  first_name: string | null;
  last_name: string | null;
  email: string | null;
  properties: Record<string, unknown> | null;
  groups: string[] | null;
  /** The row's creation, or (no row: an anonymous profile) its first event. */
  created_at: Date;
  /** The later of the row's last update and the profile's latest event. */
  last_seen_at: Date | null;
  /** The device id of the profile's latest event, or null when it has none. */
  device_id: string | null;
}

/** A device id as Tidemark makes them (32 hex characters). */
const DEVICE_ID = /^[0-9a-f]{32}$/;

/**
 * OpenPanel's is_external: the id is not a device id (its `profileId !== deviceId`): unlike the
 * device of its latest event, or, with no event, not of a device id's form.
 */
export const isExternal = (id: string, deviceId: string | null): boolean => (deviceId === null ? !DEVICE_ID.test(id) : deviceId !== id);

/** A profile as OpenPanel's IClickhouseProfile (in its column order). */
export function profileRow(p: ProfileSource) {
  const properties = p.properties ?? {};
  return {
    id: p.id,
    first_name: p.first_name ?? '',
    last_name: p.last_name ?? '',
    email: p.email ?? '',
    avatar: typeof properties.avatar === 'string' ? properties.avatar : '',
    properties,
    project_id: p.project_id,
    is_external: isExternal(p.id, p.device_id),
    created_at: iso(p.created_at),
    last_seen_at: isoOrNull(p.last_seen_at ?? p.created_at),
    groups: p.groups ?? [],
  };
}

/** An unknown profile: 404 with OpenPanel's body ({error, profileId}) and Tidemark's message. */
export class ProfileNotFoundError extends HttpError {
  readonly status = 404;
  readonly title = 'Profile not found';
  constructor(readonly profileId: string) {
    super(`Profile not found: ${profileId}`);
    this.bodyFields = { profileId };
  }
}

// ---------------------------------------------------------------------------------------
// Response shapes, for the OpenAPI document

const dims = (names: string[]) => Object.fromEntries(names.map((n) => [n, z.string()]));
const GEO_DEVICE = ['country', 'city', 'region', 'os', 'os_version', 'browser', 'browser_version', 'device', 'brand', 'model'];
const UTM = ['utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content'];
const LON_LAT = { longitude: z.number().nullable(), latitude: z.number().nullable() };

export const RawEvent = z.object({
  id: z.string(), name: z.string(), sdk_name: z.string().describe("'' (not kept)"), sdk_version: z.string().describe("'' (not kept)"),
  device_id: z.string(), profile_id: z.string(), project_id: z.string(), session_id: z.string().describe("'' when none"),
  path: z.string(), origin: z.string(), ...dims(['referrer', 'referrer_name', 'referrer_type']),
  duration: z.number().describe('seconds: a screen view\'s time to the next event of its session; 0 when unknown'),
  properties: z.record(z.string(), z.unknown()), created_at: z.string().describe('ISO 8601'),
  ...dims(GEO_DEVICE), ...LON_LAT,
  imported_at: z.null(), revenue: z.number().describe("a revenue event's __revenue, else 0"), groups: z.array(z.string()),
  title: z.string(), ...dims(UTM),
});

export const RawSession = z.object({
  id: z.string(), project_id: z.string(), profile_id: z.string(), device_id: z.string(),
  created_at: z.string().describe('start, ISO 8601'), ended_at: z.string().describe('last event, ISO 8601'), is_bounce: z.boolean(),
  ...dims(['entry_origin', 'entry_path', 'exit_origin', 'exit_path']),
  screen_view_count: z.number(), revenue: z.number(), event_count: z.number(), duration: z.number().describe('seconds'),
  ...dims(GEO_DEVICE), longitude: z.null(), latitude: z.null(), ...dims(UTM), ...dims(['referrer', 'referrer_name', 'referrer_type']),
  properties: z.object({}), groups: z.array(z.string()),
});

export const RawProfile = z.object({
  id: z.string(), first_name: z.string(), last_name: z.string(), email: z.string(), avatar: z.string().describe('properties.avatar'),
  properties: z.record(z.string(), z.unknown()), project_id: z.string(),
  is_external: z.boolean().describe('false when the id is a device id (that of its latest event; with no event, 32 hex characters)'),
  created_at: z.string().describe('ISO 8601'), last_seen_at: z.string().describe('ISO 8601'), groups: z.array(z.string()),
});

export const ProfileWithEvents = z.object({ profile: RawProfile, recentEvents: z.array(RawEvent) });

export const ProfileMetrics = z.object({
  profileId: z.string(),
  firstSeen: z.string().nullable(), lastSeen: z.string().nullable(),
  sessions: z.number(), screenViews: z.number(), totalEvents: z.number(), conversionEvents: z.number(), uniqueDaysActive: z.number(),
  avgSessionDurationMin: z.number().describe('minutes, 2 decimals'), p90SessionDurationMin: z.number().describe('minutes, 2 decimals'),
  avgEventsPerSession: z.number(), avgTimeBetweenSessionsSec: z.number(), bounceRate: z.number().describe('percent, 2 decimals'),
  revenue: z.number(),
});

export const ProfileNotFound = z.object({ error: z.literal('Profile not found'), message: z.string(), profileId: z.string() });
