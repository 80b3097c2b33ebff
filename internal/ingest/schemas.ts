// Request schemas of /event, /track and the older /profile routes: the single source of
// validation, types and the OpenAPI document.
import { z } from 'zod';
import { RESERVED_EVENT_NAMES } from '../model/event';

const reserved = new Set<string>(RESERVED_EVENT_NAMES);

const Properties = z.record(z.string(), z.unknown()).describe('Free-form properties');

const Id = z.union([z.string().trim().min(1).max(256), z.number().finite()]).transform(String);

const EventName = z
  .string()
  .trim()
  .min(1, 'name must not be empty')
  .max(256)
  .refine((n) => !reserved.has(n), { message: 'session_start and session_end are emitted by the service and cannot be sent' });

export const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;

/** ISO 8601 date or date-time; without an offset it is UTC. */
const Timestamp = z
  .string()
  .regex(ISO_DATE_TIME, { message: 'must be an ISO 8601 date-time', abort: true }) // one issue, not two
  .refine((s) => !Number.isNaN(parseIsoMs(s)), 'must be a valid ISO 8601 date-time');

/** ms since the epoch, or NaN for anything that is not a real calendar date and time. */
export function parseIsoMs(input: string): number {
  const s = input.toUpperCase();
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?/.exec(s);
  if (!m) return NaN;
  const [, y, mo, d, h = '0', mi = '0', sec = '0'] = m;
  // Date.parse rolls 2024-02-30 over into March; a real date must round-trip.
  const probe = new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d)));
  if (probe.getUTCFullYear() !== Number(y) || probe.getUTCMonth() !== Number(mo) - 1 || probe.getUTCDate() !== Number(d)) return NaN;
  if (Number(h) > 23 || Number(mi) > 59 || Number(sec) > 59) return NaN;
  const hasTime = /[T ]\d{2}:/.test(s);
  const hasOffset = /(?:Z|[+-]\d{2}:?\d{2})$/.test(s);
  const normalised = hasTime ? (hasOffset ? s : `${s}Z`).replace(' ', 'T') : `${s}T00:00:00Z`;
  return Date.parse(normalised);
}

export const EventBody = z
  .object({
    name: EventName,
    properties: Properties.optional(),
    timestamp: Timestamp.optional(),
    profileId: Id.optional(),
  })
  .describe('A plain event (POST /event)');

const TrackPayload = z.object({
  name: EventName,
  properties: Properties.optional(),
  profileId: Id.optional(),
  groups: z.array(z.string().trim().min(1).max(256)).max(100).optional(),
});

export const IdentifyPayload = z.object({
  profileId: Id,
  firstName: z.string().max(256).optional(),
  lastName: z.string().max(256).optional(),
  email: z.string().max(320).optional(),
  avatar: z.string().max(2048).optional(),
  properties: Properties.optional(),
});

export const IncrementPayload = z.object({
  profileId: Id,
  property: z.string().trim().min(1).max(256),
  value: z.number().finite().default(1),
});

const GroupPayload = z.object({
  id: z.string().trim().min(1).max(256),
  type: z.string().trim().min(1).max(256),
  name: z.string().trim().min(1).max(512),
  properties: Properties.optional(),
});

const AssignGroupPayload = z.object({
  profileId: Id.optional(),
  groupIds: z.array(z.string().trim().min(1).max(256)).min(1).max(100),
});

export const TrackBody = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('track'), payload: TrackPayload }),
    z.object({ type: z.literal('identify'), payload: IdentifyPayload }),
    z.object({ type: z.literal('increment'), payload: IncrementPayload }),
    z.object({ type: z.literal('decrement'), payload: IncrementPayload }),
    z.object({ type: z.literal('group'), payload: GroupPayload }),
    z.object({ type: z.literal('assign_group'), payload: AssignGroupPayload }),
  ])
  .describe('One ingest operation (POST /track)');

export type TrackBodyT = z.infer<typeof TrackBody>;
export type IdentifyPayloadT = z.infer<typeof IdentifyPayload>;
export type IncrementPayloadT = z.infer<typeof IncrementPayload>;
export type EventBodyT = z.infer<typeof EventBody>;

export const IngestAccepted = z.object({ deviceId: z.string().describe('32 hex chars') });

/** Reserved property keys (semantics.md): consumed, never kept in properties. */
export const ReservedProps = z.object({
  __timestamp: Timestamp.optional(),
  __ip: z.string().trim().min(1).max(64).optional(),
  __deviceId: z.string().trim().min(1).max(128).optional(),
  __path: z.string().max(8192).optional(),
  __title: z.string().max(2048).optional(),
  __referrer: z.string().max(8192).optional(),
});
export const RESERVED_KEYS = Object.keys(ReservedProps.shape);

const hasOwn = Object.prototype.hasOwnProperty;
const isJsonObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A trimmed string of 1..max characters, or undefined when zod has to decide. */
function trimmedFast(v: unknown, max: number): string | undefined {
  if (typeof v !== 'string') return undefined;
  const t = v.trim();
  return t.length >= 1 && t.length <= max ? t : undefined;
}

/**
 * TrackBody's answer for the common body, `{"type":"track","payload":{...}}` with every
 * field plainly valid, without running zod: the same value zod's safeParse returns (same
 * keys, trimmed strings, copied properties, unknown keys dropped). Undefined whenever
 * anything is unusual or invalid: zod then decides, and words the issues, as always.
 * schemas.test.ts compares the two on generated bodies.
 */
export function trackBodyFast(data: unknown): TrackBodyT | undefined {
  if (!isJsonObject(data) || data.type !== 'track') return undefined;
  const p = data.payload;
  if (!isJsonObject(p)) return undefined;
  const name = trimmedFast(p.name, 256);
  if (name === undefined || reserved.has(name)) return undefined;
  const payload: { name: string; properties?: Record<string, unknown>; profileId?: string; groups?: string[] } = { name };
  if (hasOwn.call(p, 'properties')) {
    const props = p.properties;
    // zod's record takes a plain object; an own `constructor` or `__proto__` key is left to it.
    if (!isJsonObject(props) || hasOwn.call(props, 'constructor') || hasOwn.call(props, '__proto__')) return undefined;
    const copy: Record<string, unknown> = {};
    for (const k of Object.keys(props)) copy[k] = props[k];
    payload.properties = copy;
  }
  if (hasOwn.call(p, 'profileId')) {
    const id = p.profileId;
    if (typeof id === 'number') {
      if (!Number.isFinite(id)) return undefined;
      payload.profileId = String(id);
    } else {
      const t = trimmedFast(id, 256);
      if (t === undefined) return undefined;
      payload.profileId = t;
    }
  }
  if (hasOwn.call(p, 'groups')) {
    const g = p.groups;
    if (!Array.isArray(g) || g.length > 100) return undefined;
    const groups = new Array<string>(g.length);
    for (let i = 0; i < g.length; i++) {
      const t = trimmedFast(g[i], 256);
      if (t === undefined) return undefined;
      groups[i] = t;
    }
    payload.groups = groups;
  }
  return { type: 'track', payload } as TrackBodyT;
}
