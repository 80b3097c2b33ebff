// Insights routes and /projects, each behind the read guard (internal/read/guard.ts: read-client
// auth, the shared 100 req / 10 s rate limit with its headers, the project check), then the query.
import { NotFoundError } from '../http/errors';
import type { Route } from '../http/router';
import type { HttpRequest } from '../http/types';
import { getPropertyValues, listEventNames, listEventProperties, parseEventPropertiesParams, parsePropertyValuesParams } from '../insights/events-catalog';
import { getBreakdown, getMetrics, getPages, isBreakdownDimension } from '../insights/service';
import { liveVisitors } from '../live/live';
import { parsePageParams, parsePeriodParams } from '../query/params';
import { readGuard, type GuardOptions, type ReadContext, type ReadDeps } from '../read/guard';
import { listProjects } from '../store/accounts';

export function readRoutes(deps: ReadDeps): Route[] {
  const opts = { statementTimeoutMs: deps.queryTimeoutMs, exactVisitorsMax: deps.exactVisitorsMax };
  const fromPath = (req: HttpRequest) => req.params.projectId;
  const insights = (pattern: string, fn: (req: HttpRequest, ctx: ReadContext) => Promise<unknown>, guard: GuardOptions = {}): Route => ({
    method: 'GET', pattern, family: 'read', handler: readGuard(deps, fn, fromPath, guard),
  });
  return [
    // The projects a client may read (the dashboard's project picker): a read client's own,
    // every project for a root client. Not in OpenPanel's API; see docs/decisions.md.
    {
      method: 'GET', pattern: '/projects', family: 'read',
      handler: readGuard(deps, async (_req, ctx) => {
        const rows = ctx.client.mode === 'root' ? await listProjects(deps.db) : [await deps.auth.project(ctx.client.projectId)];
        return rows.filter((p) => p !== null).map((p) => ({ id: p.id, name: p.name, timezone: p.timezone }));
      }, () => undefined, { admit: false }),
    },
    insights('/insights/:projectId/metrics', (req, ctx) => getMetrics(ctx.db, ctx.projectId, parsePeriodParams(req.query), new Date(), opts)),
    // Counted by the guard's rate-limit call; asked again only if that call could not be made.
    insights('/insights/:projectId/live', async (_req, ctx) => ({ visitors: ctx.live ?? (await liveVisitors(deps.redis, deps.keys, ctx.projectId)) }), { live: true, admit: false }),
    insights('/insights/:projectId/pages', (req, ctx) => getPages(ctx.db, ctx.projectId, parsePageParams(req.query), new Date(), opts)),
    // OpenPanel's event catalogue (internal/insights/events-catalog.ts).
    insights('/insights/:projectId/events/names', (_req, ctx) => listEventNames(ctx.db, ctx.projectId, opts)),
    insights('/insights/:projectId/events/properties', (req, ctx) => listEventProperties(ctx.db, ctx.projectId, parseEventPropertiesParams(req.query), opts)),
    insights('/insights/:projectId/events/property_values', (req, ctx) => getPropertyValues(ctx.db, ctx.projectId, parsePropertyValuesParams(req.query), opts)),
    insights('/insights/:projectId/:dimension', (req, ctx) => {
      const dimension = req.params.dimension ?? '';
      if (!isBreakdownDimension(dimension)) throw new NotFoundError(`unknown insights endpoint: ${dimension}`);
      return getBreakdown(ctx.db, ctx.projectId, dimension, parsePageParams(req.query), new Date(), opts);
    }),
  ];
}
