// The read planner: which pre-aggregated source answers a dashboard read, decided
// here and only here by ONE rule over the read catalogue below (data: one entry per source, as
// the write side's internal/store/rollup-catalogue.ts lists what is kept): the first entry,
// smallest first, whose keys, measures, grain and needs answer the request (mismatch()); none,
// or path 'raw': the raw rows. docs/rollups.md, "Reading: one planner", states the rule and the
// order. planRead() is pure (no database, no clock): the callers map the chosen entry to their
// SQL builders, which all read the local-day tables for the complete days inside one bucket and
// the hourly tables or raw rows for the other hours, so every entry needs the same whole hours.
import { DIMENSION_PREFIX, SESSION_DIMENSIONS, type SessionDimension } from '../model/event';
import { CUBE_DIMENSIONS, EVENT_ROLLUP_DIMENSIONS, WIDE_DIMENSIONS, type CubeDimension } from '../store/rollup-catalogue';

// ---------------------------------------------------------------------------------------
// The keys the sources are built over: the dimension lists are declared once, with the tables
// that keep them (store/rollup-catalogue.ts).
export { CUBE_DIMENSIONS, EVENT_ROLLUP_DIMENSIONS, type CubeDimension };

/** Keys of the event rollups (sql/013: property keys longer than this are not rolled up). */
const MAX_ROLLED_KEY_BYTES = 200;

// ---------------------------------------------------------------------------------------
// The request

type ReadSide = 'sessions' | 'events';

/** 'auto' lets the planner choose; 'raw' never reads a rollup. */
export type ReadPath = 'auto' | 'raw';

/**
 * What a read asks for:
 * - sessions: `metrics` (the five session sums per bucket and in total, plus unique visitors),
 *   `pages` (per page sums and title), `breakdown` (the five sums per value of the breakdown);
 * - events: `eventCount` (a chart series of segment event: counts per bucket and breakdown
 *   value), `distinctCount` (segments user, session, user_average: estimated from sketches
 *   above the exact threshold), `propertyAggregate` (property_sum/average/min/max of one
 *   top-level key), `totalCount` (/export/events meta.totalCount: every event, bots and
 *   session rows too). one_event_per_user and group have no target: always raw.
 */
export type ReadTarget = 'metrics' | 'pages' | 'breakdown' | 'eventCount' | 'distinctCount' | 'propertyAggregate' | 'totalCount';

export interface ReadRequest {
  side: ReadSide;
  target: ReadTarget;
  /** The names the filters test (a name may repeat). */
  filters: readonly string[];
  /** The breakdown names (sessions' `breakdown`: the one dimension). */
  breakdowns?: readonly string[];
  /** Default 'auto'. */
  path?: ReadPath;
  /**
   * The hours fit: insights, the period's start, end and every bucket start are whole UTC
   * hours; charts, every bucket boundary inside the window is a whole UTC hour and some whole
   * hour lies inside it; totalCount, some whole hour lies between the start and the anchor.
   */
  wholeHours: boolean;
  /** The read is one profile's (export profileId): no rollup keeps profiles. */
  profileId?: boolean;
  /** propertyAggregate: the top-level property key. */
  propertyKey?: string;
  /**
   * Extensions the sources may need; undefined: not known here (the caller checks at run
   * time, or answers as if present: planFor()).
   */
  extensions?: { hll?: boolean };
}

// ---------------------------------------------------------------------------------------
// The catalogue

type SourceFamily =
  | 'sessions' | 'pages' | 'session_dimension' | 'session_pair_metrics' | 'session_cube' | 'session_dimension_pair'
  | 'events' | 'event_column' | 'event_properties' | 'event_sketches' | 'event_cube';

/**
 * A rollup table as a read sees it: `as` renames its stored key columns to the names the read's
 * filters and breakdown use (value AS city), `match` fixes key columns (dimension = 'city').
 * `every`: its rows count every event (bots and session rows too; a chart keeps the charted ones).
 */
export interface RollupRelation {
  table: string;
  as?: Readonly<Record<string, string>>;
  match?: Readonly<Record<string, string>>;
  every?: true;
}

/**
 * Where a source's rows are, layer by layer (internal/query/layered.ts): the complete local days
 * listed in `days` read `daily` (or, naming at most two cube dimensions, that pair's rows of the
 * `pairs` table: pair, a, b), the other hours `hourly` ('raw': the raw rows of each hour).
 * `uncharted`: the rows of the events these leave out, which a totalCount adds; `visitors`: the
 * hourly visitor sketches of the same keys (hll), which metrics read above the exact threshold.
 */
export interface SourceTables {
  days?: string;
  daily?: RollupRelation;
  pairs?: RollupRelation;
  hourly: RollupRelation | 'raw';
  uncharted?: { days: string; daily: RollupRelation; hourly: RollupRelation };
  visitors?: RollupRelation;
}

export interface ReadSource {
  /** Unique: the family and its parameter (`session_dimension:city`, `session_dimension_pair:city,device`). */
  id: string;
  family: SourceFamily;
  side: ReadSide;
  tables: SourceTables;
  /** Names a filter may test: the source's rows carry them. */
  filterKeys: ReadonlySet<string>;
  /** Names a breakdown may group by. */
  groupKeys: ReadonlySet<string>;
  /** Names the read must name (a filter or the breakdown): a per-column source serves its column's reads. */
  named: readonly string[];
  /** At most this many distinct filter names (pair tables keep two dimensions). */
  maxFilterNames?: number;
  /** At most this many breakdowns. */
  maxBreakdowns: number;
  measures: ReadonlySet<ReadTarget>;
  /** `hour`: hourly rows; `day`: local-day rows, the period's other hours raw or hourly. Both need whole UTC hours. */
  grain: 'hour' | 'day';
  needs: readonly 'hll'[];
  /** propertyAggregate: keys of at most this many UTF-8 bytes. */
  maxKeyBytes?: number;
  /** Position in the catalogue (smallest first). */
  rank: number;
}

const set = <T extends string = string>(...names: readonly T[]): ReadonlySet<T> => new Set(names);
const measures = (...targets: readonly ReadTarget[]): ReadonlySet<ReadTarget> => new Set(targets);
const parentOf = (d: SessionDimension): SessionDimension[] => (DIMENSION_PREFIX[d] ? [DIMENSION_PREFIX[d]!] : []);
const SESSION_SUMS = measures('metrics');

type Entry = Omit<ReadSource, 'rank'>;

function sessionEntries(): Entry[] {
  const out: Entry[] = [
    {
      id: 'sessions', family: 'sessions', side: 'sessions',
      tables: { hourly: { table: 'rollup_sessions_hourly' } },
      filterKeys: set(), groupKeys: set(), named: [], maxBreakdowns: 0, measures: SESSION_SUMS, grain: 'hour', needs: [],
    },
    {
      id: 'pages', family: 'pages', side: 'sessions',
      tables: { daily: { table: 'rollup_pages_daily' }, hourly: { table: 'rollup_pages_hourly' } },
      filterKeys: set(), groupKeys: set(), named: [], maxBreakdowns: 0, measures: measures('pages'), grain: 'hour', needs: [],
    },
  ];
  // One dimension's rollup: value = the dimension, prefix = its parent. It serves the reads
  // that name the dimension: metrics filtered on it (and its parent), its breakdown.
  for (const d of SESSION_DIMENSIONS) {
    const as = { value: d, ...(DIMENSION_PREFIX[d] ? { prefix: DIMENSION_PREFIX[d] } : {}) };
    out.push({
      id: `session_dimension:${d}`, family: 'session_dimension', side: 'sessions',
      tables: { hourly: { table: `rollup_${d}_hourly`, as }, visitors: { table: 'rollup_visitor_values_hourly', match: { dimension: d }, as } },
      filterKeys: set(d, ...parentOf(d)), groupKeys: set(d), named: [d], maxBreakdowns: 1,
      measures: measures('metrics', 'breakdown'), grain: 'hour', needs: [],
    });
  }
  // Metrics filtered on two cube dimensions: per local day and pair, the sums and a visitors sketch.
  out.push({
    id: 'session_pair_metrics', family: 'session_pair_metrics', side: 'sessions',
    tables: { days: 'rollup_session_pair_metrics_days', pairs: { table: 'rollup_session_pair_metrics_daily' }, hourly: 'raw' },
    filterKeys: set(...CUBE_DIMENSIONS), groupKeys: set(), named: [], maxFilterNames: 2, maxBreakdowns: 0,
    measures: SESSION_SUMS, grain: 'day', needs: ['hll'],
  });
  // A breakdown of a cube dimension filtered on cube dimensions (no visitors: metrics never).
  out.push({
    id: 'session_cube', family: 'session_cube', side: 'sessions',
    tables: {
      days: 'rollup_session_cube_days', pairs: { table: 'rollup_session_cube_pairs_daily' },
      daily: { table: 'rollup_session_cube_daily' }, hourly: { table: 'rollup_session_cube_hourly' },
    },
    filterKeys: set(...CUBE_DIMENSIONS), groupKeys: set(...CUBE_DIMENSIONS), named: [], maxBreakdowns: 1,
    measures: measures('breakdown'), grain: 'hour', needs: [],
  });
  // A breakdown naming one wide dimension W (and maybe its parent) and one cube dimension C:
  // the (W, C) rows per local day (a = W, a_prefix = W's parent, b = C); (W, parent) first.
  for (const w of WIDE_DIMENSIONS) {
    const parent = DIMENSION_PREFIX[w] as CubeDimension | undefined;
    const cubes = parent ? [parent, ...CUBE_DIMENSIONS.filter((c) => c !== parent)] : CUBE_DIMENSIONS;
    for (const c of cubes) {
      const keys = set(w, ...parentOf(w), c);
      out.push({
        id: `session_dimension_pair:${w},${c}`, family: 'session_dimension_pair', side: 'sessions',
        tables: {
          days: 'rollup_session_dim_pairs_days', hourly: 'raw',
          daily: { table: 'rollup_session_dim_pairs_daily', match: { pair: `${w},${c}` }, as: { a: w, b: c, ...(parent && parent !== c ? { a_prefix: parent } : {}) } },
        },
        filterKeys: keys, groupKeys: keys, named: c === parent ? [w] : [w, c], maxBreakdowns: 1,
        measures: measures('breakdown'), grain: 'day', needs: [],
      });
    }
  }
  return out;
}

function eventEntries(): Entry[] {
  const columns = EVENT_ROLLUP_DIMENSIONS;
  const out: Entry[] = [
    {
      id: 'events', family: 'events', side: 'events',
      tables: {
        days: 'event_counts_days', daily: { table: 'event_counts_daily', match: { dimension: '' } },
        hourly: { table: 'events_hourly', every: true },
      },
      filterKeys: set(), groupKeys: set('name'), named: [], maxBreakdowns: 1,
      measures: measures('eventCount', 'totalCount'), grain: 'hour', needs: [],
    },
  ];
  // One column's rollups: per hour or local day, event name and value of the column. They
  // serve the reads naming the column (fewer rows than the cube, which holds nine columns).
  for (const c of columns) {
    out.push({
      id: `event_column:${c}`, family: 'event_column', side: 'events',
      tables: {
        days: 'event_counts_days', daily: { table: 'event_counts_daily', match: { dimension: c }, as: { value: c } },
        hourly: { table: `events_${c}_hourly`, as: { value: c } },
        uncharted: {
          days: 'event_uncharted_days', daily: { table: 'event_uncharted_daily', match: { dimension: c }, as: { value: c } },
          hourly: { table: 'event_uncharted_hourly', match: { dimension: c }, as: { value: c } },
        },
      },
      filterKeys: set('name', c), groupKeys: set('name', c), named: [c], maxBreakdowns: 1,
      measures: measures('eventCount', 'totalCount'), grain: 'hour', needs: [],
    });
  }
  out.push({
    id: 'event_properties', family: 'event_properties', side: 'events',
    tables: { hourly: { table: 'event_properties_hourly' } },
    filterKeys: set(), groupKeys: set('name', ...columns), named: [], maxBreakdowns: 1,
    measures: measures('propertyAggregate'), grain: 'hour', needs: [], maxKeyBytes: MAX_ROLLED_KEY_BYTES,
  });
  out.push({
    id: 'event_sketches', family: 'event_sketches', side: 'events',
    tables: { days: 'events_sketches_days', daily: { table: 'events_sketches_daily' }, hourly: { table: 'events_sketches_hourly' } },
    filterKeys: set(), groupKeys: set('name', ...columns), named: [], maxBreakdowns: 1,
    measures: measures('distinctCount'), grain: 'hour', needs: ['hll'],
  });
  out.push({
    id: 'event_cube', family: 'event_cube', side: 'events',
    tables: {
      days: 'event_cube_days', pairs: { table: 'event_cube_pairs_daily', every: true },
      daily: { table: 'event_cube_daily', every: true }, hourly: { table: 'event_cube_hourly', every: true },
    },
    filterKeys: set('name', ...CUBE_DIMENSIONS), groupKeys: set('name', ...CUBE_DIMENSIONS), named: [], maxBreakdowns: 1,
    measures: measures('eventCount', 'totalCount'), grain: 'hour', needs: [],
  });
  return out;
}

/** The read catalogue, smallest first within each side. */
export const READ_CATALOGUE: readonly ReadSource[] = [...sessionEntries(), ...eventEntries()].map((e, rank) => ({ ...e, rank }));

const BY_ID = new Map(READ_CATALOGUE.map((e) => [e.id, e]));

/** The entry of `id` (throws on an unknown id: ids are ours). */
export function readSource(id: string): ReadSource {
  const e = BY_ID.get(id);
  if (!e) throw new Error(`no read source ${id}`);
  return e;
}

// ---------------------------------------------------------------------------------------
// The rule

/** Why an entry does not answer a request, or null when it does (the rule, one test at a time). */
export function mismatch(entry: ReadSource, request: ReadRequest): string | null {
  const breakdowns = request.breakdowns ?? [];
  const filters = new Set(request.filters);
  // No rollup keeps profiles: a profile's read is a filter on profile_id.
  if (request.profileId) filters.add('profile_id');
  if (entry.side !== request.side) return 'side';
  if (!entry.measures.has(request.target)) return 'measure';
  for (const n of filters) if (!entry.filterKeys.has(n)) return `filter ${n}`;
  if (entry.maxFilterNames !== undefined && filters.size > entry.maxFilterNames) return 'filter names';
  if (breakdowns.length > entry.maxBreakdowns) return 'breakdowns';
  for (const n of breakdowns) if (!entry.groupKeys.has(n)) return `breakdown ${n}`;
  for (const n of entry.named) if (!filters.has(n) && !breakdowns.includes(n)) return `unnamed ${n}`;
  if (entry.maxKeyBytes !== undefined) {
    const key = request.propertyKey ?? '';
    // Bytes of UTF-8 on both sides (octet_length in sql/013), whatever the database encoding.
    if (key === '' || Buffer.byteLength(key, 'utf8') > entry.maxKeyBytes) return 'property key';
  }
  if (!request.wholeHours) return 'grain';
  if (entry.needs.includes('hll') && request.extensions?.hll === false) return 'needs hll';
  return null;
}

/**
 * The source a read takes: the first catalogue entry (smallest first) that answers it
 * (mismatch() null), or null for the raw rows. Path 'raw': null.
 */
export function planRead(request: ReadRequest): ReadSource | null {
  if ((request.path ?? 'auto') === 'raw') return null;
  for (const entry of READ_CATALOGUE) if (mismatch(entry, request) === null) return entry;
  return null;
}

// ---------------------------------------------------------------------------------------
// Helpers the SQL builders share

/** HyperLogLog parameters of every sketch (sql/008, sql/010, sql/011): log2m, regwidth, expthresh, sparseon. */
export const HLL_PARAMS = '14, 5, -1, 1';

/** One pair of cube dimensions, as the daily pair rows key it (sql/015, sql/016, sql/018). */
interface CubePair {
  /** `first,second` in CUBE_DIMENSIONS order. */
  key: string;
  a: CubeDimension;
  b: CubeDimension;
}

/**
 * The pair of cube dimensions whose daily pair rows answer a read naming `names` (all cube
 * dimensions): those two, or the one named and the first other; null for three or more.
 */
export function cubePair(names: Iterable<CubeDimension>): CubePair | null {
  const named = new Set(names);
  if (named.size > 2) return null;
  const cols = CUBE_DIMENSIONS.filter((d) => named.has(d));
  for (const d of CUBE_DIMENSIONS) if (cols.length < 2 && !named.has(d)) cols.push(d);
  cols.sort((x, y) => CUBE_DIMENSIONS.indexOf(x) - CUBE_DIMENSIONS.indexOf(y));
  const [a, b] = cols as [CubeDimension, CubeDimension];
  return { key: `${a},${b}`, a, b };
}

/**
 * The daily pair rows a read of a source naming `names` takes (sources with `pairs`, at most two
 * cube dimensions named; `name` is a key of every event row): that pair's relation, a and b seen
 * as the dimensions. Null: the source's `daily` rows.
 */
export function pairRelation(source: ReadSource, names: readonly string[]): RollupRelation | null {
  const pair = source.tables.pairs && cubePair(names.filter((n) => n !== 'name') as CubeDimension[]);
  return pair ? { ...source.tables.pairs!, match: { pair: pair.key }, as: { a: pair.a, b: pair.b } } : null;
}
