// Event counts filtered on the event cube's columns (sql/015_event_cube.sql, sql/017): hourly
// rows per event name, bot flag and combination of the nine CUBE_DIMENSIONS; per complete
// local day, rows per pair of columns and per full combination. A read whose filters and
// breakdown name at most two columns takes one pair's daily rows, else the full-combination
// ones; the other unlogged hours their hourly rows; logged and edge hours raw (./rollups.ts).
// The filters are compiled against rows whose columns carry the events' own names, so they
// test them exactly as events. Reads filtered on ONE column take that column's rollups
// instead (./column.ts). docs/export.md, "Filtered counts: the event cube".
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
