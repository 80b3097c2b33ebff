// Property segments of /export/charts (property_sum, property_average, property_min,
// property_max) from the hourly property rollups (sql/013_event_property_rollups.sql).
//
// event_properties_hourly holds, per (project, UTC hour, event name, top-level property key,
// dimension '' or one column of events_rollup_dimensions, value), the events charts count
// whose `properties ->> key` is numeric text (NUMERIC_TEXT of ./charts.ts): their count,
// and the sum, min and max of the values as numeric. Everything the raw path computes is
// additive over hours without loss:
//   n (the count that ranks breakdown values)  sum of the counts;
//   property_sum                               sum of the sums (numeric: exact, same scale);
//   property_average                           sum / count in numeric: PostgreSQL's
//                                              avg(numeric) IS numeric_div(sum, count), and
//                                              the sum of hourly sums has the same digits
//                                              and display scale as the sum of the values;
//   property_min / property_max                min of the mins / max of the maxes.
// So the answers are the raw ones: the same numbers, series, order and tie-breaks.
//
// Eligible: the planner's event_properties entry (internal/query/planner.ts). A layered read
// without days (internal/query/layered.ts): the hours logged or listed in
// event_properties_raw_hours for the key (a numeric text too long to roll up safely) read raw.
import type { SqlParams } from '../query/filters';
import type { ChartSegment } from './params';
import { rawParts, unloggedRows, type Layers } from '../query/layered';
import { chartBounds, seriesOfParts, type ChartWindow } from './rollups';

export interface PropertyRollupPlan {
  /** Whole UTC hours inside the window (both ends set). */
  span: { from: Date; to: Date };
  /** The top-level property key. */
  key: string;
  /** event_properties_hourly.dimension: '' without breakdown or for a breakdown on `name`. */
  dimension: string;
  /** The breakdown value of a rollup row (alias `r`); null without a breakdown. */
  value: string | null;
}

/** The property-rollup read of a series the planner gives event_properties_hourly. */
export function propertyRollupOf(span: { from: Date; to: Date }, key: string, breakdown: string | undefined): PropertyRollupPlan {
  if (breakdown === undefined) return { span, key, dimension: '', value: null };
  if (breakdown === 'name') return { span, key, dimension: '', value: 'r.name' };
  return { span, key, dimension: breakdown, value: 'r.value' };
}

/** The value of a group of parts (columns n, s, mn, mx), as the raw path's aggregate. */
const COMBINE: Partial<Record<ChartSegment, string>> = {
  property_sum: 'sum(parts.s)',
  // avg(numeric) = numeric_div(sum, count::numeric): sum(bigint) is numeric (scale 0).
  property_average: 'sum(parts.s) / sum(parts.n)',
  property_min: 'min(parts.mn)',
  property_max: 'max(parts.mx)',
};

export interface PropertyRollupOptions {
  projectId: string;
  /** Event name or '*'. */
  name: string;
  segment: ChartSegment;
  window: ChartWindow;
  /**
   * Conditions of the raw query (alias `s`): project, window, not bots, not
   * session_start/session_end, the name, and the numeric test of the property.
   */
  rawWhere: string;
  /** Raw breakdown expression (alias `s`); null without breakdown. */
  rawValue: string | null;
  /** The raw numeric value (alias `s`; numeric by rawWhere). */
  rawNumber: string;
}

/**
 * The `grouped` part of a property series over the rollups, with the columns and grouping
 * sets of the raw one: bucket (1-based width_bucket index; NULL on the total rows), b0 when
 * there is a breakdown, n (events with a numeric value) and value (text).
 */
export function propertyRollupGroupedSql(plan: PropertyRollupPlan, opts: PropertyRollupOptions, p: SqlParams): string {
  const combine = COMBINE[opts.segment];
  if (!combine) throw new Error(`not a property segment: ${opts.segment}`);
  const project = p.add(opts.projectId);
  const key = `${p.add(plan.key)}::text`;
  const { from, to, starts, head, tail } = chartBounds(plan.span, opts.window, p);
  const b = plan.value !== null;
  // The layers (internal/query/layered.ts), no days: the hours logged or listed in
  // event_properties_raw_hours for the key (a numeric text too long to roll up safely) read raw.
  const layers: Layers = {
    project, from, to,
    alsoRaw: `SELECT h.bucket FROM event_properties_raw_hours h
        WHERE h.project_id = ${project} AND h.key = ${key} AND h.bucket >= ${from} AND h.bucket < ${to}`,
  };
  const rollupWhere = [`r.key = ${key}`, `r.dimension = ${p.add(plan.dimension)}::text`];
  if (opts.name !== '*') rollupWhere.push(`r.name = ${p.add(opts.name)}::text`);
  const rawPart = (rows: string) => `SELECT width_bucket(x.created_at, ${starts})${b ? ', x.b0' : ''}, count(*), sum(x.v), min(x.v), max(x.v)
        FROM ${rows}
        GROUP BY ${b ? '1, 2' : '1'}`;
  return seriesOfParts(layers, b, combine, [
    `SELECT width_bucket(r.bucket, ${starts}) AS bucket${b ? `, ${plan.value} AS b0` : ''}, r.count AS n, r.sum AS s, r.min AS mn, r.max AS mx
        FROM ${unloggedRows(layers, 'event_properties_hourly', rollupWhere)}`,
    ...rawParts(layers, {
      columns: `s.created_at${b ? `, ${opts.rawValue} AS b0` : ''}, ${opts.rawNumber} AS v`, table: 'events s', where: opts.rawWhere, time: 's.created_at', head, tail,
    }, rawPart),
  ]);
}
