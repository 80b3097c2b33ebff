// What the user-activity routes (retention, retention/cohort, active_users, engagement:
// ./retention.ts, ./active-users.ts) share: who is active when, their period parameters, and
// local days and weeks. docs/insights-decisions.md ("Retention, active users, engagement") has
// the decisions and where they differ from OpenPanel.
//
// Activity is EVENTS (semantics.md, "Product analytics"): a profile is active in a local day (or
// week, Monday to Sunday, project timezone) when it has an event in it that is not a bot's and not
// the service's own session_start / session_end; a server-side event with no session counts too.
// A profile is the event's profile_id: the identified profile, or the device's own id for an
// anonymous visitor; "identified" means profile_id <> device_id. Events are read through the two
// partial indexes of sql/033_activity_index.sql ((project_id, created_at) INCLUDE (profile_id),
// one over those events, one over the identified ones), an index-only scan of the days asked;
// ACTIVE_EVENTS below repeats their predicates literally so the planner can use them.
import { z } from 'zod';
import { BadRequestError } from '../http/errors';
import { DEFAULT_STATEMENT_TIMEOUT_MS, type ReadOptions } from '../query/db';
import type { SqlParams } from '../query/filters';
import { withRead } from '../query/lookups';
import { checkDates, dateSchema, pickParams, RANGES, type Range } from '../query/params';
import { addDays, daysBetween, localDateOf, parseLocalDate, resolvePeriod, startOfDay, type LocalDate } from '../query/period';
import type { ConnectionSource, Queryable } from '../query/source';

/** The longest startDate..endDate these routes take (every `range` is shorter). */
export const MAX_WINDOW_DAYS = 400;
const MAX_PERIOD_YEARS = 20;

/** startDate and endDate (each route adds its `range` and default). */
export const datesShape = {
  startDate: dateSchema.optional().describe('First day, YYYY-MM-DD in the project timezone; with endDate, wins over range'),
  endDate: dateSchema.optional().describe(`Last day, inclusive; at most ${MAX_WINDOW_DAYS} days from startDate`),
};
export const rangeSchema = z.enum(RANGES);

/** checkDates (params.ts), and a startDate..endDate of at most MAX_WINDOW_DAYS days. */
export function checkWindow(v: { startDate?: string | undefined; endDate?: string | undefined }, ctx: z.RefinementCtx): void {
  checkDates(v, ctx);
  const { startDate, endDate } = v;
  if (startDate === undefined || endDate === undefined) return;
  if (!dateSchema.safeParse(startDate).success || !dateSchema.safeParse(endDate).success || startDate > endDate) return;
  if (Number(endDate.slice(0, 4)) - Number(startDate.slice(0, 4)) > MAX_PERIOD_YEARS) return; // checkDates said so
  if (daysBetween(parseLocalDate(startDate), parseLocalDate(endDate)) + 1 > MAX_WINDOW_DAYS) {
    ctx.addIssue({ code: 'custom', path: ['endDate'], message: `at most ${MAX_WINDOW_DAYS} days from startDate to endDate` });
  }
}

/** `names` of `query` (the first value of each) through `schema`, or a 400 naming each bad one. */
export function parseParams<S extends z.ZodType>(schema: S, query: URLSearchParams, names: readonly string[]): z.infer<S> {
  const result = schema.safeParse(pickParams(query, names));
  if (!result.success) throw BadRequestError.fromZod(result.error);
  return result.data;
}

export interface WindowParams {
  startDate?: string | undefined;
  endDate?: string | undefined;
  range?: Range | undefined;
}

/** First and last local day of the period the params name (resolvePeriod's, in `timezone`). */
export function windowDays(params: WindowParams, timezone: string, now: Date): { first: LocalDate; last: LocalDate } {
  const period = resolvePeriod({ range: params.range ?? '7d', startDate: params.startDate, endDate: params.endDate }, timezone, now);
  return { first: localDateOf(period.start.getTime(), timezone), last: localDateOf(period.end.getTime() - 1, timezone) };
}

/** The Monday on or before `d`. */
export function mondayOf(d: LocalDate): LocalDate {
  const weekday = new Date(Date.UTC(d.year, d.month - 1, d.day)).getUTCDay(); // 0 = Sunday
  return addDays(d, -((weekday + 6) % 7));
}

/** YYYY-MM-DD. */
export function formatDate(d: LocalDate): string {
  return `${String(d.year).padStart(4, '0')}-${String(d.month).padStart(2, '0')}-${String(d.day).padStart(2, '0')}`;
}

/** Start instants (ISO 8601) of `count` local days from `first`, `step` days apart. */
export function dayStarts(first: LocalDate, count: number, timezone: string, step = 1): string[] {
  return Array.from({ length: count }, (_, i) => new Date(startOfDay(addDays(first, i * step), timezone)).toISOString());
}

/** The events that are activity (sql/033_activity_index.sql's predicates, literally), alias `e`. */
const ACTIVE_EVENTS = `NOT e.is_bot AND e.name NOT IN ('session_start', 'session_end')`;
/** An identified profile's event (the second index's extra predicate). */
const IDENTIFIED = 'e.profile_id <> e.device_id';

/**
 * Conditions on events `e`: the project's activity events (only identified profiles' when
 * `identified`) from `from` (inclusive) to `to` (exclusive), ISO instants.
 */
export function activityWhere(p: SqlParams, projectId: string, from: string, to: string, identified: boolean): string {
  return `e.project_id = ${p.add(projectId)}
      AND e.created_at >= ${p.add(from)}::timestamptz AND e.created_at < ${p.add(to)}::timestamptz
      AND ${ACTIVE_EVENTS}${identified ? ` AND ${IDENTIFIED}` : ''}`;
}

/** The 1-based index of the interval of `bounds` (all but the last: interval starts) holding e.created_at. */
function bucketOf(p: SqlParams, bounds: readonly string[]): string {
  return `width_bucket(e.created_at, ${p.add(bounds.slice(0, -1))}::timestamptz[])`;
}

/**
 * (i, p) of each activity event in [bounds[0], bounds[n-1]): `p` the profile_id, `i` the 1-based
 * index of the bound interval (local day or week) holding the event.
 */
export function activityEventsSql(p: SqlParams, projectId: string, bounds: readonly string[], identified: boolean): string {
  return `SELECT ${bucketOf(p, bounds)} AS i, e.profile_id COLLATE "C" AS p
    FROM events e
    WHERE ${activityWhere(p, projectId, bounds[0]!, bounds[bounds.length - 1]!, identified)}`;
}

/** Bits of a mask word: a bigint's, less the sign. */
export const WORD_BITS = 63;
/** Intervals a mask holds (interval i is bit i - 1): 8 words, more than any read here asks. */
export const MASK_BITS = 8 * WORD_BITS;

/** The words of a mask of `intervals` intervals. */
export const maskWords = (intervals: number): number => Math.ceil(intervals / WORD_BITS);

/**
 * One row per profile active in [bounds[0], bounds[n-1]]: the intervals it was active in as a bit
 * mask in bigint words w0, w1, ... (maskWords(n) of them): interval i is bit (i - 1) % 63 of
 * word (i - 1) / 63. One pass over the events, grouped by profile.
 */
export function profileMasksSql(p: SqlParams, projectId: string, bounds: readonly string[], identified: boolean): string {
  const intervals = bounds.length - 1;
  if (intervals > MASK_BITS) throw new Error(`at most ${MASK_BITS} intervals, got ${intervals}`);
  const words = Array.from({ length: maskWords(intervals) }, (_, j) =>
    `coalesce(bit_or(1::bigint << a.b) FILTER (WHERE a.w = ${j}), 0) AS w${j}`);
  return `SELECT ${words.join(', ')}
    FROM (SELECT (x.i - 1) / ${WORD_BITS} AS w, (x.i - 1) % ${WORD_BITS} AS b, x.p
          FROM (${activityEventsSql(p, projectId, bounds, identified)}) x) a
    GROUP BY a.p`;
}

/**
 * For each set of intervals some profiles were active in (profileMasksSql), how many: rows (w0,
 * w1, ..., users); maskOf joins the words. The masks are grouped (and returned) as text: grouped
 * as bigints, a hash aggregate that spilled to disk crawled (measured: over 20 s for 150k
 * profiles' masks of 59 days, 0.3 s as text; PostgreSQL's int8 hash folds a value's two halves
 * together, so masks with days 32 apart collide), and pg's int8 parser here gives lossy numbers.
 */
export function activityMasksSql(p: SqlParams, projectId: string, bounds: readonly string[], identified: boolean): string {
  const words = Array.from({ length: maskWords(bounds.length - 1) }, (_, j) => j);
  return `SELECT ${words.map((j) => `m.w${j}::text COLLATE "C" AS w${j}`).join(', ')}, count(*) AS users
    FROM (${profileMasksSql(p, projectId, bounds, identified)}) m
    GROUP BY ${words.map((j) => j + 1).join(', ')}`;
}

/**
 * The intervals of an activityMasksSql row of `words` words as a string of '0' / '1', character
 * j for interval j + 1 (read with hasBit: a string test per bit, where BigInt shifts cost more).
 */
export function maskOf(row: Record<string, unknown>, words: number): string {
  let bits = '';
  for (let j = 0; j < words; j++) bits += [...BigInt(String(row[`w${j}`])).toString(2).padStart(WORD_BITS, '0')].reverse().join('');
  return bits;
}

/** Whether a maskOf string has interval j + 1 (false past its end). */
export const hasBit = (bits: string, j: number): boolean => bits.charCodeAt(j) === 49;

/**
 * SQL true when profileMasksSql's row `x` has a bit among bits from..to (0-based, inclusive):
 * the words they fall in, each tested against its part.
 */
export function anyBitSql(from: number, to: number): string {
  const tests: string[] = [];
  for (let j = Math.floor(from / WORD_BITS); j <= Math.floor(to / WORD_BITS); j++) {
    const lo = Math.max(from, j * WORD_BITS) - j * WORD_BITS;
    const hi = Math.min(to, j * WORD_BITS + WORD_BITS - 1) - j * WORD_BITS;
    const bits = ((1n << BigInt(hi - lo + 1)) - 1n) << BigInt(lo);
    tests.push(`x.w${j} & ${bits.toString()}::bigint <> 0`);
  }
  return tests.join(' OR ');
}

/** withRead (transaction, statement timeout, project timezone or 404) without filters. */
export function readActivity<T>(
  pool: ConnectionSource,
  projectId: string,
  options: ReadOptions,
  fn: (db: Queryable, timezone: string) => Promise<T>,
): Promise<T> {
  return withRead<T>(pool, { statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS }, projectId, [], fn);
}
