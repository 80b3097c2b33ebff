// Insights read model: metrics with a series, top pages and the 18 session breakdowns, from
// `sessions` and `events` (semantics.md, "Insights numbers"; docs/insights-decisions.md has
// the decisions beyond it), through the read planner's source or the raw path.
import { BadRequestError, NotFoundError } from '../http/errors';
import { DIMENSION_PREFIX, SCREEN_VIEW, SESSION_DIMENSIONS, type SessionDimension } from '../model/event';
import { exactVisitorsMaxOf, type ReadOptions } from '../query/db';
import { compileAll, splitFilters, SqlParams, type SplitFilters } from '../query/filters';
import type { PageParams, PeriodParams } from '../query/params';
import { bucketStarts, resolvePeriod, type Granularity, type Period } from '../query/period';
import { withRead } from '../query/lookups';
import { bounceRate, meanSeconds, roundedRatio, toNumber } from './numbers';
import { dayBuckets, forgetReady, periodDays, visitorDaysReady } from './day-visitors';
import { breakdownSql, insightsRequest, rollupMetricsSql, rollupPagesSql, RAW_MEASURES, type PlanTarget, wholeHoursOf } from './rollups';
import { planRead, type ReadSource } from '../query/planner';
import type { ConnectionSource, Queryable } from '../query/source';
import { scopedSessionsSql, type SessionScope } from './sessions';

const BREAKDOWN_DIMENSIONS = SESSION_DIMENSIONS;
export type BreakdownDimension = SessionDimension;

export function isBreakdownDimension(name: string): name is BreakdownDimension {
  return (BREAKDOWN_DIMENSIONS as readonly string[]).includes(name);
}

/** Path 'raw': metrics and breakdowns from the raw sessions, pages by the original query (referencePagesSql). */
export type InsightsOptions = ReadOptions;

export interface MetricValues {
  bounce_rate: number;
  unique_visitors: number;
  total_sessions: number;
  avg_session_duration: number;
  total_screen_views: number;
  views_per_session: number;
}

export interface MetricsResponse {
  metrics: MetricValues;
  series: Array<{ date: string } & MetricValues>;
}

export interface PageRow {
  title: string;
  origin: string;
  path: string;
  sessions: number;
  bounce_rate: number;
  avg_duration: number;
  /** Views of the page counted by the same rules as `sessions` (semantics.md, "OpenPanel fidelity"). */
  pageviews: number;
}

export interface BreakdownRow {
  name: string;
  /** Only on region, city (country), browser_version (browser), os_version (os). */
  prefix?: string;
  sessions: number;
  bounce_rate: number;
  avg_session_duration: number;
  /** Screen views of the row's sessions (their screen_view_count summed). */
  pageviews: number;
}

interface QueryContext {
  db: Queryable;
  projectId: string;
  period: Period;
  filters: SplitFilters;
  /**
   * Metrics, pages and breakdowns: the rollup source the planner chose (planRead of
   * internal/query/planner.ts, decided once per query), or null for the raw rows.
   */
  source: ReadSource | null;
  /**
   * The visitor sketches of the source exist (hll extension installed): its entry's
   * `tables.visitors` (sql/010) for a dimension's rollup, rollup_visitors_hourly (sql/008) else.
   */
  sketches: boolean;
}

/** Totals and one row per bucket (empty buckets as zeros). */
export async function getMetrics(
  pool: ConnectionSource,
  projectId: string,
  params: PeriodParams,
  now: Date = new Date(),
  options: InsightsOptions = {},
): Promise<MetricsResponse> {
  const { metrics, series } = await getMetricsOverPeriod(pool, projectId, params, now, options);
  return { metrics, series };
}

/**
 * getMetrics' answer and the period it covers; with `granularity` (overview's `interval`,
 * internal/insights/overview.ts) the series has buckets of that size instead of the period's own.
 */
export async function getMetricsOverPeriod(
  pool: ConnectionSource,
  projectId: string,
  params: PeriodParams,
  now: Date = new Date(),
  options: InsightsOptions = {},
  granularity?: Granularity,
): Promise<MetricsResponse & { period: Period }> {
  return runInsightsQuery(pool, projectId, params, now, options, async (ctx) => {
    const exactMax = exactVisitorsMaxOf(options);
    // Unfiltered whole local days: unique visitors from the visit days' returns (exact), unless
    // the project's are not built or hold too much unfolded log (days_ok false): then as before.
    const unfiltered = ctx.source?.family === 'sessions' && !ctx.filters.session.length && !ctx.filters.event.length;
    const run = async (days: ReturnType<typeof dayBuckets>) => {
      const p = new SqlParams();
      const sql = ctx.source
        ? rollupMetricsSql(scopeOf(ctx), ctx.period.buckets, p, { exactMax, sketches: ctx.sketches && !days }, ctx.source, ctx.filters.session, days)
        : rawMetricsSql(ctx, p);
      return (await ctx.db.query<MetricsRow>(sql, p.values)).rows;
    };
    // An hourly series of whole local days (yesterday) takes the visit days for its total and
    // counts its buckets exactly, where they would be counted exactly anyway (no hll, or no
    // exact bound); with sketches over the bound they stay sketches.
    const exactBuckets = !(ctx.sketches && Number.isFinite(exactMax));
    const whole = unfiltered && options.path !== 'raw' ? (dayBuckets(ctx.period) ?? (exactBuckets ? periodDays(ctx.period) : null)) : null;
    const days = whole && (await visitorDaysReady(ctx.db, projectId)) ? whole : null;
    let rows = await run(days);
    if (days && rows.some((r) => r.days_ok === false)) {
      forgetReady(projectId);
      rows = await run(null);
    }
    const empty = metricValues(undefined);
    let totals = empty;
    const byBucket = new Map<number, MetricValues>();
    for (const row of rows) {
      if (row.bucket === null) totals = metricValues(row);
      else byBucket.set(toNumber(row.bucket), metricValues(row));
    }
    return {
      metrics: totals,
      series: ctx.period.buckets.map((b, i) => ({ date: b.toISOString(), ...(byBucket.get(i + 1) ?? empty) })),
      period: ctx.period,
    };
  }, undefined, 'metrics', granularity);
}

/** Metrics from the raw sessions: one row per bucket index and the totals row (bucket NULL). */
function rawMetricsSql(ctx: QueryContext, p: SqlParams): string {
  const sessionsSql = scopedSessionsSql(scopeOf(ctx), p, { applyEventFilters: true });
  const buckets = p.add(ctx.period.buckets.map((b) => b.toISOString()));
  // width_bucket over the bucket starts gives the 1-based bucket index; the () grouping
  // set adds the totals row (bucket NULL), so unique visitors stay exact in both.
  return `
    WITH s AS (${sessionsSql})
    SELECT width_bucket(s.started_at, ${buckets}::timestamptz[]) AS bucket,
           ${RAW_MEASURES},
           count(DISTINCT s.profile_id) AS visitors
    FROM s
    GROUP BY GROUPING SETS ((width_bucket(s.started_at, ${buckets}::timestamptz[])), ())`;
}

/** The five session sums as metrics and breakdowns select them (bigint and numeric: text). */
type SumsRow = Record<'sessions' | 'bounces' | 'timed_sessions' | 'duration_ms' | 'screen_views', string>;

type MetricsRow = SumsRow & { bucket: string | number | null; visitors: string; days_ok?: boolean };

function metricValues(row: MetricsRow | undefined): MetricValues {
  const sessions = toNumber(row?.sessions);
  const screenViews = toNumber(row?.screen_views);
  return {
    bounce_rate: bounceRate(toNumber(row?.bounces), sessions),
    unique_visitors: toNumber(row?.visitors),
    total_sessions: sessions,
    avg_session_duration: meanSeconds(toNumber(row?.duration_ms), toNumber(row?.timed_sessions)),
    total_screen_views: screenViews,
    views_per_session: roundedRatio(screenViews, sessions),
  };
}

/** One row per (origin, path) viewed in the period's sessions, a page of them. */
export async function getPages(
  pool: ConnectionSource,
  projectId: string,
  params: PageParams,
  now: Date = new Date(),
  options: InsightsOptions = {},
): Promise<PageRow[]> {
  return runInsightsQuery(pool, projectId, params, now, options, async (ctx) => {
    const p = new SqlParams();
    const sql = options.path === 'raw'
      ? referencePagesSql(ctx, p)
      : ctx.source
        ? rollupPagesSql(scopeOf(ctx), p, ctx.limit, ctx.offset, SCREEN_VIEW)
        : pagesSql(ctx, p);
    const { rows } = await ctx.db.query<PagesRow>(sql, p.values);
    return rows.map((row) => ({
      title: row.title,
      origin: row.origin,
      path: row.path,
      sessions: toNumber(row.sessions),
      bounce_rate: bounceRate(toNumber(row.bounces), toNumber(row.entries)),
      avg_duration: meanSeconds(toNumber(row.duration_ms), toNumber(row.timed_views)),
      pageviews: toNumber(row.views),
    }));
  }, pageOf(params), 'pages');
}

/**
 * Pages, the same rows as referencePagesSql() for less work: only the session columns
 * needed are materialised; the views come from an index-only scan (events_name_time_idx,
 * sql/039: the range name = 'screen_view' of the period); grouping and sorting compare bytes (COLLATE "C": the same
 * groups, as equality is bytewise either way); and the title (the latest titled counted
 * view) is looked up only for the rows of the requested page, each by a short backward
 * scan of events_view_titles_idx.
 */
function pagesSql(ctx: QueryContext & Page, p: SqlParams): string {
  const scope = scopeOf(ctx);
  const sessionsSql = scopedSessionsSql(scope, p, { applyEventFilters: false });
  const project = p.add(ctx.projectId);
  const start = `${p.add(ctx.period.start.toISOString())}::timestamptz`;
  // SCREEN_VIEW is inlined (a constant of ours) so that the partial indexes' predicate matches.
  const view = `'${SCREEN_VIEW}'`;
  const eventFilters = compileAll(ctx.filters.event, 'e', p);
  // The same scope again, probed by session id for the title lookup (sessions_id_idx).
  const scopeAgain = scopedSessionsSql(scope, p, { applyEventFilters: false });
  const titleFilters = compileAll(ctx.filters.event, 't', p);
  return `
      WITH ${pageSumsCtes(sessionsSql, project, view, start, eventFilters)},
      ranked AS (
        SELECT * FROM pages v
        ORDER BY sessions DESC, v.path, v.origin
        LIMIT ${p.add(ctx.limit)} OFFSET ${p.add(ctx.offset)}
      )
      SELECT r.origin, r.path, r.sessions, r.entries, r.bounces, r.timed_views, r.duration_ms, r.views,
             coalesce((
               SELECT t.title FROM events t
               WHERE t.project_id = ${project}
                 AND t.name = ${view}
                 AND t.path = r.path COLLATE "default" AND t.origin = r.origin COLLATE "default"
                 AND t.title <> ''
                 AND t.created_at >= ${start}
                 AND t.created_at <= (SELECT max(s3.last_event_at) FROM s s3)
                 AND ${titleFilters}
                 AND EXISTS (SELECT 1 FROM (${scopeAgain}) s2 WHERE s2.id = t.session_id AND s2.started_at <= t.created_at)
               ORDER BY t.created_at DESC, t.id DESC
               LIMIT 1), '') AS title
      FROM ranked r
      ORDER BY r.sessions DESC, r.path, r.origin`;
}

/**
 * The screen views (`columns` of events e, and the session's is_bounce and `entered`) of the
 * sessions of CTE `s` that started at or after `start` and meet the event filters.
 */
export function sessionViews(columns: string, project: string, view: string, start: string, eventFilters: string): string {
  return `SELECT ${columns}, s.is_bounce, (s.entry_origin = e.origin AND s.entry_path = e.path) AS entered
        FROM s
        JOIN events e ON e.session_id = s.id
        WHERE e.project_id = ${project}
          AND e.name = ${view}
          AND e.created_at >= ${start}
          -- a session's events lie in [started_at, last_event_at]; bounds the index range scan
          AND e.created_at <= (SELECT max(s2.last_event_at) FROM s s2)
          AND e.created_at >= s.started_at
          AND ${eventFilters}`;
}

/**
 * The CTEs `s` (the scope's sessions), `v` (their screen views, sessionViews) and `pages` (each
 * page's PAGE_MEASURES): what /pages and pages/performance rank and cut.
 */
export function pageSumsCtes(sessionsSql: string, project: string, view: string, start: string, eventFilters: string): string {
  return `s AS MATERIALIZED (
        SELECT s.id, s.started_at, s.last_event_at, s.is_bounce, s.entry_origin, s.entry_path
        FROM (${sessionsSql}) s
      ),
      v AS (
        ${sessionViews('e.session_id, e.origin COLLATE "C" AS origin, e.path COLLATE "C" AS path, e.duration_ms', project, view, start, eventFilters)}
      ),
      pages AS (
        SELECT v.origin, v.path, ${PAGE_MEASURES}
        FROM v
        GROUP BY v.origin, v.path
      )`;
}

/** A page's sums over its views `v` (sessionViews). */
export const PAGE_MEASURES = `count(DISTINCT v.session_id) AS sessions,
               count(DISTINCT v.session_id) FILTER (WHERE v.entered) AS entries,
               count(DISTINCT v.session_id) FILTER (WHERE v.entered AND v.is_bounce) AS bounces,
               count(v.duration_ms) AS timed_views, coalesce(sum(v.duration_ms), 0) AS duration_ms, count(*) AS views`;

/** The original pages query (path 'raw'): the reference pagesSql() must match. */
function referencePagesSql(ctx: QueryContext & Page, p: SqlParams): string {
  const sessionsSql = scopedSessionsSql(scopeOf(ctx), p, { applyEventFilters: false });
  return `
      WITH s AS (${sessionsSql}),
      v AS (
        ${sessionViews('e.id, e.session_id, e.origin, e.path, e.title, e.created_at, e.duration_ms', p.add(ctx.projectId), p.add(SCREEN_VIEW),
          `${p.add(ctx.period.start.toISOString())}::timestamptz`, compileAll(ctx.filters.event, 'e', p))}
      )
      SELECT v.origin, v.path, ${PAGE_MEASURES},
             coalesce((array_agg(v.title ORDER BY v.created_at DESC, v.id DESC) FILTER (WHERE v.title <> ''))[1], '') AS title
      FROM v
      GROUP BY v.origin, v.path
      ORDER BY sessions DESC, v.path COLLATE "C", v.origin COLLATE "C"
      LIMIT ${p.add(ctx.limit)} OFFSET ${p.add(ctx.offset)}`;
}

export interface PagesRow {
  origin: string;
  path: string;
  title: string;
  sessions: string;
  entries: string;
  bounces: string;
  timed_views: string;
  duration_ms: string;
  views: string;
}

/** Sessions grouped by one session dimension (and its parent, as `prefix`), a page of them. */
export async function getBreakdown(
  pool: ConnectionSource,
  projectId: string,
  dimension: BreakdownDimension,
  params: PageParams,
  now: Date = new Date(),
  options: InsightsOptions = {},
): Promise<BreakdownRow[]> {
  if (!isBreakdownDimension(dimension)) throw new NotFoundError(`Unknown breakdown: ${String(dimension)}`);
  const parent = DIMENSION_PREFIX[dimension];
  return runInsightsQuery(pool, projectId, params, now, options, async (ctx) => {
    const p = new SqlParams();
    const source = ctx.source ?? { rawSessions: scopedSessionsSql(scopeOf(ctx), p, { applyEventFilters: true }) };
    const sql = breakdownSql(scopeOf(ctx), dimension, source, p, ctx.limit, ctx.offset, ctx.filters.session);
    const { rows } = await ctx.db.query<BreakdownSqlRow>(sql, p.values);
    return rows.map((row): BreakdownRow => {
      const sessions = toNumber(row.sessions);
      return {
        name: row.name,
        ...(parent ? { prefix: row.prefix ?? '' } : {}),
        sessions,
        bounce_rate: bounceRate(toNumber(row.bounces), sessions),
        avg_session_duration: meanSeconds(toNumber(row.duration_ms), toNumber(row.timed_sessions)),
        pageviews: toNumber(row.screen_views),
      };
    });
  }, pageOf(params), dimension);
}

type BreakdownSqlRow = SumsRow & { name: string; prefix?: string };

// ---------------------------------------------------------------------------------------

interface Page {
  limit: number;
  offset: number;
}

function pageOf(params: PageParams): Page {
  return { limit: params.limit, offset: (params.cursor - 1) * params.limit };
}

function scopeOf(ctx: QueryContext): SessionScope {
  return { projectId: ctx.projectId, start: ctx.period.start, end: ctx.period.end, filters: ctx.filters };
}

/** Most buckets of a series asked at a chosen granularity (as /export/charts). */
export const MAX_SERIES_BUCKETS = 3000;
/** Shortest real length of one bucket (a DST day is 23 h, a month at least 28 days less an hour). */
const MIN_BUCKET_MS: Record<Granularity, number> = { hour: 3_600_000, day: 23 * 3_600_000, week: 167 * 3_600_000, month: 671 * 3_600_000 };

/**
 * The period with series buckets of `granularity` (aligned as semantics.md's `series`), or as
 * it is when none is asked; more than MAX_SERIES_BUCKETS buckets is a 400 naming `interval`.
 */
function withGranularity(period: Period, granularity: Granularity | undefined): Period {
  if (granularity === undefined || granularity === period.granularity) return period;
  const startMs = period.start.getTime();
  const endMs = period.end.getTime();
  // Refused before the buckets are built: an hour interval over 20 years is 175,000 of them.
  const atMost = Math.ceil((endMs - startMs) / MIN_BUCKET_MS[granularity]) + 1;
  const buckets = atMost > MAX_SERIES_BUCKETS + 1 ? null : bucketStarts(startMs, endMs, granularity, period.timezone);
  if (buckets === null || buckets.length > MAX_SERIES_BUCKETS) {
    const message = `interval ${granularity} gives more than ${MAX_SERIES_BUCKETS} buckets for this period; use a coarser interval or a shorter period`;
    throw new BadRequestError(`interval: ${message}`, [{ path: ['interval'], message }]);
  }
  return { ...period, granularity, buckets };
}

// Asked in withRead's JIT round trip: which optional rollups exist: the unique-visitor sketches
// (sql/008), the per-value sketches of filtered metrics (sql/010), the pair metrics (sql/018).
const OPTIONAL_ROLLUPS = `, to_regclass('rollup_visitors_hourly') IS NOT NULL AS sketches,
              to_regclass('rollup_visitor_values_hourly') IS NOT NULL AS value_sketches,
              to_regclass('rollup_session_pair_metrics_daily') IS NOT NULL AS pair_metrics`;

/**
 * Shared frame of every insights query: the read's frame (withRead: transaction, statement
 * timeout, project lookup, regex check), period resolution in the project's timezone, the
 * planner's source, then the endpoint's query.
 */
async function runInsightsQuery<T>(
  pool: ConnectionSource,
  projectId: string,
  params: PeriodParams,
  now: Date,
  options: InsightsOptions,
  query: (ctx: QueryContext & Page) => Promise<T>,
  page: Page = { limit: 0, offset: 0 },
  target: PlanTarget = 'metrics',
  granularity?: Granularity,
): Promise<T> {
  return withRead<T, Record<'sketches' | 'value_sketches' | 'pair_metrics', boolean>>(pool, options, projectId, params.filters, async (db, timezone, setup) => {
    const period = withGranularity(resolvePeriod(params, timezone, now), granularity);
    // One rule picks the source (internal/query/planner.ts); the pair metrics need their
    // tables (the hll extension): without them, the raw sessions.
    const source = planRead(insightsRequest(params.filters, target, {
      path: options.path, wholeHours: wholeHoursOf(period), hll: setup?.pair_metrics === true,
    }));
    const sketches = (source?.tables.visitors ? setup?.value_sketches : setup?.sketches) === true;
    const filters = splitFilters(params.filters);
    return query({ db, projectId, period, filters, source, sketches, ...page });
  }, OPTIONAL_ROLLUPS);
}
