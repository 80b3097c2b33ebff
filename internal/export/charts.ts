// GET /export/charts: aggregated time series of events, per series item and breakdown value, in
// OpenPanel's chart response shape. docs/export.md ("GET /export/charts" and "Chart decisions")
// has the segments, breakdowns, metrics, previous periods and ids; which series read rollups is
// the read planner's choice (seriesRead, chartSketchPlan).
import { BadRequestError } from '../http/errors';
import { exactVisitorsMaxOf, type ReadOptions } from '../query/db';
import { compileAll, indexed, SqlParams } from '../query/filters';
import { PROPERTY_PREFIX, type Filter } from '../query/params';
import { addDays, bucketStarts, daysBetween, localDateOf, resolvePeriod, startOfDay } from '../query/period';
import { propertyKey, PROPERTY_SEGMENTS, type ChartInterval, type ChartParams, type ChartSegment, type ChartSeriesItem } from './params';
import { checkRegexes, num, withRead } from '../query/lookups';
import { chartedWhere, chartRequest, chartSpan, groupedSql, layerRows, namesWhere, SEGMENT_TARGETS, type ChartWindow } from './rollups';
import { chartSketchPlan, sketchDecisionSql, sketchSeriesSql, type SketchPlan } from './sketches';
import { propertyRollupGroupedSql } from './property-rollups';
import { planRead, type ReadPath, type ReadSource } from '../query/planner';
import type { ConnectionSource, Queryable } from '../query/source';
import { checkChartShape, minMax, ResponseBudget, textBytes } from './budget';
import { Slicer } from '../http/json';

const MAX_BUCKETS = 3000;

interface PreviousValue {
  diff: number | null;
  state: 'positive' | 'negative' | 'neutral';
  value: number;
}

interface ChartMetrics {
  sum: number;
  average: number;
  min: number;
  max: number;
}

interface SeriesMetrics extends ChartMetrics {
  count: number;
  previous?: { sum?: PreviousValue; average?: PreviousValue; min?: PreviousValue; max?: PreviousValue; count?: PreviousValue };
}

interface ChartSeries {
  id: string;
  names: string[];
  event: { id: string; name: string; breakdowns?: Record<string, string> };
  metrics: SeriesMetrics;
  data: Array<{ date: string; count: number; previous?: PreviousValue }>;
}

export interface ChartResponse {
  series: ChartSeries[];
  metrics: ChartMetrics;
}

// ---------------------------------------------------------------------------------------
// OpenPanel's arithmetic (packages/common/src/math.ts, get-previous-metric.ts)

export function round(n: number, decimals = 2): number {
  const f = 10 ** decimals;
  return Math.round((n + Number.EPSILON) * f) / f;
}

/** Mean of the finite non-zero values; 0 when there are none. */
export function averageNonZero(values: number[]): number {
  const kept = values.filter((v) => Number.isFinite(v) && v !== 0);
  return kept.length ? kept.reduce((a, b) => a + b, 0) / kept.length : 0;
}

export function seriesMetrics(values: number[]): ChartMetrics {
  const { min, max } = minMax(values); // constant stack: a chart may hold 200,000 points
  return {
    sum: round(values.reduce((a, b) => a + b, 0)),
    average: round(averageNonZero(values)),
    min,
    max,
  };
}

export function previousMetric(current: number, previous: number | null | undefined): PreviousValue | undefined {
  if (previous === null || previous === undefined) return undefined;
  const diff = previous === 0 ? null : round(Math.abs((current - previous) / previous) * 100, 1);
  return {
    diff: diff === null || !Number.isFinite(diff) || current === previous ? null : diff,
    state: current > previous ? 'positive' : current < previous ? 'negative' : 'neutral',
    value: previous,
  };
}

// ---------------------------------------------------------------------------------------
// Periods and buckets

const MINUTE = 60_000;
const DAY = 86_400_000;
const SLIDING = new Set(['30min', 'lastHour', 'last24h']);

/** Shortest length of one bucket of each interval (months and DST days are never shorter). */
const MIN_BUCKET_MS: Record<ChartInterval, number> = { minute: MINUTE, hour: 3_600_000, day: 23 * 3_600_000, week: 7 * DAY - 3_600_000, month: 28 * DAY - 3_600_000 };

/** Builds the buckets, refusing (400) before building when there would be too many. */
function bucketsFor(startMs: number, endMs: number, interval: ChartInterval, timezone: string): Date[] {
  const upperBound = Math.ceil((endMs - startMs) / MIN_BUCKET_MS[interval]) + 1;
  if (upperBound > MAX_BUCKETS + 2) {
    const message = `interval ${interval} gives more than ${MAX_BUCKETS} buckets for this period; use a coarser interval or a shorter period`;
    throw new BadRequestError(`interval: ${message}`, [{ path: ['interval'], message }]);
  }
  return bucketStarts(startMs, endMs, interval, timezone);
}

/** The period of equal length just before `current`. */
function previousWindow(current: ChartWindow, params: ChartParams, interval: ChartInterval, timezone: string): ChartWindow {
  const startMs = current.start.getTime();
  const endMs = current.end.getTime();
  let prevStart: number;
  if (params.startDate === undefined && SLIDING.has(params.range)) {
    prevStart = startMs - (endMs - startMs);
  } else {
    const first = localDateOf(startMs, timezone);
    const days = daysBetween(first, localDateOf(endMs, timezone));
    prevStart = startOfDay(addDays(first, -days), timezone);
  }
  return { start: new Date(prevStart), end: current.start, buckets: bucketsFor(prevStart, startMs, interval, timezone) };
}

// ---------------------------------------------------------------------------------------
// SQL

// Only ASCII blanks: PostgreSQL's \\s also matches U+3000 and friends, which ::numeric refuses.
const NUMERIC_TEXT = '^[ \\t\\n\\r\\f\\v]*[-+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]{1,3})?[ \\t\\n\\r\\f\\v]*$';

/** The value of a group of events `s` (`v`: the numeric property value). */
const AGGREGATE: Record<ChartSegment, (v: string) => string> = {
  event: () => 'count(*)',
  user: () => 'count(DISTINCT s.profile_id)',
  session: () => 'count(DISTINCT s.session_id)',
  user_average: () => 'coalesce(count(*)::float8 / NULLIF(count(DISTINCT s.profile_id), 0), 0)',
  one_event_per_user: () => 'count(*)',
  property_sum: (v) => `sum(${v})`,
  property_average: (v) => `avg(${v})`,
  property_min: (v) => `min(${v})`,
  property_max: (v) => `max(${v})`,
  group: () => 'count(DISTINCT g.gid)',
};

/** Segments whose value needs the events first narrowed to the top breakdown values. */
const TWO_PASS: ReadonlySet<ChartSegment> = new Set(['one_event_per_user', 'group']);

function breakdownExpr(name: string, p: SqlParams): string {
  if (name.startsWith(PROPERTY_PREFIX)) return `coalesce(s.properties ->> ${p.add(name.slice(PROPERTY_PREFIX.length))}::text, '')`;
  // Allow-listed by params (isFilterName): a column of `events`.
  if (!/^[a-z_]+$/.test(name)) throw new Error(`breakdown not allowed: ${name}`);
  return `s.${name}`;
}

interface SeriesQuery {
  projectId: string;
  window: ChartWindow;
  item: ChartSeriesItem;
  filters: Filter[];
  breakdowns: { name: string }[];
  limit: number;
  /** Breakdown value combinations to compute (previous period); null = the top `limit`. */
  combos: string[][] | null;
  /** 'raw' never reads the event rollups nor the sketches. */
  path: ReadPath;
  /** Distinct counts over more events of the series than this come from the sketches. */
  exactMax: number;
  /** The answer's budget (./budget.ts): the rows of each query count against it. */
  budget?: ResponseBudget;
}

interface SeriesResult {
  /** Breakdown value combinations, in series order ([[]] without breakdowns). */
  combos: string[][];
  /** Per combination: the value of each bucket. */
  points: number[][];
  /** Per combination: the segment's total over the period. */
  totals: number[];
}

/** The raw conditions of a series item over its window (alias `s`). */
function seriesWhere(q: SeriesQuery, p: SqlParams): { where: string; v: string } {
  const { item } = q;
  const conditions = [
    `s.project_id = ${p.add(q.projectId)}`,
    `s.created_at >= ${p.add(q.window.start.toISOString())}::timestamptz`,
    `s.created_at < ${p.add(q.window.end.toISOString())}::timestamptz`,
    ...chartedWhere('s', p),
    ...namesWhere('s', item.name === '*' ? [] : [item.name], p),
  ];
  if (q.filters.length) conditions.push(compileAll(indexed(q.filters), 's', p));
  let v = 'NULL';
  if (PROPERTY_SEGMENTS.has(item.segment)) {
    const key = p.add(propertyKey(item.property ?? ''));
    const re = p.add(NUMERIC_TEXT);
    conditions.push(`(s.properties ->> ${key}::text) ~ ${re}::text`);
    v = `(s.properties ->> ${key}::text)::numeric`; // numeric text: checked by the condition above
  }
  return { where: conditions.join('\n      AND '), v };
}

/** Where a series of a common segment (not one_event_per_user or group) reads its whole hours. */
type SeriesRead =
  | { kind: 'layered' | 'propertyRollup'; source: ReadSource; span: { from: Date; to: Date }; key: string }
  | { kind: 'raw' };

/**
 * The read that answers the series exactly: the planner's source for its event counts (layered,
 * ./rollups.ts layerRows) or property aggregates (./property-rollups.ts), else raw. Distinct
 * counts read raw here (exact); the sketches replace them above the threshold (sketchPlanFor).
 */
export function seriesRead(
  window: ChartWindow,
  item: Pick<ChartSeriesItem, 'segment' | 'property'>,
  filters: readonly Filter[],
  breakdowns: readonly { name: string }[],
  path: ReadPath,
): SeriesRead {
  const target = SEGMENT_TARGETS[item.segment];
  const span = chartSpan(window);
  if (!span || (target !== 'eventCount' && target !== 'propertyAggregate')) return { kind: 'raw' };
  const key = target === 'propertyAggregate' && item.property !== undefined ? propertyKey(item.property) : undefined;
  const source = planRead(chartRequest(window, target, filters, breakdowns, path, key));
  // The entries measuring event counts are read in layers; the one measuring property aggregates, its rollups.
  return source ? { kind: target === 'eventCount' ? 'layered' : 'propertyRollup', source, span, key: key ?? '' } : { kind: 'raw' };
}

/**
 * One statement per series item and period. It yields one row per (bucket, breakdown
 * values) and one total row per breakdown values (bucket NULL, GROUPING SETS), each with
 * `rk`, the rank of its breakdown values (1 without breakdowns).
 *
 * Common segments aggregate the events in a single pass and rank the breakdown values by
 * the event count of their total rows afterwards. one_event_per_user and group first pick
 * the top values, then aggregate only those events (DISTINCT ON / unnest need that order).
 */
function seriesSql(q: SeriesQuery, p: SqlParams, sketch: SketchPlan | null = null): string {
  const { item, breakdowns } = q;
  const b = breakdowns.map((_, i) => `b${i}`);
  const { where, v } = seriesWhere(q, p);
  const bExprs = breakdowns.map((bd) => breakdownExpr(bd.name, p));
  const bSelect = bExprs.map((e, i) => `, ${e} AS b${i}`).join('');
  if (sketch) {
    return sketchSeriesSql(sketch, {
      projectId: q.projectId, name: item.name, segment: item.segment, window: q.window,
      rawWhere: where, rawValue: bExprs[0] ?? null, limit: q.limit, combos: q.combos,
    }, p);
  }
  // Added to the parameters only when used (an unreferenced parameter has no type: error).
  let bucketSql: string | undefined;
  const bucketExpr = () => (bucketSql ??= `width_bucket(s.created_at, ${p.add(q.window.buckets.map((d) => d.toISOString()))}::timestamptz[])`);
  const order = ['n DESC', ...b.map((c) => `${c} COLLATE "C"`)].join(', ');
  const given = (): string => {
    const arrays = b.map((_, i) => `${p.add(q.combos!.map((c) => c[i] ?? ''))}::text[]`).join(', ');
    return `SELECT * FROM unnest(${arrays}) WITH ORDINALITY AS t(${b.join(', ')}, rk)`;
  };

  if (!TWO_PASS.has(item.segment)) {
    const read = seriesRead(q.window, item, q.filters, breakdowns, q.path);
    const layer = { projectId: q.projectId, name: item.name, window: q.window, rawWhere: where, rawValue: bExprs[0] ?? null };
    let grouped: string;
    if (read.kind === 'layered') {
      const project = p.add(q.projectId);
      const rows = layerRows(read.source, { project, names: item.name === '*' ? [] : [item.name], filters: q.filters, breakdown: breakdowns[0]?.name, every: false }, p);
      grouped = groupedSql(rows, { ...layer, project, span: read.span }, p);
    } else if (read.kind === 'propertyRollup') {
      grouped = propertyRollupGroupedSql(read.source, read.span, read.key, breakdowns[0]?.name, { ...layer, segment: item.segment, rawNumber: v }, p);
    } else {
      const bucket = bucketExpr();
      const sets = breakdowns.length ? `(${[bucket, ...bExprs].join(', ')}), (${bExprs.join(', ')})` : `(${bucket}), ()`;
      grouped = `SELECT ${bucket} AS bucket${bSelect}, count(*) AS n, (${AGGREGATE[item.segment](v)})::text AS value
      FROM events s WHERE ${where}
      GROUP BY GROUPING SETS (${sets})`;
    }
    if (breakdowns.length === 0) return `SELECT g.bucket, 1 AS rk, g.value FROM (${grouped}) g`;
    const top = q.combos
      ? given()
      : `SELECT ${b.join(', ')}, row_number() OVER (ORDER BY ${order}) AS rk FROM g WHERE g.bucket IS NULL ORDER BY ${order} LIMIT ${p.add(q.limit)}`;
    return `WITH g AS (${grouped}), top AS (${top})
      SELECT g.bucket, top.rk, ${b.map((c) => `g.${c}`).join(', ')}, g.value
      FROM g JOIN top ON ${b.map((c) => `g.${c} = top.${c}`).join(' AND ')}`;
  }

  const ev = `SELECT s.created_at, s.id, s.profile_id, s.groups${bSelect} FROM events s WHERE ${where}`;
  let top = '';
  let src = 'SELECT ev.*, 1 AS rk FROM ev';
  if (breakdowns.length) {
    top = q.combos
      ? `, top AS (${given()})`
      : `, top AS (SELECT ${b.join(', ')}, row_number() OVER (ORDER BY ${order}) AS rk
          FROM (SELECT ${b.join(', ')}, count(*) AS n FROM ev GROUP BY ${b.join(', ')}) c ORDER BY ${order} LIMIT ${p.add(q.limit)})`;
    src = `SELECT ev.*, top.rk FROM ev JOIN top ON ${b.map((c) => `ev.${c} = top.${c}`).join(' AND ')}`;
  }
  const from = item.segment === 'one_event_per_user'
    ? '(SELECT DISTINCT ON (src.profile_id) * FROM src ORDER BY src.profile_id, src.created_at DESC, src.id DESC) s'
    : 'src s CROSS JOIN LATERAL unnest(s.groups) AS g(gid)';
  const keys = ['s.rk', ...b.map((c) => `s.${c}`)].join(', ');
  const srcBucket = bucketExpr(); // same expression over alias s
  return `WITH ev AS (${ev})${top}, src AS (${src})
    SELECT ${srcBucket} AS bucket, ${keys}, (${AGGREGATE[item.segment](v)})::text AS value
    FROM ${from}
    GROUP BY GROUPING SETS ((${srcBucket}, ${keys}), (${keys}))`;
}

/**
 * The sketch plan of a distinct-count series when it is to be estimated: eligible
 * (chartSketchPlan), the sketches exist and the window holds more than `exactMax` events of
 * the series (counted exactly from the event rollups). Null: count exactly (raw).
 */
async function sketchPlanFor(db: Queryable, q: SeriesQuery): Promise<SketchPlan | null> {
  if (!(q.exactMax >= 0) || !Number.isFinite(q.exactMax)) return null;
  const plan = chartSketchPlan(q.window, q.item.segment, q.filters, q.breakdowns, q.path);
  if (!plan) return null;
  const p = new SqlParams();
  const { where } = seriesWhere(q, p);
  const { rows } = await db.query<{ sketches: boolean; n: string | null }>(
    sketchDecisionSql(plan, { projectId: q.projectId, name: q.item.name, window: q.window, rawWhere: where }, p),
    p.values,
  );
  const r = rows[0];
  return r?.sketches && num(r.n) > q.exactMax ? plan : null;
}

async function querySeries(db: Queryable, q: SeriesQuery): Promise<SeriesResult> {
  const p = new SqlParams();
  const { breakdowns } = q;
  const b = breakdowns.map((_, i) => `b${i}`);
  const sketch = await sketchPlanFor(db, q);
  const { rows } = await db.query<Record<string, unknown>>(seriesSql(q, p, sketch), p.values);
  if (q.budget) {
    let bytes = 0;
    for (const r of rows) for (const c of b) bytes += textBytes([r[c]]);
    q.budget.addRows(rows.length, bytes);
  }

  const size = q.window.buckets.length;
  const byRank = new Map<number, { combo: string[]; points: number[]; total: number }>();
  const entry = (r: Record<string, unknown>) => {
    const rk = Number(r.rk);
    let e = byRank.get(rk);
    if (!e) {
      e = { combo: b.map((c) => String(r[c] ?? '')), points: new Array<number>(size).fill(0), total: 0 };
      byRank.set(rk, e);
    }
    return e;
  };
  for (const r of rows) {
    const e = entry(r);
    if (r.bucket === null) e.total = num(r.value);
    else {
      const i = Number(r.bucket) - 1;
      if (i >= 0 && i < size) e.points[i] = num(r.value);
    }
  }
  if (q.combos) {
    // Every asked-for combination, in the given order, zeros where nothing matched.
    const combos = breakdowns.length ? q.combos : [[]];
    return {
      combos,
      points: combos.map((_, i) => byRank.get(i + 1)?.points ?? new Array<number>(size).fill(0)),
      totals: combos.map((_, i) => byRank.get(i + 1)?.total ?? 0),
    };
  }
  const ranked = [...byRank.entries()].sort((x, y) => x[0] - y[0]).map(([, e]) => e);
  if (ranked.length === 0) return { combos: [[]], points: [new Array<number>(size).fill(0)], totals: [0] };
  return { combos: ranked.map((e) => e.combo), points: ranked.map((e) => e.points), totals: ranked.map((e) => e.total) };
}

// ---------------------------------------------------------------------------------------
// The chart

const ALPHA = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

function slug(s: string): string {
  return s.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '') || 'all';
}

/** Resolves the period, runs one query per series item (and per previous period), formats. */
export async function getChart(
  pool: ConnectionSource,
  projectId: string,
  params: ChartParams,
  now: Date = new Date(),
  options: ReadOptions = {},
): Promise<ChartResponse> {
  const exactMax = exactVisitorsMaxOf(options);
  return withRead(pool, options, projectId, params.filters, async (db, timezone) => {
    for (const [i, item] of params.series.entries()) await checkRegexes(db, item.filters, ['series', String(i)]);

    const period = resolvePeriod({ range: params.range, startDate: params.startDate, endDate: params.endDate }, timezone, now);
    const interval: ChartInterval = params.interval ?? period.granularity;
    const current: ChartWindow = {
      start: period.start,
      end: period.end,
      buckets: interval === period.granularity ? period.buckets : bucketsFor(period.start.getTime(), period.end.getTime(), interval, timezone),
    };
    if (current.buckets.length > MAX_BUCKETS) {
      const message = `interval ${interval} gives ${current.buckets.length} buckets for this period (at most ${MAX_BUCKETS}); use a coarser interval or a shorter period`;
      throw new BadRequestError(`interval: ${message}`, [{ path: ['interval'], message }]);
    }
    const previous = params.previous ? previousWindow(current, params, interval, timezone) : null;
    checkChartShape({ series: params.series.length, buckets: current.buckets.length, breakdowns: params.breakdowns.length, limit: params.limit, previous: previous !== null });
    const budget = new ResponseBudget('chart');

    const series: ChartSeries[] = [];
    const usedIds = new Set<string>();
    // One ISO string per bucket for every series; the points are built in slices that give
    // way to the event loop (a minute chart by 100 values is 144,000 of them).
    const dates = current.buckets.map((d) => d.toISOString());
    const slicer = new Slicer(undefined, 1);
    for (const [index, item] of params.series.entries()) {
      const base = { projectId, item, filters: [...item.filters, ...params.filters], limit: params.limit, path: options.path ?? 'auto', exactMax, budget };
      const cur = await querySeries(db, { ...base, window: current, breakdowns: params.breakdowns, combos: null });
      const withValues = cur.combos[0]!.length > 0;
      const prev = previous
        ? await querySeries(db, {
            ...base,
            window: previous,
            breakdowns: withValues ? params.breakdowns : [],
            combos: withValues ? cur.combos : null,
          })
        : null;
      const definitionId = item.id ?? ALPHA[index] ?? `series-${index}`;
      for (const [ci, combo] of cur.combos.entries()) {
        await slicer.pause();
        const names = [item.name, ...combo];
        const values = cur.points[ci]!;
        budget.addSeries(values.length, textBytes(combo), prev !== null);
        const metrics: SeriesMetrics = { ...seriesMetrics(values), count: cur.totals[ci]! };
        let prevValues: number[] | undefined;
        if (prev) {
          prevValues = prev.points[ci]!;
          const pm = { ...seriesMetrics(prevValues), count: prev.totals[ci]! };
          metrics.previous = {
            sum: previousMetric(metrics.sum, pm.sum),
            average: previousMetric(metrics.average, pm.average),
            min: previousMetric(metrics.min, pm.min),
            max: previousMetric(metrics.max, pm.max),
            count: previousMetric(metrics.count, pm.count),
          };
        }
        let id = `${slug(item.name)}-${definitionId}-${names.join('-')}`;
        for (let n = 2; usedIds.has(id); n++) id = `${slug(item.name)}-${definitionId}-${names.join('-')}~${n}`;
        usedIds.add(id);
        const breakdowns = withValues
          ? Object.fromEntries(params.breakdowns.map((bd, i) => [bd.name, combo[i] ?? '']))
          : undefined;
        series.push({
          id,
          names,
          event: { id: definitionId, name: item.name, ...(breakdowns ? { breakdowns } : {}) },
          metrics,
          data: dates.map((date, i) => {
            const point: { date: string; count: number; previous?: PreviousValue } = { date, count: values[i]! };
            const pv = prevValues && i < prevValues.length ? previousMetric(values[i]!, prevValues[i]) : undefined;
            if (pv) point.previous = pv;
            return point;
          }),
        });
      }
    }
    return { series, metrics: seriesMetrics(series.flatMap((s) => s.data.map((d) => d.count))) };
  });
}
