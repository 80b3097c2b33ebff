// The one layered read of the rollups (insights and export): which hours of a span come from
// which rows (days, hrs, inv, and the raw edges of a chart window), in one statement, each day or
// hour read by a LATERAL subquery kept by OFFSET 0. docs/rollups.md, "One layered read", states
// the layers, why each is read so, and who reads them.
import type { SqlParams } from './filters';
import type { RollupRelation } from './planner';

/** The span of a layered read: placeholders (or SQL timestamptz expressions) of its bounds. */
export interface Layers {
  /** The project's placeholder. */
  project: string;
  /** The first whole hour the rollups answer for ('-infinity' for a count without a start). */
  from: string;
  /** The end of the last whole hour the rollups answer for. */
  to: string;
  /** More hours to read raw, as a query of (bucket) (e.g. a property key's raw hours). */
  alsoRaw?: string;
  /**
   * The daily layer: the `*_days` table (or a query of project_id, bucket, hours) listing the
   * built days; with `starts` (the series' bucket starts, a timestamptz[]), only the days inside
   * one bucket, and `days.bucket` is that bucket's 1-based index.
   */
  days?: { table: string; starts?: string };
  /**
   * The hourly layer `hrs` (h): the hours of the span outside the days and not logged, taken from
   * `series` (every hour of [from, to)), `held` (every hour of [lo, hi]: e.g. between the first
   * and the last hour with rows, so that long sparse spans probe few hours) or `listed` (the
   * hours with rows in that hourly table: however long and sparse the span). With `logged`, the logged hours stay in `hrs` (when the
   * hourly layer reads raw rows itself).
   */
  hours?: ({ series: true } | { held: { lo: string; hi: string } } | { listed: string }) & { logged?: boolean };
}

const HOUR = `interval '1 hour'`;

/** The CTEs of a layered read: inv, then days, covered, held and hrs as `layers` asks. */
export function layerCtes(layers: Layers): string {
  const { project, from, to, days, hours } = layers;
  const ctes = [layers.alsoRaw === undefined
    ? `inv AS MATERIALIZED (
        SELECT DISTINCT i.bucket FROM rollup_invalidations i
        WHERE i.project_id = ${project} AND i.bucket >= ${from} AND i.bucket < ${to}
      )`
    : `inv AS MATERIALIZED (
        SELECT i.bucket FROM rollup_invalidations i
        WHERE i.project_id = ${project} AND i.bucket >= ${from} AND i.bucket < ${to}
        UNION
        ${layers.alsoRaw}
      )`];
  if (days) {
    const hi = `m.bucket + m.hours * ${HOUR}`;
    const s = days.starts;
    ctes.push(`-- complete local days inside the span${s ? ' and inside one series bucket' : ''}, none of their hours logged
      days AS MATERIALIZED (
        SELECT ${s ? `width_bucket(m.bucket, ${s}) AS bucket, ` : ''}m.bucket AS lo, ${hi} AS hi
        FROM ${days.table} m
        WHERE m.project_id = ${project} AND m.bucket >= ${from} AND ${hi} <= ${to}${s ? `
          AND width_bucket(m.bucket, ${s}) = width_bucket(${hi} - interval '1 microsecond', ${s})` : ''}
          AND NOT EXISTS (SELECT 1 FROM inv WHERE inv.bucket >= m.bucket AND inv.bucket < ${hi})
      )`);
  }
  if (hours) {
    const covered = [
      ...(days ? [`SELECT generate_series(days.lo, days.hi - ${HOUR}, ${HOUR}) AS h FROM days`] : []),
      ...(hours.logged ? [] : ['SELECT inv.bucket FROM inv']),
    ];
    const hrs = 'listed' in hours
      ? `SELECT DISTINCT r.bucket AS h FROM ${hours.listed} r
        WHERE r.project_id = ${project} AND r.bucket >= ${from} AND r.bucket < ${to}
          AND NOT EXISTS (SELECT 1 FROM covered c WHERE c.h = r.bucket)`
      : `SELECT g.h FROM ${'series' in hours ? `generate_series(${from}, ${to} - ${HOUR}, ${HOUR})`
        : `held CROSS JOIN LATERAL generate_series(held.lo, held.hi, ${HOUR})`} AS g(h)
        WHERE NOT EXISTS (SELECT 1 FROM covered c WHERE c.h = g.h)`;
    ctes.push(`-- the span's other hours${hours.logged ? '' : ' that are not logged'}
      covered AS MATERIALIZED (
        ${covered.length ? covered.join('\n        UNION ALL\n        ') : 'SELECT NULL::timestamptz AS h WHERE false'}
      )`);
    if ('held' in hours) {
      ctes.push(`held AS MATERIALIZED (
        SELECT ${hours.held.lo} AS lo,
               ${hours.held.hi} AS hi
      )`);
    }
    ctes.push(`hrs AS MATERIALIZED (
        ${hrs}
      )`);
  }
  return ctes.join(',\n      ');
}

/** The layers' CTE whose rows a part reads: days (days.lo), hrs (hrs.h) or inv (inv.bucket). */
type Layer = 'days' | 'hrs' | 'inv';

/** The start of a layer's day or hour. */
export const LAYER_START: Record<Layer, string> = { days: 'days.lo', hrs: 'hrs.h', inv: 'inv.bucket' };

/** `sql` (which reads days.lo, hrs.h or inv.bucket) once per row of `layer`, as `alias`: LATERAL, kept by OFFSET 0. */
export function perRow(layer: Layer, sql: string, alias: string): string {
  return `${layer} CROSS JOIN LATERAL (${sql} OFFSET 0) ${alias}`;
}

/** A rollup relation's fixed keys as conditions on alias `a` (a.dimension = 'city'), and its renamed keys (x.value AS city). */
export const matching = (rel: RollupRelation, a: string, p: SqlParams) => Object.entries(rel.match ?? {}).map(([k, v]) => `${a}.${k} = ${p.add(v)}`);
export const renames = (rel: RollupRelation) => Object.entries(rel.as ?? {}).map(([k, n]) => `x.${k} AS ${n}`).join(', ');

/** `select` of one day's or hour's rows of `relation` (alias `a`), the project's, with `keys` (fixed keys) and `where`: an index probe. */
export function probe(layer: 'days' | 'hrs', relation: string, a: string, project: string, keys: readonly string[], where: readonly string[] = [], select = '*'): string {
  return `SELECT ${select} FROM ${relation} ${a} WHERE ${[`${a}.project_id = ${project}`, ...keys, `${a}.bucket = ${LAYER_START[layer]}`, ...where].join(' AND ')}`;
}

/**
 * The raw rows of `table` (e.g. `events s`) meeting `where` with `time` in each hour of `layer`
 * (inv or hrs). With `span` (the layers' bounds, which hold every hour of both layers), `time`
 * is bounded by them too: constants the planner prunes the partitions of events with when it
 * plans (an hour of a LATERAL is known only when it runs), so a read plans the partitions of
 * its span, not every month the project ever wrote.
 */
export function rawPerHour(layer: 'inv' | 'hrs', select: string, table: string, where: string, time: string, alias: string, span?: Pick<Layers, 'from' | 'to'>): string {
  const h = LAYER_START[layer];
  const bounds = span ? ` AND ${time} >= ${span.from} AND ${time} < ${span.to}` : '';
  return perRow(layer, `SELECT ${select} FROM ${table}
          WHERE ${where} AND ${time} >= ${h} AND ${time} < ${h} + ${HOUR}${bounds}`, alias);
}

/** The hourly rows of `relation` (alias r) of the span's unlogged hours, read flat (no days), meeting `where`. */
export function unloggedRows(layers: Layers, relation: string, where: readonly string[] = []): string {
  return `${relation} r
        WHERE r.project_id = ${layers.project} AND r.bucket >= ${layers.from} AND r.bucket < ${layers.to}
          AND ${['r.bucket NOT IN (SELECT inv.bucket FROM inv)', ...where].join('\n          AND ')}`;
}

/** The conditions on `time` of the partial hours before the span (`head`) and from its end (`tail`). */
export function edges(layers: Layers, time: string, head: boolean, tail: boolean): string[] {
  return [...(head ? [`${time} < ${layers.from}`] : []), ...(tail ? [`${time} >= ${layers.to}`] : [])];
}

/**
 * The raw layer of a series: `columns` of the rows of `table` (e.g. `events s`) meeting `where`,
 * in each logged hour (an index range scan per hour) and in the partial hours before (`head`) and
 * after (`tail`) the span, each a relation `x` that `part` selects and groups alike.
 */
export function rawParts(
  layers: Layers,
  raw: { columns: string; table: string; where: string; time: string; head: boolean; tail: boolean },
  part: (rows: string) => string,
): string[] {
  return [
    part(rawPerHour('inv', raw.columns, raw.table, raw.where, raw.time, 'x', layers)),
    ...edges(layers, raw.time, raw.head, raw.tail)
      .map((edge) => part(`(SELECT ${raw.columns} FROM ${raw.table} WHERE ${raw.where} AND ${edge} OFFSET 0) x`)),
  ];
}

/** The parts, one after another (UNION ALL). */
export function unionAll(parts: readonly string[]): string {
  return parts.join('\n        UNION ALL\n        ');
}
