// Export charts filtered on ONE rolled-up column, from that column's own rollups
// (sql/009_event_rollups.sql: events_<column>_hourly; sql/014_event_counts_daily.sql:
// event_counts_daily rows of dimension <column>).
//
// The event cube (./cube.ts) applies filters on its nine low-cardinality columns only; a
// chart filtered on another column (city, region, path, referrer, utm_campaign, ...) read
// every raw event of the period. But a filter that names one column C only (any operator,
// any number of filters on C, plus filters on `name`) tests nothing but the event's name and
// its value of C, and that is exactly what a row of C's rollups carries: per (hour or
// complete local day, event name, value of C) the number of charted events (no bots, no
// session_start / session_end, as charts count). Event columns are NOT NULL (default ''),
// so the rollup value IS the event's value. With a breakdown of none, `name` or C itself,
// every number of the raw answer is a sum of such rows:
//   - complete local days (event_counts_days, no hour logged, inside one chart bucket) read
//     the day's event_counts_daily rows of dimension C;
//   - the other whole hours not logged read their events_C_hourly rows (an index probe per
//     hour);
//   - logged hours and the partial hours at either edge read raw events, as everywhere
//     (groupedSql of ./rollups.ts, one statement).
// The filters are compiled by internal/query/filters.ts against the rollup rows seen with the
// event's column names (`value AS <C>`, `name`), so they test the rows exactly as they test
// events (same operators, same values, same collation: the value columns are plain text).
//
// Eligible (else cube or raw): segment `event`, not the raw path, at most one breakdown (none,
// `name` or C), and every bucket boundary inside the window on a whole UTC hour (not
// Asia/Kolkata, not minute intervals), with a whole hour inside the window. An unfiltered
// chart broken down by C reads the same rows (no filter to test).
//
// C may be one of the cube's columns too: such a chart also fits the cube, but charts ask this
// source first (internal/query/planner.ts: before the cube in the read catalogue), as its rows are far fewer: per hour one row per (name,
// value of C) instead of one per combination of nine columns, per day one per (name, value)
// instead of one per (name, pair of values). Measured on the 10M bench data, 30 days, median
// of 5: screen_view filtered on country 31 ms on the cube -> 5 ms here; by country filtered on
// country 47 -> 12 ms; hourly by os filtered on os 519 -> 21 ms.
//
// /export/events meta.totalCount of a page filtered the same way (one column C and names; no
// profileId) counts every event, bots and session_start / session_end too, which these rows
// leave out. sql/020_events_uncharted_hourly.sql keeps exactly that remainder per column
// (event_uncharted_hourly / event_uncharted_daily: per hour or complete local day, column,
// name and value, the bots and session rows), so its totalCount rows (columnRows) hold both, under the
// same filters: whole days listed complete in event_counts_days AND event_uncharted_days (no
// hour logged) from both daily tables, the other unlogged hours with events from
// events_C_hourly + event_uncharted_hourly, the logged hours and the edges raw
// (totalCountSql of ./rollups.ts, one statement). As for charts, filters on one cube
// column take this read rather than the cube (the same catalogue order): on the 10M bench
// data (in-process, median of 9) country=DE counts in 15 ms here against 42 ms on the cube,
// os isNot iOS 19 vs 30 ms, screen_view with browser contains Chrome 10 vs 25 ms.
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
