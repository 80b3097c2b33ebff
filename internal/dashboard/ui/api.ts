// The public API as the dashboard calls it: credentials in headers (from sessionStorage),
// errors turned into something a person can act on.
import type { Metrics } from './format';
import type { Filter } from './state';
import { periodParams, type Period } from './periods';

interface Credentials {
  clientId: string;
  clientSecret: string;
}

export interface Project {
  id: string;
  name: string;
  timezone: string;
}

interface MetricsResponse {
  metrics: Metrics;
  series: (Metrics & { date: string })[];
}

export interface Row {
  name: string;
  sessions: number;
  pageviews?: number;
  bounce_rate: number;
  prefix?: string;
}

export interface PageRow {
  title: string;
  origin: string;
  path: string;
  sessions: number;
  pageviews?: number;
  bounce_rate: number;
  avg_duration: number;
}

type ApiErrorKind = 'unauthorized' | 'forbidden' | 'notFound' | 'rateLimited' | 'unavailable' | 'network' | 'badRequest' | 'server';

export class ApiError extends Error {
  constructor(
    readonly kind: ApiErrorKind,
    message: string,
    readonly status: number,
    /** Seconds to wait (429 and 503 Retry-After). */
    readonly retryAfter: number | null = null,
  ) {
    super(message);
  }
}

/** What a person is told for each failure. */
export function explain(err: unknown): string {
  if (!(err instanceof ApiError)) return 'Something went wrong. Reload the page to try again.';
  switch (err.kind) {
    case 'unauthorized': return 'These credentials were not accepted. Check the client id and secret (a read or root client), or ask for a new client.';
    case 'forbidden': return 'This client cannot read this project. Use a read client of the project, or a root client.';
    case 'notFound': return 'This project does not exist (any more). Pick another one.';
    case 'rateLimited': return `Too many requests for this client. Trying again in ${err.retryAfter ?? 10} s.`;
    case 'unavailable': return `The service is unavailable for a moment. Trying again in ${err.retryAfter ?? 5} s.`;
    case 'network': return 'Cannot reach the server. Check the connection; trying again shortly.';
    case 'badRequest': return `The server refused this view: ${err.message}`;
    default: return `The server failed to answer (${err.status}). Trying again shortly.`;
  }
}

const STORAGE_KEY = 'tidemark.credentials';

export function loadCredentials(): Credentials | null {
  try {
    const v = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? 'null') as Credentials | null;
    return v && typeof v.clientId === 'string' && typeof v.clientSecret === 'string' ? v : null;
  } catch {
    return null;
  }
}

export function saveCredentials(c: Credentials | null): void {
  if (c) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(c));
  else sessionStorage.removeItem(STORAGE_KEY);
}

export class Api {
  constructor(private readonly creds: Credentials, private readonly base = '') {}

  get credentials(): Credentials {
    return this.creds;
  }

  async get<T>(path: string, params: Record<string, string> = {}, signal?: AbortSignal): Promise<T> {
    const q = new URLSearchParams(params).toString();
    let res: Response;
    try {
      res = await fetch(`${this.base}${path}${q ? `?${q}` : ''}`, {
        headers: { 'service-client-id': this.creds.clientId, 'service-client-secret': this.creds.clientSecret },
        signal,
      });
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err;
      throw new ApiError('network', 'network error', 0);
    }
    if (res.ok) return (await res.json()) as T;
    let message = res.statusText;
    try {
      message = ((await res.json()) as { message?: string }).message ?? message;
    } catch {}
    const retry = Number(res.headers.get('retry-after'));
    const retryAfter = Number.isFinite(retry) && retry > 0 ? retry : null;
    const kind: ApiErrorKind = res.status === 401 ? 'unauthorized' : res.status === 403 ? 'forbidden' : res.status === 404 ? 'notFound'
      : res.status === 429 ? 'rateLimited' : res.status === 503 ? 'unavailable' : res.status === 400 ? 'badRequest' : 'server';
    throw new ApiError(kind, message, res.status, retryAfter);
  }

  projects(): Promise<Project[]> {
    return this.get('/projects');
  }

  private params(period: Period, filters: Filter[], extra: Record<string, string> = {}): Record<string, string> {
    return { ...periodParams(period), ...(filters.length ? { filters: JSON.stringify(filters) } : {}), ...extra };
  }

  metrics(project: string, period: Period, filters: Filter[], signal?: AbortSignal): Promise<MetricsResponse> {
    return this.get(`/insights/${encodeURIComponent(project)}/metrics`, this.params(period, filters), signal);
  }

  pages(project: string, period: Period, filters: Filter[], limit: number, signal?: AbortSignal): Promise<PageRow[]> {
    return this.get(`/insights/${encodeURIComponent(project)}/pages`, this.params(period, filters, { limit: String(limit) }), signal);
  }

  breakdown(project: string, dimension: string, period: Period, filters: Filter[], limit: number, signal?: AbortSignal): Promise<Row[]> {
    return this.get(`/insights/${encodeURIComponent(project)}/${dimension}`, this.params(period, filters, { limit: String(limit) }), signal);
  }
}
