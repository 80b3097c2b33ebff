// OpenPanel's user_flow: the flow of event names after, before or between events, as sankey
// nodes and links (flow-graph.ts builds them). The period's sessions (semantics.md: those that
// start in it; bots never count; the service's session_start / session_end are not events) that
// hold the start event give one path each; the database returns the distinct paths' windows with
// their session counts. docs/api.md ("User flow") and docs/insights-decisions.md ("User flow").
import { z } from 'zod';
import { RESERVED_EVENT_NAMES } from '../model/event';
import { DEFAULT_STATEMENT_TIMEOUT_MS, type ReadOptions } from '../query/db';
import { splitFilters, SqlParams } from '../query/filters';
import { withRead } from '../query/lookups';
import { resolvePeriod } from '../query/period';
import type { ConnectionSource } from '../query/source';
import { buildFlowGraph, flowPathOf, type FlowLink, type FlowMode, type FlowNode, type FlowPath } from './flow-graph';
import { toNumber } from './numbers';
import { nameListParam, parseReportParams, reportPeriodSchema, textParam } from './report-params';
import { scopedSessionsSql } from './sessions';

/** OpenPanel's bounds and default of `steps`. */
export const MIN_FLOW_STEPS = 2;
export const MAX_FLOW_STEPS = 10;
export const DEFAULT_FLOW_STEPS = 5;

export const userFlowParamsSchema = reportPeriodSchema.safeExtend({
  startEvent: textParam.min(1, 'Required').describe('The event the flows start from (after, between) or lead to (before)'),
  endEvent: textParam.min(1, 'Must not be empty').optional().describe('between: the event the flows end on'),
  mode: z.enum(['after', 'before', 'between']).default('after'),
  steps: z
    .string()
    .regex(/^\d+$/, 'Expected a whole number')
    .transform(Number)
    .pipe(z.number().min(MIN_FLOW_STEPS, `steps must be at least ${MIN_FLOW_STEPS}`).max(MAX_FLOW_STEPS, `steps must be at most ${MAX_FLOW_STEPS}`))
    .default(DEFAULT_FLOW_STEPS),
  exclude: nameListParam.optional().describe('Event names left out of the paths; repeated or a JSON array'),
  include: nameListParam.optional().describe('Only these event names (and startEvent, endEvent) in the paths; repeated or a JSON array; wins over exclude'),
}).superRefine((v, ctx) => {
  if (v.mode === 'between' && v.endEvent === undefined) {
    ctx.addIssue({ code: 'custom', path: ['endEvent'], message: 'endEvent is required when mode is "between"' });
  }
});
export type UserFlowParams = z.infer<typeof userFlowParamsSchema>;

export const parseUserFlowParams = (query: URLSearchParams): UserFlowParams =>
  parseReportParams(userFlowParamsSchema, query, ['startEvent', 'endEvent', 'mode', 'steps'], ['exclude', 'include']);

export interface UserFlowResponse {
  mode: FlowMode;
  startEvent: string;
  endEvent?: string;
  node_count: number;
  link_count: number;
  nodes: FlowNode[];
  links: FlowLink[];
}

/** The event names a path may hold (OpenPanel: include, with the start and end events, wins over exclude). */
function nameCondition(params: UserFlowParams, p: SqlParams): string {
  if (params.include && params.include.length > 0) {
    const names = [...params.include, params.startEvent, ...(params.endEvent === undefined ? [] : [params.endEvent])];
    return `e.name = ANY(${p.add(names)}::text[])`;
  }
  if (params.exclude && params.exclude.length > 0) return `e.name <> ALL(${p.add(params.exclude)}::text[])`;
  return 'true';
}

export async function getUserFlow(
  pool: ConnectionSource,
  projectId: string,
  params: UserFlowParams,
  now: Date = new Date(),
  options: ReadOptions = {},
): Promise<UserFlowResponse> {
  const statementTimeoutMs = options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  const paths = await withRead(pool, { statementTimeoutMs }, projectId, params.filters, async (db, timezone) => {
    const period = resolvePeriod(params, timezone, now);
    const p = new SqlParams();
    const sessionsSql = scopedSessionsSql(
      { projectId, start: period.start, end: period.end, filters: splitFilters(params.filters) }, p, { applyEventFilters: true },
    );
    const project = p.add(projectId);
    const start = `${p.add(period.start.toISOString())}::timestamptz`;
    const startEvent = p.add(params.startEvent);
    const steps = p.add(params.steps);
    // after / between: the first start event and at most steps - 1 names after it; before: at most
    // steps - 1 names before it and itself.
    const window = params.mode === 'before'
      ? `d.i > f.k - ${steps}::int AND d.i <= f.k`
      : `d.i >= f.k AND d.i < f.k + ${steps}::int`;
    const { rows } = await db.query<{ names: string[]; sessions: string }>(
      `WITH s AS MATERIALIZED (
         SELECT s.id, s.started_at, s.last_event_at FROM (${sessionsSql}) s
       ),
       -- the sessions holding the start event (events_name_time_idx over the period)
       st AS MATERIALIZED (
         SELECT s.id, s.started_at, s.last_event_at FROM s
         WHERE s.id IN (
           SELECT e.session_id FROM events e
           WHERE e.project_id = ${project} AND e.name = ${startEvent}
             AND e.created_at >= ${start}
             AND e.created_at <= (SELECT max(s2.last_event_at) FROM s s2)
             AND NOT e.is_bot)
       ),
       -- their events in time order (events_time_idx over the period)
       ev AS (
         SELECT e.session_id, e.name,
                lag(e.name) OVER (PARTITION BY e.session_id ORDER BY e.created_at, e.id) AS previous,
                e.created_at, e.id
         FROM st JOIN events e ON e.session_id = st.id
         WHERE e.project_id = ${project}
           AND e.created_at >= ${start}
           AND e.created_at <= (SELECT max(st2.last_event_at) FROM st st2)
           AND e.created_at >= st.started_at
           AND NOT e.is_bot
           AND e.name <> ALL(${p.add([...RESERVED_EVENT_NAMES])}::text[])
           AND ${nameCondition(params, p)}
       ),
       -- a run of the same name is one step
       d AS (
         SELECT ev.session_id, ev.name, row_number() OVER (PARTITION BY ev.session_id ORDER BY ev.created_at, ev.id) AS i
         FROM ev WHERE ev.previous IS DISTINCT FROM ev.name
       ),
       f AS (SELECT d.session_id, min(d.i) AS k FROM d WHERE d.name = ${startEvent} GROUP BY d.session_id),
       w AS (
         SELECT d.session_id, array_agg(d.name ORDER BY d.i) AS names
         FROM d JOIN f ON f.session_id = d.session_id
         WHERE ${window}
         GROUP BY d.session_id
       )
       SELECT w.names, count(*) AS sessions FROM w GROUP BY w.names`,
      p.values,
    );
    return rows;
  });
  // Each distinct window gives the same path; paths that became equal are counted together.
  const counted = new Map<string, FlowPath>();
  for (const row of paths) {
    const names = flowPathOf(row.names, params.mode, params.endEvent);
    if (!names) continue;
    const key = JSON.stringify(names);
    const existing = counted.get(key);
    if (existing) existing.sessions += toNumber(row.sessions);
    else counted.set(key, { names, sessions: toNumber(row.sessions) });
  }
  const { nodes, links } = buildFlowGraph([...counted.values()], params.steps);
  return {
    mode: params.mode,
    startEvent: params.startEvent,
    ...(params.endEvent === undefined ? {} : { endEvent: params.endEvent }),
    node_count: nodes.length,
    link_count: links.length,
    nodes,
    links,
  };
}
