// Unique visitors over whole local days from the visit days' returns (sql/038,
// docs/rollups.md, "Unique visitors by days"): exact, and a sum over at most (days asked) x
// (distinct earlier visit days) rows instead of a distinct count over the period's sessions.
import type { SqlParams } from '../query/filters';
import type { Queryable } from '../query/source';
import { localDateOf, startOfDay, type LocalDate, type Period } from '../query/period';

/** Log entries a read folds in itself at most; beyond, the project is read as before. */
export const MAX_PENDING_VISITOR_ENTRIES = 50_000;

/** The local days a read covers: each bucket's first day (the first is the period's) and the day the period ends before. */
export interface DayBuckets {
  starts: string[];
  stop: string;
  /** The visit days count the whole period only (its buckets are not whole days: they are counted otherwise). */
  totalOnly?: boolean;
}

const iso = (d: LocalDate): string =>
  `${String(d.year).padStart(4, '0')}-${String(d.month).padStart(2, '0')}-${String(d.day).padStart(2, '0')}`;

/** The local date whose first instant is `ms`, or null when `ms` is not a local midnight. */
function midnight(ms: number, timezone: string): LocalDate | null {
  const d = localDateOf(ms, timezone);
  return startOfDay(d, timezone) === ms ? d : null;
}

/**
 * The period and its buckets as local days, or null when the period's start or end, or a bucket
 * start inside it, is not a local midnight (an hourly series, a range of hours).
 */
export function dayBuckets(period: Period): DayBuckets | null {
  const tz = period.timezone;
  const start = period.start.getTime();
  const end = period.end.getTime();
  const first = midnight(start, tz);
  const stop = midnight(end, tz);
  if (!first || !stop || end <= start) return null;
  const starts = [iso(first)];
  for (const b of period.buckets) {
    const ms = b.getTime();
    if (ms <= start) continue;
    if (ms >= end) break;
    const d = midnight(ms, tz);
    if (!d) return null;
    starts.push(iso(d));
  }
  return { starts, stop: iso(stop) };
}

/**
 * The period as one run of local days, for its total alone, or null when its start or end is not
 * a local midnight: an hourly series of whole days (yesterday, or dates a day long).
 */
export function periodDays(period: Period): DayBuckets | null {
  const first = midnight(period.start.getTime(), period.timezone);
  const stop = midnight(period.end.getTime(), period.timezone);
  if (!first || !stop || period.end.getTime() <= period.start.getTime()) return null;
  return { starts: [iso(first)], stop: iso(stop), totalOnly: true };
}

/**
 * Whether the project's visit days are built in its timezone, one PostgreSQL knows (else they are
 * in UTC days, not the local days the buckets start on), and its unfolded log is small (`vstate.ok`).
 */
const readySql = (project: string): string =>
  `coalesce((SELECT s.timezone = pr.timezone AND s.zone = s.timezone FROM visitor_state s JOIN projects pr ON pr.id = s.project_id
             WHERE s.project_id = ${project}), false)
   AND (SELECT count(*) FROM (SELECT 1 FROM visitor_log l WHERE l.project_id = ${project}
                              LIMIT ${MAX_PENDING_VISITOR_ENTRIES + 1}) x) <= ${MAX_PENDING_VISITOR_ENTRIES}`;

/** Projects last seen ready, and when (ms): asked again after READY_TTL_MS. */
const readySeen = new Map<string, number>();
const READY_TTL_MS = 10_000;

/**
 * Asked before a read, so that a project that is not ready costs one small statement, not a
 * statement whose visitors are thrown away. A project seen ready in the last 10 s is not asked
 * again: the read checks in its own statement (days_ok) and is redone the other way when it is
 * not, which `forgetReady` then records.
 */
export async function visitorDaysReady(db: Queryable, projectId: string, now = Date.now()): Promise<boolean> {
  const seen = readySeen.get(projectId);
  if (seen !== undefined && now - seen < READY_TTL_MS) return true;
  const r = await db.query<{ ok: boolean }>(`SELECT ${readySql('$1')} AS ok`, [projectId]);
  const ok = r.rows[0]?.ok === true;
  if (ok) {
    if (readySeen.size > 10_000) readySeen.clear();
    readySeen.set(projectId, now);
  } else readySeen.delete(projectId);
  return ok;
}

/** A read found the project not ready after all (its statement's days_ok was false). */
export function forgetReady(projectId: string): void {
  readySeen.delete(projectId);
}

/**
 * CTEs `vstate` (ok: the project's visit days are built in its current timezone and its
 * unfolded log is small) and `day_visitors` (bucket: 1-based index of `days.starts`, NULL for
 * the whole period; visitors), for rollupMetricsSql without filters. A visitor counts in a run of days [a, b) once: the visit days in
 * it whose previous visit day is before a. Folded days come from visitor_day_returns; the
 * visitors with log entries not folded yet are compared, per bucket, as stored and as they are
 * with their entries.
 */
export function dayVisitorsCtes(project: string, days: DayBuckets, p: SqlParams): string {
  const starts = `${p.add(days.starts)}::date[]`;
  const first = `(${starts})[1]`;
  const stop = `${p.add(days.stop)}::date`;
  return `
      vstate AS MATERIALIZED (
        SELECT ${readySql(project)} AS ok,
               (SELECT s.zone FROM visitor_state s WHERE s.project_id = ${project}) AS zone
      ),
      vstored AS (
        SELECT width_bucket(r.day, ${starts}) AS bucket, r.day, r.prev_day, r.visitors
        FROM visitor_day_returns r
        WHERE r.project_id = ${project} AND r.day >= ${first} AND r.day < ${stop} AND (SELECT ok FROM vstate)
      ),
      vpend AS MATERIALIZED (
        SELECT l.profile_id, (l.started_at AT TIME ZONE v.zone)::date AS day, sum(l.delta) AS delta
        FROM visitor_log l, vstate v
        WHERE l.project_id = ${project} AND v.ok
        GROUP BY 1, 2
        HAVING sum(l.delta) <> 0
      ),
      vcmp AS (
        SELECT coalesce(d.profile_id, q.profile_id) AS profile_id, coalesce(d.day, q.day) AS day,
               coalesce(d.sessions, 0) > 0 AS was, coalesce(d.sessions, 0) + coalesce(q.delta, 0) > 0 AS now
        FROM (
          SELECT x.profile_id, x.day, x.sessions
          FROM (SELECT DISTINCT vpend.profile_id FROM vpend WHERE vpend.day >= ${first} AND vpend.day < ${stop}) w
          JOIN visitor_days x ON x.project_id = ${project} AND x.profile_id = w.profile_id
          WHERE x.day >= ${first} AND x.day < ${stop}
        ) d
        FULL JOIN (SELECT * FROM vpend WHERE vpend.day >= ${first} AND vpend.day < ${stop}) q
          ON q.profile_id = d.profile_id AND q.day = d.day
      ),
      day_visitors AS (
        SELECT k.bucket, sum(k.visitors) AS visitors
        FROM (
          SELECT s.bucket, s.visitors FROM vstored s WHERE s.prev_day < (${starts})[s.bucket]
          UNION ALL
          SELECT NULL, s.visitors FROM vstored s WHERE s.prev_day < ${first}
          UNION ALL
          SELECT width_bucket(c.day, ${starts}),
                 count(DISTINCT c.profile_id) FILTER (WHERE c.now) - count(DISTINCT c.profile_id) FILTER (WHERE c.was)
          FROM vcmp c
          GROUP BY GROUPING SETS ((width_bucket(c.day, ${starts})), ())
        ) k
        GROUP BY k.bucket
      )`;
}
