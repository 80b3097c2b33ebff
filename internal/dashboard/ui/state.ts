// What a view is, kept in the URL (never the credentials) so a view can be shared.
import { DEFAULT_ANALYTICS, parseAnalytics, writeAnalytics, type AnalyticsState } from './analytics-state';
import { isMetric, type MetricKey } from './format';
import { isDate, isRange, type Period } from './periods';

export interface Filter {
  name: string;
  operator: 'is' | 'isNot';
  value: string[];
}

export const TAB_GROUPS = {
  sources: ['referrer_name', 'referrer_type', 'referrer', 'utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content'],
  geo: ['country', 'region', 'city'],
  devices: ['device', 'browser', 'os'],
} as const;
export type TabGroup = keyof typeof TAB_GROUPS;

export interface ViewState {
  project: string | null;
  period: Period;
  metric: MetricKey;
  filters: Filter[];
  tabs: Record<TabGroup, string>;
  /** The view that is open and its own state (analytics-state.ts). */
  analytics: AnalyticsState;
}

export const DEFAULT_STATE: ViewState = {
  project: null,
  period: { range: '7d' },
  metric: 'unique_visitors',
  filters: [],
  tabs: { sources: 'referrer_name', geo: 'country', devices: 'device' },
  analytics: DEFAULT_ANALYTICS,
};

const FILTER_NAMES = new Set<string>(['path', 'origin', ...Object.values(TAB_GROUPS).flat()]);

function parseFilters(raw: string | null): Filter[] {
  if (!raw) return [];
  try {
    const v = JSON.parse(raw) as unknown;
    if (!Array.isArray(v)) return [];
    return v.filter((f): f is Filter =>
      !!f && typeof f === 'object' && FILTER_NAMES.has((f as Filter).name) && ['is', 'isNot'].includes((f as Filter).operator)
      && Array.isArray((f as Filter).value) && (f as Filter).value.length > 0 && (f as Filter).value.every((x) => typeof x === 'string'),
    ).map((f) => ({ name: f.name, operator: f.operator, value: [...f.value] }));
  } catch {
    return [];
  }
}

export function parseState(search: string): ViewState {
  const q = new URLSearchParams(search);
  const s: ViewState = { ...DEFAULT_STATE, tabs: { ...DEFAULT_STATE.tabs }, filters: [] };
  s.project = q.get('project') || null;
  const from = q.get('from') ?? '';
  const to = q.get('to') ?? '';
  const range = q.get('range') ?? '';
  if (isDate(from) && isDate(to) && from <= to) s.period = { startDate: from, endDate: to };
  else if (isRange(range)) s.period = { range };
  const metric = q.get('metric') ?? '';
  if (isMetric(metric)) s.metric = metric;
  s.filters = parseFilters(q.get('filters'));
  for (const group of Object.keys(TAB_GROUPS) as TabGroup[]) {
    const tab = q.get(group) ?? '';
    if ((TAB_GROUPS[group] as readonly string[]).includes(tab)) s.tabs[group] = tab;
  }
  s.analytics = parseAnalytics(q);
  return s;
}

/** The query string of a view; defaults are left out so shared links stay short. */
export function stateToSearch(s: ViewState): string {
  const q = new URLSearchParams();
  if (s.project) q.set('project', s.project);
  if ('range' in s.period) {
    if (s.period.range !== (DEFAULT_STATE.period as { range: string }).range) q.set('range', s.period.range);
  } else {
    q.set('from', s.period.startDate);
    q.set('to', s.period.endDate);
  }
  if (s.metric !== DEFAULT_STATE.metric) q.set('metric', s.metric);
  if (s.filters.length) q.set('filters', JSON.stringify(s.filters));
  for (const group of Object.keys(TAB_GROUPS) as TabGroup[]) {
    if (s.tabs[group] !== DEFAULT_STATE.tabs[group]) q.set(group, s.tabs[group]);
  }
  writeAnalytics(q, s.analytics);
  const text = q.toString();
  return text ? `?${text}` : '';
}

/** Adds a filter (replacing one on the same name and operator). */
export function withFilter(filters: Filter[], f: Filter): Filter[] {
  return [...filters.filter((x) => !(x.name === f.name && x.operator === f.operator)), f];
}
