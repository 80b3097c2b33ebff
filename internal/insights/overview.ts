// OpenPanel's GET /insights/{projectId}/overview: the /metrics totals (as `summary`) and series,
// with the series' bucket size chosen by `interval`, and the period it covers. Computed by
// getMetrics' own query (./service.ts), so its numbers are /metrics' for the same parameters.
// docs/api.md ("Overview") and docs/insights-decisions.md ("Overview") say where it differs
// from OpenPanel (overview.service.ts there: getAnalyticsOverviewCore).
import { z } from 'zod';
import { checkDates, dateSchema, filtersParamSchema, RANGES } from '../query/params';
import type { Granularity } from '../query/period';
import type { ConnectionSource } from '../query/source';
import { parseParams } from './activity';
import { getMetricsOverPeriod, MAX_SERIES_BUCKETS, type InsightsOptions, type MetricValues } from './service';

export const OVERVIEW_INTERVALS = ['hour', 'day', 'week', 'month'] as const satisfies readonly Granularity[];
/** OpenPanel's overview without dates reads the last 30 days. */
export const OVERVIEW_DEFAULT_RANGE = '30d';

export const overviewParamsSchema = z
  .object({
    startDate: dateSchema.optional(),
    endDate: dateSchema.optional(),
    range: z.enum(RANGES).default(OVERVIEW_DEFAULT_RANGE),
    filters: filtersParamSchema.default([]),
    interval: z
      .enum(OVERVIEW_INTERVALS, { message: `Expected one of ${OVERVIEW_INTERVALS.join(', ')}` })
      .optional()
      .describe(`Series bucket size (weeks start on Monday; at most ${MAX_SERIES_BUCKETS} buckets); default: the one /metrics uses for the period`),
  })
  .superRefine(checkDates);
export type OverviewParams = z.infer<typeof overviewParamsSchema>;

export const parseOverviewParams = (query: URLSearchParams): OverviewParams =>
  parseParams(overviewParamsSchema, query, ['startDate', 'endDate', 'range', 'filters', 'interval']);

export interface OverviewResponse {
  summary: MetricValues;
  series: Array<{ date: string } & MetricValues>;
  interval: Granularity;
  /** First instant of the period, ISO 8601. */
  startDate: string;
  /** End of the period (exclusive), ISO 8601. */
  endDate: string;
}

export async function getOverview(
  pool: ConnectionSource,
  projectId: string,
  params: OverviewParams,
  now: Date = new Date(),
  options: InsightsOptions = {},
): Promise<OverviewResponse> {
  const { interval, ...period } = params;
  const { metrics, series, period: covered } = await getMetricsOverPeriod(pool, projectId, period, now, options, interval);
  return {
    summary: metrics,
    series,
    interval: covered.granularity,
    startDate: covered.start.toISOString(),
    endDate: covered.end.toISOString(),
  };
}
