// How each service-kept rollup table combines, as data: the refresh applies deltas by it
// (internal/store/rollup-deltas.ts, applyDeltas). A table's rows are keyed by every column that
// is not a measure; a delta row is added to the stored row of the same key, and a row whose
// `presence` measure reaches 0 is removed (it counted nothing any more).
//
//   sums    added (a delta carries now - before)
//   mins    least of stored and now (only for tables whose source rows are never removed:
//           events' numeric properties)
//   maxes   greatest of stored and now (same)
//   latest  the columns of the row with the greatest `by` (pages: the latest title)
//   unions  HyperLogLog sketches (the optional hll extension): stored unioned with now.
//           Exact (the same sketch as a recompute) while nothing leaves a sketch; where
//           something may have (an event deleted, a session's profile changed), the refresh
//           recomputes the hour's sketch tables instead (rollups.ts, sketchHours).
//   grain   'hour' (bucket is a UTC hour) or 'day' (bucket is a day's first instant)
//   days    for a daily table: the table listing which days are built, with their length in
//           hours; deltas go into a day only if it is listed and none of its hours awaits a
//           recompute. Without it (pages), the UTC day of 24 hours.
//   keys    the columns a row is keyed by
//   bookkeeping  not summed: a *_days list, or event_properties_raw_hours (a union, see
//           applyDeltas).
// Every column of a table is a key (`keys`) or a measure, and the keys are its primary key
// where it has one: test/rollup-catalogue-schema.test.ts checks a migrated database both ways.
// A kept table that is in no entry makes its refresh function non-additive: its delta hours
// are recomputed instead. test/rollup-deltas.test.ts checks that every kept table of a migrated
// database is here; rollup-catalogue.test.ts checks the entries' own rules.

import { DIMENSION_PREFIX, SESSION_DIMENSIONS, type SessionDimension } from '../model/event';

export interface RollupEntry {
  relation: string;
  /** The columns a row is keyed by (project_id and bucket among them); every other column is a measure. */
  keys: string[];
  grain: 'hour' | 'day';
  sums: string[];
  mins?: string[];
  maxes?: string[];
  latest?: { by: string[]; cols: string[] };
  unions?: string[];
  /** A measure that is 0 exactly when the row counts nothing (none: sketches only, kept). */
  presence?: string;
  days?: string;
  /**
   * It counts the service's own session_start / session_end rows (the export lists them), so
   * they alone change it; every other table reads sessions, screen views or the events charts
   * count. A refresh round whose only changes are such rows (an idle session's end: the usual
   * delta of a live hour) runs and merges only these (rollup-deltas.ts);
   * test/rollup-deltas.test.ts checks the flags against a recompute.
   */
  serviceEvents?: true;
}

// ---- the dimension lists, declared once (the read planner, the tests and the SQL agree with these) ----

/**
 * The low-cardinality session dimensions kept together, per combination, in the session cube
 * (sql/012) and the event cube (sql/015), and in pairs per local day (sql/015, 016, 018).
 */
export const CUBE_DIMENSIONS = [
  'referrer_name', 'referrer_type', 'utm_source', 'utm_medium', 'country', 'device', 'browser', 'os', 'brand',
] as const satisfies readonly SessionDimension[];
export type CubeDimension = (typeof CUBE_DIMENSIONS)[number];

/**
 * The session dimensions the session cube leaves out (their values would multiply its
 * combinations); each is kept per local day paired with each cube dimension (sql/019), with
 * its parent as the rows' a_prefix.
 */
export const WIDE_DIMENSIONS = [
  'referrer', 'utm_campaign', 'utm_term', 'utm_content', 'region', 'city', 'browser_version', 'os_version', 'model',
] as const satisfies readonly SessionDimension[];

/** The event columns with an events_<column>_hourly rollup (sql/009): the session dimensions, origin and path. */
export const EVENT_ROLLUP_DIMENSIONS = [...SESSION_DIMENSIONS, 'origin', 'path'] as const;

const SESSION_SUMS = ['sessions', 'bounces', 'timed_sessions', 'duration_ms', 'screen_views'];
const HOUR = ['project_id', 'bucket'];

const sessions = (relation: string, keys: string[], grain: 'hour' | 'day' = 'hour', days?: string): RollupEntry =>
  ({ relation, keys, grain, sums: SESSION_SUMS, presence: 'sessions', ...(days ? { days } : {}) });
const counts = (relation: string, keys: string[], grain: 'hour' | 'day' = 'hour', days?: string): RollupEntry =>
  ({ relation, keys, grain, sums: ['count'], presence: 'count', ...(days ? { days } : {}) });
/** A count of every event, the service's session_start / session_end included (`serviceEvents`). */
const allEventCounts = (relation: string, keys: string[], grain: 'hour' | 'day' = 'hour', days?: string): RollupEntry =>
  ({ ...counts(relation, keys, grain, days), serviceEvents: true });
const PAGES = {
  keys: [...HOUR, 'origin', 'path'],
  sums: ['sessions', 'entries', 'bounces', 'timed_views', 'duration_ms', 'views'],
  latest: { by: ['title_at', 'title_id'], cols: ['title', 'title_at', 'title_id'] },
  presence: 'views',
};
/** A session dimension's own table: its value, and its parent's as prefix (region: country). */
const dimensionKeys = (d: SessionDimension) => [...HOUR, ...(DIMENSION_PREFIX[d] ? ['prefix'] : []), 'value'];
const PAIR = [...HOUR, 'pair', 'a', 'b'];
const EVENT_GROUP = [...HOUR, 'name', 'dimension', 'value'];

export const ROLLUP_CATALOGUE: RollupEntry[] = [
  // sessions (sql/002, 012, 016, 019, 023)
  sessions('rollup_sessions_hourly', HOUR),
  ...SESSION_DIMENSIONS.map((d) => sessions(`rollup_${d}_hourly`, dimensionKeys(d))),
  sessions('rollup_session_cube_hourly', [...HOUR, ...CUBE_DIMENSIONS]),
  sessions('rollup_session_cube_daily', [...HOUR, ...CUBE_DIMENSIONS], 'day', 'rollup_session_cube_days'),
  sessions('rollup_session_cube_pairs_daily', PAIR, 'day', 'rollup_session_cube_days'),
  sessions('rollup_session_dim_pairs_daily', [...PAIR, 'a_prefix'], 'day', 'rollup_session_dim_pairs_days'),
  // pages (sql/008, 023)
  { relation: 'rollup_pages_hourly', grain: 'hour', ...PAGES },
  { relation: 'rollup_pages_daily', grain: 'day', ...PAGES },
  // events (sql/009, 013, 014, 015, 017, 020)
  allEventCounts('events_hourly', [...HOUR, 'name', 'is_bot']),
  ...EVENT_ROLLUP_DIMENSIONS.map((d) => counts(`events_${d}_hourly`, [...HOUR, 'name', 'value'])),
  { relation: 'event_properties_hourly', keys: [...EVENT_GROUP, 'key'], grain: 'hour', sums: ['count', 'sum'], mins: ['min'], maxes: ['max'], presence: 'count' },
  counts('event_counts_daily', EVENT_GROUP, 'day', 'event_counts_days'),
  allEventCounts('event_cube_hourly', [...HOUR, 'name', 'is_bot', ...CUBE_DIMENSIONS]),
  allEventCounts('event_cube_daily', [...HOUR, 'name', 'is_bot', ...CUBE_DIMENSIONS], 'day', 'event_cube_days'),
  allEventCounts('event_cube_pairs_daily', [...PAIR, 'name', 'is_bot'], 'day', 'event_cube_days'),
  allEventCounts('event_uncharted_hourly', EVENT_GROUP),
  allEventCounts('event_uncharted_daily', EVENT_GROUP, 'day', 'event_uncharted_days'),
  // hll sketches (sql/008_rollup_visitors, 010, 011, 018), only where the extension is
  { relation: 'rollup_visitors_hourly', keys: HOUR, grain: 'hour', sums: [], unions: ['visitors'] },
  { relation: 'rollup_visitors_dayparts', keys: [...HOUR, 'kind', 'k'], grain: 'day', sums: [], unions: ['visitors'] },
  { relation: 'rollup_visitor_values_hourly', keys: [...HOUR, 'dimension', 'prefix', 'value'], grain: 'hour', sums: [], unions: ['visitors'] },
  { relation: 'events_sketches_hourly', keys: EVENT_GROUP, grain: 'hour', sums: [], unions: ['users', 'sessions'] },
  { relation: 'events_sketches_daily', keys: EVENT_GROUP, grain: 'day', sums: [], unions: ['users', 'sessions'], days: 'events_sketches_days' },
  { ...sessions('rollup_session_pair_metrics_daily', PAIR, 'day', 'rollup_session_pair_metrics_days'), unions: ['visitors'] },
];

export const BOOKKEEPING = new Set([
  'rollup_session_cube_days', 'rollup_session_dim_pairs_days', 'event_counts_days', 'event_cube_days', 'event_uncharted_days',
  'event_properties_raw_hours', 'events_sketches_days', 'rollup_session_pair_metrics_days',
]);

const byRelation = new Map(ROLLUP_CATALOGUE.map((e) => [e.relation, e]));
export const catalogueEntry = (relation: string): RollupEntry | undefined => byRelation.get(relation);
export const isCatalogued = (relation: string): boolean => byRelation.has(relation) || BOOKKEEPING.has(relation);

export const measuresOf = (e: RollupEntry): Set<string> =>
  new Set([...e.sums, ...(e.mins ?? []), ...(e.maxes ?? []), ...(e.latest?.cols ?? []), ...(e.unions ?? [])]);
