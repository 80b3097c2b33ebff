// The product-analytics part of a view, kept in the URL beside the overview's (state.ts): which
// view is open (funnel, retention, profiles, sessions), the funnel's steps, window and grouping,
// the profile search, and the profile or session that is open. Never credentials.

export const VIEWS = ['overview', 'funnel', 'retention', 'profiles', 'sessions'] as const;
export type View = (typeof VIEWS)[number];
export const VIEW_LABELS: Record<View, string> = { overview: 'Overview', funnel: 'Funnel', retention: 'Retention', profiles: 'Profiles', sessions: 'Sessions' };

/** The API's bounds (GET /insights/{id}/funnel). */
export const MIN_STEPS = 2;
export const MAX_STEPS = 10;
export const MAX_WINDOW_HOURS = 720;
export const DEFAULT_WINDOW_HOURS = 24;
export const FUNNEL_GROUPS = ['session_id', 'profile_id'] as const;
export type FunnelGroup = (typeof FUNNEL_GROUPS)[number];
/** The longest text kept from the URL for an event name, a search or an id (the API's bound). */
const MAX_TEXT = 256;

/** A session as the URL names it: the id, its profile and the local day it started. */
export interface SessionRef {
  id: string;
  profile: string;
  day: string;
}

export interface AnalyticsState {
  view: View;
  steps: string[];
  windowHours: number;
  groupBy: FunnelGroup;
  search: string;
  profile: string | null;
  session: SessionRef | null;
}

export const DEFAULT_ANALYTICS: AnalyticsState = {
  view: 'overview', steps: [], windowHours: DEFAULT_WINDOW_HOURS, groupBy: 'session_id', search: '', profile: null, session: null,
};

const text = (v: string | null): string | null => (v !== null && v.length > 0 && v.length <= MAX_TEXT && !v.includes('\u0000') ? v : null);
const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** The analytics state of a query string; what is malformed falls back to the default. */
export function parseAnalytics(q: URLSearchParams): AnalyticsState {
  const view = q.get('view') ?? '';
  const window = Number(q.get('window') ?? '');
  const groupBy = q.get('groupBy') ?? '';
  const steps = q.getAll('step').map(text).filter((s): s is string => s !== null).slice(0, MAX_STEPS);
  const profile = text(q.get('profile'));
  const session = text(q.get('session'));
  const day = q.get('day') ?? '';
  return {
    view: (VIEWS as readonly string[]).includes(view) ? (view as View) : 'overview',
    steps,
    windowHours: Number.isInteger(window) && window >= 1 && window <= MAX_WINDOW_HOURS ? window : DEFAULT_WINDOW_HOURS,
    groupBy: (FUNNEL_GROUPS as readonly string[]).includes(groupBy) ? (groupBy as FunnelGroup) : 'session_id',
    search: (q.get('q') ?? '').slice(0, MAX_TEXT),
    profile,
    session: session && profile && DAY.test(day) ? { id: session, profile, day } : null,
  };
}

/** Adds the non-default analytics parameters to `q` (the overview's are state.ts's). */
export function writeAnalytics(q: URLSearchParams, a: AnalyticsState): void {
  if (a.view !== 'overview') q.set('view', a.view);
  for (const step of a.steps) q.append('step', step);
  if (a.windowHours !== DEFAULT_WINDOW_HOURS) q.set('window', String(a.windowHours));
  if (a.groupBy !== 'session_id') q.set('groupBy', a.groupBy);
  if (a.search) q.set('q', a.search);
  const profile = a.session?.profile ?? a.profile;
  if (profile) q.set('profile', profile);
  if (a.session) {
    q.set('session', a.session.id);
    q.set('day', a.session.day);
  }
}
