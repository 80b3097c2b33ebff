// The event catalogue of a project, as OpenPanel's insights API serves it (its routes
// events/names, events/properties and events/property_values): the event names, the property
// keys per event name, and the values of one property. docs/api.md ("Event catalogue") and
// docs/insights-decisions.md say what each answers and where it differs from OpenPanel.
//
// OpenPanel reads ClickHouse materialized views that hold the whole history; here every
// answer reads the events table through an index and bounded work: names by a skip scan of
// events_name_time_idx (one probe per distinct name), and counts, keys and values from
// the project's (or the event name's) most recent RECENT_EVENTS events, newest first.
import { z } from 'zod';
import { BadRequestError } from '../http/errors';
import { RESERVED_EVENT_NAMES } from '../model/event';
import { DEFAULT_STATEMENT_TIMEOUT_MS, type ReadOptions } from '../query/db';
import { withRead } from '../query/lookups';
import { isFilterName, noNul, pickParams } from '../query/params';
import type { ConnectionSource } from '../query/source';

/** How many event names events/names lists (OpenPanel: 50). */
export const MAX_EVENT_NAMES = 50;
/** How many (key, event name) pairs events/properties lists (OpenPanel: 500). */
export const MAX_PROPERTY_KEYS = 500;
/** How many values events/property_values lists (OpenPanel: 200). */
export const MAX_PROPERTY_VALUES = 200;
/**
 * The most recent events read for counts, keys and values (bounded work on any project): each
 * is a heap page read when cold, so 100,000 took 300-400 ms at 10M events (bench/RESULTS.md,
 * "Product analytics queries").
 */
export const RECENT_EVENTS = 10_000;
/** Longest eventName or propertyKey accepted. */
const MAX_PARAM_LENGTH = 2000;
/** Keys OpenPanel's property catalogue leaves out (its internal bookkeeping keys). */
const SKIPPED_KEYS = ['__duration_from', '__properties_from'];

/**
 * OpenPanel's EVENT_COLUMNS (the event columns its filters take by name), in its order, kept to
 * those Tidemark's filters take too, so that every listed column works as a filter `name`.
 */
const OPENPANEL_EVENT_COLUMNS = [
  'path', 'origin', 'referrer', 'referrer_name', 'referrer_type', 'duration', 'country', 'city',
  'region', 'os', 'os_version', 'browser', 'browser_version', 'device', 'brand', 'model',
  'sdk_name', 'sdk_version', 'profile_id', 'session_id', 'device_id', 'revenue',
] as const;
export const EVENT_COLUMNS: readonly string[] = OPENPANEL_EVENT_COLUMNS.filter((c) => isFilterName(c));

const textParam = z
  .string()
  .max(MAX_PARAM_LENGTH, `At most ${MAX_PARAM_LENGTH} characters`)
  .refine(noNul, 'Must not contain NUL characters');

export const eventPropertiesParamsSchema = z.object({
  eventName: textParam.optional().describe('Only the keys of this event name; absent or empty: every name'),
});
export type EventPropertiesParams = z.infer<typeof eventPropertiesParamsSchema>;

export const propertyValuesParamsSchema = z.object({
  eventName: textParam.describe('The event name'),
  propertyKey: textParam.describe('The top-level property key'),
});
export type PropertyValuesParams = z.infer<typeof propertyValuesParamsSchema>;

function parse<S extends z.ZodType>(schema: S, query: URLSearchParams, names: readonly string[]): z.infer<S> {
  const result = schema.safeParse(pickParams(query, names));
  if (!result.success) throw BadRequestError.fromZod(result.error);
  return result.data;
}

export const parseEventPropertiesParams = (query: URLSearchParams): EventPropertiesParams =>
  parse(eventPropertiesParamsSchema, query, ['eventName']);
export const parsePropertyValuesParams = (query: URLSearchParams): PropertyValuesParams =>
  parse(propertyValuesParamsSchema, query, ['eventName', 'propertyKey']);

export interface EventPropertiesResponse {
  columns: readonly string[];
  properties: Array<{ property_key: string; event_name: string }>;
}

export interface PropertyValuesResponse {
  event: string;
  property: string;
  values: string[];
}

const reserved = [...RESERVED_EVENT_NAMES];
const read = <T>(pool: ConnectionSource, options: ReadOptions, projectId: string, fn: Parameters<typeof withRead<T>>[4]) =>
  withRead<T>(pool, { statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS }, projectId, [], fn);

/**
 * The project's event names (no bots, not session_start / session_end), at most 50: the most
 * frequent among its RECENT_EVENTS most recent events first, then by name.
 */
export async function listEventNames(pool: ConnectionSource, projectId: string, options: ReadOptions = {}): Promise<string[]> {
  return read(pool, options, projectId, async (db) => {
    const { rows } = await db.query<{ name: string }>(
      `WITH RECURSIVE names(name) AS (
         (SELECT e.name FROM events e WHERE e.project_id = $1 ORDER BY e.name LIMIT 1)
         UNION ALL
         SELECT (SELECT e.name FROM events e WHERE e.project_id = $1 AND e.name > n.name ORDER BY e.name LIMIT 1)
         FROM names n WHERE n.name IS NOT NULL
       ),
       recent AS (
         SELECT r.name, count(*) AS n
         FROM (SELECT e.name FROM events e WHERE e.project_id = $1 AND NOT e.is_bot
               ORDER BY e.created_at DESC LIMIT $3) r
         GROUP BY r.name
       )
       SELECT names.name FROM names
       -- one probe per name for a non-bot event: a LATERAL with LIMIT 1, which PostgreSQL
       -- cannot turn into a semi-join over the project's whole history (it did: 5 s at 10M)
       CROSS JOIN LATERAL (SELECT 1 FROM events e WHERE e.project_id = $1 AND e.name = names.name AND NOT e.is_bot LIMIT 1) human
       LEFT JOIN recent ON recent.name = names.name
       WHERE names.name IS NOT NULL AND names.name <> ALL($2::text[])
       ORDER BY coalesce(recent.n, 0) DESC, names.name COLLATE "C"
       LIMIT $4`,
      [projectId, reserved, RECENT_EVENTS, MAX_EVENT_NAMES],
    );
    return rows.map((r) => r.name);
  });
}

/**
 * Distinct (top-level property key, event name) pairs with a non-empty value among the
 * RECENT_EVENTS most recent events (of `eventName` when given), by key then name, at most 500.
 */
export async function listEventProperties(
  pool: ConnectionSource,
  projectId: string,
  params: EventPropertiesParams,
  options: ReadOptions = {},
): Promise<EventPropertiesResponse> {
  const eventName = params.eventName ? params.eventName : undefined;
  return read(pool, options, projectId, async (db) => {
    const values: unknown[] = [projectId, reserved, RECENT_EVENTS, MAX_PROPERTY_KEYS, SKIPPED_KEYS];
    const byName = eventName === undefined ? '' : `AND e.name = $${values.push(eventName)}`;
    const { rows } = await db.query<{ property_key: string; event_name: string }>(
      `SELECT d.property_key, d.event_name FROM (
         SELECT DISTINCT k.key AS property_key, r.name AS event_name
         FROM (SELECT e.name, e.properties FROM events e
               WHERE e.project_id = $1 ${byName} AND NOT e.is_bot AND e.name <> ALL($2::text[])
               ORDER BY e.created_at DESC LIMIT $3) r
         CROSS JOIN LATERAL jsonb_each_text(CASE WHEN jsonb_typeof(r.properties) = 'object' THEN r.properties ELSE '{}'::jsonb END) k
         WHERE k.key <> '' AND k.value <> '' AND k.key <> ALL($5::text[])
       ) d
       ORDER BY d.property_key COLLATE "C", d.event_name COLLATE "C"
       LIMIT $4`,
      values,
    );
    return { columns: EVENT_COLUMNS, properties: rows };
  });
}

/**
 * The distinct non-empty values (as text, what a `properties.<key>` filter compares) of one
 * top-level property of one event name among its RECENT_EVENTS most recent events: the most
 * recently seen first (then by value), at most 200.
 */
export async function getPropertyValues(
  pool: ConnectionSource,
  projectId: string,
  params: PropertyValuesParams,
  options: ReadOptions = {},
): Promise<PropertyValuesResponse> {
  const { eventName, propertyKey } = params;
  const answer = (values: string[]) => ({ event: eventName, property: propertyKey, values });
  if (reserved.includes(eventName as (typeof reserved)[number])) return answer([]);
  return read(pool, options, projectId, async (db) => {
    const { rows } = await db.query<{ value: string }>(
      `SELECT r.value
       FROM (SELECT e.properties ->> $3::text AS value, e.created_at
             FROM events e
             WHERE e.project_id = $1 AND e.name = $2 AND NOT e.is_bot
             ORDER BY e.created_at DESC LIMIT $4) r
       WHERE r.value <> '' AND $3::text <> ALL($6::text[])
       GROUP BY r.value
       ORDER BY max(r.created_at) DESC, r.value COLLATE "C"
       LIMIT $5`,
      [projectId, eventName, propertyKey, RECENT_EVENTS, MAX_PROPERTY_VALUES, SKIPPED_KEYS],
    );
    return answer(rows.map((r) => r.value));
  });
}
