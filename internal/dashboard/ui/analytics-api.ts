// The product-analytics routes as the dashboard calls them (OpenPanel's shapes: docs/api.md
// "Funnel", "Retention, active users, engagement", "Events, sessions and profiles").
import type { Api } from './api';
import type { FunnelGroup } from './analytics-state';
import { periodParams, type Period } from './periods';
import type { Filter } from './state';

export interface FunnelStep {
  step: number;
  eventName: string;
  users: number;
  conversionRateFromStart: number;
  dropoffPercent: number | null;
  isHighestDropoff: boolean;
}

export interface FunnelResult {
  steps: FunnelStep[];
  totalUsers: number;
  completedUsers: number;
  overallConversionRate: number;
}

export interface CohortRow {
  cohort_interval: string;
  sum: number;
  values: number[];
  /** Fractions 0..1, 2 decimals. */
  percentages: number[];
}

export interface EventRow {
  id: string;
  name: string;
  device_id: string;
  profile_id: string;
  session_id: string;
  path: string;
  origin: string;
  title: string;
  referrer_name: string;
  duration: number;
  properties: Record<string, unknown>;
  created_at: string;
  country: string;
  city: string;
  browser: string;
  os: string;
  device: string;
  revenue: number;
}

export interface SessionRow {
  id: string;
  profile_id: string;
  device_id: string;
  created_at: string;
  ended_at: string;
  is_bounce: boolean;
  entry_origin: string;
  entry_path: string;
  exit_path: string;
  screen_view_count: number;
  event_count: number;
  duration: number;
  revenue: number;
  country: string;
  city: string;
  device: string;
  browser: string;
  os: string;
  referrer_name: string;
}

export interface ProfileRow {
  id: string;
  first_name: string;
  last_name: string;
  email: string;
  avatar: string;
  properties: Record<string, unknown>;
  is_external: boolean;
  created_at: string;
  last_seen_at: string;
  groups: string[];
}

export interface ProfileMetrics {
  firstSeen: string | null;
  lastSeen: string | null;
  sessions: number;
  screenViews: number;
  totalEvents: number;
  uniqueDaysActive: number;
  avgSessionDurationMin: number;
  bounceRate: number;
  revenue: number;
}

/** Rows a list asks for (the API's largest `limit`). */
export const LIST_ROWS = 100;

const base = (project: string) => `/insights/${encodeURIComponent(project)}`;

/** The funnel route's query: the period, the filters, the steps as one JSON array, window and grouping. */
export function funnelQuery(period: Period, filters: Filter[], steps: string[], windowHours: number, groupBy: FunnelGroup): Record<string, string> {
  return {
    ...periodParams(period),
    ...(filters.length ? { filters: JSON.stringify(filters) } : {}),
    steps: JSON.stringify(steps),
    windowHours: String(windowHours),
    groupBy,
  };
}

export class AnalyticsApi {
  constructor(private readonly api: Api, private readonly project: string) {}

  eventNames(signal?: AbortSignal): Promise<string[]> {
    return this.api.get(`${base(this.project)}/events/names`, {}, signal);
  }

  funnel(query: Record<string, string>, signal?: AbortSignal): Promise<FunnelResult> {
    return this.api.get(`${base(this.project)}/funnel`, query, signal);
  }

  cohorts(signal?: AbortSignal): Promise<CohortRow[]> {
    return this.api.get(`${base(this.project)}/retention/cohort`, {}, signal);
  }

  profiles(search: string, signal?: AbortSignal): Promise<ProfileRow[]> {
    return this.api.get(`${base(this.project)}/profiles`, { ...(search.trim() ? { name: search.trim() } : {}), limit: String(LIST_ROWS) }, signal);
  }

  profile(id: string, signal?: AbortSignal): Promise<{ profile: ProfileRow; recentEvents: EventRow[] }> {
    return this.api.get(`${base(this.project)}/profiles/${encodeURIComponent(id)}`, { eventLimit: String(LIST_ROWS) }, signal);
  }

  profileSessions(id: string, signal?: AbortSignal): Promise<SessionRow[]> {
    return this.api.get(`${base(this.project)}/profiles/${encodeURIComponent(id)}/sessions`, { limit: String(LIST_ROWS) }, signal);
  }

  profileMetrics(id: string, signal?: AbortSignal): Promise<ProfileMetrics> {
    return this.api.get(`${base(this.project)}/profiles/${encodeURIComponent(id)}/metrics`, {}, signal);
  }

  sessions(params: Record<string, string>, signal?: AbortSignal): Promise<SessionRow[]> {
    return this.api.get(`${base(this.project)}/sessions`, { limit: String(LIST_ROWS), ...params }, signal);
  }

  events(params: Record<string, string>, signal?: AbortSignal): Promise<EventRow[]> {
    return this.api.get(`${base(this.project)}/events`, { limit: String(LIST_ROWS), ...params }, signal);
  }
}
