// Rollup-backed reads for unfiltered metrics and breakdowns (sql/002_rollups.sql).
//
// The hourly rollups hold, per (project, UTC hour) and per dimension value, the sums the
// insights numbers are made of (sessions, bounces, timed sessions, their duration, screen
// views; bots excluded). An hour whose sessions changed after its last refresh is listed in
// rollup_invalidations until the refresh catches up, so a query reads
//   rollup rows of the hours in [start, end) that are NOT in the log
//   UNION ALL raw `sessions` rows (not bots) that started in the hours that ARE in the log,
// in one statement (one snapshot: the worker's commit and the refresh each change the
// sessions/rollups and the log together), and then groups exactly as the raw path does.
// Unique visitors are not additive: they are always counted exactly from `sessions`
// (index-only scan of sessions_visitors_idx).
//
// This holds only when every hour lies entirely inside one series bucket and inside or
// outside the period: planFor() takes the rollups only when the period bounds and every
// bucket start are whole UTC hours (all zones with whole-hour offsets; not Asia/Kolkata),
// and only without filters (the rollups keep no per-event data). Everything else, and any
// caller asking for path 'raw', reads the raw rows.
import { DIMENSION_PREFIX, type SessionDimension } from '../model/event';
import type { SqlParams } from '../query/filters';
import type { Filter } from '../query/params';
import type { Period } from '../query/period';

/** What a caller may ask for: 'auto' lets planFor() choose; 'raw' forces the raw tables. */
export type InsightsPath = 'auto' | 'raw';

/** How one query reads its sessions. */
export type ReadPlan = 'raw' | 'rollup';

const HOUR_MS = 3_600_000;

const wholeUtcHour = (d: Date): boolean => d.getTime() % HOUR_MS === 0;

/**
 * The single decision between the rollups and the raw tables for metrics and breakdowns:
 * rollups when not forced raw, without filters, and when the period's start and end and
 * every bucket start are whole UTC hours.
 */
export function planFor(
  period: Pick<Period, 'start' | 'end' | 'buckets'>,
  filters: readonly Filter[],
  path: InsightsPath = 'auto',
): ReadPlan {
  if (path === 'raw') return 'raw';
  if (filters.length > 0) return 'raw';
  if (!wholeUtcHour(period.start) || !wholeUtcHour(period.end)) return 'raw';
  if (!period.buckets.every(wholeUtcHour)) return 'raw';
  return 'rollup';
}

export interface RollupScope {
  projectId: string;
  /** Whole UTC hours (see planFor). */
  start: Date;
  end: Date;
}

/** The rollup relation of a breakdown dimension (sql/002_rollups.sql, rollup_dimensions). */
export function rollupRelation(dimension: SessionDimension): string {
  return `rollup_${dimension}_hourly`;
}

interface Bound {
  project: string;
  start: string;
  end: string;
}

function bind(scope: RollupScope, params: SqlParams): Bound {
  return {
    project: params.add(scope.projectId),
    start: `${params.add(scope.start.toISOString())}::timestamptz`,
    end: `${params.add(scope.end.toISOString())}::timestamptz`,
  };
}

/**
 * The invalidated hours of the period (a handful: the live hour and any not yet refreshed),
 * each once: the log may hold one row per (project, hour, writer shard).
 */
function invalidatedCte(b: Bound): string {
  return `inv AS MATERIALIZED (
        SELECT DISTINCT i.bucket FROM rollup_invalidations i
        WHERE i.project_id = ${b.project} AND i.bucket >= ${b.start} AND i.bucket < ${b.end}
      )`;
}

/** Raw sessions of the invalidated hours, alias `s` (same rows the rollup refresh would sum). */
function tailSessions(b: Bound): string {
  return `inv JOIN sessions s
          ON s.project_id = ${b.project}
         AND s.started_at >= inv.bucket AND s.started_at < inv.bucket + interval '1 hour'
         AND NOT s.is_bot`;
}

/** Rollup rows (alias `r`) of the period's hours that are not invalidated. */
function rolledUp(relation: string, b: Bound): string {
  return `${relation} r
        WHERE r.project_id = ${b.project} AND r.bucket >= ${b.start} AND r.bucket < ${b.end}
          AND r.bucket NOT IN (SELECT inv.bucket FROM inv)`;
}

const RAW_MEASURES = `count(*),
               count(*) FILTER (WHERE s.is_bounce),
               count(*) FILTER (WHERE s.duration_ms > 0),
               coalesce(sum(s.duration_ms) FILTER (WHERE s.duration_ms > 0), 0)`;

/**
 * Metrics over the rollups: one row per series bucket (1-based width_bucket index) plus the
 * totals row (bucket NULL), with the columns of the raw query (sessions, bounces,
 * timed_sessions, duration_ms, screen_views, visitors).
 */
export function rollupMetricsSql(scope: RollupScope, buckets: readonly Date[], params: SqlParams): string {
  const b = bind(scope, params);
  const starts = `${params.add(buckets.map((x) => x.toISOString()))}::timestamptz[]`;
  return `
      WITH ${invalidatedCte(b)},
      parts AS (
        SELECT r.bucket AS hour, r.sessions, r.bounces, r.timed_sessions, r.duration_ms, r.screen_views
        FROM ${rolledUp('rollup_sessions_hourly', b)}
        UNION ALL
        SELECT inv.bucket, ${RAW_MEASURES}, coalesce(sum(s.screen_view_count), 0)
        FROM ${tailSessions(b)}
        GROUP BY inv.bucket
      ),
      sums AS (
        SELECT width_bucket(parts.hour, ${starts}) AS bucket,
               sum(parts.sessions) AS sessions, sum(parts.bounces) AS bounces,
               sum(parts.timed_sessions) AS timed_sessions, sum(parts.duration_ms) AS duration_ms,
               sum(parts.screen_views) AS screen_views
        FROM parts
        GROUP BY GROUPING SETS ((width_bucket(parts.hour, ${starts})), ())
      ),
      visitors AS (
        -- COLLATE "C": the same distinct values (equality is bytewise either way), sorted
        -- by memcmp instead of the locale's strcoll: half the CPU of this step.
        SELECT width_bucket(v.started_at, ${starts}) AS bucket, count(DISTINCT v.profile_id COLLATE "C") AS visitors
        FROM sessions v
        WHERE v.project_id = ${b.project} AND v.started_at >= ${b.start} AND v.started_at < ${b.end} AND NOT v.is_bot
        GROUP BY GROUPING SETS ((width_bucket(v.started_at, ${starts})), ())
      )
      SELECT coalesce(sums.bucket, visitors.bucket) AS bucket,
             coalesce(sums.sessions, 0) AS sessions, coalesce(sums.bounces, 0) AS bounces,
             coalesce(sums.timed_sessions, 0) AS timed_sessions, coalesce(sums.duration_ms, 0) AS duration_ms,
             coalesce(sums.screen_views, 0) AS screen_views, coalesce(visitors.visitors, 0) AS visitors
      FROM sums FULL JOIN visitors ON coalesce(sums.bucket, -1) = coalesce(visitors.bucket, -1)`;
}

/**
 * A breakdown over the rollups: columns name, [prefix,] sessions, bounces, timed_sessions,
 * duration_ms; sorted and paged as the raw query.
 */
export function rollupBreakdownSql(scope: RollupScope, dimension: SessionDimension, params: SqlParams, limit: number, offset: number): string {
  const b = bind(scope, params);
  // Identifiers: the dimension and its parent come from SESSION_DIMENSIONS / DIMENSION_PREFIX.
  const parent = DIMENSION_PREFIX[dimension];
  const rollupKeys = parent ? 'r.value AS name, r.prefix AS prefix' : 'r.value AS name';
  const rawKeys = parent ? `s.${dimension}, s.${parent}` : `s.${dimension}`;
  const keys = parent ? 'parts.name, parts.prefix' : 'parts.name';
  const order = parent ? 'parts.name COLLATE "C", parts.prefix COLLATE "C"' : 'parts.name COLLATE "C"';
  return `
      WITH ${invalidatedCte(b)},
      parts AS (
        SELECT ${rollupKeys}, r.sessions, r.bounces, r.timed_sessions, r.duration_ms
        FROM ${rolledUp(rollupRelation(dimension), b)}
        UNION ALL
        SELECT ${rawKeys}, ${RAW_MEASURES}
        FROM ${tailSessions(b)}
        GROUP BY ${rawKeys}
      )
      SELECT ${keys},
             sum(parts.sessions) AS sessions, sum(parts.bounces) AS bounces,
             sum(parts.timed_sessions) AS timed_sessions, sum(parts.duration_ms) AS duration_ms
      FROM parts
      GROUP BY ${keys}
      ORDER BY sum(parts.sessions) DESC, ${order}
      LIMIT ${params.add(limit)} OFFSET ${params.add(offset)}`;
}
