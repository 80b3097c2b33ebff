/**
 * Compiles insights filters into parameterised SQL: values and property keys always travel as
 * parameters; column identifiers come only from the allow-list. Where each filter is evaluated
 * (session-level names on the session, event-level names on its events or, for pages, on each
 * view) and what each operator holds for: docs/semantics.md, "Filters", and
 * docs/insights-decisions.md, "Decisions".
 */
import { SESSION_DIMENSIONS, type SessionDimension } from '../model/event';
import { EVENT_FILTER_COLUMNS, MAX_NUMBER_TEXT, PROPERTY_PREFIX, type EventFilterColumn, type Filter } from './params';

/** Collects positional parameters while SQL text is built: `params.add(v)` gives `$n`. */
export class SqlParams {
  readonly values: unknown[] = [];
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

type FilterLevel = 'session' | 'event';

/** A filter with its position in the request (for error paths). */
export interface IndexedFilter {
  index: number;
  filter: Filter;
}

/** The filters with their positions in the request. */
export function indexed(filters: readonly Filter[]): IndexedFilter[] {
  return filters.map((filter, index) => ({ filter, index }));
}

export interface SplitFilters {
  session: IndexedFilter[];
  event: IndexedFilter[];
}

const SESSION_COLUMNS: ReadonlySet<string> = new Set(SESSION_DIMENSIONS);
const EVENT_COLUMNS: ReadonlySet<string> = new Set(EVENT_FILTER_COLUMNS);

export function filterLevel(name: string): FilterLevel {
  return SESSION_COLUMNS.has(name) ? 'session' : 'event';
}

export function splitFilters(filters: readonly Filter[]): SplitFilters {
  const split: SplitFilters = { session: [], event: [] };
  filters.forEach((filter, index) => split[filterLevel(filter.name)].push({ index, filter }));
  return split;
}

/** LIKE pattern text that matches `s` literally (backslash is PostgreSQL's LIKE escape). */
export function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** The SQL expression of the filtered value, on table alias `alias`. */
function valueExpression(name: string, alias: string, params: SqlParams): string {
  if (name.startsWith(PROPERTY_PREFIX)) {
    const key = params.add(name.slice(PROPERTY_PREFIX.length));
    return `coalesce(${alias}.properties ->> ${key}::text, '')`;
  }
  if (SESSION_COLUMNS.has(name) || EVENT_COLUMNS.has(name)) {
    // Safe: the identifier is one of the allow-listed column names.
    return `${alias}.${name as SessionDimension | EventFilterColumn}`;
  }
  throw new Error(`filter name not allowed: ${name}`); // params.ts rejects these first
}

/**
 * A stored text that is a decimal number PostgreSQL's numeric can hold: params.ts
 * DECIMAL_NUMBER (at most 4 exponent digits) in at most MAX_NUMBER_TEXT characters, so the
 * cast can never overflow (< 11,000 digits either side of the point).
 */
const NUMERIC_TEXT = "'^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]{1,4})?$'";
const COMPARISONS = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;

/** One filter as a boolean SQL expression over alias `alias` (a pure function of its arguments). */
export function compileFilter(filter: Filter, alias: string, params: SqlParams): string {
  const expr = valueExpression(filter.name, alias, params);
  const values = filter.value;
  const patterns = (wrap: (escaped: string) => string) => params.add(values.map((v) => wrap(escapeLike(v))));
  switch (filter.operator) {
    case 'isNull': return `coalesce(${expr}, '') = ''`;
    case 'isNotNull': return `coalesce(${expr}, '') <> ''`;
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      // CASE: the cast runs only on a text that is a number, so no row can fail the query.
      return `CASE WHEN length(${expr}) <= ${MAX_NUMBER_TEXT} AND ${expr} ~ ${NUMERIC_TEXT} THEN ${expr}::numeric ${COMPARISONS[filter.operator]} ANY(${params.add(values)}::numeric[]) ELSE false END`;
    case 'is': return `${expr} = ANY(${params.add(values)}::text[])`;
    case 'isNot': return `${expr} <> ALL(${params.add(values)}::text[])`;
    case 'contains': return `${expr} LIKE ANY(${patterns((v) => `%${v}%`)}::text[])`;
    case 'doesNotContain': return `${expr} NOT LIKE ALL(${patterns((v) => `%${v}%`)}::text[])`;
    case 'startsWith': return `${expr} LIKE ANY(${patterns((v) => `${v}%`)}::text[])`;
    case 'endsWith': return `${expr} LIKE ANY(${patterns((v) => `%${v}`)}::text[])`;
    case 'regex': return `${expr} ~ ANY(${params.add(values)}::text[])`;
  }
}

/** All filters ANDed over alias `alias`; 'true' when there are none. */
export function compileAll(filters: readonly IndexedFilter[], alias: string, params: SqlParams): string {
  if (filters.length === 0) return 'true';
  return filters.map(({ filter }) => `(${compileFilter(filter, alias, params)})`).join(' AND ');
}

/** Every regex value with its issue path, for validating them before the main query. */
export function regexValues(filters: readonly Filter[]): { pattern: string; path: string[] }[] {
  const out: { pattern: string; path: string[] }[] = [];
  filters.forEach((f, i) => {
    if (f.operator !== 'regex') return;
    f.value.forEach((pattern, j) => out.push({ pattern, path: ['filters', String(i), 'value', String(j)] }));
  });
  return out;
}
