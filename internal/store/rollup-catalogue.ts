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
//   bookkeeping  not summed: a *_days list, or event_properties_raw_hours (a union, see
//           applyDeltas).
// A kept table that is in no entry makes its refresh function non-additive: its delta hours
// are recomputed instead. test/rollup-deltas.test.ts checks that every kept table of a migrated
// database is here; rollup-catalogue.test.ts checks the entries' own rules.

export interface RollupEntry {
  relation: string;
  grain: 'hour' | 'day';
  sums: string[];
  mins?: string[];
  maxes?: string[];
  latest?: { by: string[]; cols: string[] };
  unions?: string[];
  /** A measure that is 0 exactly when the row counts nothing (none: sketches only, kept). */
  presence?: string;
  days?: string;
}

const SESSION_SUMS = ['sessions', 'bounces', 'timed_sessions', 'duration_ms', 'screen_views'];
const SESSION_DIMENSIONS = [
  'referrer', 'referrer_name', 'referrer_type', 'utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content',
  'country', 'region', 'city', 'device', 'browser', 'browser_version', 'os', 'os_version', 'brand', 'model',
];
/** sql/009 events_rollup_dimensions: the session dimensions plus origin and path. */
const EVENT_DIMENSIONS = [...SESSION_DIMENSIONS, 'origin', 'path'];

const sessions = (relation: string, grain: 'hour' | 'day' = 'hour', days?: string): RollupEntry =>
  ({ relation, grain, sums: SESSION_SUMS, presence: 'sessions', ...(days ? { days } : {}) });
const counts = (relation: string, grain: 'hour' | 'day' = 'hour', days?: string): RollupEntry =>
  ({ relation, grain, sums: ['count'], presence: 'count', ...(days ? { days } : {}) });
const PAGES = {
  sums: ['sessions', 'entries', 'bounces', 'timed_views', 'duration_ms', 'views'],
  latest: { by: ['title_at', 'title_id'], cols: ['title', 'title_at', 'title_id'] },
  presence: 'views',
};

export const ROLLUP_CATALOGUE: RollupEntry[] = [
  // sessions (sql/002, 012, 016, 019, 023)
  sessions('rollup_sessions_hourly'),
  ...SESSION_DIMENSIONS.map((d) => sessions(`rollup_${d}_hourly`)),
  sessions('rollup_session_cube_hourly'),
  sessions('rollup_session_cube_daily', 'day', 'rollup_session_cube_days'),
  sessions('rollup_session_cube_pairs_daily', 'day', 'rollup_session_cube_days'),
  sessions('rollup_session_dim_pairs_daily', 'day', 'rollup_session_dim_pairs_days'),
  // pages (sql/008, 023)
  { relation: 'rollup_pages_hourly', grain: 'hour', ...PAGES },
  { relation: 'rollup_pages_daily', grain: 'day', ...PAGES },
  // events (sql/009, 013, 014, 015, 017, 020)
  counts('events_hourly'),
  ...EVENT_DIMENSIONS.map((d) => counts(`events_${d}_hourly`)),
  { relation: 'event_properties_hourly', grain: 'hour', sums: ['count', 'sum'], mins: ['min'], maxes: ['max'], presence: 'count' },
  counts('event_counts_daily', 'day', 'event_counts_days'),
  counts('event_cube_hourly'),
  counts('event_cube_daily', 'day', 'event_cube_days'),
  counts('event_cube_pairs_daily', 'day', 'event_cube_days'),
  counts('event_uncharted_hourly'),
  counts('event_uncharted_daily', 'day', 'event_uncharted_days'),
  // hll sketches (sql/008_rollup_visitors, 010, 011, 018), only where the extension is
  { relation: 'rollup_visitors_hourly', grain: 'hour', sums: [], unions: ['visitors'] },
  { relation: 'rollup_visitors_dayparts', grain: 'day', sums: [], unions: ['visitors'] },
  { relation: 'rollup_visitor_values_hourly', grain: 'hour', sums: [], unions: ['visitors'] },
  { relation: 'events_sketches_hourly', grain: 'hour', sums: [], unions: ['users', 'sessions'] },
  { relation: 'events_sketches_daily', grain: 'day', sums: [], unions: ['users', 'sessions'], days: 'events_sketches_days' },
  { ...sessions('rollup_session_pair_metrics_daily', 'day', 'rollup_session_pair_metrics_days'), unions: ['visitors'] },
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
