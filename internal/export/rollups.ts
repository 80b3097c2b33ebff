// Layered event-count reads of the export (internal/query/layered.ts, one statement each): a
// chart series (groupedSql) and /export/events meta.totalCount (totalCountSql), over the rows
// the planner's source keeps (layerRows, from its catalogue entry's tables). Exact as long as
// every rolled-up hour lies inside one answer bucket (chartSpan, countHours).
import { RESERVED_EVENT_NAMES } from '../model/event';
import { compileAll, indexed, type SqlParams } from '../query/filters';
import type { Filter } from '../query/params';
import { pairRelation, type ReadPath, type ReadRequest, type ReadSource, type ReadTarget, type RollupRelation } from '../query/planner';
import type { ChartSegment } from './params';
import { edges, layerCtes, matching, perRow, probe, rawParts, rawPerHour, renames, unionAll, unloggedRows, type Layers } from '../query/layered';

const HOUR_MS = 3_600_000;

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
interface HourSpan {
  from: Date | null;
  to: Date;
}

// ---------------------------------------------------------------------------------------
// /export/events meta.totalCount

/**
 * The whole hours of a totalCount: from the first at or after `startIso` (inclusive,
 * `YYYY-MM-DDTHH:MM:SS.ffffffZ`; undefined = all time) to the hour of `anchorIso` (the walk's
 * anchor: created_at of the newest counted event, same format), or null when none.
 */
export function countHours(scope: { startIso: string | undefined; anchorIso: string }): HourSpan | null {
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

// ---------------------------------------------------------------------------------------
// /export/charts

export interface ChartWindow {
  start: Date;
  end: Date;
  /** Bucket starts, ascending; the first is <= start. */
  buckets: readonly Date[];
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
  path: ReadPath,
  propertyKey?: string,
): ReadRequest {
  return {
    side: 'events', target, filters: filters.map((f) => f.name), breakdowns: breakdowns.map((b) => b.name),
    path, wholeHours: chartSpan(window) !== null, ...(propertyKey === undefined ? {} : { propertyKey }),
  };
}

// ---------------------------------------------------------------------------------------
// The layered reads: one builder per shape, the family gives its rows

/**
 * Which rows a layered read takes (chart series: charted events of `names`; totalCount with
 * `every`: every event, bots and session_start / session_end too), under `filters` and grouped
 * by `breakdown`. `project` is the project's placeholder (already added).
 */
interface RowQuery {
  project: string;
  /** Event names to keep (empty: all). */
  names: readonly string[];
  filters: readonly Filter[];
  breakdown: string | undefined;
  every: boolean;
}

/**
 * A family's rows per layer, each with a `count` column: `days.rows` those of one complete
 * local day `days.lo` listed in `days.list` (a relation of project_id, bucket, hours), `hours`
 * those of one hour `hrs.h`, or, `flat` and without days, those of every unlogged hour (the
 * relation, alias r, and conditions of unloggedRows). `value` is a row's breakdown value
 * (alias r; null without a breakdown).
 */
interface LayerRows {
  days?: { list: string; rows: string };
  hours: string | { flat: string; where: string[] };
  value: string | null;
}

/** Rows (alias `alias`) of the event names `names` (none: every name). */
export function namesWhere(alias: string, names: readonly string[], p: SqlParams): string[] {
  if (names.length === 0) return [];
  return [names.length === 1 ? `${alias}.name = ${p.add(names[0])}` : `${alias}.name = ANY(${p.add([...names])}::text[])`];
}

/** The events charts count (alias `alias`): no bots, no session_start / session_end. */
export function chartedWhere(alias: string, p: SqlParams): string[] {
  return [`NOT ${alias}.is_bot`, `${alias}.name <> ALL(${p.add([...RESERVED_EVENT_NAMES])}::text[])`];
}

/**
 * The rows of `q` per layer of the planner's source, from its entry's tables (docs/rollups.md, "A
 * new source" and "One layered read"), key columns seen under the events' column names so that the
 * filters test them as they test events (NOT NULL, '' a value); a totalCount adds the entry's
 * `uncharted` rows (on the days complete in both lists), or, without them, reads the hours flat.
 */
export function layerRows(source: ReadSource, q: RowQuery, p: SqlParams): LayerRows {
  const { days, daily, hourly, uncharted } = source.tables;
  if (!days || !daily || hourly === 'raw') throw new Error(`not an event-count source: ${source.id}`);
  // Identifier: a group key of the entry, a column of its rows.
  const value = q.breakdown === undefined ? null : `r.${q.breakdown}`;
  const every = q.every && !daily.every ? uncharted : undefined;
  if (q.every && !daily.every && !uncharted) {
    // Read flat: the relation's rows as stored, so only a source without renamed keys or filters.
    if (hourly.as || q.filters.length) throw new Error(`no totalCount over ${source.id}`);
    return { hours: { flat: hourly.table, where: namesWhere('r', q.names, p) }, value };
  }
  const day = pairRelation(source, [...q.filters.map((f) => f.name), ...(q.breakdown === undefined ? [] : [q.breakdown])]) ?? daily;
  const rows = (relations: RollupRelation[], layer: 'days' | 'hrs'): string => {
    const where = (rel: RollupRelation) => [...(rel.every && !q.every ? chartedWhere('x', p) : []), ...namesWhere('x', q.names, p)];
    // Arguments in order (match, where, filters): the placeholders' numbering.
    if (!relations[0]!.as) {
      const rel = relations[0]!;
      return probe(layer, rel.table, 'x', q.project, matching(rel, 'x', p), [...where(rel), ...(q.filters.length ? [compileAll(indexed(q.filters), 'x', p)] : [])]);
    }
    // Identifiers: the catalogue's column names.
    const renamed = relations.map((rel) => probe(layer, rel.table, 'x', q.project, matching(rel, 'x', p), where(rel), `x.name, x.count, ${renames(rel)}`));
    return `SELECT * FROM (${renamed.join(' UNION ALL ')} OFFSET 0) x
          WHERE ${compileAll(indexed(q.filters), 'x', p)}`;
  };
  return {
    days: {
      list: every ? `(SELECT c.project_id, c.bucket, c.hours FROM ${days} c
        JOIN ${every.days} u ON u.project_id = c.project_id AND u.bucket = c.bucket AND u.hours = c.hours)` : days,
      rows: rows([day, ...(every ? [every.daily] : [])], 'days'),
    },
    hours: rows([hourly, ...(every ? [every.hourly] : [])], 'hrs'),
    value,
  };
}

/**
 * The `grouped` part of a chart series read in layers, same columns and grouping sets as the raw
 * one: bucket (1-based width_bucket index; NULL on the total rows), b0 with a breakdown, n
 * (events) and value (text). The hourly layer probes only the hours between the first and the
 * last with events (long periods with little data probe few). `rawWhere` / `rawValue`: the raw
 * query's conditions and breakdown expression (alias `s`).
 */
export function groupedSql(
  rows: LayerRows,
  opts: { project: string; span: { from: Date; to: Date }; window: ChartWindow; rawWhere: string; rawValue: string | null },
  p: SqlParams,
): string {
  const { project, span } = opts;
  if (!rows.days || typeof rows.hours !== 'string') throw new Error('a chart series reads days and hours');
  const { from, to, starts, head, tail } = chartBounds(span, opts.window, p);
  const first = (order: string) => `date_trunc('hour', (SELECT e.created_at FROM events e WHERE e.project_id = ${project} AND e.created_at >= ${from} AND e.created_at < ${to}
                                   ORDER BY e.created_at${order} LIMIT 1), 'UTC')`;
  const layers: Layers = {
    project, from, to,
    days: { table: rows.days.list, starts },
    hours: { held: { lo: first(''), hi: first(' DESC') } },
  };
  const b = rows.value !== null;
  return seriesOfParts(layers, b, 'sum(parts.n)', [
    `SELECT days.bucket${b ? `, ${rows.value} AS b0` : ''}, r.count AS n
        FROM ${perRow('days', rows.days.rows, 'r')}`,
    `SELECT width_bucket(hrs.h, ${starts})${b ? `, ${rows.value}` : ''}, r.count
        FROM ${perRow('hrs', rows.hours, 'r')}`,
    ...rawParts(layers, {
      columns: `s.created_at${b ? `, ${opts.rawValue} AS b0` : ''}`, table: 'events s', where: opts.rawWhere, time: 's.created_at', head, tail,
    }, (raw) => `SELECT width_bucket(x.created_at, ${starts})${b ? ', x.b0' : ''}, count(*) FROM ${raw}
        GROUP BY ${b ? '1, 2' : '1'}`),
  ]);
}

/**
 * A chart series' bounds as placeholders: its span's whole hours [from, to), the window's
 * bucket starts, and whether partial hours of the window lie before (head) or after (tail) the span.
 */
export function chartBounds(span: { from: Date; to: Date }, window: ChartWindow, p: SqlParams) {
  return {
    from: `${p.add(span.from.toISOString())}::timestamptz`,
    to: `${p.add(span.to.toISOString())}::timestamptz`,
    starts: `${p.add(window.buckets.map((d) => d.toISOString()))}::timestamptz[]`,
    head: span.from.getTime() > window.start.getTime(),
    tail: span.to.getTime() < window.end.getTime(),
  };
}

/**
 * A chart series' grouped rows from its layered `parts` (columns bucket, b0 with a breakdown,
 * n, and what `value` aggregates): bucket (1-based width_bucket index; NULL on the total rows),
 * b0, n (events) and value (text), the grouping sets of the raw query.
 */
export function seriesOfParts(layers: Layers, b: boolean, value: string, parts: readonly string[]): string {
  const sets = b ? '(parts.bucket, parts.b0), (parts.b0)' : '(parts.bucket), ()';
  return `WITH ${layerCtes(layers)},
      parts AS (
        ${unionAll(parts)}
      )
      SELECT parts.bucket${b ? ', parts.b0' : ''}, sum(parts.n) AS n, (${value})::text AS value
      FROM parts GROUP BY GROUPING SETS (${sets})`;
}

/**
 * One statement giving `n` (text): the events matching `rawWhere` (alias `e`) at or before the
 * anchor (`atOrBefore`), in layers over `span` (from null: all before `to`); the hourly layer
 * probes only the hours with events in events_hourly (a totalCount without start may reach back
 * years), or reads flat; raw events for the logged hours, the head and the tail.
 */
export function totalCountSql(
  rows: LayerRows,
  project: string,
  span: HourSpan,
  p: SqlParams,
  rawWhere: (p: SqlParams) => string,
  atOrBefore: (p: SqlParams) => string,
): string {
  const from = span.from ? `${p.add(span.from.toISOString())}::timestamptz` : `'-infinity'::timestamptz`;
  const to = `${p.add(span.to.toISOString())}::timestamptz`;
  const layers: Layers = rows.days
    ? { project, from, to, days: { table: rows.days.list }, hours: { listed: 'events_hourly' } }
    : { project, from, to };
  const sum = (relation: string) => `(SELECT coalesce(sum(r.count), 0) FROM ${relation})`;
  const parts = [
    ...(rows.days ? [sum(perRow('days', rows.days.rows, 'r'))] : []),
    sum(typeof rows.hours === 'string' ? perRow('hrs', rows.hours, 'r') : unloggedRows(layers, rows.hours.flat, rows.hours.where)),
    `(SELECT count(*) FROM ${rawPerHour('inv', '1', 'events e', rawWhere(p), 'e.created_at', 'x', layers)})`,
    `(SELECT count(*) FROM events e WHERE ${rawWhere(p)} AND ${edges(layers, 'e.created_at', false, true)[0]} AND ${atOrBefore(p)})`,
    ...(span.from ? [`(SELECT count(*) FROM events e WHERE ${rawWhere(p)} AND ${edges(layers, 'e.created_at', true, false)[0]})`] : []),
  ];
  return `WITH ${layerCtes(layers)}
    SELECT (${parts.join('\n      + ')})::text AS n`;
}
