// OpenAPI entries of the pages/entry_exit, pages/performance, user_flow, groups/types, groups and
// groups/{groupId} insights routes (internal/insights/page-reports.ts, user-flow.ts, groups.ts),
// added to the document by openapi.ts.
import { z } from 'zod';
import { groupParamsSchema, groupsParamsSchema, MAX_GROUPS_LIMIT, MAX_MEMBER_LIMIT } from '../insights/groups';
import { entryExitParamsSchema, MAX_ENTRY_EXIT_ROWS, pagePerformanceParamsSchema } from '../insights/page-reports';
import { MAX_FLOW_STEPS, MIN_FLOW_STEPS, userFlowParamsSchema } from '../insights/user-flow';

/** openapi.ts' builder of one insights path (GET and its preflight). */
type InsightsPath = (summary: string, params: z.ZodType, response: z.ZodType) => unknown;

interface Parameter {
  name: string;
  [key: string]: unknown;
}
interface PathItem {
  get: { parameters: Parameter[]; responses: Record<string, unknown> } & Record<string, unknown>;
  [key: string]: unknown;
}

/** Each named parameter's entry rebuilt by `change`. */
function adjust(item: unknown, change: Record<string, (p: Parameter) => Parameter>): PathItem {
  const path = item as PathItem;
  return { ...path, get: { ...path.get, parameters: path.get.parameters.map((p) => change[p.name]?.(p) ?? p) } };
}

/** A parameter that is one value (a name another route takes as a list, such as the funnel's `steps`). */
const notList = (p: Parameter): Parameter => Object.fromEntries(Object.entries(p).filter(([k]) => k !== 'style' && k !== 'explode')) as Parameter;
/** A list parameter: repeated, or one JSON array. */
const list = (description: string) => (p: Parameter): Parameter => ({ ...p, style: 'form', explode: true, description });

const EntryExitRow = z.object({
  origin: z.string(), path: z.string().describe("'' for sessions without a page view"),
  sessions: z.number(), pageviews: z.number().describe('screen views of those sessions'),
  revenue: z.number().describe("__revenue of those sessions' revenue events, summed"),
});
const PagePerformance = z.object({
  total_pages: z.number().describe('pages that match (search)'),
  shown: z.number(),
  pages: z.array(z.object({
    origin: z.string(), path: z.string(), title: z.string().describe('the latest non-empty title'),
    sessions: z.number(), pageviews: z.number(),
    avg_duration: z.number().describe('seconds from a view to the next event of its session, 2 decimals'),
    bounce_rate: z.number().describe('of the sessions that entered on the page, percent bounced, 2 decimals'),
    seo_signals: z.object({
      high_bounce: z.boolean().describe('bounce_rate > 70'),
      low_engagement: z.boolean().describe('avg_duration < 60 s'),
      good_landing_page: z.boolean().describe('bounce_rate < 40 and avg_duration > 120 s'),
    }),
  })),
});
const UserFlow = z.object({
  mode: z.enum(['after', 'before', 'between']), startEvent: z.string(), endEvent: z.string().optional(),
  node_count: z.number(), link_count: z.number(),
  nodes: z.array(z.object({
    id: z.string().describe('<event>::step<n>, or <event>::final for the merged last nodes of one event'),
    label: z.string().describe('the event name'), nodeColor: z.string(),
    percentage: z.number().describe('value / the sessions starting on a shown entry event, percent, 2 decimals'),
    value: z.number().describe('sessions'), step: z.number().describe('1-based'),
  })),
  links: z.array(z.object({ source: z.string(), target: z.string(), value: z.number().describe('sessions') })),
});
const Group = z.object({
  id: z.string(), projectId: z.string(), type: z.string(), name: z.string(),
  properties: z.record(z.string(), z.unknown()), createdAt: z.string().describe('ISO 8601'), updatedAt: z.string().describe('ISO 8601'),
});
const Member = z.object({
  id: z.string(), email: z.string(), avatar: z.string().describe('properties.avatar'), firstName: z.string(), lastName: z.string(),
  createdAt: z.string().describe('ISO 8601'), lastSeenAt: z.string().describe('ISO 8601: the later of its last change and latest event'),
  isExternal: z.boolean().describe('false when the id has a device id\'s form (32 hex characters)'),
  projectId: z.string(), groups: z.array(z.string()), properties: z.record(z.string(), z.unknown()),
});

export function reportPaths(insights: InsightsPath): Record<string, unknown> {
  const groupPath = adjust(
    insights(`A group, its member count and its newest members (OpenPanel's), memberLimit at most ${MAX_MEMBER_LIMIT}`, groupParamsSchema,
      z.object({ group: Group, member_count: z.number(), members: z.array(Member) })),
    {},
  );
  groupPath.get.parameters.splice(1, 0, { name: 'groupId', in: 'path', required: true, schema: { type: 'string' } });
  groupPath.get.responses = {
    ...groupPath.get.responses,
    404: { description: 'Unknown project or group', content: { 'application/json': { schema: { type: 'object', properties: { error: { type: 'string' }, message: { type: 'string' } } } } } },
  };
  return {
    '/insights/{projectId}/pages/entry_exit': insights(
      `Entry or exit pages by sessions (OpenPanel's), at most ${MAX_ENTRY_EXIT_ROWS}`, entryExitParamsSchema, z.array(EntryExitRow),
    ),
    '/insights/{projectId}/pages/performance': insights(
      "Per page sessions, views, time on page and bounce rate, with SEO flags (OpenPanel's)", pagePerformanceParamsSchema, PagePerformance,
    ),
    '/insights/{projectId}/user_flow': adjust(
      insights("Flows of event names after, before or between events, as sankey nodes and links (OpenPanel's)", userFlowParamsSchema, UserFlow),
      {
        steps: (p) => ({ ...notList(p), description: `Steps of the flow, ${MIN_FLOW_STEPS} to ${MAX_FLOW_STEPS} (default 5)` }),
        exclude: list('Event names left out of the paths; repeated (exclude=a&exclude=b) or one JSON array'),
        include: list('Only these event names (with startEvent and endEvent) in the paths, wins over exclude; repeated or one JSON array'),
      },
    ),
    '/insights/{projectId}/groups/types': insights("The project's group types (OpenPanel's)", z.object({}), z.object({ types: z.array(z.string()) })),
    '/insights/{projectId}/groups': insights(
      `The project's groups, newest first (OpenPanel's), limit at most ${MAX_GROUPS_LIMIT}`, groupsParamsSchema, z.array(Group),
    ),
    '/insights/{projectId}/groups/{groupId}': groupPath,
  };
}
