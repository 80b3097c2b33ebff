// OpenPanel's retention routes: GET /insights/{projectId}/retention (week over week: the
// identified profiles active in a week, and how many of them were active the next week) and
// retention/cohort (each identified profile in the cohort of its first active week of the
// window, and how many of each cohort were active that many weeks later or after, with
// OpenPanel's weighted average row first). Who is active when: ./activity.ts. The numbers are
// semantics.md's ("Product analytics": Retention, Cohorts); docs/api.md and
// docs/insights-decisions.md ("Retention, active users, engagement") say where they differ
// from OpenPanel (retention.service.ts there: getRetentionSeries, getRetentionCohortCore,
// processCohortData).
//
// Both read the identified profiles' events of the weeks they need (the series: the window
// and the week after; the cohorts: the window and the 12 weeks after it) in one pass through
// events_identified_activity_idx, as one bit mask of active weeks per profile, counted by mask.
import { z } from 'zod';
import type { ReadOptions } from '../query/db';
import { SqlParams } from '../query/filters';
import { addDays, daysBetween, localDateOf, type LocalDate } from '../query/period';
import type { ConnectionSource, Queryable } from '../query/source';
import {
  activityMasksSql, checkWindow, datesShape, dayStarts, formatDate, hasBit, maskOf, maskWords, mondayOf, parseParams, rangeSchema, readActivity,
  windowDays, type WindowParams,
} from './activity';
import { roundedRatio, toNumber } from './numbers';

/** Weeks before the current one in the default window (OpenPanel's cohort: the last 12 weeks). */
export const DEFAULT_WEEKS_BACK = 12;
/** Columns of a cohort row: k = 0..12 weeks after the cohort week (OpenPanel's 12-week window). */
export const COHORT_COLUMNS = 13;
/** The weighted average row's cohort_interval (OpenPanel's). */
export const AVERAGE_ROW = 'Weighted Average';

export const retentionParamsSchema = z
  .object({
    ...datesShape,
    range: rangeSchema.optional().describe(`A range instead of dates; neither: the current week and the ${DEFAULT_WEEKS_BACK} before it`),
  })
  .superRefine(checkWindow);
export type RetentionParams = z.infer<typeof retentionParamsSchema>;

export const parseRetentionParams = (query: URLSearchParams): RetentionParams =>
  parseParams(retentionParamsSchema, query, ['startDate', 'endDate', 'range']);

export interface RetentionRow {
  /** The week's Monday, YYYY-MM-DD (project timezone). */
  date: string;
  /** Identified profiles with an event that week. */
  active_users: number;
  /** Of active_users, those with an event the next week too. */
  retained_users: number;
  /** retained_users / active_users x 100, 2 decimals. */
  retention: number;
}

export interface CohortRow {
  /** The cohort's Monday (YYYY-MM-DD), or 'Weighted Average'. */
  cohort_interval: string;
  /** Profiles in the cohort (the average row: the mean cohort size, rounded). */
  sum: number;
  /** values[k], k = 0..12: of the cohort, those with an event k or more weeks after its week. */
  values: number[];
  /** values[k] / sum, a fraction with 2 decimals (OpenPanel's). */
  percentages: number[];
}

/** The Mondays of the weeks the period touches; no period: this week and the 12 before it. */
export function windowWeeks(params: WindowParams, timezone: string, now: Date): LocalDate[] {
  const today = localDateOf(now.getTime(), timezone);
  const { first, last } = params.startDate === undefined && params.range === undefined
    ? { first: addDays(today, -7 * DEFAULT_WEEKS_BACK), last: today }
    : windowDays(params, timezone, now);
  const mondays: LocalDate[] = [];
  for (let m = mondayOf(first); daysBetween(m, last) >= 0; m = addDays(m, 7)) mondays.push(m);
  return mondays;
}

/** (active-week mask, profiles) of the identified profiles over `weeks` weeks from `first`. */
async function weekMasks(
  db: Queryable,
  projectId: string,
  first: LocalDate,
  weeks: number,
  timezone: string,
): Promise<Array<{ mask: string; users: number }>> {
  const p = new SqlParams();
  const sql = activityMasksSql(p, projectId, dayStarts(first, weeks + 1, timezone, 7), true);
  const { rows } = await db.query<Record<string, string>>(sql, p.values);
  return rows.map((r) => ({ mask: maskOf(r, maskWords(weeks)), users: toNumber(r.users) }));
}

/** One row per week of the window with active profiles, oldest first. */
export async function getRetentionSeries(
  pool: ConnectionSource,
  projectId: string,
  params: RetentionParams,
  now: Date = new Date(),
  options: ReadOptions = {},
): Promise<RetentionRow[]> {
  return readActivity(pool, projectId, options, async (db, timezone) => {
    const weeks = windowWeeks(params, timezone, now);
    // The weeks and the one after the last (its profiles are the last week's retained ones).
    const masks = await weekMasks(db, projectId, weeks[0]!, weeks.length + 1, timezone);
    return retentionRows(weeks, masks);
  });
}

/** The series from the (mask, profiles) counts: bit j = active in week j (j = weeks.length: the week after). */
export function retentionRows(weeks: readonly LocalDate[], masks: ReadonlyArray<{ mask: string; users: number }>): RetentionRow[] {
  const rows: RetentionRow[] = [];
  weeks.forEach((monday, j) => {
    let active = 0;
    let retained = 0;
    for (const { mask, users } of masks) {
      if (!hasBit(mask, j)) continue;
      active += users;
      if (hasBit(mask, j + 1)) retained += users;
    }
    if (active > 0) rows.push({ date: formatDate(monday), active_users: active, retained_users: retained, retention: roundedRatio(retained * 100, active) });
  });
  return rows;
}

/**
 * The weighted average row, then one row per week of the window in which some identified
 * profile had its first event of the window, oldest first; [] when none had any.
 */
export async function getRetentionCohort(
  pool: ConnectionSource,
  projectId: string,
  params: RetentionParams,
  now: Date = new Date(),
  options: ReadOptions = {},
): Promise<CohortRow[]> {
  return readActivity(pool, projectId, options, async (db, timezone) => {
    const weeks = windowWeeks(params, timezone, now);
    // The window's weeks (cohorts) and the COHORT_COLUMNS - 1 after the last (its later columns).
    const masks = await weekMasks(db, projectId, weeks[0]!, weeks.length + COHORT_COLUMNS - 1, timezone);
    return cohortTable(weeks, masks, localDateOf(now.getTime(), timezone));
  });
}

/**
 * The table from the (mask, profiles) counts, bit j = active in the week j weeks after
 * weeks[0]. A profile's cohort is its first active week of the window; it counts in column k
 * when it was active k..12 weeks after that week. The average row follows OpenPanel's
 * processCohortData: for each column k it pools only the cohorts that have reached week k (k
 * whole weeks from the cohort's Monday to `today`); `percentages[k]` = pooled retained /
 * pooled size, `sum` the mean cohort size rounded, `values[k]` that size x the rate rounded.
 */
export function cohortTable(weeks: readonly LocalDate[], masks: ReadonlyArray<{ mask: string; users: number }>, today: LocalDate): CohortRow[] {
  const cohorts = new Map<number, number[]>(); // first active week index -> values
  for (const { mask, users } of masks) {
    let first = 0;
    while (first < weeks.length && !hasBit(mask, first)) first++;
    if (first === weeks.length) continue; // active only after the window
    let span = 0; // weeks from the cohort week to its last active week within 12 after it
    for (let k = 1; k < COHORT_COLUMNS; k++) if (hasBit(mask, first + k)) span = k;
    let values = cohorts.get(first);
    if (!values) cohorts.set(first, (values = new Array<number>(COHORT_COLUMNS).fill(0)));
    for (let k = 0; k <= span; k++) values[k]! += users;
  }
  if (cohorts.size === 0) return [];
  const rows = [...cohorts.entries()].sort((a, b) => a[0] - b[0]).map(([index, values]) => {
    const monday = weeks[index]!;
    const sum = values[0]!;
    return {
      mature: Math.floor(daysBetween(monday, today) / 7), // columns this cohort has reached
      row: { cohort_interval: formatDate(monday), sum, values, percentages: values.map((v) => roundedRatio(v, sum)) },
    };
  });
  const size = Math.round(rows.reduce((acc, r) => acc + r.row.sum, 0) / rows.length);
  const average: CohortRow = { cohort_interval: AVERAGE_ROW, sum: size, values: [], percentages: [] };
  for (let k = 0; k < COHORT_COLUMNS; k++) {
    let pooled = 0;
    let retained = 0;
    for (const r of rows) {
      if (k > r.mature) continue;
      pooled += r.row.sum;
      retained += r.row.values[k]!;
    }
    average.percentages.push(roundedRatio(retained, pooled));
    average.values.push(pooled === 0 ? 0 : Math.round((retained * size) / pooled));
  }
  return [average, ...rows.map((r) => r.row)];
}
