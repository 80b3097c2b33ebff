// Property segments of /export/charts (property_sum, property_average, property_min,
// property_max) from the hourly property rollups (sql/013), when the planner gives a series
// event_properties: counts, numeric sums, mins and maxes add up over hours without loss, so the
// answers are the raw ones (docs/export.md, "Property segments from rollups"). A layered read
// without days; the hours logged or listed in event_properties_raw_hours for the key read raw.
import type { SqlParams } from '../query/filters';
import type { ReadSource, RollupRelation } from '../query/planner';
import type { ChartSegment } from './params';
import { rawParts, unloggedRows, type Layers } from '../query/layered';
import { chartBounds, seriesOfParts, type ChartWindow } from './rollups';

/** The value of a group of parts (columns n, s, mn, mx), as the raw path's aggregate. */
const COMBINE: Partial<Record<ChartSegment, string>> = {
  property_sum: 'sum(parts.s)',
  // avg(numeric) = numeric_div(sum, count::numeric): sum(bigint) is numeric (scale 0).
  property_average: 'sum(parts.s) / sum(parts.n)',
  property_min: 'min(parts.mn)',
  property_max: 'max(parts.mx)',
};

interface PropertyRollupOptions {
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
export function propertyRollupGroupedSql(
  source: ReadSource,
  span: { from: Date; to: Date },
  propertyKey: string,
  breakdown: string | undefined,
  opts: PropertyRollupOptions,
  p: SqlParams,
): string {
  const combine = COMBINE[opts.segment];
  if (!combine) throw new Error(`not a property segment: ${opts.segment}`);
  const project = p.add(opts.projectId);
  const key = `${p.add(propertyKey)}::text`;
  const { from, to, starts, head, tail } = chartBounds(span, opts.window, p);
  const b = breakdown !== undefined;
  // Rows of dimension '' (every name, each name) or of the breakdown's column (its value).
  const dimension = b && breakdown !== 'name' ? breakdown : '';
  const value = breakdown === 'name' ? 'r.name' : 'r.value';
  // The layers (internal/query/layered.ts), no days: the hours logged or listed in
  // event_properties_raw_hours for the key (a numeric text too long to roll up safely) read raw.
  const layers: Layers = {
    project, from, to,
    alsoRaw: `SELECT h.bucket FROM event_properties_raw_hours h
        WHERE h.project_id = ${project} AND h.key = ${key} AND h.bucket >= ${from} AND h.bucket < ${to}`,
  };
  const rollupWhere = [`r.key = ${key}`, `r.dimension = ${p.add(dimension)}::text`];
  if (opts.name !== '*') rollupWhere.push(`r.name = ${p.add(opts.name)}::text`);
  const rawPart = (rows: string) => `SELECT width_bucket(x.created_at, ${starts})${b ? ', x.b0' : ''}, count(*), sum(x.v), min(x.v), max(x.v)
        FROM ${rows}
        GROUP BY ${b ? '1, 2' : '1'}`;
  return seriesOfParts(layers, b, combine, [
    `SELECT width_bucket(r.bucket, ${starts}) AS bucket${b ? `, ${value} AS b0` : ''}, r.count AS n, r.sum AS s, r.min AS mn, r.max AS mx
        FROM ${unloggedRows(layers, (source.tables.hourly as RollupRelation).table, rollupWhere)}`,
    ...rawParts(layers, {
      columns: `s.created_at${b ? `, ${opts.rawValue} AS b0` : ''}, ${opts.rawNumber} AS v`, table: 'events s', where: opts.rawWhere, time: 's.created_at', head, tail,
    }, rawPart),
  ]);
}
