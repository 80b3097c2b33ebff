// A small path router: literal segments and :params; 404 and 405 decided here.
import { MethodNotAllowedError, NotFoundError } from './errors';
import type { Handler, RouteFamily } from './types';

export interface Route {
  method: string;
  pattern: string;
  family: RouteFamily;
  handler: Handler;
  /** Answer CORS preflights for this path (ingest). */
  cors?: boolean;
}

interface Compiled extends Route {
  segments: string[];
}

interface Match {
  route: Route;
  params: Record<string, string>;
}

export class Router {
  private readonly routes: Compiled[] = [];

  add(route: Route): this {
    this.routes.push({ ...route, segments: route.pattern.split('/').filter(Boolean) });
    return this;
  }

  /** Finds the route; throws NotFoundError / MethodNotAllowedError. */
  match(method: string, path: string): Match {
    const parts = path.split('/').filter(Boolean);
    const allowed: string[] = [];
    for (const r of this.routes) {
      const params = matchSegments(r.segments, parts);
      if (!params) continue;
      if (r.method === method) return { route: r, params };
      allowed.push(r.method);
    }
    if (allowed.length) throw new MethodNotAllowedError([...new Set(allowed)]);
    throw new NotFoundError(`no route for ${method} ${path}`);
  }

  /** The family of the first route whose path matches (for error body shape). */
  familyOf(path: string): RouteFamily {
    const parts = path.split('/').filter(Boolean);
    return this.routes.find((r) => matchSegments(r.segments, parts))?.family ?? 'read';
  }

  /**
   * Which CORS preflight a path gets: 'ingest' (its routes' project origins), 'read'
   * (insights and export: any origin, they need a secret), or null (no preflight: the
   * usual 404/405).
   */
  preflightOf(path: string): 'ingest' | 'read' | null {
    const parts = path.split('/').filter(Boolean);
    let read = false;
    for (const r of this.routes) {
      if (!matchSegments(r.segments, parts)) continue;
      if (r.cors) return 'ingest';
      if (r.family === 'read') read = true;
    }
    return read ? 'read' : null;
  }
}

function matchSegments(segments: string[], parts: string[]): Record<string, string> | null {
  if (segments.length !== parts.length) return null;
  // Literal segments first: a route that cannot match costs no params object.
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    if (!s.startsWith(':') && s !== parts[i]) return null;
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    const p = parts[i]!;
    if (s.startsWith(':')) {
      let v: string;
      try {
        v = decodeURIComponent(p);
      } catch {
        return null;
      }
      params[s.slice(1)] = v;
    } else if (s !== p) return null;
  }
  return params;
}
