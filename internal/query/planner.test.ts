// The read planner's rule (internal/query/planner.ts), checked over an exhaustive enumeration
// of reads: every target x every set of 0, 1 and 2 filter names (and every 3-set of session
// dimensions / a few event columns) x breakdowns x path x whole hours or not x hll. For each
// read: the chosen entry keys every filter name and breakdown, is named where it must be,
// measures the target, fits the grain and has what it needs; no entry before it in the
// catalogue does; raw exactly when none does. Then the precedences the read paths document,
// as named cases.
//
// (The commit that introduced planRead proved it equal, on this enumeration, to the per-shape
// decision functions it replaced: rollupDimensionFor / cubeFor / pairMetricsFor /
// dimensionPairFor / planFor of insights, seriesRead / chartSketchPlan / countAtOrBefore of
// the export.)
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SESSION_DIMENSIONS } from '../model/event';
import { EVENT_ROLLUP_DIMENSIONS, planRead, READ_CATALOGUE, type ReadRequest, type ReadSource, type ReadTarget } from './planner';

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

const PATHS = ['auto', 'raw'] as const;

/** Every enumerated read of both sides. */
function* requests(): Generator<ReadRequest> {
  const sessionNames = [...SESSION_DIMENSIONS, 'path', 'origin', 'name', 'profile_id', 'properties.plan'];
  const sessionSets = nameSets(sessionNames, SESSION_DIMENSIONS);
  sessionSets.push(['city', 'city'], ['city', 'country', 'city'], ['device', 'country', 'device']);
  const sessionTargets: Array<[ReadTarget, string[]]> = [['metrics', []], ['pages', []], ...SESSION_DIMENSIONS.map((d): [ReadTarget, string[]] => ['breakdown', [d]])];
  for (const filters of sessionSets) for (const [target, breakdowns] of sessionTargets) {
    for (const path of PATHS) for (const wholeHours of [true, false]) for (const hll of [true, false, undefined]) {
      yield { side: 'sessions', target, filters, breakdowns, path, wholeHours, ...(hll === undefined ? {} : { extensions: { hll } }) };
    }
  }
  const eventNames = [...EVENT_ROLLUP_DIMENSIONS, 'name', 'profile_id', 'properties.plan'];
  const eventSets = nameSets(eventNames, ['name', 'country', 'device', 'os', 'city', 'path']);
  const breakdowns: string[][] = [[], ...eventNames.map((n) => [n]), ['name', 'country'], ['country', 'device']];
  const keys = ['amount', '', 'k'.repeat(200), 'k'.repeat(201), 'é'.repeat(101)];
  for (const filters of eventSets) {
    for (const path of PATHS) for (const wholeHours of [true, false]) {
      for (const bds of breakdowns) {
        yield { side: 'events', target: 'eventCount', filters, breakdowns: bds, path, wholeHours };
        for (const hll of [true, false, undefined]) {
          yield { side: 'events', target: 'distinctCount', filters, breakdowns: bds, path, wholeHours, ...(hll === undefined ? {} : { extensions: { hll } }) };
        }
        for (const propertyKey of keys) yield { side: 'events', target: 'propertyAggregate', filters, breakdowns: bds, path, wholeHours, propertyKey };
      }
      for (const profileId of [false, true]) yield { side: 'events', target: 'totalCount', filters, path, wholeHours, profileId };
    }
  }
}

/** Whether an entry answers `r`, each clause of the rule written out (what depends on `r` alone computed once). */
function answersTo(r: ReadRequest): (entry: ReadSource) => boolean {
  const filters = [...r.filters, ...(r.profileId ? ['profile_id'] : [])];
  const distinctFilters = new Set(filters).size;
  const breakdowns = r.breakdowns ?? [];
  const named = new Set([...filters, ...breakdowns]);
  const keyBytes = Buffer.byteLength(r.propertyKey ?? '', 'utf8');
  return (entry) => entry.side === r.side
    && filters.every((n) => entry.filterKeys.has(n))
    && distinctFilters <= (entry.maxFilterNames ?? Infinity)
    && breakdowns.length <= entry.maxBreakdowns
    && breakdowns.every((n) => entry.groupKeys.has(n))
    && entry.named.every((n) => named.has(n))
    && entry.measures.has(r.target)
    && (entry.maxKeyBytes === undefined || (keyBytes > 0 && keyBytes <= entry.maxKeyBytes))
    && r.wholeHours
    && !(entry.needs.includes('hll') && r.extensions?.hll === false);
}

describe('read planner: the rule', () => {
  it('the catalogue: unique ids, ranks in order, one side each', () => {
    assert.equal(new Set(READ_CATALOGUE.map((e) => e.id)).size, READ_CATALOGUE.length);
    READ_CATALOGUE.forEach((e, i) => assert.equal(e.rank, i));
  });

  it('every enumerated read takes the first entry that answers it, raw when none; every entry is taken somewhere', () => {
    const taken = new Map<string, number>();
    let n = 0;
    for (const r of requests()) {
      const chosen = planRead(r);
      // The first entry that answers (so no earlier one does), or none: raw.
      const first = r.path === 'raw' ? undefined : READ_CATALOGUE.find(answersTo(r));
      // (Messages built only on a failure: 250,000 reads.)
      if (chosen?.id !== first?.id) assert.fail(`${chosen?.id ?? 'raw'} chosen, ${first?.id ?? 'raw'} expected: ${JSON.stringify(r)}`);
      if (chosen) {
        // keys, measures, grain, needs of the chosen entry
        if (!(r.filters.every((x) => chosen.filterKeys.has(x)) && (r.breakdowns ?? []).every((x) => chosen.groupKeys.has(x)))) assert.fail(`keys: ${JSON.stringify(r)}`);
        if (!(chosen.measures.has(r.target) && r.wholeHours && chosen.side === r.side)) assert.fail(`measures, grain or side: ${JSON.stringify(r)}`);
      }
      taken.set(chosen?.id ?? 'raw', (taken.get(chosen?.id ?? 'raw') ?? 0) + 1);
      n++;
    }
    for (const e of READ_CATALOGUE) assert.ok(taken.get(e.id), `never taken: ${e.id}`);
    assert.ok(n > 200_000, String(n));
  });
});

const hours = { path: 'auto', wholeHours: true } as const;
const sessions = (target: ReadTarget, filters: string[], breakdown?: string, more: Partial<ReadRequest> = {}) =>
  planRead({ side: 'sessions', target, filters, breakdowns: breakdown ? [breakdown] : [], ...hours, ...more })?.id ?? 'raw';
const events = (target: ReadTarget, filters: string[], breakdowns: string[] = [], more: Partial<ReadRequest> = {}) =>
  planRead({ side: 'events', target, filters, breakdowns, ...hours, ...more })?.id ?? 'raw';

describe('read planner: documented precedences', () => {
  it('insights: unfiltered reads take the unfiltered rollups', () => {
    assert.equal(sessions('metrics', []), 'sessions');
    assert.equal(sessions('pages', []), 'pages');
    assert.equal(sessions('breakdown', [], 'city'), 'session_dimension:city');
  });

  it('insights: metrics filtered on one dimension (and its parent) read that dimension\'s rollup, the child\'s for both', () => {
    assert.equal(sessions('metrics', ['country']), 'session_dimension:country');
    assert.equal(sessions('metrics', ['city', 'country']), 'session_dimension:city');
    assert.equal(sessions('metrics', ['country', 'city', 'city']), 'session_dimension:city');
    assert.equal(sessions('metrics', ['os_version', 'os']), 'session_dimension:os_version');
    assert.equal(sessions('metrics', ['region', 'city']), 'raw');
  });

  it('insights: a breakdown filtered on its own dimension or its parent reads its rollup, before the cube', () => {
    assert.equal(sessions('breakdown', ['country'], 'country'), 'session_dimension:country');
    assert.equal(sessions('breakdown', ['country'], 'region'), 'session_dimension:region');
    assert.equal(sessions('breakdown', ['browser', 'browser_version'], 'browser_version'), 'session_dimension:browser_version');
  });

  it('insights: metrics filtered on two cube dimensions read the pair metrics (hll), three or a wide one: raw', () => {
    assert.equal(sessions('metrics', ['device', 'country']), 'session_pair_metrics');
    assert.equal(sessions('metrics', ['device', 'country'], undefined, { extensions: { hll: false } }), 'raw');
    assert.equal(sessions('metrics', ['device', 'country', 'os']), 'raw');
    assert.equal(sessions('metrics', ['device', 'city']), 'raw');
  });

  it('insights: a breakdown of a cube dimension filtered on others reads the session cube, before a dimension pair', () => {
    assert.equal(sessions('breakdown', ['device'], 'referrer_name'), 'session_cube');
    assert.equal(sessions('breakdown', ['device', 'os', 'country'], 'browser'), 'session_cube');
    // (city, device) rows also key country and device: the cube is narrower
    assert.equal(sessions('breakdown', ['device'], 'country'), 'session_cube');
  });

  it('insights: a breakdown naming one wide dimension and one cube dimension reads their pair', () => {
    assert.equal(sessions('breakdown', ['city'], 'country'), 'session_dimension_pair:city,country');
    assert.equal(sessions('breakdown', ['device'], 'city'), 'session_dimension_pair:city,device');
    assert.equal(sessions('breakdown', ['city', 'country'], 'device'), 'session_dimension_pair:city,device');
    assert.equal(sessions('breakdown', ['browser_version'], 'browser'), 'session_dimension_pair:browser_version,browser');
    assert.equal(sessions('breakdown', ['referrer'], 'device'), 'session_dimension_pair:referrer,device');
    assert.equal(sessions('breakdown', ['city', 'region'], 'country'), 'raw');
    assert.equal(sessions('breakdown', ['referrer', 'device'], 'os'), 'raw');
  });

  it('insights: pages filtered, event-level filters, hours not whole or path raw: raw', () => {
    assert.equal(sessions('pages', ['country']), 'raw');
    assert.equal(sessions('metrics', ['path']), 'raw');
    assert.equal(sessions('breakdown', ['properties.plan'], 'country'), 'raw');
    assert.equal(sessions('metrics', [], undefined, { wholeHours: false }), 'raw');
    assert.equal(sessions('metrics', [], undefined, { path: 'raw' }), 'raw');
  });

  it('export: unfiltered event counts read events_hourly, a column breakdown that column\'s rollups', () => {
    assert.equal(events('eventCount', []), 'events');
    assert.equal(events('eventCount', [], ['name']), 'events');
    assert.equal(events('eventCount', [], ['city']), 'event_column:city');
    assert.equal(events('eventCount', [], ['properties.plan']), 'raw');
    assert.equal(events('eventCount', [], ['name', 'country']), 'raw');
  });

  it('export: country=DE alone counts from the column, not the cube; several cube columns from the cube', () => {
    assert.equal(events('eventCount', ['country']), 'event_column:country');
    assert.equal(events('totalCount', ['country']), 'event_column:country');
    assert.equal(events('eventCount', ['country'], ['country']), 'event_column:country');
    assert.equal(events('eventCount', ['name'], ['region']), 'event_column:region');
    assert.equal(events('eventCount', ['device'], ['country']), 'event_cube');
    assert.equal(events('eventCount', ['country', 'device']), 'event_cube');
    assert.equal(events('totalCount', ['country', 'device', 'os']), 'event_cube');
    // names only: every column's rows would do; the cube answers
    assert.equal(events('eventCount', ['name']), 'event_cube');
    assert.equal(events('totalCount', ['name']), 'event_cube');
  });

  it('export: what no rollup keys reads raw', () => {
    assert.equal(events('eventCount', ['city'], ['country']), 'raw');
    assert.equal(events('eventCount', ['city', 'path']), 'raw');
    assert.equal(events('eventCount', ['properties.plan']), 'raw');
    assert.equal(events('totalCount', [], [], { profileId: true }), 'raw');
    assert.equal(events('totalCount', ['profile_id']), 'raw');
    assert.equal(events('eventCount', ['city'], [], { wholeHours: false }), 'raw');
  });

  it('export: property aggregates of a short key and distinct counts, unfiltered only', () => {
    assert.equal(events('propertyAggregate', [], ['city'], { propertyKey: 'amount' }), 'event_properties');
    assert.equal(events('propertyAggregate', [], [], { propertyKey: 'k'.repeat(201) }), 'raw');
    assert.equal(events('propertyAggregate', [], [], { propertyKey: '' }), 'raw');
    assert.equal(events('propertyAggregate', ['city'], [], { propertyKey: 'amount' }), 'raw');
    assert.equal(events('distinctCount', [], ['name']), 'event_sketches');
    assert.equal(events('distinctCount', [], [], { extensions: { hll: false } }), 'raw');
    assert.equal(events('distinctCount', ['city']), 'raw');
  });
});
