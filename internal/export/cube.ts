// Filtered export reads over the event cube (sql/015_event_cube.sql).
//
// The per-column event rollups (./rollups.ts) keep one column per row, so a chart or a
// totalCount FILTERED on a column (e.g. events per country where device = mobile) read every
// raw event of the period. The cube keeps event counts per hour and combination of the nine
// low-cardinality columns (CUBE_DIMENSIONS, the session cube's list), with the event name and
// bot flag; and per complete local day, per pair of those columns (sql/015) and per full
// combination (sql/017_event_cube_daily.sql). So when every filter names a cube column (or
// `name`) and the breakdown is one of them, `name` or none:
//   - complete local days (event_cube_days, no hour logged; for charts inside one bucket)
//     read one pair's daily rows when the filters and breakdown name at most two columns,
//     else the day's full-combination rows (event_cube_daily: the same days, ~4 times fewer
//     rows than their hours on the bench data);
//   - the other whole hours not logged read their hourly cube rows (an index probe per hour);
//   - logged hours and the partial hours at either edge read raw events, as everywhere.
// The filters are compiled once per layer against rows whose columns carry the events' own
// names, so they test the cube rows exactly as they test events. (The session cube of insights,
// sql/012 and sql/016, is built the same way.) Charts filtered on ONE column (with a breakdown
// of none, `name` or that column) read that column's own rollups instead (./column.ts: fewer
// rows); the cube serves the rest.
import { cubePair, type CubeDimension, type CubePair } from '../query/planner';
import { compileAll, indexed, type SqlParams } from '../query/filters';
import type { Filter } from '../query/params';
import { chartedWhere, namesWhere, type LayerRows, type RowQuery } from './rollups';

/** How a filtered read uses the cube. */
export interface CubePlan {
  /**
   * The daily pair read, or null when the filters and breakdown name more than two columns
   * (days then read the full-combination rows of event_cube_daily).
   */
  pair: CubePair | null;
  /** The breakdown column of a cube row (alias r), or null without a breakdown. */
  value: string | null;
}

/**
 * How a read the planner gives the event cube (internal/query/planner.ts) takes its rows: the
 * pair is the two columns named by the filters and breakdown (in CUBE_DIMENSIONS order),
 * completed with the first other column when fewer are named; null for three or more.
 */
export function cubePlanOf(filters: readonly Filter[], breakdown: string | undefined): CubePlan {
  const named = new Set<CubeDimension>();
  for (const name of [...filters.map((f) => f.name), ...(breakdown === undefined ? [] : [breakdown])]) {
    if (name !== 'name') named.add(name as CubeDimension);
  }
  // Identifier: a cube column or `name` (the planner's event_cube group keys).
  return { pair: cubePair(named), value: breakdown === undefined ? null : `r.${breakdown}` };
}

/** A chart's charted events, a totalCount's (`every`) every event; of the names asked for. */
function rowConditions(q: RowQuery, p: SqlParams): string[] {
  return [...(q.every ? [] : chartedWhere('x', p)), ...namesWhere('x', q.names, p)];
}

/** The hourly cube rows of hour `hrs.h` that pass the filters (columns: the cube's own). */
function hourSql(q: RowQuery, p: SqlParams): string {
  const c = [`x.project_id = ${q.project}`, 'x.bucket = hrs.h', ...rowConditions(q, p), compileAll(indexed(q.filters), 'x', p)];
  return `SELECT * FROM event_cube_hourly x WHERE ${c.join(' AND ')}`;
}

/**
 * The daily rows of day `days.lo` that pass the filters: a pair's rows, a and b renamed to
 * their columns (so the filters and the breakdown read them by name); without a pair (more
 * than two columns named) the day's full-combination rows, whose columns carry their names.
 */
function daySql(plan: CubePlan, q: RowQuery, p: SqlParams): string {
  if (!plan.pair) {
    const c = [`x.project_id = ${q.project}`, 'x.bucket = days.lo', ...rowConditions(q, p), compileAll(indexed(q.filters), 'x', p)];
    return `SELECT * FROM event_cube_daily x WHERE ${c.join(' AND ')}`;
  }
  const { key, a, b } = plan.pair;
  const c = [`x.project_id = ${q.project}`, `x.pair = ${p.add(key)}`, 'x.bucket = days.lo', ...rowConditions(q, p)];
  // Identifiers: a and b come from CUBE_DIMENSIONS only.
  return `SELECT * FROM (SELECT x.name, x.count, x.a AS ${a}, x.b AS ${b} FROM event_cube_pairs_daily x WHERE ${c.join(' AND ')} OFFSET 0) x
          WHERE ${compileAll(indexed(q.filters), 'x', p)}`;
}

/**
 * The cube's rows per layer (./rollups.ts, layerRows): complete days (event_cube_days: pair
 * rows and full-combination rows complete, sql/015, sql/017) from one pair's rows, or the
 * full-combination rows with more than two columns named; hours from the hourly rows.
 */
export function cubeRows(plan: CubePlan, q: RowQuery, p: SqlParams): LayerRows {
  return { days: { list: 'event_cube_days', rows: daySql(plan, q, p) }, hours: hourSql(q, p), value: plan.value };
}
