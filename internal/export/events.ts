// GET /export/events: raw events of a project, newest first, a page at a time (JSON: anchored,
// OFFSET or keyset cursor) or all of them as NDJSON from a server-side cursor in one snapshot.
// docs/export.md has the parameters, the includes and the paging rules. Rows carry `title`
// beside the base fields (a stored field no include group names: leaving it out would lose data).
import { createHash } from 'node:crypto';
import Cursor from 'pg-cursor';
import { BadRequestError } from '../http/errors';
import { DEFAULT_STATEMENT_TIMEOUT_MS, type ReadOptions } from '../query/db';
import { PG_QUERY_CANCELED, pgErrorCode, QueryTimeoutError } from '../query/errors';
import { compileAll, indexed, SqlParams } from '../query/filters';
import { addDays, instantOfWallClock, parseLocalDate, startOfDay } from '../query/period';
import {
  encodeCursor,
  EXPORT_COLUMNS,
  type ExportField,
  type ExportIncludeGroup,
  type EventsParams,
  type ExportCursor,
  type ExportInclude,
  type KeysetPosition,
  type TimeBound,
} from './params';
import { TS_TEXT, withoutJit, withRead } from '../query/lookups';
import { countHours, layerRows, totalCountSql } from './rollups';
import { planRead, type ReadPath } from '../query/planner';
import type { ConnectionSource, Queryable } from '../query/source';
import { NDJSON_BATCH_BYTES, ResponseBudget } from './budget';

/** Path 'raw' never reads the event rollups nor the sketches; exactVisitorsMax: the charts' distinct counts (./sketches.ts). */
export type ExportOptions = ReadOptions;

interface ExportedProfile {
  id: string;
  firstName: string | null;
  lastName: string | null;
  email: string | null;
  properties: Record<string, unknown>;
  groups: string[];
}

interface ExportedEvent {
  id: string;
  name: string;
  deviceId: string;
  profileId: string;
  sessionId: string | null;
  projectId: string;
  createdAt: string;
  path: string;
  origin: string;
  title: string;
  profile?: ExportedProfile | null;
  meta?: { durationMs: number | null; isBot: boolean; botReason: string | null; receivedAt: string };
  /**
   * The single fields `includes` adds at the top level, by their field names (params.ts
   * EXPORT_COLUMNS: properties, groups, country, browserVersion, receivedAt, ...; fieldValue()).
   */
  [field: string]: unknown;
}

interface EventsPageMeta {
  count: number;
  totalCount: number;
  pages: number;
  current: number;
  /** Pass back as `cursor` for the next page; null when there is none. */
  cursor: string | null;
}

export interface EventsPage {
  meta: EventsPageMeta;
  data: ExportedEvent[];
}

// ---------------------------------------------------------------------------------------
// Query building

interface ResolvedBound {
  /** ISO 8601 with microseconds, UTC. */
  iso: string;
  inclusive: boolean;
}

const MIN_MS = new Date(0).setUTCFullYear(1, 0, 1); // 0001-01-01T00:00:00Z
const MAX_MS = Date.UTC(9999, 11, 31, 23, 59, 59);

function isoMicros(secondsMs: number, fraction: string, param: 'start' | 'end'): string {
  if (!(secondsMs >= MIN_MS && secondsMs <= MAX_MS)) {
    throw new BadRequestError(`${param}: out of range`, [{ path: [param], message: 'Date-time out of range (years 0001..9999)' }]);
  }
  return `${new Date(secondsMs).toISOString().slice(0, 19)}.${fraction}Z`;
}

/** The instant a bound stands for, in the project's timezone. */
export function resolveBound(bound: TimeBound, timezone: string, side: 'start' | 'end'): ResolvedBound {
  switch (bound.kind) {
    case 'date': {
      const day = parseLocalDate(bound.date);
      const ms = side === 'start' ? startOfDay(day, timezone) : startOfDay(addDays(day, 1), timezone);
      return { iso: isoMicros(ms, '000000', side), inclusive: side === 'start' };
    }
    case 'local':
      return { iso: isoMicros(instantOfWallClock(bound.wallSecondsMs, timezone), bound.fraction, side), inclusive: true };
    case 'instant':
      return { iso: isoMicros(bound.utcSecondsMs, bound.fraction, side), inclusive: true };
  }
}

interface EventQuery {
  projectId: string;
  events: string[];
  profileId: string | undefined;
  start: ResolvedBound | undefined;
  end: ResolvedBound | undefined;
  params: EventsParams;
}

/** The WHERE conditions of the export (alias `e`), values added to `p`. */
function whereSql(q: EventQuery, p: SqlParams): string {
  const c = [`e.project_id = ${p.add(q.projectId)}`];
  if (q.start) c.push(`e.created_at >= ${p.add(q.start.iso)}::timestamptz`);
  if (q.end) c.push(`e.created_at ${q.end.inclusive ? '<=' : '<'} ${p.add(q.end.iso)}::timestamptz`);
  if (q.events.length) c.push(`e.name = ANY(${p.add(q.events)}::text[])`);
  if (q.profileId !== undefined) c.push(`e.profile_id = ${p.add(q.profileId)}`);
  if (q.params.filters.length) c.push(compileAll(indexed(q.params.filters), 'e', p));
  return c.join('\n  AND ');
}

/** Columns every row carries (the base fields). */
const BASE_COLUMNS = [
  'e.id', 'e.name', 'e.device_id', 'e.profile_id', 'e.session_id', 'e.project_id', 'e.created_at',
  `${TS_TEXT('e.created_at')} AS ts`, 'e.path', 'e.origin', 'e.title',
];
const BASE_FIELDS: ReadonlySet<ExportField> = new Set(['id', 'name', 'deviceId', 'profileId', 'sessionId', 'projectId', 'createdAt', 'path', 'origin', 'title']);

/** The single columns each flat group adds (profile and meta are nested objects, apart). */
const GROUP_FIELDS: Record<Exclude<ExportIncludeGroup, 'profile' | 'meta'>, ExportField[]> = {
  properties: ['properties', 'groups'],
  geo: ['country', 'region', 'city', 'latitude', 'longitude'],
  device: ['device', 'browser', 'browserVersion', 'os', 'osVersion', 'brand', 'model'],
  referrer: ['referrer', 'referrerName', 'referrerType', 'utmSource', 'utmMedium', 'utmCampaign', 'utmTerm', 'utmContent'],
};
const META_COLUMNS = ['e.duration_ms::float8 AS duration_ms', 'e.is_bot', 'e.bot_reason', 'e.received_at'];
const PROFILE_COLUMNS = ['pr.id AS p_id', 'pr.first_name AS p_first_name', 'pr.last_name AS p_last_name', 'pr.email AS p_email', 'pr.properties AS p_properties', 'pr.groups AS p_groups'];

/** How one column is selected (alias = its column name) and read back into its field. */
const selectOf = (field: ExportField): string => (field === 'durationMs' ? 'e.duration_ms::float8 AS duration_ms' : `e.${EXPORT_COLUMNS[field]}`);

type Row = Record<string, unknown>;

const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString());

function fieldValue(field: ExportField, r: Row): unknown {
  const v = r[EXPORT_COLUMNS[field]];
  switch (field) {
    case 'receivedAt': return iso(v);
    case 'durationMs': return v === null || v === undefined ? null : Number(v);
    case 'latitude':
    case 'longitude':
    case 'botReason':
      return v ?? null;
    default: return v;
  }
}

/** The single-column fields the includes ask for, beyond the base fields, in a stable order. */
function flatFields(includes: readonly ExportInclude[]): ExportField[] {
  const out = new Set<ExportField>();
  for (const inc of includes) {
    if (typeof inc === 'object') {
      if (!BASE_FIELDS.has(inc.field)) out.add(inc.field);
    } else if (inc !== 'profile' && inc !== 'meta') {
      for (const f of GROUP_FIELDS[inc]) out.add(f);
    }
  }
  return [...out];
}

function selectSql(includes: readonly ExportInclude[]): { columns: string; join: string } {
  const cols = [...BASE_COLUMNS];
  let join = '';
  if (includes.includes('profile')) {
    cols.push(...PROFILE_COLUMNS);
    join = 'LEFT JOIN profiles pr ON pr.project_id = e.project_id AND pr.id = e.profile_id';
  }
  const selected = new Set(cols);
  const add = (c: string) => {
    if (!selected.has(c)) selected.add(c), cols.push(c);
  };
  if (includes.includes('meta')) META_COLUMNS.forEach(add);
  for (const f of flatFields(includes)) add(selectOf(f));
  return { columns: cols.join(', '), join };
}

/** One row as the exported event object (fields by `includes`). */
function toExportedEvent(r: Row, includes: readonly ExportInclude[]): ExportedEvent {
  const out: ExportedEvent = {
    id: r.id as string,
    name: r.name as string,
    deviceId: r.device_id as string,
    profileId: r.profile_id as string,
    sessionId: (r.session_id as string | null) ?? null,
    projectId: r.project_id as string,
    createdAt: iso(r.created_at),
    path: r.path as string,
    origin: r.origin as string,
    title: r.title as string,
  };
  if (includes.includes('profile')) {
    out.profile = r.p_id === null || r.p_id === undefined
      ? null
      : {
          id: r.p_id as string,
          firstName: (r.p_first_name as string | null) ?? null,
          lastName: (r.p_last_name as string | null) ?? null,
          email: (r.p_email as string | null) ?? null,
          properties: (r.p_properties as Record<string, unknown>) ?? {},
          groups: (r.p_groups as string[]) ?? [],
        };
  }
  if (includes.includes('meta')) {
    out.meta = {
      durationMs: fieldValue('durationMs', r) as number | null,
      isBot: r.is_bot as boolean,
      botReason: (r.bot_reason as string | null) ?? null,
      receivedAt: iso(r.received_at),
    };
  }
  const target = out as Record<string, unknown>;
  for (const f of flatFields(includes)) target[f] = fieldValue(f, r);
  return out;
}

/** Fingerprint of everything that decides which rows a walk covers and how it is paged. */
function queryFingerprint(projectId: string, params: EventsParams): string {
  const key = JSON.stringify([
    projectId, [...params.events].sort(), params.profileId ?? null, params.start?.text ?? null, params.end?.text ?? null,
    params.filters, params.limit,
  ]);
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

/** The bounds in the project's timezone: with withRead's regex check, every 400 before any row is read. */
function prepare(projectId: string, params: EventsParams, timezone: string): EventQuery {
  const start = params.start ? resolveBound(params.start, timezone, 'start') : undefined;
  const end = params.end ? resolveBound(params.end, timezone, 'end') : undefined;
  if (start && end && (end.inclusive ? start.iso > end.iso : start.iso >= end.iso)) {
    throw new BadRequestError('end: end must not be before start', [{ path: ['end'], message: 'end must not be before start' }]);
  }
  return { projectId, events: params.events, profileId: params.profileId, start, end, params };
}

const ORDER = 'ORDER BY e.created_at DESC, e.id DESC';
const positionOf = (r: Row): KeysetPosition => ({ ts: r.ts as string, id: r.id as string });

// ---------------------------------------------------------------------------------------
// JSON pages

/** One page of events with its meta (see the pagination notes at the top). */
export async function getEventsPage(
  pool: ConnectionSource,
  projectId: string,
  params: EventsParams,
  options: ExportOptions = {},
): Promise<EventsPage> {
  const fingerprint = queryFingerprint(projectId, params);
  if (params.cursor && params.cursor.query !== fingerprint) {
    throw new BadRequestError('cursor: belongs to another query', [
      { path: ['cursor'], message: 'This cursor belongs to another query (project, event, profileId, start, end, filters or limit differ)' },
    ]);
  }
  return withRead(pool, options, projectId, params.filters, async (db, timezone) => {
    const q = prepare(projectId, params, timezone);
    return params.cursor ? pageAfterCursor(db, q, params.cursor, fingerprint) : pageByNumber(db, q, fingerprint, options.path);
  });
}

async function pageAfterCursor(db: Queryable, q: EventQuery, cursor: ExportCursor, fingerprint: string): Promise<EventsPage> {
  const { limit, includes } = q.params;
  const p = new SqlParams();
  const { columns, join } = selectSql(includes);
  const sql = `SELECT ${columns} FROM events e ${join}
    WHERE ${whereSql(q, p)}
      AND (e.created_at, e.id) < (${p.add(cursor.last.ts)}::timestamptz, ${p.add(cursor.last.id)}::uuid)
    ${ORDER} LIMIT ${p.add(limit)}`;
  const rows = await readPageRows(db, sql, p.values);
  return page(rows, cursor.page + 1, cursor.total, cursor.anchor, fingerprint, q.params);
}

async function pageByNumber(db: Queryable, q: EventQuery, fingerprint: string, path: ReadPath = 'auto'): Promise<EventsPage> {
  const { limit, includes } = q.params;
  const current = q.params.page ?? 1;
  // The anchor: the newest matching event now.
  const ap = new SqlParams();
  const anchorRows = await db.query(`SELECT ${TS_TEXT('e.created_at')} AS ts, e.id FROM events e WHERE ${whereSql(q, ap)} ${ORDER} LIMIT 1`, ap.values);
  const anchorRow = anchorRows.rows[0];
  if (!anchorRow) return { meta: { count: 0, totalCount: 0, pages: 0, current, cursor: null }, data: [] };
  const anchor = positionOf(anchorRow);
  const atOrBefore = (p: SqlParams) => `(e.created_at, e.id) <= (${p.add(anchor.ts)}::timestamptz, ${p.add(anchor.id)}::uuid)`;

  const total = await countAtOrBefore(db, q, anchor, atOrBefore, path);

  const offset = (current - 1) * limit;
  let rows: Row[] = [];
  if (offset < total) {
    const p = new SqlParams();
    const { columns, join } = selectSql(includes);
    const sql = `SELECT ${columns} FROM events e ${join}
      WHERE ${whereSql(q, p)} AND ${atOrBefore(p)}
      ${ORDER} LIMIT ${p.add(limit)} OFFSET ${p.add(offset)}`;
    rows = await readPageRows(db, sql, p.values);
  }
  return page(rows, current, total, anchor, fingerprint, q.params);
}

/** totalCount: the matching events at or before the anchor, from the planner's source in layers (./rollups.ts), else raw. */
async function countAtOrBefore(
  db: Queryable,
  q: EventQuery,
  anchor: KeysetPosition,
  atOrBefore: (p: SqlParams) => string,
  path: ReadPath = 'auto',
): Promise<number> {
  const { filters } = q.params;
  // One column (a cube column too): its rows are far fewer than the cube's (bench data, 10M:
  // country=DE 42 ms on the cube, 15 ms from the column's rows); several cube columns: the cube.
  const span = countHours({ startIso: q.start?.iso, anchorIso: anchor.ts });
  const source = planRead({
    side: 'events', target: 'totalCount', filters: filters.map((f) => f.name),
    profileId: q.profileId !== undefined, path, wholeHours: span !== null,
  });
  const p = new SqlParams();
  let sql: string;
  if (span && source) {
    const project = p.add(q.projectId);
    const rows = layerRows(source, { project, names: q.events, filters, breakdown: undefined, every: true }, p);
    sql = totalCountSql(rows, project, span, p, (pp) => whereSql(q, pp), atOrBefore);
  } else sql = `SELECT count(*)::text AS n FROM events e WHERE ${whereSql(q, p)} AND ${atOrBefore(p)}`;
  const counted = await db.query<{ n: string }>(sql, p.values);
  return Number(counted.rows[0]?.n ?? 0);
}

/** Rows read per round trip of a page (a page is read in steps so its size is checked as it comes). */
const PAGE_STEP = 100;

/** Bytes a row will take as JSON, roughly (its text and its JSON values; other fields a few bytes). */
function rowBytes(r: Row): number {
  let n = 0;
  for (const k in r) {
    const v = r[k];
    if (typeof v === 'string') n += v.length + 4;
    else if (v !== null && typeof v === 'object' && !(v instanceof Date)) n += JSON.stringify(v).length;
    else n += 16;
  }
  return n;
}

/**
 * The rows of one page, read in steps with a cursor: a page whose events would make an
 * answer over MAX_RESPONSE_BYTES is a 400 (./budget.ts) before the rest is read.
 */
async function readPageRows(db: Queryable, sql: string, values: unknown[]): Promise<Row[]> {
  const budget = new ResponseBudget('page');
  const cursor = (db as unknown as { query(c: Cursor): Cursor }).query(new Cursor(sql, values));
  const rows: Row[] = [];
  try {
    for (;;) {
      const batch = (await cursor.read(PAGE_STEP)) as Row[];
      for (const r of batch) {
        budget.addBytes(rowBytes(r));
        rows.push(r);
      }
      if (batch.length < PAGE_STEP) break;
    }
  } finally {
    await cursor.close();
  }
  return rows;
}

function page(rows: Row[], current: number, total: number, anchor: KeysetPosition, fingerprint: string, params: EventsParams): EventsPage {
  const pages = Math.ceil(total / params.limit);
  const last = rows[rows.length - 1];
  const cursor = last && rows.length === params.limit && current < pages
    ? encodeCursor({ query: fingerprint, anchor, last: positionOf(last), page: current, total })
    : null;
  return {
    meta: { count: rows.length, totalCount: total, pages, current, cursor },
    data: rows.map((r) => toExportedEvent(r, params.includes)),
  };
}

// ---------------------------------------------------------------------------------------
// NDJSON stream

interface StreamOptions extends ExportOptions {
  /** Rows fetched per round trip (default 1000). */
  batchSize?: number;
}

/**
 * Validates the query (400s happen here, before anything is sent) and returns the chunks
 * of the NDJSON body: each chunk is one batch of lines. The database connection is taken
 * when iteration starts and released when it ends, fails, or is stopped early (return()).
 */
export async function streamEvents(
  pool: ConnectionSource,
  projectId: string,
  params: EventsParams,
  options: StreamOptions = {},
): Promise<AsyncIterable<string>> {
  const timeoutMs = options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  const batchSize = options.batchSize ?? 1000;
  const q = await withRead(pool, options, projectId, params.filters, async (_, timezone) => prepare(projectId, params, timezone));
  const p = new SqlParams();
  const { columns, join } = selectSql(params.includes);
  const sql = `SELECT ${columns} FROM events e ${join} WHERE ${whereSql(q, p)} ${ORDER}`;
  const includes = params.includes;

  return {
    async *[Symbol.asyncIterator]() {
      const client = await pool.connect();
      let cursor: Cursor | null = null;
      let committed = false;
      let broken = false;
      try {
        await client.query('BEGIN READ ONLY');
        await client.query("SELECT set_config('statement_timeout', $1, true)", [String(timeoutMs)]);
        await withoutJit(client);
        cursor = client.query(new Cursor(sql, p.values));
        // Rows per read shrink while a batch's lines pass NDJSON_BATCH_BYTES (large
        // properties), so memory stays near that size whatever the events hold.
        let size = includes.includes('properties') || includes.includes('profile') ? Math.min(batchSize, 100) : batchSize;
        for (;;) {
          const rows = (await cursor.read(size)) as Row[];
          if (rows.length === 0) break;
          let chunk = '';
          for (const r of rows) chunk += `${JSON.stringify(toExportedEvent(r, includes))}\n`;
          yield chunk;
          if (rows.length < size) break;
          if (chunk.length > NDJSON_BATCH_BYTES) size = Math.max(1, size >> 1);
          else if (chunk.length < NDJSON_BATCH_BYTES / 4) size = Math.min(batchSize, size * 2);
        }
        await cursor.close();
        cursor = null;
        await client.query('COMMIT');
        committed = true;
      } catch (err) {
        if (pgErrorCode(err) === PG_QUERY_CANCELED) throw new QueryTimeoutError(timeoutMs);
        throw err;
      } finally {
        if (!committed) {
          try {
            if (cursor) await cursor.close();
            await client.query('ROLLBACK');
          } catch {
            broken = true; // let the pool discard the connection
          }
        }
        client.release(broken);
      }
    },
  };
}
