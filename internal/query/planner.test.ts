// Equivalence of planRead() with the per-shape decision functions it replaces (issue #15):
// every target x every set of 0, 1 and 2 filter names (and every 3-set of session
// dimensions / cube columns) x breakdowns x path x whole hours or not x hll, compared with
// what insights (planFor + rollupDimensionFor / cubeFor / pairMetricsFor / dimensionPairFor,
// as runInsightsQuery combines them) and the export (seriesRead, chartSketchPlan, and
// countAtOrBefore's columnPlan / cubePlan / countSpan) decide today.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SESSION_DIMENSIONS } from '../model/event';
import type { Filter } from './params';
import { EVENT_ROLLUP_DIMENSIONS, planRead, type ReadRequest } from './planner';
import { cubeFor, dimensionPairFor, pairMetricsFor, planFor, rollupDimensionFor, type PlanTarget } from '../insights/rollups';
import { seriesRead } from '../export/charts';
import { chartSketchPlan } from '../export/sketches';
import { columnPlan } from '../export/column';
import { cubePlan } from '../export/cube';
import { countSpan, type ChartWindow } from '../export/rollups';
import { CHART_SEGMENTS, propertyKey, type ChartSegment } from '../export/params';

const f = (name: string): Filter => ({ name, operator: 'is', value: ['x'] });

/** Every subset of `names` of 0, 1 and 2 names, and of 3 names drawn from `three`. */
function nameSets(names: readonly string[], three: readonly string[]): string[][] {
  const out: string[][] = [[]];
  for (let i = 0; i < names.length; i++) {
    out.push([names[i]!]);
    for (let j = i + 1; j < names.length; j++) out.push([names[i]!, names[j]!]);
  }
  for (let i = 0; i < three.length; i++) {
    for (let j = i + 1; j < three.length; j++) for (let k = j + 1; k < three.length; k++) out.push([three[i]!, three[j]!, three[k]!]);
  }
  return out;
}

const day = (d: number) => new Date(Date.UTC(2026, 2, d));
const KOLKATA = -19_800_000;
const WHOLE: ChartWindow = { start: day(1), end: day(8), buckets: [1, 2, 3, 4, 5, 6, 7].map(day) };
const PART: ChartWindow = {
  start: new Date(day(1).getTime() + KOLKATA), end: new Date(day(8).getTime() + KOLKATA),
  buckets: [1, 2, 3, 4, 5, 6, 7].map((d) => new Date(day(d).getTime() + KOLKATA)),
};
const PATHS = ['auto', 'raw'] as const;

describe('planRead equals the decisions it replaces', () => {
  it('insights: metrics, pages and every breakdown', () => {
    const names = [...SESSION_DIMENSIONS, 'path', 'origin', 'name', 'profile_id', 'properties.plan'];
    const sets = nameSets(names, SESSION_DIMENSIONS);
    // Filters repeat a name (two filters on city) as well as naming several.
    sets.push(['city', 'city'], ['city', 'country', 'city'], ['device', 'country', 'device']);
    const targets: PlanTarget[] = ['metrics', 'pages', ...SESSION_DIMENSIONS];
    let n = 0;
    const chosen = new Map<string, number>();
    for (const set of sets) {
      const filters = set.map(f);
      for (const target of targets) {
        for (const path of PATHS) {
          for (const whole of [true, false]) {
            for (const hll of [true, false]) {
              const w = whole ? WHOLE : PART;
              const old = oldInsights(w, filters, path, target, hll);
              const request: ReadRequest = {
                side: 'sessions',
                target: target === 'metrics' || target === 'pages' ? target : 'breakdown',
                filters: set, breakdowns: target === 'metrics' || target === 'pages' ? [] : [target],
                path, wholeHours: whole, extensions: { hll },
              };
              const now = planRead(request)?.id ?? 'raw';
              assert.equal(now, old, `${JSON.stringify(request)}`);
              chosen.set(now, (chosen.get(now) ?? 0) + 1);
              n++;
            }
          }
        }
      }
    }
    // Every source was chosen somewhere (the enumeration reaches them all).
    for (const family of ['sessions', 'pages', 'session_dimension:city', 'session_pair_metrics', 'session_cube', 'session_dimension_pair:city,country', 'session_dimension_pair:referrer,device']) {
      assert.ok(chosen.get(family), family);
    }
    assert.ok(n > 100_000, String(n));
  });

  it('export: chart series of every segment', () => {
    const names = [...EVENT_ROLLUP_DIMENSIONS, 'name', 'profile_id', 'properties.plan'];
    const sets = nameSets(names, ['name', 'country', 'device', 'os', 'city', 'path']);
    const breakdowns: string[][] = [[], ...names.map((n) => [n]), ['name', 'country'], ['country', 'device']];
    const properties = [undefined, 'properties.amount', 'properties.', `properties.${'k'.repeat(200)}`, `properties.${'k'.repeat(201)}`, `properties.${'é'.repeat(101)}`];
    let n = 0;
    const chosen = new Map<string, number>();
    for (const set of sets) {
      const filters = set.map(f);
      for (const bds of breakdowns) {
        for (const segment of CHART_SEGMENTS) {
          for (const property of segment.startsWith('property_') ? properties : [undefined]) {
            for (const path of PATHS) {
              for (const whole of [true, false]) {
                const old = oldSeries(whole ? WHOLE : PART, segment, property, filters, bds, path);
                const target = TARGET[segment];
                const now = target === null ? 'raw' : planRead({
                  side: 'events', target, filters: set, breakdowns: bds, path, wholeHours: whole,
                  ...(property === undefined ? {} : { propertyKey: propertyKey(property) }),
                })?.id ?? 'raw';
                assert.equal(now, old, JSON.stringify({ set, bds, segment, property, path, whole }));
                chosen.set(now, (chosen.get(now) ?? 0) + 1);
                n++;
              }
            }
          }
        }
      }
    }
    for (const id of ['events', 'event_column:city', 'event_column:country', 'event_properties', 'event_sketches', 'event_cube', 'raw']) assert.ok(chosen.get(id), id);
    assert.ok(n > 100_000, String(n));
  });

  it('export: /export/events totalCount', () => {
    const names = [...EVENT_ROLLUP_DIMENSIONS, 'name', 'profile_id', 'properties.plan'];
    const sets = nameSets(names, ['name', 'country', 'device', 'os', 'city', 'path', 'referrer_name']);
    const scopes = {
      whole: { projectId: 'p', events: [], startIso: '2026-03-01T00:00:00.000000Z', anchorIso: '2026-03-02T05:30:00.000000Z' },
      open: { projectId: 'p', events: ['click'], startIso: undefined, anchorIso: '2026-03-02T05:30:00.000000Z' },
      part: { projectId: 'p', events: [], startIso: '2026-03-01T05:10:00.000000Z', anchorIso: '2026-03-01T05:50:00.000000Z' },
    };
    const chosen = new Map<string, number>();
    for (const set of sets) {
      const filters = set.map(f);
      for (const [kind, scope] of Object.entries(scopes)) {
        for (const profileId of [undefined, 'u1']) {
          for (const path of PATHS) {
            // countAtOrBefore (./export/events.ts) as it decides today
            const column = filters.length ? columnPlan(filters, undefined) : null;
            const cube = filters.length && !column ? cubePlan(filters, undefined) : null;
            const span = countSpan(scope, { profileId, filters: cube || column ? [] : filters, path });
            const old = span && cube ? 'event_cube' : span && column ? `event_column:${column.column}` : span ? 'events' : 'raw';
            const now = planRead({
              side: 'events', target: 'totalCount', filters: set, path, profileId: profileId !== undefined, wholeHours: kind !== 'part',
            })?.id ?? 'raw';
            assert.equal(now, old, JSON.stringify({ set, kind, profileId, path }));
            chosen.set(now, (chosen.get(now) ?? 0) + 1);
          }
        }
      }
    }
    for (const id of ['events', 'event_column:city', 'event_cube', 'raw']) assert.ok(chosen.get(id), id);
  });
});

/** The chart segment's target (null: always raw). */
const TARGET: Record<ChartSegment, ReadRequest['target'] | null> = {
  event: 'eventCount',
  user: 'distinctCount', session: 'distinctCount', user_average: 'distinctCount',
  one_event_per_user: null, group: null,
  property_sum: 'propertyAggregate', property_average: 'propertyAggregate', property_min: 'propertyAggregate', property_max: 'propertyAggregate',
};

/** The source runInsightsQuery and getMetrics / getPages / getBreakdown read today. */
function oldInsights(w: ChartWindow, filters: Filter[], path: 'auto' | 'raw', target: PlanTarget, hll: boolean): string {
  const plan = planFor({ start: w.start, end: w.end, buckets: [...w.buckets] }, filters, path, target);
  if (plan === 'raw') return 'raw';
  const pair = pairMetricsFor(filters, target);
  if (pair && !hll) return 'raw';
  if (target === 'pages') return 'pages';
  const dimension = rollupDimensionFor(filters, target);
  if (target === 'metrics') return dimension ? `session_dimension:${dimension}` : pair ? 'session_pair_metrics' : 'sessions';
  if (cubeFor(filters, target)) return 'session_cube';
  const dp = dimensionPairFor(filters, target);
  if (dp) return `session_dimension_pair:${dp.key}`;
  return `session_dimension:${target}`;
}

/** The source a chart series reads today: seriesRead, or the sketches for distinct counts. */
function oldSeries(w: ChartWindow, segment: ChartSegment, property: string | undefined, filters: Filter[], breakdowns: string[], path: 'auto' | 'raw'): string {
  if (segment === 'one_event_per_user' || segment === 'group') return 'raw';
  const bds = breakdowns.map((name) => ({ name }));
  const read = seriesRead(w, { segment, property }, filters, bds, path);
  if (segment === 'user' || segment === 'session' || segment === 'user_average') {
    assert.equal(read.kind, 'raw');
    return chartSketchPlan(w, segment, filters, bds, path) ? 'event_sketches' : 'raw';
  }
  switch (read.kind) {
    case 'rollup': return read.plan.relation === 'events_hourly' ? 'events' : `event_column:${read.plan.dimension}`;
    case 'propertyRollup': return 'event_properties';
    case 'column': return `event_column:${read.plan.plan.column}`;
    case 'cube': return 'event_cube';
    case 'raw': return 'raw';
  }
}
