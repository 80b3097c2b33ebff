// OpenPanel's page reports: pages/entry_exit (the sessions' entry or exit pages, by session
// count) and pages/performance (per page: sessions, views, time on page, bounce rate, with
// OpenPanel's SEO flags). The numbers are /pages' (semantics.md, "Insights numbers": a session
// belongs to the period it starts in, bots never count, a page's bounce rate is over the sessions
// that entered on it, its duration the time from a view to the session's next event).
// docs/api.md ("Page reports") and docs/insights-decisions.md say where they differ from OpenPanel.
import { z } from 'zod';
import { SCREEN_VIEW } from '../model/event';
import { DEFAULT_STATEMENT_TIMEOUT_MS, type ReadOptions } from '../query/db';
import { compileAll, splitFilters, SqlParams, type SplitFilters } from '../query/filters';
import { withRead } from '../query/lookups';
import { positiveIntSchema } from '../query/params';
import { resolvePeriod, type Period } from '../query/period';
import type { ConnectionSource, Queryable } from '../query/source';
import { bounceRate, meanSeconds, toNumber } from './numbers';
import { parseReportParams, reportPeriodSchema, textParam } from './report-params';
import { revenueSql } from './raw-rows';
import { pageSumsCtes, type PagesRow } from './service';
import { scopedSessionsSql, type SessionScope } from './sessions';

/** Rows pages/entry_exit answers at most (OpenPanel's MAX_RECORDS_LIMIT). */
export const MAX_ENTRY_EXIT_ROWS = 1000;
/** pages/performance: default and largest `limit` (OpenPanel's). */
export const DEFAULT_PERFORMANCE_LIMIT = 50;
export const MAX_PERFORMANCE_LIMIT = 500;
/** The event OpenPanel takes revenue from (its `__revenue` property), summed per session. */
const REVENUE_EVENT = 'revenue';

export const entryExitParamsSchema = reportPeriodSchema.safeExtend({
  mode: z.enum(['entry', 'exit']).default('entry').describe('entry: the sessions\' first page; exit: their last'),
});
export type EntryExitParams = z.infer<typeof entryExitParamsSchema>;

export const PAGE_SORT_KEYS = ['sessions', 'pageviews', 'bounce_rate', 'avg_duration'] as const;
export const pagePerformanceParamsSchema = reportPeriodSchema.safeExtend({
  search: textParam.optional().describe('Only pages whose path, origin or title contains this text (case-sensitive)'),
  sortBy: z.enum(PAGE_SORT_KEYS).default('sessions'),
  sortOrder: z.enum(['asc', 'desc']).default('desc'),
  limit: positiveIntSchema(MAX_PERFORMANCE_LIMIT, 'limit').default(DEFAULT_PERFORMANCE_LIMIT),
});
export type PagePerformanceParams = z.infer<typeof pagePerformanceParamsSchema>;

export const parseEntryExitParams = (query: URLSearchParams): EntryExitParams =>
  parseReportParams(entryExitParamsSchema, query, ['mode']);
export const parsePagePerformanceParams = (query: URLSearchParams): PagePerformanceParams =>
  parseReportParams(pagePerformanceParamsSchema, query, ['search', 'sortBy', 'sortOrder', 'limit']);

export interface EntryExitRow {
  origin: string;
  path: string;
  sessions: number;
  /** Screen views of those sessions. */
  pageviews: number;
  /** `__revenue` of those sessions' `revenue` events, summed. */
  revenue: number;
}

export interface PagePerformanceRow {
  origin: string;
  path: string;
  title: string;
  sessions: number;
  pageviews: number;
  /** Seconds. */
  avg_duration: number;
  bounce_rate: number;
  seo_signals: { high_bounce: boolean; low_engagement: boolean; good_landing_page: boolean };
}

export interface PagePerformanceResponse {
  total_pages: number;
  shown: number;
  pages: PagePerformanceRow[];
}

interface Frame {
  db: Queryable;
  scope: SessionScope;
  period: Period;
}

/** withRead's frame (budget, 404 for an unknown project, regex check) and the period in the project's timezone. */
function framed<T>(
  pool: ConnectionSource,
  projectId: string,
  params: EntryExitParams | PagePerformanceParams,
  now: Date,
  options: ReadOptions,
  fn: (frame: Frame) => Promise<T>,
): Promise<T> {
  const statementTimeoutMs = options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  return withRead(pool, { statementTimeoutMs }, projectId, params.filters, (db, timezone) => {
    const period = resolvePeriod(params, timezone, now);
    const filters: SplitFilters = splitFilters(params.filters);
    return fn({ db, period, scope: { projectId, start: period.start, end: period.end, filters } });
  });
}

/**
 * The period's sessions grouped by their entry (or exit) page, most sessions first, then path and
 * origin (byte order); at most MAX_ENTRY_EXIT_ROWS rows. Sessions without a page view are the row
 * with path and origin ''. Filters as on breakdowns.
 */
export async function getEntryExitPages(
  pool: ConnectionSource,
  projectId: string,
  params: EntryExitParams,
  now: Date = new Date(),
  options: ReadOptions = {},
): Promise<EntryExitRow[]> {
  return framed(pool, projectId, params, now, options, async ({ db, scope, period }) => {
    const p = new SqlParams();
    const sessionsSql = scopedSessionsSql(scope, p, { applyEventFilters: true });
    // Identifiers from the enum only.
    const [origin, path] = params.mode === 'exit' ? ['exit_origin', 'exit_path'] : ['entry_origin', 'entry_path'];
    const { rows } = await db.query<{ origin: string; path: string; sessions: string; pageviews: string; revenue: string }>(
      `WITH s AS MATERIALIZED (
         SELECT s.id, s.started_at, s.last_event_at, s.screen_view_count, s.${origin} AS origin, s.${path} AS path
         FROM (${sessionsSql}) s
       ),
       rev AS (
         SELECT e.session_id, sum(${revenueSql('e')}) AS revenue
         FROM s JOIN events e ON e.session_id = s.id
         WHERE e.project_id = ${p.add(projectId)}
           AND e.name = ${p.add(REVENUE_EVENT)}
           AND e.created_at >= ${p.add(period.start.toISOString())}::timestamptz
           AND e.created_at <= (SELECT max(s2.last_event_at) FROM s s2)
           AND e.created_at >= s.started_at
           AND NOT e.is_bot
         GROUP BY e.session_id
       )
       SELECT s.origin, s.path, count(*) AS sessions, coalesce(sum(s.screen_view_count), 0) AS pageviews,
              coalesce(sum(rev.revenue), 0) AS revenue
       FROM s LEFT JOIN rev ON rev.session_id = s.id
       GROUP BY s.origin, s.path
       ORDER BY sessions DESC, s.path COLLATE "C", s.origin COLLATE "C"
       LIMIT ${p.add(MAX_ENTRY_EXIT_ROWS)}`,
      p.values,
    );
    return rows.map((r) => ({
      origin: r.origin,
      path: r.path,
      sessions: toNumber(r.sessions),
      pageviews: toNumber(r.pageviews),
      revenue: toNumber(r.revenue),
    }));
  });
}

/** The SQL of each sort key over a page's sums (rounded as the answer shows them). */
const SORT_EXPRESSIONS: Record<(typeof PAGE_SORT_KEYS)[number], string> = {
  sessions: 'm.sessions',
  pageviews: 'm.views',
  bounce_rate: 'CASE WHEN m.entries = 0 THEN 0 ELSE round(m.bounces * 10000.0 / m.entries) / 100 END',
  avg_duration: 'CASE WHEN m.timed_views = 0 THEN 0 ELSE round(m.duration_ms / (m.timed_views * 10.0)) / 100 END',
};

/** Seconds under which a page is `low_engagement`, over which (with a low bounce rate) a good landing page. */
const LOW_ENGAGEMENT_SECONDS = 60;
const GOOD_LANDING_SECONDS = 120;

/**
 * Every page viewed in the period's sessions, as /pages counts it, sorted by `sortBy` (then path
 * and origin, byte order), the first `limit` of them, and how many pages there are.
 */
export async function getPagePerformance(
  pool: ConnectionSource,
  projectId: string,
  params: PagePerformanceParams,
  now: Date = new Date(),
  options: ReadOptions = {},
): Promise<PagePerformanceResponse> {
  return framed(pool, projectId, params, now, options, async ({ db, scope, period }) => {
    const p = new SqlParams();
    const sessionsSql = scopedSessionsSql(scope, p, { applyEventFilters: false });
    const project = p.add(projectId);
    const start = `${p.add(period.start.toISOString())}::timestamptz`;
    const view = `'${SCREEN_VIEW}'`; // inlined so that the partial indexes' predicate matches
    const eventFilters = compileAll(scope.filters.event, 'e', p);
    const titleOf = (alias: string) => pageTitleSql(alias, scope, p, project, start, view);
    // COLLATE "C": the pages' path and origin are grouped bytewise; strpos needs one collation.
    const search = params.search ? `${p.add(params.search)} COLLATE "C"` : null;
    const dir = params.sortOrder === 'asc' ? 'ASC' : 'DESC';
    const order = `${SORT_EXPRESSIONS[params.sortBy]} ${dir}, m.path, m.origin`;
    // With a search, every page's title is needed to choose the pages; without, only the shown ones'.
    const matched = search
      ? `titled AS (SELECT g.*, ${titleOf('g')} AS title FROM pages g),
         matched AS (SELECT t.* FROM titled t
                     WHERE strpos(t.path, ${search}) > 0 OR strpos(t.origin, ${search}) > 0 OR strpos(t.title, ${search}) > 0)`
      : 'matched AS (SELECT g.* FROM pages g)';
    const { rows } = await db.query<PerformanceSqlRow>(
      `WITH ${pageSumsCtes(sessionsSql, project, view, start, eventFilters)},
       ${matched},
       shown AS (
         SELECT m.*, count(*) OVER () AS total_pages
         FROM matched m
         ORDER BY ${order}
         LIMIT ${p.add(params.limit)}
       )
       SELECT m.origin, m.path, m.sessions, m.entries, m.bounces, m.timed_views, m.duration_ms, m.views, m.total_pages,
              ${search ? 'm.title' : titleOf('m')} AS title
       FROM shown m
       ORDER BY ${order}`,
      p.values,
    );
    const pages = rows.map((r): PagePerformanceRow => {
      const bounce_rate = bounceRate(toNumber(r.bounces), toNumber(r.entries));
      const avg_duration = meanSeconds(toNumber(r.duration_ms), toNumber(r.timed_views));
      return {
        origin: r.origin,
        path: r.path,
        title: r.title,
        sessions: toNumber(r.sessions),
        pageviews: toNumber(r.views),
        avg_duration,
        bounce_rate,
        seo_signals: {
          high_bounce: bounce_rate > 70,
          low_engagement: avg_duration < LOW_ENGAGEMENT_SECONDS,
          good_landing_page: bounce_rate < 40 && avg_duration > GOOD_LANDING_SECONDS,
        },
      };
    });
    return { total_pages: rows.length ? toNumber(rows[0]!.total_pages) : 0, shown: pages.length, pages };
  });
}

interface PerformanceSqlRow extends PagesRow {
  total_pages: string;
}

/**
 * The title of page row `alias` as /pages gives it: the latest non-empty title among its
 * counted views (a short backward scan of events_view_titles_idx), else ''.
 */
function pageTitleSql(alias: string, scope: SessionScope, p: SqlParams, project: string, start: string, view: string): string {
  const scopeAgain = scopedSessionsSql(scope, p, { applyEventFilters: false });
  const titleFilters = compileAll(scope.filters.event, 't', p);
  return `coalesce((
      SELECT t.title FROM events t
      WHERE t.project_id = ${project}
        AND t.name = ${view}
        AND t.path = ${alias}.path COLLATE "default" AND t.origin = ${alias}.origin COLLATE "default"
        AND t.title <> ''
        AND t.created_at >= ${start}
        AND t.created_at <= (SELECT max(s3.last_event_at) FROM s s3)
        AND ${titleFilters}
        AND EXISTS (SELECT 1 FROM (${scopeAgain}) s2 WHERE s2.id = t.session_id AND s2.started_at <= t.created_at)
      ORDER BY t.created_at DESC, t.id DESC
      LIMIT 1), '')`;
}
