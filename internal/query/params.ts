// Query parameters shared by the insights endpoints (and the export API): one zod schema
// each, the types inferred from them, and one parse step that turns a URLSearchParams
// into typed params or a BadRequestError whose issues name the offending parameter.
import { z } from 'zod';
import { BadRequestError } from '../http/errors';
import { SESSION_DIMENSIONS } from '../model/event';

/** Every allowed `range` (semantics.md, Dates). */
export const RANGES = [
  '30min', 'lastHour', 'last24h', 'today', 'yesterday', '7d', '30d', '90d',
  '3m', '6m', '12m', 'monthToDate', 'lastMonth', 'yearToDate', 'lastYear',
] as const;
export type Range = (typeof RANGES)[number];
const DEFAULT_RANGE: Range = '7d';

export const FILTER_OPERATORS = [
  'is', 'isNot', 'contains', 'doesNotContain', 'startsWith', 'endsWith', 'regex',
  'gt', 'gte', 'lt', 'lte', 'isNull', 'isNotNull',
] as const;
type FilterOperator = (typeof FILTER_OPERATORS)[number];
/** Operators that compare numbers: each value must be a number. */
const NUMERIC_OPERATORS: ReadonlySet<FilterOperator> = new Set(['gt', 'gte', 'lt', 'lte']);
/** Operators that take no value (`value` may be empty or left out; any value is ignored). */
const VALUELESS_OPERATORS: ReadonlySet<FilterOperator> = new Set(['isNull', 'isNotNull']);
/**
 * A decimal number as text, exponent of at most 4 digits (what a numeric filter value must
 * be, and what a stored value must be to compare; filters.ts checks the same in SQL).
 */
const DECIMAL_NUMBER = /^[+-]?(?:[0-9]+(?:[.][0-9]*)?|[.][0-9]+)(?:[eE][+-]?[0-9]{1,4})?$/;
/** Longest text compared as a number (PostgreSQL's numeric then holds it, whatever the exponent). */
export const MAX_NUMBER_TEXT = 1000;

/** Filter names evaluated on each event (not on the session). */
export const EVENT_FILTER_COLUMNS = ['path', 'origin', 'name', 'profile_id'] as const;
export type EventFilterColumn = (typeof EVENT_FILTER_COLUMNS)[number];
export const PROPERTY_PREFIX = 'properties.';

const MAX_LIMIT = 50;
const MAX_PERIOD_YEARS = 20;
const DEFAULT_LIMIT = 10;
export const MAX_FILTERS = 50;
const MAX_FILTER_VALUES = 100;
const MAX_FILTER_VALUE_LENGTH = 2000;

const FILTER_COLUMNS: ReadonlySet<string> = new Set([...EVENT_FILTER_COLUMNS, ...SESSION_DIMENSIONS]);

/** True for a column name from the allow-list or `properties.<non-empty key>`. */
export function isFilterName(name: string): boolean {
  if (FILTER_COLUMNS.has(name)) return true;
  return name.startsWith(PROPERTY_PREFIX) && name.length > PROPERTY_PREFIX.length;
}

/** A finite decimal number (no hex, no Infinity, no spaces): numeric filter values. */
function isFilterNumber(v: string): boolean {
  return v.length <= MAX_NUMBER_TEXT && DECIMAL_NUMBER.test(v) && Number.isFinite(Number(v));
}

// PostgreSQL text cannot hold NUL; rejecting it here keeps it a 400 instead of a 500.
export const noNul = (s: string) => !s.includes('\u0000');

/** YYYY-MM-DD that names a real calendar day (no Feb 30), years 0001..9999. */
export const dateSchema = z
  .string()
  // abort: a string that is not YYYY-MM-DD is one issue, not also 'Not a calendar date'.
  .regex(/^\d{4}-\d{2}-\d{2}$/, { message: 'Expected a date as YYYY-MM-DD', abort: true })
  .refine(isCalendarDate, 'Not a calendar date');

function isCalendarDate(s: string): boolean {
  const [y, m, d] = s.split('-').map(Number) as [number, number, number];
  // PostgreSQL's timestamptz and a bucket list must stay finite: 1900..9998 covers any analytics.
  if (y < 1900 || y > 9998) return false;
  const date = new Date(0);
  date.setUTCFullYear(y, m - 1, d);
  return date.getUTCFullYear() === y && date.getUTCMonth() === m - 1 && date.getUTCDate() === d;
}

const rangeSchema = z.enum(RANGES);

export const filterSchema = z
  .object({
    name: z
      .string()
      .refine(isFilterName, {
        message: `Unknown filter name; use one of ${[...FILTER_COLUMNS].join(', ')} or properties.<key>`,
      })
      .refine(noNul, 'Must not contain NUL characters'),
    operator: z.enum(FILTER_OPERATORS),
    // Numbers and booleans are accepted and compared as their text (OpenPanel SDKs send them).
    // Empty (or left out) only for isNull and isNotNull.
    value: z
      .array(
        z
          .union([z.string(), z.number(), z.boolean()])
          .transform((v) => String(v))
          .refine((v) => v.length <= MAX_FILTER_VALUE_LENGTH, `At most ${MAX_FILTER_VALUE_LENGTH} characters`)
          .refine(noNul, 'Must not contain NUL characters'),
      )
      .max(MAX_FILTER_VALUES, `At most ${MAX_FILTER_VALUES} values`)
      .default([]),
  })
  .superRefine((f, ctx) => {
    if (VALUELESS_OPERATORS.has(f.operator)) return;
    if (f.value.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['value'], message: 'At least one value is required' });
      return;
    }
    if (NUMERIC_OPERATORS.has(f.operator)) {
      f.value.forEach((v, i) => {
        if (!isFilterNumber(v)) ctx.addIssue({ code: 'custom', path: ['value', i], message: `${f.operator} compares numbers; "${v.slice(0, 100)}" is not a number` });
      });
    }
  });
export type Filter = z.infer<typeof filterSchema>;

/** A query parameter holding JSON that `schema` checks. */
export function jsonParam<S extends z.ZodType>(schema: S, what: string) {
  return z
    .string()
    .transform((text, ctx): unknown => {
      try {
        return JSON.parse(text);
      } catch {
        ctx.addIssue({ code: 'custom', message: `Expected a JSON-encoded ${what}` });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

/** The `filters` query parameter: a JSON-encoded array of filters. */
export const filtersParamSchema = jsonParam(z.array(filterSchema).max(MAX_FILTERS, `At most ${MAX_FILTERS} filters`), 'array of filters');

/**
 * A positive integer written in decimal digits (query strings carry text); with `what`, the
 * bounds' messages name it.
 */
export function positiveIntSchema(max: number, what?: string) {
  return z
    .string()
    .regex(/^\d+$/, 'Expected a positive integer')
    .transform(Number)
    // Digits only, so an integer: no .int(), whose safe-integer bound would add a second
    // issue next to max's for a huge number.
    .pipe(what ? z.number().min(1, `${what} starts at 1`).max(max, `${what} must be at most ${max}`) : z.number().min(1).max(max));
}
const cursorSchema = positiveIntSchema(Number.MAX_SAFE_INTEGER);
const limitSchema = positiveIntSchema(MAX_LIMIT);

const periodShape = {
  startDate: dateSchema.optional(),
  endDate: dateSchema.optional(),
  range: rangeSchema.default(DEFAULT_RANGE),
  filters: filtersParamSchema.default([]),
};

const isDate = (s: string | undefined): s is string => s !== undefined && dateSchema.safeParse(s).success;

/** startDate and endDate together, start not after end, at most MAX_PERIOD_YEARS apart. */
export function checkDates(
  v: { startDate?: string | undefined; endDate?: string | undefined },
  ctx: z.RefinementCtx,
): void {
  if ((v.startDate === undefined) !== (v.endDate === undefined)) {
    const missing = v.startDate === undefined ? 'startDate' : 'endDate';
    ctx.addIssue({ code: 'custom', path: [missing], message: 'startDate and endDate must be given together' });
  } else if (!isDate(v.startDate) || !isDate(v.endDate)) {
    // A malformed date already has its own issue; comparing it would add a spurious one.
    return;
  } else if (v.startDate! > v.endDate!) {
    ctx.addIssue({ code: 'custom', path: ['endDate'], message: 'endDate must not be before startDate' });
  } else if (Number(v.endDate!.slice(0, 4)) - Number(v.startDate!.slice(0, 4)) > MAX_PERIOD_YEARS) {
    ctx.addIssue({ code: 'custom', path: ['endDate'], message: `a period spans at most ${MAX_PERIOD_YEARS} years` });
  }
}

/** Period and filters: what every insights endpoint takes (metrics takes only these). */
export const periodParamsSchema = z.object(periodShape).superRefine(checkDates);
export type PeriodParams = z.infer<typeof periodParamsSchema>;

/** Period, filters and a page: pages and breakdowns. */
export const pageParamsSchema = z
  .object({
    ...periodShape,
    cursor: cursorSchema.default(1),
    limit: limitSchema.default(DEFAULT_LIMIT),
  })
  .superRefine(checkDates);
export type PageParams = z.infer<typeof pageParamsSchema>;

const PARAM_NAMES = ['startDate', 'endDate', 'range', 'filters', 'cursor', 'limit'] as const;

/** First value of each of `names`; absent ones are left out (defaults apply). */
export function pickParams(query: URLSearchParams, names: readonly string[] = PARAM_NAMES): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = query.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}

function parseWith<S extends z.ZodType>(schema: S, query: URLSearchParams): z.infer<S> {
  const result = schema.safeParse(pickParams(query));
  if (!result.success) throw BadRequestError.fromZod(result.error);
  return result.data;
}

/** Parses the period and filter parameters; throws BadRequestError on any invalid one. */
export function parsePeriodParams(query: URLSearchParams): PeriodParams {
  return parseWith(periodParamsSchema, query);
}

/** Parses period, filters, cursor and limit; throws BadRequestError on any invalid one. */
export function parsePageParams(query: URLSearchParams): PageParams {
  return parseWith(pageParamsSchema, query);
}
