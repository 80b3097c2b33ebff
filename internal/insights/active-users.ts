// OpenPanel's GET /insights/{projectId}/active_users (rolling active users: for each day, the
// distinct profiles, anonymous visitors by device id, with an event in the `days` days ending
// that day: DAU, WAU, MAU) and engagement (the identified profiles by days since their last
// event). Who is active when: ./activity.ts (events; bots and session_start / session_end never
// count). semantics.md ("Product analytics": Active users) gives the numbers; docs/api.md and
// docs/insights-decisions.md ("Retention, active users, engagement") say where they differ
// from OpenPanel (retention.service.ts there: getRollingActiveUsersCore, getEngagementCore).
import { z } from 'zod';
import type { ReadOptions } from '../query/db';
import { SqlParams } from '../query/filters';
import { positiveIntSchema } from '../query/params';
import { addDays, daysBetween } from '../query/period';
import type { ConnectionSource, Queryable } from '../query/source';
import {
  activityWhere, anyBitSql, checkWindow, datesShape, dayStarts, formatDate, parseParams, profileMasksSql, rangeSchema, readActivity, windowDays,
} from './activity';
import { toNumber } from './numbers';

/** Longest rolling window (OpenPanel's). */
export const MAX_ACTIVE_DAYS = 90;
export const DEFAULT_ACTIVE_DAYS = 7;

export const activeUsersParamsSchema = z
  .object({
    days: positiveIntSchema(MAX_ACTIVE_DAYS, 'days')
      .default(DEFAULT_ACTIVE_DAYS)
      .describe(`Rolling window in days, 1..${MAX_ACTIVE_DAYS} (default ${DEFAULT_ACTIVE_DAYS}): 1 DAU, 7 WAU, 30 MAU`),
    ...datesShape,
    range: rangeSchema.default('30d').describe('The days listed (each counts the `days` days ending on it)'),
  })
  .superRefine(checkWindow);
export type ActiveUsersParams = z.infer<typeof activeUsersParamsSchema>;

export const parseActiveUsersParams = (query: URLSearchParams): ActiveUsersParams =>
  parseParams(activeUsersParamsSchema, query, ['days', 'startDate', 'endDate', 'range']);

export const engagementParamsSchema = z
  .object({
    ...datesShape,
    range: rangeSchema.default('90d').describe('The period read; days since the last event count back from its last day'),
  })
  .superRefine(checkWindow);
export type EngagementParams = z.infer<typeof engagementParamsSchema>;

export const parseEngagementParams = (query: URLSearchParams): EngagementParams =>
  parseParams(engagementParamsSchema, query, ['startDate', 'endDate', 'range']);

export interface ActiveUsersResponse {
  window_days: number;
  /** DAU (1), WAU (7), MAU (30), else `${days}d active`. */
  label: string;
  /** One row per day of the period, oldest first: `date` YYYY-MM-DD, project timezone; `users` 0 on a day with none. */
  series: Array<{ date: string; users: number }>;
}

export interface EngagementResponse {
  summary: {
    total_identified_users: number;
    active_last_7_days: number;
    active_8_to_14_days: number;
    active_15_to_30_days: number;
    inactive_31_to_60_days: number;
    churned_60_plus_days: number;
  };
  /** Identified profiles by days from their last event's day to the period's last day (0: on it), ascending; only days with some. */
  distribution: Array<{ days: number; users: number }>;
}

export function activeUsersLabel(days: number): string {
  return days === 1 ? 'DAU' : days === 7 ? 'WAU' : days === 30 ? 'MAU' : `${days}d active`;
}

/**
 * For each day of the period, the distinct profiles with an event on it or the days - 1 days
 * before. Read: the period's days and the days - 1 before the first.
 */
export async function getActiveUsers(
  pool: ConnectionSource,
  projectId: string,
  params: ActiveUsersParams,
  now: Date = new Date(),
  options: ReadOptions = {},
): Promise<ActiveUsersResponse> {
  const window = params.days;
  return readActivity(pool, projectId, options, async (db, timezone) => {
    const { first, last } = windowDays(params, timezone, now);
    const listed = daysBetween(first, last) + 1;
    const read = listed + window - 1; // days read: index 1..read, listed ones window..read
    const bounds = dayStarts(addDays(first, -(window - 1)), read + 1, timezone);
    const counts = await rollingCounts(db, projectId, bounds, window);
    const series = counts.map((users, j) => ({ date: formatDate(addDays(first, j)), users }));
    return { window_days: window, label: activeUsersLabel(window), series };
  });
}

/**
 * For each listed day (days window..n of `bounds`, n days), the profiles with an event on it or
 * the window - 1 days before: each profile's active days as a bit mask (profileMasksSql, one pass
 * over the events grouped by profile), then per listed day the profiles whose mask has a day in
 * that window (one pass over the profiles).
 */
async function rollingCounts(db: Queryable, projectId: string, bounds: readonly string[], window: number): Promise<number[]> {
  const p = new SqlParams();
  const read = bounds.length - 1;
  const columns: string[] = [];
  for (let d = window; d <= read; d++) columns.push(`count(*) FILTER (WHERE ${anyBitSql(d - window, d - 1)}) AS c${d}`);
  const { rows } = await db.query<Record<string, string>>(`SELECT ${columns.join(', ')} FROM (${profileMasksSql(p, projectId, bounds, false)}) x`, p.values);
  return columns.map((_, j) => toNumber(rows[0]?.[`c${window + j}`]));
}

/**
 * The identified profiles (profile id not the device's) with an event in the period, by days
 * from their last event's local day to the period's last day, with OpenPanel's summary buckets.
 * Read: one max(created_at) per profile, through events_identified_activity_idx.
 */
export async function getEngagement(
  pool: ConnectionSource,
  projectId: string,
  params: EngagementParams,
  now: Date = new Date(),
  options: ReadOptions = {},
): Promise<EngagementResponse> {
  return readActivity(pool, projectId, options, async (db, timezone) => {
    const { first, last } = windowDays(params, timezone, now);
    const count = daysBetween(first, last) + 1;
    const p = new SqlParams();
    const bounds = dayStarts(first, count + 1, timezone);
    const { rows } = await db.query<{ days: number; users: string }>(
      `SELECT ${p.add(count)}::int - width_bucket(l.t, ${p.add(bounds.slice(0, -1))}::timestamptz[]) AS days, count(*) AS users
       FROM (SELECT max(e.created_at) AS t FROM events e WHERE ${activityWhere(p, projectId, bounds[0]!, bounds[count]!, true)} GROUP BY e.profile_id) l
       GROUP BY 1
       ORDER BY 1`,
      p.values,
    );
    const distribution = rows.map((r) => ({ days: toNumber(r.days), users: toNumber(r.users) }));
    const within = (lo: number, hi: number) => distribution.reduce((acc, r) => acc + (r.days >= lo && r.days <= hi ? r.users : 0), 0);
    return {
      summary: {
        total_identified_users: within(0, Infinity),
        active_last_7_days: within(0, 7),
        active_8_to_14_days: within(8, 14),
        active_15_to_30_days: within(15, 30),
        inactive_31_to_60_days: within(31, 60),
        churned_60_plus_days: within(61, Infinity),
      },
      distribution,
    };
  });
}
