// Query parameters of OpenPanel's raw-row insights routes (its insights.controller.ts: zEventsQuery,
// zSessionsQuery, zProfilesQuery, zGetProfileQuery, zProfileSessionsQuery): the names, defaults
// and limits OpenPanel takes, validated by zod into typed params or a BadRequestError naming the
// parameter. The period (startDate, endDate, range) and `filters` are the other insights routes'
// (../query/params.ts); these routes default to the last 30 days, as OpenPanel's do.
// docs/api.md ("Events, sessions and profiles") and docs/insights-decisions.md say the rest.
import { z } from 'zod';
import { BadRequestError } from '../http/errors';
import {
  dateSchema, filtersParamSchema, isFilterName, jsonParam, noNul, parsePeriodParams, pickParams, positiveIntSchema,
  PROPERTY_PREFIX, RANGES, type Filter, type PeriodParams,
} from '../query/params';

/** Rows a list gives at most, and by default (OpenPanel: limit 1..100, default 20). */
export const MAX_ROWS = 100;
export const DEFAULT_ROWS = 20;
/** The period of events and sessions when neither range nor startDate/endDate is given. */
export const DEFAULT_RAW_RANGE = '30d';
/** Longest text parameter accepted. */
const MAX_TEXT = 2000;
/** Most event names in eventNames, most keys in properties. */
export const MAX_EVENT_NAMES = 100;
const MAX_PROPERTIES = 50;
/** Largest minSessions (a profile's sessions are counted up to this many). */
export const MAX_MIN_SESSIONS = 1000;
/** Largest inactiveDays (100 years). */
const MAX_INACTIVE_DAYS = 36_500;

const text = z
  .string()
  .max(MAX_TEXT, `At most ${MAX_TEXT} characters`)
  .refine(noNul, 'Must not contain NUL characters');
const rows = (what: string) => positiveIntSchema(MAX_ROWS, what).default(DEFAULT_ROWS);

/** eventNames: repeated (`eventNames=a&eventNames=b`), a JSON array (`["a","b"]`) or one name. */
const eventNamesSchema = z
  .array(text)
  .max(MAX_EVENT_NAMES, `At most ${MAX_EVENT_NAMES} event names`)
  .describe('Event names; repeated, a JSON array, or one name');

/** properties: a JSON object of top-level property key -> value (numbers and booleans as text). */
const propertiesSchema = jsonParam(
  z
    .record(
      z.string().min(1, 'A property key must not be empty').max(MAX_TEXT).refine(noNul, 'Must not contain NUL characters'),
      z.union([z.string(), z.number(), z.boolean()]).transform(String).pipe(text),
    )
    .refine((o) => Object.keys(o).length <= MAX_PROPERTIES, `At most ${MAX_PROPERTIES} properties`),
  'object of property key to value',
);

/** The single-value column parameters both lists take (OpenPanel's names), and their columns. */
const COLUMN_PARAMS = {
  country: 'country', city: 'city', device: 'device', browser: 'browser', os: 'os',
  referrer: 'referrer', referrerName: 'referrer_name', referrerType: 'referrer_type',
} as const;
type ColumnParam = keyof typeof COLUMN_PARAMS;
const columnShape = Object.fromEntries(
  Object.keys(COLUMN_PARAMS).map((k) => [k, text.optional().describe(`Only rows whose ${COLUMN_PARAMS[k as ColumnParam]} is this value (empty: no condition)`)]),
) as Record<ColumnParam, z.ZodOptional<typeof text>>;

/** Period and filters, as documented (parsed by parsePeriodParams, which also checks the dates). */
const periodDocShape = {
  startDate: dateSchema.optional().describe('First day (YYYY-MM-DD, project timezone); with endDate'),
  endDate: dateSchema.optional().describe('Last day, inclusive; with startDate'),
  range: z.enum(RANGES).optional().describe(`A range; default ${DEFAULT_RAW_RANGE} when no dates are given`),
  filters: filtersParamSchema.optional(),
};

export const eventsParamsSchema = z.object({
  ...periodDocShape,
  eventNames: eventNamesSchema.optional(),
  path: text.optional().describe('Only events with this path'),
  ...columnShape,
  profileId: text.optional().describe("Only this profile's events"),
  properties: propertiesSchema.optional().describe('JSON object: only events whose property <key> is <value>, for every key'),
  limit: rows('limit'),
});

export const sessionsParamsSchema = z.object({
  ...periodDocShape,
  ...columnShape,
  profileId: text.optional().describe("Only this profile's sessions"),
  limit: rows('limit'),
});

export const profilesParamsSchema = z.object({
  name: text.optional().describe('Every word (at most 5) is in the id, email, first, last or full name (case-insensitive)'),
  email: text.optional().describe('The email contains this (case-insensitive)'),
  country: text.optional().describe("The country of the profile's latest event"),
  city: text.optional().describe("The city of the profile's latest event"),
  device: text.optional().describe("The device of the profile's latest event"),
  browser: text.optional().describe("The browser of the profile's latest event"),
  inactiveDays: positiveIntSchema(MAX_INACTIVE_DAYS, 'inactiveDays').optional().describe('No event in the last N days'),
  minSessions: positiveIntSchema(MAX_MIN_SESSIONS, 'minSessions').optional().describe('At least N sessions'),
  performedEvent: text.optional().describe('Has an event of this name (among its latest occurrences)'),
  filters: filtersParamSchema.optional().describe('JSON array of filters on properties.<key> (profile properties) or profile_id'),
  sortOrder: z.enum(['asc', 'desc']).default('desc').describe('By created_at'),
  limit: rows('limit'),
});

export const profileParamsSchema = z.object({ eventLimit: rows('eventLimit').describe('Recent events, 1..100') });
export const profileSessionsParamsSchema = z.object({ limit: rows('limit') });

interface PeriodPart {
  period: Pick<PeriodParams, 'range' | 'startDate' | 'endDate'>;
  filters: Filter[];
}
export type EventsParams = Omit<z.infer<typeof eventsParamsSchema>, keyof typeof periodDocShape> & PeriodPart & { eventNames: string[] };
export type SessionsParams = Omit<z.infer<typeof sessionsParamsSchema>, keyof typeof periodDocShape> & PeriodPart;
export type ProfilesParams = Omit<z.infer<typeof profilesParamsSchema>, 'filters'> & { filters: Filter[] };
export type ProfileParams = z.infer<typeof profileParamsSchema>;
export type ProfileSessionsParams = z.infer<typeof profileSessionsParamsSchema>;

function parse<S extends z.ZodType>(schema: S, input: Record<string, unknown>): z.infer<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw BadRequestError.fromZod(result.error);
  return result.data;
}

/** The period as the other insights routes take it, OpenPanel's 30 days when none is given. */
function periodOf(query: URLSearchParams): PeriodPart {
  const { range, startDate, endDate, filters } = parsePeriodParams(query);
  const given = query.get('range') !== null || startDate !== undefined;
  return { period: { range: given ? range : DEFAULT_RAW_RANGE, startDate, endDate }, filters };
}

/** Every value of eventNames: repeated params, or one holding a JSON array. */
function eventNamesOf(query: URLSearchParams): string[] | undefined {
  const all = query.getAll('eventNames');
  if (all.length === 0) return undefined;
  if (all.length === 1 && all[0]!.trimStart().startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(all[0]!);
      if (Array.isArray(parsed)) return parsed as string[];
    } catch {
      // not JSON: the text is one event name
    }
  }
  return all;
}

const COLUMN_NAMES = Object.keys(COLUMN_PARAMS);

export function parseEventsParams(query: URLSearchParams): EventsParams {
  const period = periodOf(query);
  const picked: Record<string, unknown> = pickParams(query, ['path', ...COLUMN_NAMES, 'profileId', 'properties', 'limit']);
  const names = eventNamesOf(query);
  if (names !== undefined) picked.eventNames = names;
  const own = parse(eventsParamsSchema.omit({ startDate: true, endDate: true, range: true, filters: true }), picked);
  return { ...own, ...period, eventNames: own.eventNames ?? [] };
}

export function parseSessionsParams(query: URLSearchParams): SessionsParams {
  const period = periodOf(query);
  const own = parse(sessionsParamsSchema.omit({ startDate: true, endDate: true, range: true, filters: true }), pickParams(query, [...COLUMN_NAMES, 'profileId', 'limit']));
  return { ...own, ...period };
}

/** On profiles, filters name a profile property or the profile id. */
const isProfileFilterName = (name: string) => name === 'profile_id' || (name.startsWith(PROPERTY_PREFIX) && isFilterName(name));

export function parseProfilesParams(query: URLSearchParams): ProfilesParams {
  const names = ['name', 'email', 'country', 'city', 'device', 'browser', 'inactiveDays', 'minSessions', 'performedEvent', 'filters', 'sortOrder', 'limit'];
  const own = parse(profilesParamsSchema, pickParams(query, names));
  const filters = own.filters ?? [];
  const bad = filters.findIndex((f) => !isProfileFilterName(f.name));
  if (bad >= 0) {
    const message = 'On profiles, a filter names properties.<key> (a profile property) or profile_id';
    throw new BadRequestError(`filters.${bad}.name: ${message}`, [{ path: ['filters', String(bad), 'name'], message }]);
  }
  return { ...own, filters };
}

export const parseProfileParams = (query: URLSearchParams): ProfileParams => parse(profileParamsSchema, pickParams(query, ['eventLimit']));
export const parseProfileSessionsParams = (query: URLSearchParams): ProfileSessionsParams =>
  parse(profileSessionsParamsSchema, pickParams(query, ['limit']));

/**
 * OpenPanel's single-value column parameters as `is` filters on those columns (an empty value
 * sets no condition, as in OpenPanel).
 */
export function columnFilters(params: Partial<Record<ColumnParam, string>>): Filter[] {
  const out: Filter[] = [];
  for (const [param, column] of Object.entries(COLUMN_PARAMS)) {
    const value = params[param as ColumnParam];
    if (value) out.push({ name: column, operator: 'is', value: [value] });
  }
  return out;
}

/** `text` for a profile id in a path: the same bounds as the parameters. */
export function checkProfileId(profileId: string): string {
  const result = text.safeParse(profileId);
  if (!result.success) throw BadRequestError.fromZod(result.error, ['profileId']);
  return result.data;
}
