// The funnel by session from each session's steps (sql/036_session_steps.sql): the sessionizer
// keeps, on the sessions row, the names of its non-bot events other than screen views in time
// order. For a session whose steps all lie in the period and span at most the window, the
// level it reaches depends on those names alone, so the period's sessions are grouped by
// them in one index-only read (a few thousand distinct lists where there are hundreds of
// thousands of sessions) and each list's level is worked out here. The other sessions of the
// period (crossing its start or end, steps spanning more than the window, or names not known
// in order) are few; funnel.ts reads their events as it reads every funnel's.
import { SCREEN_VIEW } from '../model/event';
import type { Queryable } from '../query/source';
import { toNumber } from './numbers';

/** What of a funnel's parameters the steps need (FunnelParams in funnel.ts). */
export interface StepsFunnelParams {
  steps: string[];
  windowHours: number;
  groupBy: string;
  filters: readonly unknown[];
}

/**
 * Whether the steps can answer: a funnel by session, unfiltered (filters test each event's
 * own columns, which the steps do not keep), of names that are not screen views.
 */
export function stepsSummaryApplies(params: StepsFunnelParams): boolean {
  return params.groupBy === 'session_id' && params.filters.length === 0 && !params.steps.includes(SCREEN_VIEW);
}

/**
 * The level a session reaches, from its step names in time order ('' before a name at the
 * same instant as the one before it): the longest prefix of `steps` found in order, each
 * step strictly later than the one before (so one step per instant). Taking each next step
 * at its first chance is optimal (a later match never leaves more room); the window does not
 * bind when the session's steps span at most the window.
 */
export function levelOfSteps(names: readonly string[], steps: readonly string[]): number {
  let level = 0;
  let advancedAtThisInstant = false;
  for (let i = 0; i < names.length && level < steps.length; i++) {
    const name = names[i]!;
    if (name === '') continue; // the next name shares the previous one's instant
    const sameInstant = i > 0 && names[i - 1] === '';
    if (!sameInstant) advancedAtThisInstant = false;
    if (!advancedAtThisInstant && name === steps[level]) {
      level++;
      advancedAtThisInstant = true;
    }
  }
  return level;
}

/** The instants of a session's step names ('' before a name at the instant of the one before): the names of each, in order. */
export function stepInstants(names: readonly string[]): string[][] {
  const out: string[][] = [];
  for (let i = 0; i < names.length; i++) {
    if (names[i] === '') out[out.length - 1]!.push(names[++i]!);
    else out.push([names[i]!]);
  }
  return out;
}

export interface StepsSummary {
  /** Sessions answered from their steps that reached each step. */
  reached: number[];
  /** The period's other sessions with steps: their events decide. */
  rawSessionIds: string[];
}

/**
 * The sessions of the period with steps, in one read of sessions_steps_idx (and of the few
 * whose steps span over a day, sessions_long_steps_idx); null when the period starts before
 * the sessions carried steps (the caller reads the events).
 */
export async function readStepsSummary(db: Queryable, projectId: string, params: StepsFunnelParams, start: Date, end: Date): Promise<StepsSummary | null> {
  const since = await db.query<{ since: Date }>('SELECT since FROM session_steps_since');
  const from = since.rows[0]?.since;
  if (!from || from.getTime() > start.getTime()) return null;
  const names = [...new Set(params.steps)];
  const { rows } = await db.query<{ names: string[] | null; id: string | null; n: string }>(
    `SELECT names, id, count(*) AS n FROM (
       SELECT CASE WHEN whole THEN step_names END AS names, CASE WHEN NOT whole THEN id END AS id FROM (
         SELECT id, step_names, step_names IS NOT NULL AND step_first_at >= $3::timestamptz AND step_last_at < $4::timestamptz
                  AND step_last_at - step_first_at <= $5::int * interval '1 hour' AS whole
         FROM sessions
         WHERE project_id = $1 AND step_first_at IS NOT NULL
           AND step_first_at >= $3::timestamptz - interval '1 day' AND step_first_at < $4::timestamptz
           AND step_last_at >= $3::timestamptz AND (step_names IS NULL OR step_names && $2::text[])
         UNION ALL
         SELECT id, NULL, false FROM sessions
         WHERE project_id = $1 AND step_last_at - step_first_at > interval '1 day' AND step_last_at >= $3::timestamptz
           AND step_first_at < $3::timestamptz - interval '1 day'
       ) s
     ) t GROUP BY names, id`,
    [projectId, names, start.toISOString(), end.toISOString(), params.windowHours],
  );
  const reached = params.steps.map(() => 0);
  const rawSessionIds: string[] = [];
  for (const row of rows) {
    if (row.id !== null) {
      rawSessionIds.push(row.id);
      continue;
    }
    const level = levelOfSteps(row.names ?? [], params.steps);
    const n = toNumber(row.n);
    for (let k = 0; k < level; k++) reached[k] = reached[k]! + n;
  }
  return { reached, rawSessionIds };
}
