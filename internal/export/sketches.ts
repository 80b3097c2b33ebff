// Distinct counts of /export/charts (user, session, user_average) from HyperLogLog sketches
// (sql/011), when the planner gives the series event_sketches and the window holds more than
// `exactVisitorsMax` events of it; else the raw path counts exactly (docs/export.md, "Distinct
// counts"). One statement: `counts` (exact event counts from the event rollups: they rank the
// values and are user_average's numerator), `top` (the values kept), `sk` (the layers' sketches,
// raw hours hashed on the fly), `est` (their unions, tm_visitors_estimate, capped at the count).
import type { SqlParams } from '../query/filters';
import type { Filter } from '../query/params';
import type { ChartSegment } from './params';
import { layerCtes, perRow, probe, rawParts, unionAll, type Layers } from '../query/layered';
import { HLL_PARAMS, planRead, type ReadPath, type ReadSource, type RollupRelation, type SourceTables } from '../query/planner';
import { chartBounds, chartRequest, chartSpan, groupedSql, layerRows, type ChartWindow } from './rollups';

/** Segments answered from the sketches above the threshold. */
const SKETCH_SEGMENTS: ReadonlySet<ChartSegment> = new Set(['user', 'session', 'user_average']);

export interface SketchPlan {
  /** Whole hours inside the window. */
  span: { from: Date; to: Date };
  /** The sketches' entry (event_sketches). */
  sketches: ReadSource;
  /** The source of the series' exact event counts per bucket and breakdown value (the event rollups). */
  counts: ReadSource;
  /** The source of its exact event count over the window, without breakdown (the threshold). */
  total: ReadSource;
  /** The one breakdown: `name` or a rolled-up column; undefined without. */
  breakdown: string | undefined;
}

/**
 * Whether a series can be answered from the sketches when its window is large: segment
 * user, session or user_average, no filters, no breakdown or one on `name` or a rolled-up
 * column, every bucket boundary inside the window on a whole UTC hour.
 */
export function chartSketchPlan(
  window: ChartWindow,
  segment: ChartSegment,
  filters: readonly Filter[],
  breakdowns: readonly { name: string }[],
  path: ReadPath = 'auto',
): SketchPlan | null {
  const span = chartSpan(window);
  if (!SKETCH_SEGMENTS.has(segment) || !span) return null;
  // The planner's choice (internal/query/planner.ts); whether the sketches exist is checked
  // with the threshold, in one statement (sketchDecisionSql).
  const sketches = planRead(chartRequest(window, 'distinctCount', filters, breakdowns, path));
  if (sketches?.family !== 'event_sketches') return null;
  // The exact event counts (the threshold and the ranks) from the event rollups.
  const counts = planRead(chartRequest(window, 'eventCount', filters, breakdowns, path));
  const total = breakdowns.length ? planRead(chartRequest(window, 'eventCount', filters, [], path)) : counts;
  if (counts?.family !== 'events' && counts?.family !== 'event_column') return null;
  if (total?.family !== 'events') return null;
  return { span, sketches, counts, total, breakdown: breakdowns[0]?.name };
}

interface SketchSeriesOptions {
  projectId: string;
  /** Event name or '*'. */
  name: string;
  segment: ChartSegment;
  window: ChartWindow;
  /** Conditions of the raw query (alias `s`): project, window, not bots, not session_start/session_end, the name. */
  rawWhere: string;
  /** Raw breakdown expression (alias `s`); null without breakdown. */
  rawValue: string | null;
  limit: number;
  /** Breakdown values to compute (previous period), in rank order; null = the top `limit`. */
  combos: string[][] | null;
}

/**
 * One statement: whether the sketches exist and the series' exact event count over the
 * window (columns `sketches` boolean, `n` text).
 */
export function sketchDecisionSql(plan: SketchPlan, opts: Pick<SketchSeriesOptions, 'projectId' | 'name' | 'window' | 'rawWhere'>, p: SqlParams): string {
  const project = p.add(opts.projectId);
  const rows = layerRows(plan.total, { project, names: opts.name === '*' ? [] : [opts.name], filters: [], breakdown: undefined, every: false }, p);
  const grouped = groupedSql(rows, { ...opts, project, span: plan.span, rawValue: null }, p);
  return `SELECT to_regclass('${plan.sketches.tables.days}') IS NOT NULL AS sketches,
      (SELECT g.n FROM (${grouped}) g WHERE g.bucket IS NULL)::text AS n`;
}

/**
 * The series over the sketches: rows (bucket: 1-based width_bucket index, NULL on the total
 * rows; rk: rank of the breakdown value; b0 with a breakdown; value: text), as the raw
 * query of charts.ts gives them.
 */
export function sketchSeriesSql(plan: SketchPlan, opts: SketchSeriesOptions, p: SqlParams): string {
  const b = plan.breakdown !== undefined;
  // A breakdown on `name`: the value is the sketch row's name (dimension '').
  const byName = plan.breakdown === 'name';
  const project = p.add(opts.projectId);
  const names = opts.name === '*' ? [] : [opts.name];
  const rows = layerRows(plan.counts, { project, names, filters: [], breakdown: plan.breakdown, every: false }, p);
  const grouped = groupedSql(rows, { ...opts, project, span: plan.span }, p);
  const { from, to, starts, head, tail } = chartBounds(plan.span, opts.window, p);
  const users = opts.segment !== 'session';

  let top: string;
  if (!b) top = `SELECT ''::text AS b0, 1::bigint AS rk`;
  else if (opts.combos) top = `SELECT t.b0, t.rk FROM unnest(${p.add(opts.combos.map((c) => c[0] ?? ''))}::text[]) WITH ORDINALITY AS t(b0, rk)`;
  else {
    const order = 'c.n DESC, c.b0 COLLATE "C"';
    top = `SELECT c.b0, row_number() OVER (ORDER BY ${order}) AS rk FROM counts c WHERE c.bucket IS NULL ORDER BY ${order} LIMIT ${p.add(opts.limit)}`;
  }

  // Stored sketch rows (alias r): the breakdown's dimension, the series' name (name '' is
  // every name: '*'; with a breakdown on name, every row of a name).
  const rowValue = !b ? `''::text` : byName ? 'r.name' : 'r.value';
  const dimension = p.add(b && !byName ? plan.breakdown : '');
  const rowWhere = [`r.dimension = ${dimension}`];
  if (byName && opts.name === '*') rowWhere.push(`r.name <> ''`);
  else rowWhere.push(`r.name = ${p.add(opts.name === '*' ? '' : opts.name)}`);
  if (b) rowWhere.push(`${rowValue} IN (SELECT top.b0 FROM top)`);
  const sketch = `r.${users ? 'users' : 'sessions'}`;

  // Raw events hashed on the fly (logged hours, partial edge hours).
  const rawHash = users ? 'hll_hash_text(s.profile_id)' : 'hll_hash_text(s.session_id::text)';
  const rawCond = users ? '' : ' AND s.session_id IS NOT NULL';
  const rawB0 = b ? opts.rawValue! : `''::text`;
  const inTop = b ? ' AND x.b0 IN (SELECT top.b0 FROM top)' : '';
  const rawPart = (rows: string) => `SELECT width_bucket(x.created_at, ${starts}), x.b0, hll_add_agg(x.h, ${HLL_PARAMS})
        FROM ${rows}
        WHERE true${inTop}
        GROUP BY 1, 2`;
  // The layers (internal/query/layered.ts): complete local days inside one series bucket, none
  // of their hours logged, from the daily sketches; the other hours not logged, only between
  // the first and last hour with sketch rows (long periods, little data), from the hourly ones;
  // the logged hours and the partial edge hours from raw events.
  const { days, daily, hourly } = plan.sketches.tables as Required<Pick<SourceTables, 'days' | 'daily'>> & { hourly: RollupRelation };
  const rowsOf = (dim: string) => `(SELECT ${dim}(r.bucket) FROM ${hourly.table} r WHERE r.project_id = ${project} AND r.dimension = ${dimension})`;
  const layers: Layers = {
    project, from, to,
    days: { table: days, starts },
    hours: { held: { lo: `greatest(${from}, ${rowsOf('min')})`, hi: `least(${to} - interval '1 hour', ${rowsOf('max')})` } },
  };
  const parts = [
    `SELECT days.bucket, ${rowValue} AS b0, ${sketch} AS h
        FROM ${perRow('days', probe('days', daily.table, 'r', project, rowWhere), 'r')}`,
    `SELECT width_bucket(hrs.h, ${starts}), ${rowValue}, ${sketch}
        FROM ${perRow('hrs', probe('hrs', hourly.table, 'r', project, rowWhere), 'r')}`,
    ...rawParts(layers, {
      columns: `s.created_at, ${rawB0} AS b0, ${rawHash} AS h`, table: 'events s', where: `${opts.rawWhere}${rawCond}`, time: 's.created_at', head, tail,
    }, rawPart),
  ];

  const n = 'c.n::float8';
  // Never more distinct users or sessions than events: the estimate is capped at n.
  const d = 'least(coalesce(e.d, 0), c.n)';
  const value = opts.segment === 'user_average' ? `coalesce(${n} / NULLIF(${d}, 0), 0)` : d;
  return `WITH counts AS MATERIALIZED (
        SELECT g.bucket, ${b ? 'g.b0' : `''::text`} AS b0, g.n FROM (${grouped}) g
      ),
      top AS MATERIALIZED (${top}),
      ${layerCtes(layers)},
      sk AS (
        ${unionAll(parts)}
      ),
      bsk AS MATERIALIZED (
        SELECT sk.bucket, sk.b0, hll_union_agg(sk.h) AS h FROM sk GROUP BY sk.bucket, sk.b0
      ),
      -- tm_visitors_estimate: hll_cardinality with the estimator's bias removed (sql/008_rollup_visitors.sql)
      est AS (
        SELECT k.bucket, k.b0, tm_visitors_estimate(k.h) AS d FROM bsk k
        UNION ALL
        SELECT NULL::int, k.b0, tm_visitors_estimate(hll_union_agg(k.h)) FROM bsk k GROUP BY k.b0
      )
      SELECT c.bucket, top.rk${b ? ', c.b0' : ''}, (${value})::text AS value
      FROM counts c
      JOIN top ON top.b0 = c.b0
      LEFT JOIN est e ON e.b0 = c.b0 AND coalesce(e.bucket, -1) = coalesce(c.bucket, -1)`;
}
