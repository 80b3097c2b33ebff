// Insights routes and /projects, each behind the read guard (internal/read/guard.ts: read-client
// auth, the shared 100 req / 10 s rate limit with its headers, the project check), then the query.
import { NotFoundError } from '../http/errors';
import type { Route } from '../http/router';
import type { HttpRequest } from '../http/types';
import { getActiveUsers, getEngagement, parseActiveUsersParams, parseEngagementParams } from '../insights/active-users';
import { getPropertyValues, listEventNames, listEventProperties, parseEventPropertiesParams, parsePropertyValuesParams } from '../insights/events-catalog';
import { getFunnel, parseFunnelParams } from '../insights/funnel';
import { findGroups, getGroup, listGroupTypes, parseGroupParams, parseGroupsParams } from '../insights/groups';
import { getEntryExitPages, getPagePerformance, parseEntryExitParams, parsePagePerformanceParams } from '../insights/page-reports';
import { getOverview, parseOverviewParams } from '../insights/overview';
import { getRetentionCohort, getRetentionSeries, parseRetentionParams } from '../insights/retention';
import { findProfiles, getProfile, getProfileMetrics, getProfileSessions } from '../insights/profiles';
import { queryEvents, querySessions } from '../insights/raw-lists';
import { parseEventsParams, parseProfileParams, parseProfileSessionsParams, parseProfilesParams, parseSessionsParams } from '../insights/raw-params';
import { getBreakdown, getMetrics, getPages, isBreakdownDimension } from '../insights/service';
import { getUserFlow, parseUserFlowParams } from '../insights/user-flow';
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
    // OpenPanel's funnel (internal/insights/funnel.ts).
    insights('/insights/:projectId/funnel', (req, ctx) => getFunnel(ctx.db, ctx.projectId, parseFunnelParams(req.query), new Date(), opts)),
    // OpenPanel's page reports, user flow and groups (internal/insights/page-reports.ts,
    // user-flow.ts, groups.ts); groups/types before groups/:groupId.
    insights('/insights/:projectId/pages/entry_exit', (req, ctx) => getEntryExitPages(ctx.db, ctx.projectId, parseEntryExitParams(req.query), new Date(), opts)),
    insights('/insights/:projectId/pages/performance', (req, ctx) => getPagePerformance(ctx.db, ctx.projectId, parsePagePerformanceParams(req.query), new Date(), opts)),
    insights('/insights/:projectId/user_flow', (req, ctx) => getUserFlow(ctx.db, ctx.projectId, parseUserFlowParams(req.query), new Date(), opts)),
    insights('/insights/:projectId/groups/types', (_req, ctx) => listGroupTypes(ctx.db, ctx.projectId, opts)),
    insights('/insights/:projectId/groups', (req, ctx) => findGroups(ctx.db, ctx.projectId, parseGroupsParams(req.query), opts)),
    insights('/insights/:projectId/groups/:groupId', (req, ctx) => getGroup(ctx.db, ctx.projectId, req.params.groupId ?? '', parseGroupParams(req.query), opts)),
    // OpenPanel's overview, active users, retention and engagement (internal/insights/overview.ts,
    // active-users.ts, retention.ts).
    insights('/insights/:projectId/overview', (req, ctx) => getOverview(ctx.db, ctx.projectId, parseOverviewParams(req.query), new Date(), opts)),
    insights('/insights/:projectId/active_users', (req, ctx) => getActiveUsers(ctx.db, ctx.projectId, parseActiveUsersParams(req.query), new Date(), opts)),
    insights('/insights/:projectId/retention', (req, ctx) => getRetentionSeries(ctx.db, ctx.projectId, parseRetentionParams(req.query), new Date(), opts)),
    insights('/insights/:projectId/retention/cohort', (req, ctx) => getRetentionCohort(ctx.db, ctx.projectId, parseRetentionParams(req.query), new Date(), opts)),
    insights('/insights/:projectId/engagement', (req, ctx) => getEngagement(ctx.db, ctx.projectId, parseEngagementParams(req.query), new Date(), opts)),
    // OpenPanel's raw rows: events, sessions and profiles (internal/insights/raw-lists.ts,
    // profiles.ts); `events` beside the event catalogue's events/names etc.
    insights('/insights/:projectId/events', (req, ctx) => queryEvents(ctx.db, ctx.projectId, parseEventsParams(req.query), new Date(), opts)),
    insights('/insights/:projectId/sessions', (req, ctx) => querySessions(ctx.db, ctx.projectId, parseSessionsParams(req.query), new Date(), opts)),
    insights('/insights/:projectId/profiles', (req, ctx) => findProfiles(ctx.db, ctx.projectId, parseProfilesParams(req.query), new Date(), opts)),
    insights('/insights/:projectId/profiles/:profileId', (req, ctx) => getProfile(ctx.db, ctx.projectId, req.params.profileId ?? '', parseProfileParams(req.query), opts)),
    insights('/insights/:projectId/profiles/:profileId/sessions', (req, ctx) => getProfileSessions(ctx.db, ctx.projectId, req.params.profileId ?? '', parseProfileSessionsParams(req.query), opts)),
    insights('/insights/:projectId/profiles/:profileId/metrics', (req, ctx) => getProfileMetrics(ctx.db, ctx.projectId, req.params.profileId ?? '', opts)),
    insights('/insights/:projectId/:dimension', (req, ctx) => {
      const dimension = req.params.dimension ?? '';
      if (!isBreakdownDimension(dimension)) throw new NotFoundError(`unknown insights endpoint: ${dimension}`);
      return getBreakdown(ctx.db, ctx.projectId, dimension, parsePageParams(req.query), new Date(), opts);
    }),
  ];
}
