// Rollup-backed reads of the export API (sql/009_event_rollups.sql).
//
// The hourly event rollups hold exact event counts per (project, UTC hour of created_at):
// events_hourly per event name and bot flag (every event), and events_<column>_hourly per
// event name and value of one column (the events charts count: no bots, no session_start /
// session_end). An hour whose events changed after its last refresh is listed in
// rollup_invalidations until the refresh catches up (the worker logs it in the transaction
// that inserts or deletes the events). So a count over [start, end) is a layered read
// (internal/query/layered.ts, one statement): rollup rows of the whole UTC hours not in the
// log, raw events of the logged hours and of the partial hours at either edge. It is exact as long as every rolled-up hour lies inside one answer bucket: charts use the
// rollups only when every bucket boundary inside the period is a whole UTC hour (zones with
// whole-hour offsets; not Asia/Kolkata, not minute intervals). Only unfiltered reads: the
// rollups keep no per-event data. Distinct counts (user, session, ...) are not additive over
// hours and always read raw. Callers can force the raw path ('raw') for reference.
//
// Charts also read the layers' days (sql/014_event_counts_daily.sql): a day listed complete in
// event_counts_days, with no hour in the log, inside one chart bucket reads its
// event_counts_daily rows instead of its ~24 hourly rows (rollupGroupedSql).
import { RESERVED_EVENT_NAMES } from '../model/event';
import type { SqlParams } from '../query/filters';
import type { Filter } from '../query/params';
import { EVENT_ROLLUP_DIMENSIONS, planRead, type ReadRequest, type ReadSource, type ReadTarget } from '../query/planner';
import type { ChartSegment } from './params';
import { edges, layerCtes, perRow, rawParts, rawPerHour, unionAll, unloggedRows, type Layers } from '../query/layered';

/** What a caller may ask for: 'auto' uses the rollups where they are exact; 'raw' never. */
export type ExportPath = 'auto' | 'raw';

export const HOUR_MS = 3_600_000;

/** The columns with an events_<column>_hourly rollup (same list as sql/009_event_rollups.sql). */
export { EVENT_ROLLUP_DIMENSIONS };

/**
 * What a chart series of `segment` asks the planner for (internal/query/planner.ts): event
 * counts are additive over hours, property aggregates over their hourly count, sum, min and
 * max, distinct counts over sketches; one_event_per_user and group read raw (null).
 */
export const SEGMENT_TARGETS: Record<ChartSegment, ReadTarget | null> = {
  event: 'eventCount',
  user: 'distinctCount', session: 'distinctCount', user_average: 'distinctCount',
  one_event_per_user: null, group: null,
  property_sum: 'propertyAggregate', property_average: 'propertyAggregate',
  property_min: 'propertyAggregate', property_max: 'propertyAggregate',
};

const floorHour = (ms: number) => Math.floor(ms / HOUR_MS) * HOUR_MS;
const ceilHour = (ms: number) => Math.ceil(ms / HOUR_MS) * HOUR_MS;

/** The whole UTC hours [from, to) of a range that the rollups answer for (from null: all before `to`). */
export interface HourSpan {
  from: Date | null;
  to: Date;
}

// ---------------------------------------------------------------------------------------
// /export/events meta.totalCount

export interface CountScope {
  projectId: string;
  /** Event names (empty = every name). */
  events: readonly string[];
  /** First instant counted (inclusive), `YYYY-MM-DDTHH:MM:SS.ffffffZ`; undefined = all time. */
  startIso: string | undefined;
  /** The walk's anchor: created_at of the newest counted event, same format. */
  anchorIso: string;
}

/**
 * The hours a totalCount can take from the rollups: from the first whole hour at or after
 * `start` to the start of the anchor's hour (that hour is partial: counted raw). Null unless
 * the planner reads the count from events_hourly: no profileId, no filters, a whole hour.
 */
export function countSpan(scope: CountScope, opts: { profileId: string | undefined; filters: readonly Filter[]; path?: ExportPath }): HourSpan | null {
  const span = countHours(scope);
  const source = planRead({
    side: 'events', target: 'totalCount', filters: opts.filters.map((f) => f.name),
    profileId: opts.profileId !== undefined, path: opts.path ?? 'auto', wholeHours: span !== null,
  });
  return source?.family === 'events' ? span : null;
}

/** The whole hours from the first at or after the start to the anchor's hour, or null when none. */
export function countHours(scope: Pick<CountScope, 'startIso' | 'anchorIso'>): HourSpan | null {
  const to = floorHour(Date.parse(scope.anchorIso));
  let from = -Infinity;
  if (scope.startIso !== undefined) {
    // Date.parse keeps milliseconds only: a start a few microseconds past an hour is not on it.
    const onHour = scope.startIso.slice(14) === '00:00.000000Z';
    from = onHour ? Date.parse(scope.startIso) : floorHour(Date.parse(scope.startIso)) + HOUR_MS;
  }
  if (!(to > from)) return null;
  return { from: Number.isFinite(from) ? new Date(from) : null, to: new Date(to) };
}

/**
 * One statement giving `n` (text), the number of events matching `rawWhere` (alias `e`,
 * which must hold the project, start/end and event-name conditions) at or before the
 * anchor (`atOrBefore`, alias `e`): a layered read (internal/query/layered.ts) of `span`
 * without days: events_hourly rows of its unlogged hours, raw events of its logged hours,
 * of the head before it and of the tail from its end.
 */
export function totalCountSql(
  scope: CountScope,
  span: HourSpan,
  p: SqlParams,
  rawWhere: (p: SqlParams) => string,
  atOrBefore: (p: SqlParams) => string,
): string {
  const layers = countLayers(p.add(scope.projectId), span, p);
  const names = scope.events.length ? p.add([...scope.events]) : null;
  const named = (alias: string) => (names ? [`${alias}.name = ANY(${names}::text[])`] : []);
  return countSql(layers, span, p, rawWhere, atOrBefore, [
    `(SELECT coalesce(sum(r.count), 0) FROM ${unloggedRows(layers, 'events_hourly', named('r'))})`,
    `(SELECT count(*) FROM ${rawPerHour('inv', '1', 'events e', [`e.project_id = ${layers.project}`, ...named('e')].join(' AND '), 'e.created_at', 'x')})`,
  ]);
}

/** The layers of a totalCount over `span` (from null: all before `to`). */
function countLayers(project: string, span: HourSpan, p: SqlParams, days?: string): Layers {
  const from = span.from ? `${p.add(span.from.toISOString())}::timestamptz` : `'-infinity'::timestamptz`;
  const to = `${p.add(span.to.toISOString())}::timestamptz`;
  if (days === undefined) return { project, from, to };
  // the span's other hours with events, from events_hourly (a few rows per hour, however long
  // and sparse the span: a totalCount without start may reach back years)
  return { project, from, to, days: { table: days }, hours: { listed: 'events_hourly' } };
}

/** `n` (text): the sum of the layers' `parts` and the raw edges (the tail up to the anchor). */
function countSql(
  layers: Layers,
  span: HourSpan,
  p: SqlParams,
  rawWhere: (p: SqlParams) => string,
  atOrBefore: (p: SqlParams) => string,
  parts: string[],
): string {
  parts.push(`(SELECT count(*) FROM events e WHERE ${rawWhere(p)} AND ${edges(layers, 'e.created_at', false, true)[0]} AND ${atOrBefore(p)})`);
  if (span.from) parts.push(`(SELECT count(*) FROM events e WHERE ${rawWhere(p)} AND ${edges(layers, 'e.created_at', true, false)[0]})`);
  return `WITH ${layerCtes(layers)}
    SELECT (${parts.join('\n      + ')})::text AS n`;
}

/**
 * Where a filtered totalCount (./cube.ts, ./column.ts) takes its whole hours: `daysRelation`
 * (alias m: project_id, bucket, hours) lists the complete local days; `daySql` gives the rows
 * of one such day `days.lo` and `hourSql` those of one hour `hrs.h` that pass the filters,
 * both with a `count` column.
 */
export interface CountLayers {
  daysRelation: string;
  daySql: string;
  hourSql: string;
}

/**
 * One statement giving `n` (text): the events matching `rawWhere` (alias `e`: project,
 * start/end, names and the filters) at or before the anchor, read in layers
 * (internal/query/layered.ts): the complete days of `span` none of whose hours is logged from
 * `daySql`, the span's other unlogged hours with events from `hourSql`, and raw events for the
 * logged hours and the partial hours at either edge. `project` is the project's placeholder
 * (already added to `p`).
 */
export function layeredTotalCountSql(
  src: CountLayers,
  project: string,
  span: HourSpan,
  p: SqlParams,
  rawWhere: (p: SqlParams) => string,
  atOrBefore: (p: SqlParams) => string,
): string {
  const layers = countLayers(project, span, p, src.daysRelation);
  return countSql(layers, span, p, rawWhere, atOrBefore, [
    `(SELECT coalesce(sum(r.count), 0) FROM ${perRow('days', src.daySql, 'r')})`,
    `(SELECT coalesce(sum(r.count), 0) FROM ${perRow('hrs', src.hourSql, 'r')})`,
    `(SELECT count(*) FROM ${rawPerHour('inv', '1', 'events e', rawWhere(p), 'e.created_at', 'x')})`,
  ]);
}

// ---------------------------------------------------------------------------------------
// /export/charts

export interface ChartWindow {
  start: Date;
  end: Date;
  /** Bucket starts, ascending; the first is <= start. */
  buckets: readonly Date[];
}

/** Where a rolled-up chart series reads its whole hours. */
export interface ChartRollup {
  /** Whole hours inside the window (both ends set). */
  span: { from: Date; to: Date };
  /** events_hourly or events_<column>_hourly. */
  relation: string;
  /** The breakdown value of a rollup row (alias `r`); null without a breakdown. */
  value: string | null;
  /** events_hourly rows: keep only what charts count (no bots, no session_start/session_end). */
  chartedOnly: boolean;
  /** The event_counts_daily dimension (sql/014): '' without a breakdown or on `name`, else the column. */
  dimension: string;
}

/**
 * The whole UTC hours of `window` the rollups may answer for, or null: every bucket boundary
 * inside the window on a whole UTC hour (each hour in one bucket), and at least one whole hour
 * inside the window (the planner's grain for charts).
 */
export function chartSpan(window: ChartWindow): { from: Date; to: Date } | null {
  const startMs = window.start.getTime();
  if (!window.buckets.every((b) => b.getTime() <= startMs || b.getTime() % HOUR_MS === 0)) return null;
  const from = ceilHour(startMs);
  const to = floorHour(window.end.getTime());
  return to > from ? { from: new Date(from), to: new Date(to) } : null;
}

/** The planner's request for a chart series (internal/query/planner.ts). */
export function chartRequest(
  window: ChartWindow,
  target: ReadTarget,
  filters: readonly Filter[],
  breakdowns: readonly { name: string }[],
  path: ExportPath,
  propertyKey?: string,
): ReadRequest {
  return {
    side: 'events', target, filters: filters.map((f) => f.name), breakdowns: breakdowns.map((b) => b.name),
    path, wholeHours: chartSpan(window) !== null, ...(propertyKey === undefined ? {} : { propertyKey }),
  };
}

/**
 * The event-count read of an unfiltered series from `source` (events_hourly, or one column's
 * hourly rows for a breakdown on it), or null when the source is another.
 */
export function chartRollupOf(source: ReadSource | null, span: { from: Date; to: Date }, breakdown: string | undefined): ChartRollup | null {
  if (source?.family === 'events') {
    return { span, relation: 'events_hourly', value: breakdown === 'name' ? 'r.name' : null, chartedOnly: true, dimension: '' };
  }
  if (source?.family === 'event_column' && breakdown === source.column) {
    return { span, relation: `events_${source.column}_hourly`, value: 'r.value', chartedOnly: false, dimension: source.column! };
  }
  return null;
}

/**
 * Whether a chart series over `window` reads the event-count rollups without filters, and
 * which: the planner's choice for its event counts when that is events_hourly (no breakdown
 * or one on `name`) or a column's rollups broken down by that column, with no filters.
 */
export function chartRollup(
  window: ChartWindow,
  segment: ChartSegment,
  filters: readonly Filter[],
  breakdowns: readonly { name: string }[],
  path: ExportPath = 'auto',
): ChartRollup | null {
  const span = chartSpan(window);
  if (segment !== 'event' || filters.length > 0 || !span) return null;
  return chartRollupOf(planRead(chartRequest(window, 'eventCount', filters, breakdowns, path)), span, breakdowns[0]?.name);
}

/**
 * Where one layered chart read takes its rows (alias `r` in `value`): `daySql` gives the rows
 * of one complete local day `days.lo` listed in `daysTable`, `hourSql` those of one hour
 * `hrs.h`; both with a `count` column and the breakdown column that `value` names. Each is
 * read in a LATERAL subquery kept by OFFSET 0 (index probes, whatever the row estimates).
 */
export interface LayerSources {
  daysTable: string;
  daySql: string;
  hourSql: string;
  value: string | null;
}

/**
 * The `grouped` part of a chart series over the rollups, same columns and grouping sets as
 * the raw one: bucket (1-based width_bucket index; NULL on the total rows), b0 when there
 * is a breakdown, n (events) and value (text).
 *
 * `rawWhere`: the conditions of the raw query (alias `s`: project, window, not bots, not
 * session_start/session_end, the item's name); `rawValue`: the raw breakdown expression.
 */
export function rollupGroupedSql(
  plan: ChartRollup,
  opts: { projectId: string; name: string; window: ChartWindow; rawWhere: string; rawValue: string | null },
  p: SqlParams,
): string {
  const project = p.add(opts.projectId);
  // Hourly rows of one hour `hrs.h` (alias x).
  const hourWhere = [`x.project_id = ${project}`, 'x.bucket = hrs.h'];
  if (plan.chartedOnly) hourWhere.push('NOT x.is_bot', `x.name <> ALL(${p.add([...RESERVED_EVENT_NAMES])}::text[])`);
  // Daily rows of one day `days.lo` (alias x): only charted events by construction.
  const dayWhere = [`x.project_id = ${project}`, `x.dimension = ${p.add(plan.dimension)}`, 'x.bucket = days.lo'];
  if (opts.name !== '*') {
    const name = p.add(opts.name);
    hourWhere.push(`x.name = ${name}`);
    dayWhere.push(`x.name = ${name}`);
  }
  return layeredGroupedSql({
    daysTable: 'event_counts_days',
    daySql: `SELECT * FROM event_counts_daily x WHERE ${dayWhere.join(' AND ')}`,
    hourSql: `SELECT * FROM ${plan.relation} x WHERE ${hourWhere.join(' AND ')}`,
    value: plan.value,
  }, { ...opts, project, span: plan.span }, p);
}

/**
 * A chart series read in layers (internal/query/layered.ts; sources: the event rollups,
 * ./rollups.ts, one column's rollups, ./column.ts, or the event cube, ./cube.ts): complete
 * local days inside one chart bucket, none of their hours logged, from `daySql`; the span's
 * other hours that are not logged from `hourSql` (one index probe per hour, only between the
 * first and last hour with events: long periods with little data probe few hours); logged
 * hours and the partial hours at either edge from raw events.
 */
export function layeredGroupedSql(
  src: LayerSources,
  opts: { project: string; span: { from: Date; to: Date }; window: ChartWindow; rawWhere: string; rawValue: string | null },
  p: SqlParams,
): string {
  const { project, span } = opts;
  const from = `${p.add(span.from.toISOString())}::timestamptz`;
  const to = `${p.add(span.to.toISOString())}::timestamptz`;
  const starts = `${p.add(opts.window.buckets.map((d) => d.toISOString()))}::timestamptz[]`;
  const first = (order: string) => `date_trunc('hour', (SELECT e.created_at FROM events e WHERE e.project_id = ${project} AND e.created_at >= ${from} AND e.created_at < ${to}
                                   ORDER BY e.created_at${order} LIMIT 1), 'UTC')`;
  const layers: Layers = {
    project, from, to,
    days: { table: src.daysTable, starts },
    hours: { held: { lo: first(''), hi: first(' DESC') } },
  };
  const b = src.value !== null;
  const parts = [
    `SELECT days.bucket${b ? `, ${src.value} AS b0` : ''}, r.count AS n
        FROM ${perRow('days', src.daySql, 'r')}`,
    `SELECT width_bucket(hrs.h, ${starts})${b ? `, ${src.value}` : ''}, r.count
        FROM ${perRow('hrs', src.hourSql, 'r')}`,
    ...rawParts(layers, {
      columns: `s.created_at${b ? `, ${opts.rawValue} AS b0` : ''}`, table: 'events s', where: opts.rawWhere, time: 's.created_at',
      head: span.from.getTime() > opts.window.start.getTime(), tail: span.to.getTime() < opts.window.end.getTime(),
    }, (rows) => `SELECT width_bucket(x.created_at, ${starts})${b ? ', x.b0' : ''}, count(*) FROM ${rows}
        GROUP BY ${b ? '1, 2' : '1'}`),
  ];
  const sets = b ? '(parts.bucket, parts.b0), (parts.b0)' : '(parts.bucket), ()';
  return `WITH ${layerCtes(layers)},
      parts AS (
        ${unionAll(parts)}
      )
      SELECT parts.bucket${b ? ', parts.b0' : ''}, sum(parts.n) AS n, sum(parts.n)::text AS value
      FROM parts GROUP BY GROUPING SETS (${sets})`;
}
