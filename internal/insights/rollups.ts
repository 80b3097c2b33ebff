// Rollup-backed reads of insights (metrics with unique visitors, pages, breakdowns) over the
// planner's source (internal/query/planner.ts), in layers (internal/query/layered.ts), in one
// statement, grouped as the raw path groups. docs/insights-decisions.md, "Rollups" and "Unique
// visitors", has the sources, the exact-or-sketch rule and the measurements.
import { DIMENSION_PREFIX, type SessionDimension } from '../model/event';
import { compileAll, type IndexedFilter, type SqlParams } from '../query/filters';
import type { Filter } from '../query/params';
import { LAYER_START, layerCtes, matching, perRow, probe, rawPerHour, renames, unionAll, unloggedRows, type Layers } from '../query/layered';
import type { Period } from '../query/period';
import { dayVisitorsCtes, type DayBuckets } from './day-visitors';
import { exactVisitorsCte } from './exact-visitors';
import { HLL_PARAMS, pairRelation, planRead, readSource, type ReadPath, type ReadRequest, type ReadSource, type RollupRelation } from '../query/planner';

export { HLL_PARAMS };

/** How one query reads its sessions. */
type ReadPlan = 'raw' | 'rollup';

const HOUR_MS = 3_600_000;

const wholeUtcHour = (d: Date): boolean => d.getTime() % HOUR_MS === 0;

/** What a query reads: metrics (and the series), pages, or one breakdown dimension. */
export type PlanTarget = 'metrics' | 'pages' | SessionDimension;

/** The rollups hold whole UTC hours: the period's start, end and every bucket start must be on one. */
export function wholeHoursOf(period: Pick<Period, 'start' | 'end' | 'buckets'>): boolean {
  return wholeUtcHour(period.start) && wholeUtcHour(period.end) && period.buckets.every(wholeUtcHour);
}

/** The planner's request for an insights read (internal/query/planner.ts). */
export function insightsRequest(
  filters: readonly Filter[],
  target: PlanTarget,
  opts: { path?: ReadPath; wholeHours: boolean; hll?: boolean },
): ReadRequest {
  const breakdown = target !== 'metrics' && target !== 'pages';
  return {
    side: 'sessions',
    target: breakdown ? 'breakdown' : target,
    filters: filters.map((f) => f.name),
    breakdowns: breakdown ? [target] : [],
    path: opts.path ?? 'auto',
    wholeHours: opts.wholeHours,
    ...(opts.hll === undefined ? {} : { extensions: { hll: opts.hll } }),
  };
}

/**
 * Rollups or raw rows for metrics, pages and breakdowns: planRead() (internal/query/planner.ts)
 * over the period's hours, answering as if the hll extension were installed (runInsightsQuery
 * asks with what the database has).
 */
export function planFor(
  period: Pick<Period, 'start' | 'end' | 'buckets'>,
  filters: readonly Filter[],
  path: ReadPath = 'auto',
  target: PlanTarget = 'metrics',
): ReadPlan {
  return planRead(insightsRequest(filters, target, { path, wholeHours: wholeHoursOf(period) })) ? 'rollup' : 'raw';
}

/** A rollup relation's rows seen with the read's column names (value AS city, prefix AS country; identifiers of the catalogue). */
const view = (rel: RollupRelation): string => (rel.as ? `(SELECT x.*, ${renames(rel)} FROM ${rel.table} x)` : rel.table);

interface RollupScope {
  projectId: string;
  /** Whole UTC hours (see planFor). */
  start: Date;
  end: Date;
}

interface Bound {
  params: SqlParams;
  project: string;
  start: string;
  end: string;
}

function bind(scope: RollupScope, params: SqlParams): Bound {
  return {
    params,
    project: params.add(scope.projectId),
    start: `${params.add(scope.start.toISOString())}::timestamptz`,
    end: `${params.add(scope.end.toISOString())}::timestamptz`,
  };
}

/** The period's layers (internal/query/layered.ts): `inv`, and days and hours as `more` asks. */
function layersOf(b: Bound, more: Pick<Layers, 'days' | 'hours'> = {}): Layers {
  return { project: b.project, from: b.start, to: b.end, ...more };
}

/** Raw sessions (alias `s`, the rows a refresh sums) of each logged hour, or of each hour of `hrs`. */
function tailSessions(b: Bound, hours: 'inv' | 'hrs' = 'inv'): string {
  return rawPerHour(hours, '*', 'sessions s', `s.project_id = ${b.project} AND NOT s.is_bot`, 's.started_at', 's');
}

/** The five session sums of the rollups, in their measure order: alias.column AS column, each wrapped in `f` (e.g. sum). */
const SUMS = ['sessions', 'bounces', 'timed_sessions', 'duration_ms', 'screen_views'] as const;
const sums = (alias: string, f = (x: string) => x) => SUMS.map((c) => `${f(`${alias}.${c}`)} AS ${c}`).join(', ');

/** The sums of sessions rows (alias `s`), named and in the rollups' measure order: sessions, bounces, timed_sessions, duration_ms, screen_views. */
export const RAW_MEASURES = `count(*) AS sessions,
               count(*) FILTER (WHERE s.is_bounce) AS bounces,
               count(*) FILTER (WHERE s.duration_ms > 0) AS timed_sessions,
               coalesce(sum(s.duration_ms) FILTER (WHERE s.duration_ms > 0), 0) AS duration_ms,
               coalesce(sum(s.screen_view_count), 0) AS screen_views`;

/**
 * Documented bound of a unique-visitor estimate's relative error: 3 standard errors of at
 * most 1% (nominal 1.04 / sqrt(2^14) = 0.81%; measured 0.6-0.95% depending on the count,
 * bias <= 0.2% after tm_visitors_estimate's correction), i.e. 99.7% of the numbers.
 */
export const HLL_ERROR_BOUND = 0.03;

interface VisitorCounting {
  /** Count exactly when the period has at most this many sessions. */
  exactMax: number;
  /** The sketches exist (hll): rollup_visitors_hourly unfiltered, rollup_visitor_values_hourly filtered; else exact. */
  sketches: boolean;
}

/**
 * Metrics over the rollups: one row per series bucket (1-based width_bucket index) and the totals
 * row (bucket NULL), the raw query's columns (sessions, bounces, timed_sessions, duration_ms,
 * screen_views, visitors), `exact` (visitors counted exactly) and with `days`, `days_ok`. From the
 * planner's source: the unfiltered rollups (family sessions; `days`: visitors from the visit days,
 * day-visitors.ts, unless days_ok is false); one dimension's rollup for filters on it (visitors:
 * rollup_visitor_values_hourly when `counting.sketches`); or two cube dimensions' daily pair metrics.
 */
export function rollupMetricsSql(
  scope: RollupScope,
  buckets: readonly Date[],
  params: SqlParams,
  counting: VisitorCounting = { exactMax: Infinity, sketches: false },
  source: ReadSource = readSource('sessions'),
  filters: readonly IndexedFilter[] = [],
  days: DayBuckets | null = null,
): string {
  if (!['sessions', 'session_dimension', 'session_pair_metrics'].includes(source.family)) throw new Error(`no metrics over ${source.id}`);
  const b = bind(scope, params);
  const filter = source.family !== 'sessions';
  const pair = source.family === 'session_pair_metrics';
  const starts = `${params.add(buckets.map((x) => x.toISOString()))}::timestamptz[]`;
  const sketches = counting.sketches && Number.isFinite(counting.exactMax);
  // The filters (if any), once per place they apply: rollup rows, raw tail, exact count, sketches.
  const where = (alias: string) => compileAll(filters, alias, params);
  // The period's session count (every session, filtered or not: what an exact count scans)
  // decides; its sum comes from the rollups (unfiltered: the same sums), so deciding costs
  // next to nothing.
  const exact = sketches ? '(SELECT d.exact FROM decide d)' : 'true';
  const periodSessions = filter
    ? `coalesce((SELECT sum(r.sessions) FROM ${unloggedRows(layersOf(b), 'rollup_sessions_hourly')}), 0)
               + (SELECT count(*) FROM ${tailSessions(b)})`
    : 'coalesce((SELECT sums.sessions FROM sums WHERE sums.bucket IS NULL), 0)';
  const decide = sketches
    ? `
      decide AS MATERIALIZED (
        SELECT ${periodSessions} <= ${params.add(counting.exactMax)}::numeric AS exact
      ),`
    : '';
  // The visitors of the logged hours' sessions meeting `filter`, hashed on the fly.
  const loggedSketches = (filter: string) => `SELECT width_bucket(inv.bucket, ${starts}), hll_add_agg(hll_hash_text(s.profile_id), ${HLL_PARAMS})
        FROM ${tailSessions(b)}
        WHERE ${filter} AND NOT ${exact}
        GROUP BY inv.bucket`;
  // Unfiltered: the hourly sketches and their UTC day parts (sql/008_rollup_visitors.sql).
  const periodSketches = `
      -- Each series bucket's share of the period, cut at UTC midnights. A cut that starts or
      -- ends a UTC day with no logged hour is one stored day part (prefix 'p' of hours 0..k,
      -- suffix 's' of hours k..23; a whole day is prefix 23); any other reads its hours.
      segs AS MATERIALIZED (
        SELECT x.bucket, x.d, x.lo, x.hi,
               NOT EXISTS (SELECT 1 FROM inv WHERE inv.bucket >= x.d AND inv.bucket < x.d + interval '1 day') AS day_ok,
               CASE WHEN x.lo = x.d THEN 'p' WHEN x.hi = x.d + interval '1 day' THEN 's' END AS kind,
               CASE WHEN x.lo = x.d THEN (extract(epoch FROM x.hi - x.d) / 3600)::int - 1
                    WHEN x.hi = x.d + interval '1 day' THEN (extract(epoch FROM x.lo - x.d) / 3600)::int END AS k
        FROM (
          SELECT bk.i AS bucket, d.d, greatest(bk.lo, d.d) AS lo, least(bk.hi, d.d + interval '1 day') AS hi
          FROM (
            SELECT i, greatest((${starts})[i], ${b.start}) AS lo,
                   least(coalesce((${starts})[i + 1], ${b.end}), ${b.end}) AS hi
            FROM generate_subscripts(${starts}, 1) AS i
          ) bk
          CROSS JOIN LATERAL generate_series(date_trunc('day', bk.lo, 'UTC'), bk.hi - interval '1 microsecond', interval '1 day') AS d(d)
          WHERE bk.lo < bk.hi AND NOT ${exact}
        ) x
      ),
      sketches AS (
        SELECT segs.bucket, dp.visitors AS sketch
        FROM segs
        -- LATERAL (kept by OFFSET 0): primary-key probes, whatever the row estimates
        CROSS JOIN LATERAL (
          SELECT x.visitors FROM rollup_visitors_dayparts x
          WHERE x.project_id = ${b.project} AND x.bucket = segs.d AND x.kind = segs.kind AND x.k = segs.k
          OFFSET 0
        ) dp
        WHERE segs.day_ok AND segs.kind IS NOT NULL
        UNION ALL
        SELECT segs.bucket, h.visitors
        FROM segs
        CROSS JOIN LATERAL (
          SELECT x.bucket, x.visitors FROM rollup_visitors_hourly x
          WHERE x.project_id = ${b.project} AND x.bucket >= segs.lo AND x.bucket < segs.hi
          OFFSET 0
        ) h
        WHERE NOT (segs.day_ok AND segs.kind IS NOT NULL)
          AND h.bucket NOT IN (SELECT inv.bucket FROM inv)
        UNION ALL
        ${loggedSketches('true')}
      ),`;
  // Filtered: the sketches of the rollup rows meeting the filters, hour by hour (sql/010).
  // (built only when used: every params.add() must be referenced by the statement)
  const filteredSketches = (rel: RollupRelation) => `
      sketches AS (
        SELECT width_bucket(r.bucket, ${starts}) AS bucket, r.visitors AS sketch
        FROM ${unloggedRows(layersOf(b), view(rel), [...matching(rel, 'r', params), where('r'), `NOT ${exact}`])}
        UNION ALL
        ${loggedSketches(where('s'))}
      ),`;
  // Pair metrics: the visitors of the days' pair rows and of the raw hours (their parts).
  const pairSketches = `
      sketches AS (
        SELECT width_bucket(parts.hour, ${starts}) AS bucket, parts.visitors AS sketch FROM parts WHERE NOT ${exact}
      ),`;
  // From the visit days: every bucket and the total, or (an hourly series of whole local days)
  // the total alone, the buckets counted exactly.
  const dayVisitors = (d: DayBuckets) => d.totalOnly
    ? `${exactVisitorsCte(b, starts, where, exact, { total: false })},${dayVisitorsCtes(b.project, d, params)},
      visitors AS (
        SELECT e.bucket, e.visitors, true AS exact FROM exact_visitors e
        UNION ALL
        SELECT NULL, d.visitors, true FROM day_visitors d WHERE d.bucket IS NULL
      )`
    : `${dayVisitorsCtes(b.project, d, params)},
      visitors AS (SELECT d.bucket, d.visitors, true AS exact FROM day_visitors d)`;
  const sketchVisitors = days
    ? dayVisitors(days)
    : sketches
    ? `,${pair ? pairSketches : source.tables.visitors ? filteredSketches(source.tables.visitors) : periodSketches}
      -- one union per series bucket, then the total from those
      bucket_sketches AS MATERIALIZED (
        SELECT sketches.bucket, hll_union_agg(sketches.sketch) AS sketch
        FROM sketches
        GROUP BY sketches.bucket
      ),
      sketch_visitors AS (
        -- tm_visitors_estimate: hll_cardinality with the estimator's bias removed (sql/008_rollup_visitors.sql)
        SELECT k.bucket, tm_visitors_estimate(k.sketch) AS visitors FROM bucket_sketches k
        UNION ALL
        SELECT NULL, tm_visitors_estimate(hll_union_agg(k.sketch)) FROM bucket_sketches k
      ),
      visitors AS (
        SELECT e.bucket, e.visitors, true AS exact FROM exact_visitors e WHERE ${exact}
        UNION ALL
        SELECT k.bucket, k.visitors, false FROM sketch_visitors k WHERE NOT ${exact}
      )`
    : `,
      visitors AS (SELECT e.bucket, e.visitors, true AS exact FROM exact_visitors e)`;
  // The sums per hour (or per day) of the period, from the planner's source and the raw tail;
  // the pair metrics' parts carry their visitors, hashed on the raw hours only when sketches are used.
  const { layers, parts } = sessionParts(source, b, filters.map((x) => x.filter.name), (_, hour) => [`${hour} AS hour`], where, pair ? {
    starts,
    extra: { rollup: 'r.visitors', raw: `${sketches ? `hll_add_agg(hll_hash_text(s.profile_id), ${HLL_PARAMS}) FILTER (WHERE NOT ${exact})` : 'NULL'} AS visitors` },
  } : {});
  return `
      WITH ${layerCtes(layers)},${filter ? decide : ''}
      parts AS${pair ? ' MATERIALIZED' : ''} (
        ${unionAll(parts)}
      ),
      sums AS (
        SELECT width_bucket(parts.hour, ${starts}) AS bucket, ${sums('parts', (x) => `sum(${x})`)}
        FROM parts
        GROUP BY GROUPING SETS ((width_bucket(parts.hour, ${starts})), ())
      ),${filter ? '' : decide}${days ? '' : exactVisitorsCte(b, starts, where, exact, { filtered: filters.length > 0 })}${sketchVisitors}
      SELECT coalesce(sums.bucket, visitors.bucket) AS bucket,
             ${sums('sums', (x) => `coalesce(${x}, 0)`)}, coalesce(visitors.visitors, 0) AS visitors,
             coalesce(visitors.exact, true) AS exact${days ? ', (SELECT ok FROM vstate) AS days_ok' : ''}
      FROM sums FULL JOIN visitors ON coalesce(sums.bucket, -1) = coalesce(visitors.bucket, -1)`;
}

/**
 * Pages over the rollups plus the raw views of the log's hours: columns origin, path,
 * sessions, entries, bounces, timed_views, duration_ms, views, title; sorted and paged as the raw
 * query (sessions DESC, path, origin in byte order). Layered with the period's whole UTC days as
 * its days (the daily rows' days), the other unlogged hours per hour, the log's hours raw
 * sessions and their screen views. The title of each row of the page is the latest titled view
 * among those three sources (title indexes read backwards).
 */
export function rollupPagesSql(scope: RollupScope, params: SqlParams, limit: number, offset: number, screenView: string): string {
  const b = bind(scope, params);
  const { daily, hourly } = readSource('pages').tables as { daily: RollupRelation; hourly: RollupRelation };
  // screenView is a constant of ours (SCREEN_VIEW), inlined for the partial indexes' predicate.
  const view = `'${screenView.replace(/'/g, "''")}'`;
  // The daily rows are of whole UTC days: every such day of the period is a day of the layers.
  const utcDays = `(SELECT ${b.project}::text AS project_id, d AS bucket, 24 AS hours
        FROM generate_series(date_trunc('day', ${b.start}, 'UTC'), ${b.end} - interval '1 microsecond', interval '1 day') AS d)`;
  const days = '(SELECT array_agg(days.lo) FROM days)::timestamptz[]';
  return `
      WITH ${layerCtes(layersOf(b, { days: { table: utcDays }, hours: { series: true } }))},
      ts AS MATERIALIZED (
        SELECT inv.bucket, s.id, s.started_at, s.last_event_at, s.is_bounce, s.entry_origin, s.entry_path
        FROM ${tailSessions(b)}
      ),
      -- per log hour, the time range of its sessions' events (bounds each index range scan)
      spans AS MATERIALIZED (
        SELECT ts.bucket, max(ts.last_event_at) AS until FROM ts GROUP BY ts.bucket
      ),
      -- the views of the log hours' sessions: the columns events_name_time_idx carries (an index-only
      -- scan; titles are looked up below for the returned rows alone). Each view takes its
      -- session's columns by a window over (session, log hour), not by a join: the planner
      -- estimates one row for ts (its sessions are new, their statistics not yet gathered) and
      -- nested the range scan under it, one scan of the whole hour per session (760 sessions:
      -- 577,000 rows read for 760 views, a second of PostgreSQL); a sort is n log n whatever
      -- the estimates.
      tv AS MATERIALIZED (
        SELECT u.session_id, u.origin COLLATE "C" AS origin, u.path COLLATE "C" AS path,
               u.duration_ms, u.is_bounce, (u.entry_origin = u.origin AND u.entry_path = u.path) AS entered
        FROM (
          SELECT v.view, v.session_id, v.origin, v.path, v.created_at, v.duration_ms,
                 max(v.started_at) OVER w AS started_at, bool_or(v.is_bounce) OVER w AS is_bounce,
                 max(v.entry_origin) OVER w AS entry_origin, max(v.entry_path) OVER w AS entry_path
          FROM (
            SELECT false AS view, ts.id AS session_id, ts.bucket, ts.started_at, ts.is_bounce, ts.entry_origin, ts.entry_path,
                   NULL::text AS origin, NULL::text AS path, NULL::timestamptz AS created_at, NULL::bigint AS duration_ms
            FROM ts
            UNION ALL
            SELECT true, e.session_id, spans.bucket, NULL, NULL, NULL, NULL, e.origin, e.path, e.created_at, e.duration_ms
            FROM spans
            -- LATERAL (kept by OFFSET 0): an index range scan per log hour, whatever the row estimates
            CROSS JOIN LATERAL (
              SELECT e.session_id, e.origin, e.path, e.created_at, e.duration_ms FROM events e
              WHERE e.project_id = ${b.project} AND e.name = ${view}
                AND e.created_at >= spans.bucket AND e.created_at <= spans.until
                -- (every log hour is in the period: a constant bound prunes earlier months when planned)
                AND e.created_at >= ${b.start}
              OFFSET 0
            ) e
          ) v
          WINDOW w AS (PARTITION BY v.session_id, v.bucket)
        ) u
        -- a view of a log hour's session (the hour's range also holds other sessions' views)
        WHERE u.view AND u.started_at IS NOT NULL AND u.created_at >= u.started_at
      ),
      -- each layer summed per page first: the row estimates of the hourly layer (every hour of
      -- the span times the rows of an average hour) otherwise made the planner sort ~20k rows
      -- (a hash table over its work_mem at 10M events) instead of hashing them
      parts AS (
        SELECT r.origin COLLATE "C" AS origin, r.path COLLATE "C" AS path,
               sum(r.sessions) AS sessions, sum(r.entries) AS entries, sum(r.bounces) AS bounces,
               sum(r.timed_views) AS timed_views, sum(r.duration_ms) AS duration_ms, sum(r.views) AS views
        FROM ${daily.table} r
        WHERE r.project_id = ${b.project} AND r.bucket = ANY (${days})
        GROUP BY r.origin COLLATE "C", r.path COLLATE "C"
        UNION ALL
        SELECT r.origin COLLATE "C", r.path COLLATE "C",
               sum(r.sessions), sum(r.entries), sum(r.bounces), sum(r.timed_views), sum(r.duration_ms), sum(r.views)
        FROM ${perRow('hrs', probe('hrs', hourly.table, 'x', b.project, []), 'r')}
        GROUP BY r.origin COLLATE "C", r.path COLLATE "C"
        UNION ALL
        -- per page, then per (page, session) first: the distinct counts without sorting
        SELECT ps.origin, ps.path, count(*), count(*) FILTER (WHERE ps.entered), count(*) FILTER (WHERE ps.bounced),
               sum(ps.timed_views), sum(ps.duration_ms), sum(ps.views)
        FROM (
          SELECT tv.origin, tv.path, tv.session_id, bool_or(tv.entered) AS entered, bool_or(tv.entered AND tv.is_bounce) AS bounced,
                 count(tv.duration_ms) AS timed_views, coalesce(sum(tv.duration_ms), 0) AS duration_ms, count(*) AS views
          FROM tv
          GROUP BY tv.origin, tv.path, tv.session_id
        ) ps
        GROUP BY ps.origin, ps.path
      ),
      ranked AS (
        SELECT parts.origin, parts.path,
               sum(parts.sessions) AS sessions, sum(parts.entries) AS entries, sum(parts.bounces) AS bounces,
               sum(parts.timed_views) AS timed_views, sum(parts.duration_ms) AS duration_ms, sum(parts.views) AS views
        FROM parts
        GROUP BY parts.origin, parts.path
        ORDER BY sum(parts.sessions) DESC, parts.path, parts.origin
        LIMIT ${params.add(limit)} OFFSET ${params.add(offset)}
      )
      SELECT r.origin, r.path, r.sessions, r.entries, r.bounces, r.timed_views, r.duration_ms, r.views,
             coalesce((
               SELECT t.title FROM (
                 (SELECT x.title, x.title_at AS at, x.title_id AS id FROM ${daily.table} x
                  WHERE x.project_id = ${b.project}
                    AND x.path = r.path COLLATE "default" AND x.origin = r.origin COLLATE "default"
                    AND x.title <> ''
                    AND x.bucket = ANY (${days})
                  ORDER BY x.title_at DESC, x.title_id DESC
                  LIMIT 1)
                 UNION ALL
                 (SELECT x.title, x.title_at, x.title_id FROM ${hourly.table} x
                  WHERE x.project_id = ${b.project}
                    AND x.path = r.path COLLATE "default" AND x.origin = r.origin COLLATE "default"
                    AND x.title <> ''
                    AND x.bucket >= ${b.start} AND x.bucket < ${b.end}
                    AND x.bucket NOT IN (SELECT inv.bucket FROM inv)
                    AND date_trunc('day', x.bucket, 'UTC') NOT IN (SELECT days.lo FROM days)
                  ORDER BY x.title_at DESC, x.title_id DESC
                  LIMIT 1)
                 UNION ALL
                 -- the latest titled view of the page among the views tv counts (a view of a
                 -- log hour's session, from its start to its hour's span): read backwards from
                 -- the title index, each candidate's session checked by its id
                 (SELECT v.title, v.created_at, v.id FROM events v
                  WHERE v.project_id = ${b.project} AND v.name = ${view} AND v.title <> ''
                    AND v.path = r.path COLLATE "default" AND v.origin = r.origin COLLATE "default"
                    AND v.created_at >= (SELECT min(spans.bucket) FROM spans) AND v.created_at <= (SELECT max(spans.until) FROM spans)
                    AND v.created_at >= ${b.start}
                    AND EXISTS (
                      SELECT 1 FROM sessions s
                      WHERE s.id = v.session_id AND s.project_id = ${b.project} AND NOT s.is_bot AND v.created_at >= s.started_at
                        AND v.created_at <= (SELECT spans.until FROM spans WHERE spans.bucket = date_trunc('hour', s.started_at, 'UTC')))
                  ORDER BY v.created_at DESC, v.id DESC
                  LIMIT 1)
               ) t
               ORDER BY t.at DESC, t.id DESC
               LIMIT 1), '') AS title
      FROM ranked r
      ORDER BY r.sessions DESC, r.path, r.origin`;
}

/**
 * The layers and parts of a sessions read over the planner's source, from its entry's tables, as
 * layerRows gives an event count's (docs/rollups.md, "One layered read": the rule of both): rollup
 * rows seen with the dimensions' column names (alias r) and the raw sessions of the other hours.
 * Each part selects `keys` (of its alias and the start of its hour or day), the five sums and
 * `extra` (its rollup and raw columns), meeting `where`; `starts`: days only inside one bucket.
 */
function sessionParts(
  source: ReadSource,
  b: Bound,
  names: readonly string[],
  keys: (alias: string, hour: string) => string[],
  where: (alias: string) => string,
  more: { starts?: string; extra?: { rollup: string; raw: string } } = {},
): { layers: Layers; parts: string[] } {
  const { days, daily, hourly } = source.tables;
  const extra = (which: 'rollup' | 'raw') => (more.extra ? `, ${more.extra[which]}` : '');
  const part = (hour: string, rows: string) => `SELECT ${keys('r', hour).join(', ')}, ${sums('r')}${extra('rollup')}
        FROM ${rows}`;
  const raw = (hours: 'inv' | 'hrs') => `SELECT ${keys('s', LAYER_START[hours]).join(', ')}, ${RAW_MEASURES}${extra('raw')}
        FROM ${tailSessions(b, hours)}
        WHERE ${where('s')}
        GROUP BY ${keys('s', '').map((_, i) => i + 1).join(', ')}`;
  // Per day or hour: an index probe each (joined flat, the planner scanned every hourly row of
  // the cube and tested each against the days: 0.6 s at 10M events).
  const rows = (rel: RollupRelation, layer: 'days' | 'hrs') => perRow(layer, probe(layer, view(rel), 'r', b.project, matching(rel, 'r', b.params), [where('r')]), 'r');
  if (hourly === 'raw' && !days) throw new Error(`no sessions read over ${source.id}`);
  if (!days) {
    const layers = layersOf(b);
    return { layers, parts: [part('r.bucket', unloggedRows(layers, view(hourly as RollupRelation), [where('r')])), raw('inv')] };
  }
  const day = pairRelation(source, names) ?? daily!;
  const layers = layersOf(b, {
    days: more.starts ? { table: days, starts: more.starts } : { table: days },
    hours: hourly === 'raw' ? { series: true, logged: true } : { series: true },
  });
  return { layers, parts: [part('days.lo', rows(day, 'days')), ...(hourly === 'raw' ? [raw('hrs')] : [part('hrs.h', rows(hourly, 'hrs')), raw('inv')])] };
}

/**
 * A breakdown over the source the planner chose (sessionParts), or over the raw sessions of
 * `rawSessions`: columns name, [prefix,] sessions, bounces, timed_sessions, duration_ms,
 * screen_views; grouped, sorted and paged as the raw query.
 */
export function breakdownSql(
  scope: RollupScope,
  dimension: SessionDimension,
  source: ReadSource | { rawSessions: string },
  params: SqlParams,
  limit: number,
  offset: number,
  filters: readonly IndexedFilter[],
): string {
  const parent = DIMENSION_PREFIX[dimension];
  const keys = (alias: string) => [`${alias}.${dimension} AS name`, ...(parent ? [`${alias}.${parent} AS prefix`] : [])];
  const { layers, parts } = 'rawSessions' in source
    // Path 'raw' or no rollup answers: the filtered sessions (event filters included), no layers.
    ? { layers: null, parts: [`SELECT ${keys('s').join(', ')}, ${RAW_MEASURES}
        FROM (${source.rawSessions}) s
        GROUP BY ${parent ? '1, 2' : '1'}`] }
    : sessionParts(source, bind(scope, params), [dimension, ...filters.map((x) => x.filter.name)], keys, (alias) => compileAll(filters, alias, params));
  // The sessions without a value for the dimension (name '') are ONE row whatever their parents
  // (semantics.md), shown with the parent they all share (e.g. 'Linux' when every
  // os_version-less session runs Linux), else ''.
  const prefixKey = `CASE WHEN parts.name = '' THEN '' ELSE parts.prefix END`;
  const shownPrefix = `CASE WHEN min(parts.prefix) = max(parts.prefix) THEN min(parts.prefix) ELSE '' END`;
  return `
      WITH ${layers ? `${layerCtes(layers)},
      ` : ''}parts AS (
        ${unionAll(parts)}
      )
      SELECT ${parent ? `parts.name, ${shownPrefix} AS prefix` : 'parts.name'}, ${sums('parts', (x) => `sum(${x})`)}
      FROM parts
      GROUP BY ${parent ? `parts.name, ${prefixKey}` : 'parts.name'}
      ORDER BY sum(parts.sessions) DESC, ${parent ? `parts.name COLLATE "C", ${shownPrefix} COLLATE "C"` : 'parts.name COLLATE "C"'}
      LIMIT ${params.add(limit)} OFFSET ${params.add(offset)}`;
}
