// OpenAPI entries of the overview, active_users, retention, retention/cohort and engagement
// insights routes (internal/insights/overview.ts, active-users.ts, retention.ts), added to the
// document by openapi.ts.
import { z } from 'zod';
import { activeUsersParamsSchema, engagementParamsSchema, MAX_ACTIVE_DAYS } from '../insights/active-users';
import { overviewParamsSchema, OVERVIEW_INTERVALS } from '../insights/overview';
import { AVERAGE_ROW, COHORT_COLUMNS, retentionParamsSchema } from '../insights/retention';

/** openapi.ts' builder of one insights path (GET and its preflight). */
type InsightsPath = (summary: string, params: z.ZodType, response: z.ZodType) => unknown;

const day = z.string().describe('YYYY-MM-DD, project timezone');

export function activityPaths(insights: InsightsPath, metrics: z.ZodObject): Record<string, unknown> {
  const Overview = z.object({
    summary: metrics.describe("the /metrics totals for the same parameters"),
    series: z.array(metrics.extend({ date: z.string().describe('bucket start, ISO 8601') })),
    interval: z.enum(OVERVIEW_INTERVALS).describe('the bucket size of series'),
    startDate: z.string().describe('first instant of the period, ISO 8601'),
    endDate: z.string().describe('end of the period (exclusive), ISO 8601'),
  });
  const ActiveUsers = z.object({
    window_days: z.number(),
    label: z.string().describe("'DAU' (1), 'WAU' (7), 'MAU' (30), else '<days>d active'"),
    series: z.array(z.object({ date: day, users: z.number().describe('distinct profiles (anonymous visitors by device id) with an event in the window_days days ending on date; 0 if none') })),
  });
  const Retention = z.array(z.object({
    date: day.describe("the week's Monday, YYYY-MM-DD, project timezone"),
    active_users: z.number().describe('identified profiles with an event that week'),
    retained_users: z.number().describe('of active_users, those with an event the next week too'),
    retention: z.number().describe('retained_users / active_users, percent, 2 decimals'),
  }));
  const Cohort = z.array(z.object({
    cohort_interval: z.string().describe(`the cohort's Monday (YYYY-MM-DD), or '${AVERAGE_ROW}' (the first row)`),
    sum: z.number().describe('identified profiles in the cohort (average row: the mean cohort size)'),
    values: z.array(z.number()).describe(`${COHORT_COLUMNS} columns, k = 0..${COHORT_COLUMNS - 1}: profiles of the cohort with an event k or more weeks after its week`),
    percentages: z.array(z.number()).describe('values / sum as a fraction (0..1, OpenPanel\'s scale), 2 decimals'),
  }));
  const Engagement = z.object({
    summary: z.object({
      total_identified_users: z.number(), active_last_7_days: z.number(), active_8_to_14_days: z.number(),
      active_15_to_30_days: z.number(), inactive_31_to_60_days: z.number(), churned_60_plus_days: z.number(),
    }),
    distribution: z.array(z.object({ days: z.number().describe('days from the last event\'s day to the period\'s last day'), users: z.number() })),
  });
  return {
    '/insights/{projectId}/overview': insights("The /metrics totals and series at a chosen interval (OpenPanel's overview)", overviewParamsSchema, Overview),
    '/insights/{projectId}/active_users': insights(
      `Rolling active users (OpenPanel's): per day, profiles with an event in the last days (1..${MAX_ACTIVE_DAYS}) days`, activeUsersParamsSchema, ActiveUsers,
    ),
    '/insights/{projectId}/retention': insights(
      "Weekly retention (OpenPanel's): per week with activity, identified profiles active and those active the next week too", retentionParamsSchema, Retention,
    ),
    '/insights/{projectId}/retention/cohort': insights(
      "Weekly cohorts (OpenPanel's): identified profiles by first active week, and how many were active k or more weeks later; weighted average first",
      retentionParamsSchema, Cohort,
    ),
    '/insights/{projectId}/engagement': insights("Identified profiles by days since their last event (OpenPanel's engagement)", engagementParamsSchema, Engagement),
  };
}
