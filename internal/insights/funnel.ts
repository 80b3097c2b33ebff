// OpenPanel's funnel route (GET /insights/{projectId}/funnel): how many sessions (or profiles)
// did the steps in order, each within windowHours of the first step, and where they dropped
// off. docs/api.md ("Funnel") and docs/insights-decisions.md ("Funnel") say what it answers
// and where it differs from OpenPanel, whose ClickHouse query uses windowFunnel.
//
// One statement: the period's non-bot events named by a step, one range of
// events_name_time_idx (project_id, name, created_at) INCLUDE (session_id, profile_id, is_bot,
// ...) (sql/039) per name, index-only (bots left out on the index entry), sorted once by
// (group, time), then one window pass per step that carries, for each event of step k, the
// latest first-step time of a chain that reaches it (a chain starting later leaves the most
// room in the window).
import { z } from 'zod';
import { BadRequestError, type Issue } from '../http/errors';
import { RESERVED_EVENT_NAMES } from '../model/event';
import { DEFAULT_STATEMENT_TIMEOUT_MS, type ReadOptions } from '../query/db';
import { compileAll, indexed, SqlParams } from '../query/filters';
import { withRead } from '../query/lookups';
import { noNul, pickParams, positiveIntSchema, type PeriodParams } from '../query/params';
import { reportPeriodSchema } from './report-params';
import { resolvePeriod } from '../query/period';
import type { ConnectionSource, Queryable } from '../query/source';
import { roundedRatio, toNumber } from './numbers';
import { readStepsSummary, stepsSummaryApplies } from './funnel-steps';

export const MIN_STEPS = 2;
export const MAX_STEPS = 10;
export const MAX_WINDOW_HOURS = 720;
export const DEFAULT_WINDOW_HOURS = 24;
export const FUNNEL_GROUPS = ['session_id', 'profile_id'] as const;
export type FunnelGroup = (typeof FUNNEL_GROUPS)[number];
/** The longest event name ingest accepts: a longer step could match nothing. */
const MAX_STEP_LENGTH = 256;

const reserved: readonly string[] = RESERVED_EVENT_NAMES;
const STEPS_MESSAGE = `steps must have between ${MIN_STEPS} and ${MAX_STEPS} items`;

const stepNameSchema = z
  .string()
  .min(1, 'An event name must not be empty')
  .max(MAX_STEP_LENGTH, `At most ${MAX_STEP_LENGTH} characters (the longest event name)`)
  .refine(noNul, 'Must not contain NUL characters')
  .refine((n) => !reserved.includes(n), 'session_start and session_end are emitted by the service and are not funnel steps');

/** The funnel's own parameters (the period and filters are parsePeriodParams'). */
export const funnelParamsSchema = z.object({
  steps: z
    .array(stepNameSchema)
    .min(MIN_STEPS, STEPS_MESSAGE)
    .max(MAX_STEPS, STEPS_MESSAGE)
    .describe('Event names in order; repeated (steps=a&steps=b) or one JSON array (steps=["a","b"])'),
  windowHours: positiveIntSchema(MAX_WINDOW_HOURS, 'windowHours')
    .default(DEFAULT_WINDOW_HOURS)
    .describe(`Every step within this many hours of the first step (1..${MAX_WINDOW_HOURS}, default ${DEFAULT_WINDOW_HOURS})`),
  groupBy: z.enum(FUNNEL_GROUPS).default('session_id').describe('What goes through the funnel: a session, or a profile across its sessions and devices'),
});

export type FunnelParams = PeriodParams & z.infer<typeof funnelParamsSchema>;

/**
 * `steps` as OpenPanel takes it: every value of a repeated parameter as one name, or a single
 * value that is a JSON array; any other single value is one name (too few steps).
 */
function stepsInput(query: URLSearchParams): { value: unknown; issue?: Issue } {
  const all = query.getAll('steps');
  if (all.length !== 1) return { value: all.length === 0 ? undefined : all };
  const only = all[0]!;
  if (!only.trimStart().startsWith('[')) return { value: [only] };
  try {
    return { value: JSON.parse(only) as unknown };
  } catch {
    return { value: undefined, issue: { path: ['steps'], message: 'Expected repeated steps or a JSON array of event names' } };
  }
}

/** Period, filters, steps, windowHours and groupBy; a 400 naming every invalid one. */
export function parseFunnelParams(query: URLSearchParams): FunnelParams {
  const issues: Issue[] = [];
  const period = reportPeriodSchema.safeParse(pickParams(query, ['startDate', 'endDate', 'range', 'filters']));
  if (!period.success) issues.push(...BadRequestError.fromZod(period.error).issues);
  const steps = stepsInput(query);
  if (steps.issue) issues.push(steps.issue);
  const own = funnelParamsSchema.safeParse({ ...pickParams(query, ['windowHours', 'groupBy']), steps: steps.value });
  if (!own.success) issues.push(...BadRequestError.fromZod(own.error).issues.filter((i) => !(steps.issue && i.path[0] === 'steps')));
  if (!period.success || !own.success || issues.length > 0) {
    const first = issues[0]!;
    throw new BadRequestError(`${first.path.length ? `${first.path.join('.')}: ` : ''}${first.message}`, issues);
  }
  return { ...period.data, ...own.data };
}

export interface FunnelStep {
  step: number;
  eventName: string;
  /** Groups (sessions or profiles) that reached this step. */
  users: number;
  /** users / the first step's users x 100, 2 decimals. */
  conversionRateFromStart: number;
  /** Share of this step's users that did not reach the next step x 100, 2 decimals; null on the last step. */
  dropoffPercent: number | null;
  /** The first step with the largest (positive) drop-off count. */
  isHighestDropoff: boolean;
}

export interface FunnelResponse {
  steps: FunnelStep[];
  totalUsers: number;
  completedUsers: number;
  overallConversionRate: number;
}

/** OpenPanel's answer from the count of groups that reached each step (non-increasing). */
export function funnelAnswer(names: readonly string[], reached: readonly number[]): FunnelResponse {
  const total = reached[0] ?? 0;
  const drops = reached.map((n, i) => (i + 1 < reached.length ? n - reached[i + 1]! : null));
  const maxDrop = Math.max(0, ...drops.map((d) => d ?? 0));
  const highest = maxDrop > 0 ? drops.indexOf(maxDrop) : -1;
  const steps = names.map((eventName, i) => {
    const users = reached[i] ?? 0;
    const drop = drops[i] ?? null;
    return {
      step: i + 1,
      eventName,
      users,
      conversionRateFromStart: roundedRatio(users * 100, total),
      dropoffPercent: drop === null ? null : roundedRatio(drop * 100, users),
      isHighestDropoff: i === highest,
    };
  });
  const completed = reached[reached.length - 1] ?? 0;
  return { steps, totalUsers: total, completedUsers: completed, overallConversionRate: roundedRatio(completed * 100, total) };
}

/**
 * The statement. `ev`: the group, time and name of every event that can be a step (a LATERAL
 * per step name; OFFSET 0 keeps the name in the index condition). Then one level per step,
 * all over the same order (group, time), so the rows are sorted once: `fK` is, on an event
 * of step K, the latest first-step time among the chains that reach step K-1 strictly before
 * it (the frame ends 1 microsecond before the event, the precision of stored times: equal
 * times never follow each other; a frame that starts unbounded and has no exclusion is
 * computed incrementally, EXCLUDE GROUP would recompute it for every row), and
 * `f1` an event of step 1's own time. A chain reaches step K when its event of step K is at
 * most windowHours after `fK`: a later first step leaves the most room in the window.
 * One row: `r1`..`rN`, the groups that reached each step.
 */
export function funnelSql(projectId: string, params: FunnelParams, start: Date, end: Date, p: SqlParams, sessionIds?: readonly string[]): string {
  const byProfile = params.groupBy === 'profile_id';
  const filters = params.filters.length ? `AND ${compileAll(indexed(params.filters), 'e', p)}` : '';
  const project = p.add(projectId);
  const names = p.add([...new Set(params.steps)]);
  const from = p.add(start.toISOString());
  const to = p.add(end.toISOString());
  // semantics.md, "Identify within a session": an event in a session belongs to its session's
  // profile. The sessions that started in the period or the day before are joined by a hash
  // (one scan of their index range); an older session is looked up by id (a rare event that
  // continues a session begun before that).
  const group = byProfile
    ? 'coalesce(near.profile_id, (SELECT x.profile_id FROM sessions x WHERE x.id = e.session_id LIMIT 1), e.profile_id)'
    : 'e.session_id';
  const sessionJoin = byProfile
    ? `LEFT JOIN (SELECT s.id, s.profile_id FROM sessions s
                  WHERE s.project_id = ${project} AND s.started_at >= ${from}::timestamptz - interval '1 day'
                    AND s.started_at < ${to}::timestamptz) near ON near.id = e.session_id`
    : '';
  const window = `${p.add(params.windowHours)}::int * interval '1 hour'`;
  const reached = (k: number) => `f${k} IS NOT NULL AND t <= f${k} + ${window}`;
  let levels = `SELECT g, t, name, CASE WHEN name = ${p.add(params.steps[0])} THEN t END AS f1 FROM ev`;
  for (let k = 2; k <= params.steps.length; k++) {
    levels = `SELECT *, CASE WHEN name = ${p.add(params.steps[k - 1])} THEN
                max(CASE WHEN ${reached(k - 1)} THEN f${k - 1} END) OVER (PARTITION BY g ORDER BY t RANGE BETWEEN UNBOUNDED PRECEDING AND interval '1 microsecond' PRECEDING)
              END AS f${k}
              FROM (${levels}) l${k - 1}`;
  }
  const perGroup = params.steps.map((_, i) => `bool_or(${reached(i + 1)}) AS r${i + 1}`);
  const counts = params.steps.map((_, i) => `count(*) FILTER (WHERE r${i + 1}) AS r${i + 1}`);
  return `
    WITH ev AS (${sessionIds ? `
      SELECT ${group} AS g, e.created_at AS t, e.name FROM events e
      WHERE e.session_id = ANY(${p.add(sessionIds)}::uuid[]) AND e.project_id = ${project} AND e.name = ANY(${names}::text[])
        AND e.created_at >= ${from}::timestamptz AND e.created_at < ${to}::timestamptz AND NOT e.is_bot ${filters}` : `
      SELECT ${group} AS g, e.created_at AS t, e.name
      FROM unnest(${names}::text[]) AS n(name)
      CROSS JOIN LATERAL (
        SELECT e.session_id, e.profile_id, e.created_at, e.name FROM events e
        WHERE e.project_id = ${project} AND e.name = n.name
          AND e.created_at >= ${from}::timestamptz AND e.created_at < ${to}::timestamptz
          AND NOT e.is_bot ${byProfile ? '' : 'AND e.session_id IS NOT NULL'} ${filters}
        OFFSET 0
      ) e ${sessionJoin}`}
    )
    SELECT ${counts.join(', ')}
    FROM (SELECT g, ${perGroup.join(', ')} FROM (${levels}) l GROUP BY g) x`;
}

/**
 * How many groups reached each step in [start, end). A funnel by session reads the sessions'
 * steps where they can answer (funnel-steps.ts) and the events only of the sessions they
 * cannot; every other funnel reads the events (funnelSql).
 */
export async function funnelReached(db: Queryable, projectId: string, params: FunnelParams, start: Date, end: Date): Promise<number[]> {
  const raw = async (sessionIds?: readonly string[]): Promise<number[]> => {
    const p = new SqlParams();
    const { rows } = await db.query<Record<string, string>>(funnelSql(projectId, params, start, end, p, sessionIds), p.values);
    return params.steps.map((_, i) => toNumber(rows[0]?.[`r${i + 1}`]));
  };
  const summary = stepsSummaryApplies(params) ? await readStepsSummary(db, projectId, params, start, end) : null;
  if (summary === null) return raw();
  const rest = summary.rawSessionIds.length ? await raw(summary.rawSessionIds) : params.steps.map(() => 0);
  return summary.reached.map((n, i) => n + rest[i]!);
}

/** The funnel of `params.steps` over the period (docs/api.md, "Funnel"). */
export async function getFunnel(
  pool: ConnectionSource,
  projectId: string,
  params: FunnelParams,
  now: Date = new Date(),
  options: ReadOptions = {},
): Promise<FunnelResponse> {
  const readOptions = { statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS };
  return withRead(pool, readOptions, projectId, params.filters, async (db, timezone) => {
    const period = resolvePeriod(params, timezone, now);
    return funnelAnswer(params.steps, await funnelReached(db, projectId, params, period.start, period.end));
  });
}
