// Query parameters of the export API (GET /export/events, GET /export/charts): OpenPanel's
// parameter names, zod schemas, and one parse step per endpoint that turns URLSearchParams
// into typed params or a BadRequestError whose issues name every offending parameter.
//
// Reused from internal/query/params: the filter schema (same names, operators and 400s as
// insights), the YYYY-MM-DD date schema, the period schema (range/startDate/endDate) and the
// JSON, integer and NUL checks of a parameter.
import { z } from 'zod';
import { BadRequestError, type Issue } from '../http/errors';
import { RESERVED_EVENT_NAMES } from '../model/event';
import {
  dateSchema,
  filterSchema,
  filtersParamSchema,
  isFilterName,
  jsonParam,
  MAX_FILTERS,
  noNul,
  periodParamsSchema,
  pickParams,
  positiveIntSchema as positiveInt,
  PROPERTY_PREFIX,
  type Filter,
  type Range,
} from '../query/params';

// ---------------------------------------------------------------------------------------
// Shared pieces

/** `projectId` wins; `project_id` is OpenPanel's other spelling. Empty means absent. */
export function requestedProject(query: URLSearchParams): string | undefined {
  return query.get('projectId') || query.get('project_id') || undefined;
}

/** Every value of a parameter that may be repeated or comma-separated, trimmed, empty ones dropped. */
function multiValues(query: URLSearchParams, name: string): string[] {
  return query
    .getAll(name)
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v.length > 0);
}

function throwIssues(issues: Issue[]): never {
  const first = issues[0]!;
  const where = first.path.length ? `${first.path.join('.')}: ` : '';
  throw new BadRequestError(`${where}${first.message}`, issues);
}

const zodIssues = (err: z.ZodError): Issue[] => BadRequestError.fromZod(err).issues;

// ---------------------------------------------------------------------------------------
// GET /export/events

/** The documented include groups (OpenPanel's `select` groups). */
const EXPORT_INCLUDE_GROUPS = ['profile', 'meta', 'properties', 'geo', 'device', 'referrer'] as const;
export type ExportIncludeGroup = (typeof EXPORT_INCLUDE_GROUPS)[number];

/**
 * Every event column an export row can carry, by its field name in the row (OpenPanel's
 * camelCase) and its column. `includes` accepts either spelling of any of them (OpenPanel
 * selects single columns by field name: `region`, `city`, `groups`, `referrerName`).
 * The first ten are in every row anyway; naming them is allowed and changes nothing.
 */
export const EXPORT_COLUMNS = {
  id: 'id', name: 'name', deviceId: 'device_id', profileId: 'profile_id', sessionId: 'session_id',
  projectId: 'project_id', createdAt: 'created_at', path: 'path', origin: 'origin', title: 'title',
  properties: 'properties', groups: 'groups',
  country: 'country', region: 'region', city: 'city', latitude: 'latitude', longitude: 'longitude',
  device: 'device', browser: 'browser', browserVersion: 'browser_version', os: 'os', osVersion: 'os_version', brand: 'brand', model: 'model',
  referrer: 'referrer', referrerName: 'referrer_name', referrerType: 'referrer_type',
  utmSource: 'utm_source', utmMedium: 'utm_medium', utmCampaign: 'utm_campaign', utmTerm: 'utm_term', utmContent: 'utm_content',
  receivedAt: 'received_at', durationMs: 'duration_ms', isBot: 'is_bot', botReason: 'bot_reason',
} as const;
export type ExportField = keyof typeof EXPORT_COLUMNS;

/** Column name or field name -> field name. */
const FIELD_BY_NAME: ReadonlyMap<string, ExportField> = new Map(
  (Object.entries(EXPORT_COLUMNS) as [ExportField, string][]).flatMap(([field, column]) => [[field, field], [column, field]] as [string, ExportField][]),
);

/** What `includes` accepts: the groups, then every column by either name. */
export const EXPORT_INCLUDES: readonly string[] = [...new Set<string>([...EXPORT_INCLUDE_GROUPS, ...FIELD_BY_NAME.keys()])];

/** One parsed include: a group, or one column (by its field name). */
export type ExportInclude = ExportIncludeGroup | { field: ExportField };

const isGroup = (v: string): v is ExportIncludeGroup => (EXPORT_INCLUDE_GROUPS as readonly string[]).includes(v);

/** A group name is the group (`device`, `referrer`, `properties` are also columns: the group holds them); else the column. */
function includeOf(name: string): ExportInclude | null {
  if (isGroup(name)) return name;
  const field = FIELD_BY_NAME.get(name);
  return field ? { field } : null;
}
const EXPORT_DEFAULT_LIMIT = 50;
const EXPORT_MAX_LIMIT = 1000;
/** Deep enough for any real export; keeps (page - 1) * limit a safe integer. */
const EXPORT_MAX_PAGE = 1_000_000_000;
const EXPORT_FORMATS = ['json', 'ndjson'] as const;
type ExportFormat = (typeof EXPORT_FORMATS)[number];

/**
 * A `start`/`end` bound as written. `date`: a local calendar day of the project. `local`:
 * a date-time without offset, read as wall-clock time in the project's timezone.
 * `instant`: a date-time with `Z` or an offset. `wallSecondsMs` is the written time to the
 * second, as if UTC; `fraction` the written fractional digits padded to microseconds.
 */
export type TimeBound =
  | { kind: 'date'; text: string; date: string }
  | { kind: 'local'; text: string; wallSecondsMs: number; fraction: string }
  | { kind: 'instant'; text: string; utcSecondsMs: number; fraction: string };

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/** Parses a YYYY-MM-DD date or an ISO 8601 date-time; null when it is neither. */
export function parseTimeBound(text: string): TimeBound | null {
  if (dateSchema.safeParse(text).success) return { kind: 'date', text, date: text };
  const m = DATE_TIME.exec(text);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? '0'].map(Number) as [number, number, number, number, number, number];
  if (!dateSchema.safeParse(`${m[1]}-${m[2]}-${m[3]}`).success) return null;
  if (hour > 23 || minute > 59 || second > 59) return null;
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, 0);
  const fraction = (m[7] ?? '').slice(0, 6).padEnd(6, '0');
  const zone = m[8];
  if (zone === undefined) return { kind: 'local', text, wallSecondsMs: d.getTime(), fraction };
  let offsetMinutes = 0;
  if (zone.toUpperCase() !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = Number(digits.slice(2) || '0');
    if (oh > 23 || om > 59) return null;
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  return { kind: 'instant', text, utcSecondsMs: d.getTime() - offsetMinutes * 60_000, fraction };
}

const timeBoundSchema = z.string().transform((text, ctx): TimeBound => {
  const bound = parseTimeBound(text);
  if (!bound) {
    ctx.addIssue({ code: 'custom', message: 'Expected a date (YYYY-MM-DD) or an ISO 8601 date-time' });
    return z.NEVER;
  }
  return bound;
});

/** The anchor of a paginated export: a position (created_at with microseconds, id). */
export interface KeysetPosition {
  /** created_at as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (exact, microseconds). */
  ts: string;
  id: string;
}

/** What a `cursor` carries (opaque to clients). */
export interface ExportCursor {
  /** Fingerprint of the query it belongs to (project, event, profileId, start, end, filters, limit). */
  query: string;
  /** Newest row of page 1: the snapshot boundary; rows after it are never shown. */
  anchor: KeysetPosition;
  /** Last row of the page that produced the cursor; the next page starts after it. */
  last: KeysetPosition;
  /** Page number of the page that produced the cursor. */
  page: number;
  /** totalCount at the anchor, computed once on the first page of the walk. */
  total: number;
}

const TS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const positionSchema = z.tuple([z.string().regex(TS), z.string().regex(UUID)]);
const cursorPayloadSchema = z.object({
  v: z.literal(1),
  q: z.string().regex(/^[0-9a-f]{16}$/),
  a: positionSchema,
  l: positionSchema,
  p: z.number().int().min(1).max(EXPORT_MAX_PAGE),
  t: z.number().int().min(0),
});

export function encodeCursor(c: ExportCursor): string {
  const payload: z.infer<typeof cursorPayloadSchema> = {
    v: 1, q: c.query, a: [c.anchor.ts, c.anchor.id], l: [c.last.ts, c.last.id], p: c.page, t: c.total,
  };
  return Buffer.from(JSON.stringify(payload)).toString('base64url');
}

/** Decodes a cursor; null when it is not one this service made. */
export function decodeCursor(text: string): ExportCursor | null {
  if (!/^[A-Za-z0-9_-]{1,2048}$/.test(text)) return null;
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  const r = cursorPayloadSchema.safeParse(json);
  if (!r.success) return null;
  const { q, a, l, p, t } = r.data;
  return { query: q, anchor: { ts: a[0], id: a[1] }, last: { ts: l[0], id: l[1] }, page: p, total: t };
}

/** The /export/events query (for the OpenAPI document); parseEventsParams adds the cross-parameter checks. */
export const eventsSchema = z.object({
  projectId: z.string().optional(),
  project_id: z.string().optional(),
  event: z.array(z.string().max(200, 'At most 200 characters').refine(noNul, 'Must not contain NUL characters')).max(100, 'At most 100 event names'),
  profileId: z.string().min(1).max(2000).refine(noNul, 'Must not contain NUL characters').optional(),
  start: timeBoundSchema.optional(),
  end: timeBoundSchema.optional(),
  page: positiveInt(EXPORT_MAX_PAGE, 'page').optional(),
  limit: positiveInt(EXPORT_MAX_LIMIT, 'limit').default(EXPORT_DEFAULT_LIMIT),
  includes: z.array(
    z.string().refine((v) => includeOf(v) !== null, {
      message: `Unknown include; use a group (${EXPORT_INCLUDE_GROUPS.join(', ')}) or an event column (${Object.values(EXPORT_COLUMNS).join(', ')})`,
    }),
  ),
  filters: filtersParamSchema.default([]),
  cursor: z.string().optional(),
  format: z.enum(EXPORT_FORMATS, { message: 'Expected json or ndjson' }).default('json'),
});

export interface EventsParams {
  /** The project asked for (projectId or project_id), if any. */
  projectId: string | undefined;
  /** Event names (empty = all). */
  events: string[];
  profileId: string | undefined;
  start: TimeBound | undefined;
  end: TimeBound | undefined;
  /** Page asked for; undefined when not given (1, or the page after the cursor). */
  page: number | undefined;
  limit: number;
  includes: ExportInclude[];
  filters: Filter[];
  cursor: ExportCursor | undefined;
  format: ExportFormat;
}

/** Parses the /export/events query; throws BadRequestError naming every bad parameter. */
export function parseEventsParams(query: URLSearchParams): EventsParams {
  const r = eventsSchema.safeParse({
    ...pickParams(query, ['projectId', 'project_id', 'profileId', 'start', 'end', 'page', 'limit', 'filters', 'cursor', 'format']),
    event: multiValues(query, 'event'),
    includes: multiValues(query, 'includes'),
  });
  const issues: Issue[] = r.success ? [] : zodIssues(r.error);
  const projectId = query.get('projectId') || undefined;
  const projectIdAlt = query.get('project_id') || undefined;
  if (projectId && projectIdAlt && projectId !== projectIdAlt) {
    issues.push({ path: ['project_id'], message: 'projectId and project_id name different projects' });
  }
  let cursor: ExportCursor | undefined;
  const cursorText = query.get('cursor');
  if (cursorText !== null && cursorText !== '') {
    cursor = decodeCursor(cursorText) ?? undefined;
    if (!cursor) issues.push({ path: ['cursor'], message: 'Not a cursor returned by this endpoint' });
    else if (r.success && r.data.page !== undefined && r.data.page !== cursor.page + 1) {
      issues.push({ path: ['page'], message: `This cursor continues with page ${cursor.page + 1}` });
    }
  }
  if (r.success && r.data.start && r.data.end) {
    const s = r.data.start;
    const e = r.data.end;
    // Same kind: comparable now; mixed kinds are checked once the timezone is known.
    if (s.kind === 'date' && e.kind === 'date' && s.date > e.date) issues.push({ path: ['end'], message: 'end must not be before start' });
  }
  if (issues.length || !r.success) throwIssues(issues);
  const d = r.data;
  return {
    projectId: projectId ?? projectIdAlt,
    events: [...new Set(d.event)],
    profileId: d.profileId,
    start: d.start,
    end: d.end,
    page: d.page,
    limit: d.limit,
    includes: [...new Set(d.includes)].map((name) => includeOf(name)!),
    filters: d.filters,
    cursor,
    format: d.format,
  };
}

// ---------------------------------------------------------------------------------------
// GET /export/charts

export const CHART_SEGMENTS = [
  'event', 'user', 'session', 'user_average', 'one_event_per_user',
  'property_sum', 'property_average', 'property_min', 'property_max', 'group',
] as const;
export type ChartSegment = (typeof CHART_SEGMENTS)[number];
export const PROPERTY_SEGMENTS: ReadonlySet<ChartSegment> = new Set(['property_sum', 'property_average', 'property_min', 'property_max']);

const CHART_INTERVALS = ['minute', 'hour', 'day', 'week', 'month'] as const;
export type ChartInterval = (typeof CHART_INTERVALS)[number];

/** OpenPanel's series ids are letters; 26 series per chart. */
const MAX_SERIES = 26;
/** OpenPanel's chart rows carry label_1..label_3. */
const MAX_BREAKDOWNS = 3;
const CHART_DEFAULT_LIMIT = 100;
const CHART_MAX_LIMIT = 1000;

export const seriesItemSchema = z
  .object({
    name: z.string().min(1, 'An event name or * is required').max(200).refine(noNul, 'Must not contain NUL characters'),
    filters: z.array(filterSchema).max(MAX_FILTERS, `At most ${MAX_FILTERS} filters`).default([]),
    segment: z.enum(CHART_SEGMENTS, { message: `Unknown segment; use one of ${CHART_SEGMENTS.join(', ')}` }).default('event'),
    property: z.string().min(1).max(500).refine(noNul, 'Must not contain NUL characters').optional(),
    /** OpenPanel's series definition id (default A, B, C, ... by position). */
    id: z.string().min(1).max(100).refine(noNul, 'Must not contain NUL characters').optional(),
    // OpenPanel's newer series items are typed; only event series exist here.
    type: z.literal('event', { message: 'Only event series are supported (no formulas)' }).optional(),
  })
  .superRefine((item, ctx) => {
    if ((RESERVED_EVENT_NAMES as readonly string[]).includes(item.name)) {
      ctx.addIssue({
        code: 'custom',
        path: ['name'],
        message: `${item.name} is emitted by the service and never charted; use segment "session" to count sessions`,
      });
    }
    if (PROPERTY_SEGMENTS.has(item.segment)) {
      if (item.property === undefined) {
        ctx.addIssue({ code: 'custom', path: ['property'], message: `segment ${item.segment} needs a property (properties.<key>)` });
      } else if (propertyKey(item.property) === '') {
        ctx.addIssue({ code: 'custom', path: ['property'], message: 'Expected properties.<key>' });
      }
    }
  });
export type ChartSeriesItem = z.infer<typeof seriesItemSchema>;

/** The properties key of a property segment: `properties.<key>`, or a bare key. */
export function propertyKey(property: string): string {
  return property.startsWith(PROPERTY_PREFIX) ? property.slice(PROPERTY_PREFIX.length) : property;
}

export const breakdownSchema = z.object({
  name: z.string().refine(isFilterName, { message: 'Unknown breakdown; use a filterable column or properties.<key>' }).refine(noNul, 'Must not contain NUL characters'),
});

/** The /export/charts query besides range/startDate/endDate (periodParamsSchema), for the OpenAPI document. */
const seriesListSchema = jsonParam(z.array(seriesItemSchema).min(1, 'At least one series item is required').max(MAX_SERIES, `At most ${MAX_SERIES} series items`), 'array of series items');

export const chartSchema = z.object({
  series: seriesListSchema.optional(),
  events: seriesListSchema.optional(),
  breakdowns: jsonParam(z.array(breakdownSchema).max(MAX_BREAKDOWNS, `At most ${MAX_BREAKDOWNS} breakdowns`), 'array of breakdowns').default([]),
  interval: z.enum(CHART_INTERVALS, { message: `Expected one of ${CHART_INTERVALS.join(', ')}` }).optional(),
  previous: z.enum(['true', 'false', '1', '0'], { message: 'Expected true or false' }).transform((v) => v === 'true' || v === '1').default(false),
  limit: positiveInt(CHART_MAX_LIMIT, 'limit').default(CHART_DEFAULT_LIMIT),
  filters: filtersParamSchema.default([]),
});

export interface ChartParams {
  projectId: string | undefined;
  series: ChartSeriesItem[];
  breakdowns: { name: string }[];
  /** Undefined: the insights bucket rule for the period. */
  interval: ChartInterval | undefined;
  previous: boolean;
  /** Most breakdown value combinations per series item (by event count). */
  limit: number;
  /** Filters applied to every series item (besides its own). */
  filters: Filter[];
  range: Range;
  startDate: string | undefined;
  endDate: string | undefined;
}

/** Parses the /export/charts query; throws BadRequestError naming every bad parameter. */
export function parseChartParams(query: URLSearchParams): ChartParams {
  const r = chartSchema.safeParse(pickParams(query, ['series', 'events', 'breakdowns', 'interval', 'previous', 'limit', 'filters']));
  const p = periodParamsSchema.safeParse(pickParams(query, ['startDate', 'endDate', 'range']));
  const issues: Issue[] = [...(r.success ? [] : zodIssues(r.error)), ...(p.success ? [] : zodIssues(p.error))];
  if (r.success && !r.data.series && !r.data.events) {
    issues.push({ path: ['series'], message: 'series (or events) is required: a JSON array of {name, segment, filters, property}' });
  }
  if (issues.length || !r.success || !p.success) throwIssues(issues);
  return {
    projectId: requestedProject(query),
    series: (r.data.series ?? r.data.events)!,
    breakdowns: r.data.breakdowns.map((b) => ({ name: b.name })),
    interval: r.data.interval,
    previous: r.data.previous,
    limit: r.data.limit,
    filters: r.data.filters,
    range: p.data.range,
    startDate: p.data.startDate,
    endDate: p.data.endDate,
  };
}
