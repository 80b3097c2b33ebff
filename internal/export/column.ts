// Event counts FILTERED on one rolled-up column C (and `name`), broken down by none, `name` or
// C, from C's own rollups: event_counts_daily rows of dimension C for complete local days
// (sql/014), events_C_hourly for the other hours (sql/009), raw events for the logged and edge
// hours (groupedSql / totalCountSql of ./rollups.ts). A filter on C tests nothing but the
// event's name and its value of C, which is what such a row carries (columns are NOT NULL, ''
// a value), and the filters are compiled against the rows under the events' column names, so
// the answers are the raw ones. Charts ask this source before the cube: far fewer rows
// (docs/export.md, "Filtered counts: one column's rollups", has the measurements).
//
// A totalCount (`every`) counts bots and session_start / session_end too, which these rows
// leave out: it adds event_uncharted_hourly / _daily (sql/020), on the days complete in both
// event_counts_days and event_uncharted_days.
import { compileAll, indexed, type SqlParams } from '../query/filters';
import type { ReadSource, RollupColumn } from '../query/planner';
import { namesWhere, type LayerRows, type RowQuery } from './rollups';

/** How a filtered chart series reads one column's rollups. */
export interface ColumnPlan {
  /** The one rolled-up column the filters (and the breakdown) name. */
  column: RollupColumn;
  /** The breakdown value of a row (alias r): `r.<column>`, `r.name`, or null without a breakdown. */
  value: string | null;
}

/** How a read the planner gives one column's rollups (internal/query/planner.ts) groups its rows. */
export function columnPlanOf(source: ReadSource | null, breakdown: string | undefined): ColumnPlan | null {
  if (source?.family !== 'event_column') return null;
  const column = source.column!;
  // Identifier: one of EVENT_ROLLUP_DIMENSIONS.
  return { column, value: breakdown === undefined ? null : breakdown === 'name' ? 'r.name' : `r.${column}` };
}

/**
 * The rows (name, count, <column>) of one day `days.lo` (event_counts_daily, and with
 * `every` event_uncharted_daily) or one hour `hrs.h` (events_<column>_hourly, and with
 * `every` event_uncharted_hourly) that pass the filters: the value column renamed to the
 * event column's name, the filters compiled against that (alias x).
 */
function rowsSql(source: 'day' | 'hour', column: RollupColumn, q: RowQuery, p: SqlParams): string {
  const names = namesWhere('x', q.names, p);
  const select = (relation: string, conditions: string[]) =>
    // Identifiers: column comes from EVENT_ROLLUP_DIMENSIONS only.
    `SELECT x.name, x.count, x.value AS ${column} FROM ${relation} x WHERE ${[`x.project_id = ${q.project}`, ...conditions, ...names].join(' AND ')}`;
  const charted = source === 'day'
    ? select('event_counts_daily', [`x.dimension = ${p.add(column)}`, 'x.bucket = days.lo'])
    : select(`events_${column}_hourly`, ['x.bucket = hrs.h']);
  const rows = !q.every ? charted
    : `${charted} UNION ALL ${select(source === 'day' ? 'event_uncharted_daily' : 'event_uncharted_hourly',
        [`x.bucket = ${source === 'day' ? 'days.lo' : 'hrs.h'}`, `x.dimension = ${p.add(column)}`])}`;
  const filters = compileAll(indexed(q.filters), 'x', p);
  return `SELECT * FROM (${rows} OFFSET 0) x
          WHERE ${filters}`;
}

/**
 * The days whose charted rows (event_counts_days, sql/014) and uncharted rows
 * (event_uncharted_days, sql/020) are both complete, over the same hours.
 */
const COUNT_DAYS = `(SELECT c.project_id, c.bucket, c.hours FROM event_counts_days c
        JOIN event_uncharted_days u ON u.project_id = c.project_id AND u.bucket = c.bucket AND u.hours = c.hours)`;

/**
 * The column's rows per layer (./rollups.ts, layerRows): a chart's from the day's
 * event_counts_daily rows of dimension C (days listed in event_counts_days) and the hour's
 * events_C_hourly rows; a totalCount's (`every`) plus the event_uncharted_daily and
 * event_uncharted_hourly rows, on the days complete in both lists.
 */
export function columnRows(plan: ColumnPlan, q: RowQuery, p: SqlParams): LayerRows {
  return {
    days: { list: q.every ? COUNT_DAYS : 'event_counts_days', rows: rowsSql('day', plan.column, q, p) },
    hours: rowsSql('hour', plan.column, q, p),
    value: plan.value,
  };
}
