// How a profile's sessions are found. `sessions` has no index by profile, and a profile's
// sessions are those whose profile_id it is (semantics.md, "Identify within a session": the
// whole session of an identified device belongs to the profile, on every device it used); each
// has at least one event of the profile (the one that identified it). So they are found by
// walking the profile's events newest first through events_project_profile_idx
// (project_id, profile_id, created_at DESC): each step reads the newest event of a session not
// seen yet, so one step per session, and the walk stops as soon as enough sessions count. The
// work is the profile's events up to its N-th newest session, never the project's history.
import { RESERVED_EVENT_NAMES } from '../model/event';
import type { SqlParams } from '../query/filters';

export interface WalkSpec {
  /** SQL of the project id and of the profile id (a parameter, or an outer column such as p.id). */
  project: string;
  profile: string;
  /** A condition on a `sessions` row aliased `s`: the sessions that count. */
  counts: string;
  /** SQL of how many counting sessions end the walk. */
  stop: string;
  /** SQL of how many sessions end it in any case (default 2 x stop + 10). */
  most?: string;
  /** Only events in [start, end) (ISO instants), when given. */
  start?: string;
  end?: string;
}

/**
 * A recursive CTE `walk(t, sid, seen, counted)`: one row per distinct session of the profile's
 * non-bot events, newest event first; `counted` is how many of the sessions so far meet
 * `counts`. It ends at `stop` counting sessions, after `most` sessions (sessions that do not
 * count: another profile's after an identity switch, outside the filters), or when the
 * profile has no older event. Use as `WITH RECURSIVE <this> ...`.
 */
export function sessionWalkSql(p: SqlParams, w: WalkSpec): string {
  const events = [
    `e.project_id = ${w.project}`, `e.profile_id = ${w.profile}`, 'e.session_id IS NOT NULL', 'NOT e.is_bot',
  ];
  if (w.start) events.push(`e.created_at >= ${p.add(w.start)}::timestamptz`);
  if (w.end) events.push(`e.created_at < ${p.add(w.end)}::timestamptz`);
  const where = events.join(' AND ');
  const counts = (f: string) => `(EXISTS (SELECT 1 FROM sessions s WHERE s.id = ${f}.session_id AND ${w.counts}))::int`;
  return `walk(t, sid, seen, counted) AS (
      SELECT f.created_at, f.session_id, ARRAY[f.session_id], ${counts('f')}
      FROM (SELECT e.created_at, e.session_id FROM events e WHERE ${where} ORDER BY e.created_at DESC LIMIT 1) f
      UNION ALL
      SELECT f.created_at, f.session_id, w.seen || f.session_id, w.counted + ${counts('f')}
      FROM walk w
      CROSS JOIN LATERAL (
        SELECT e.created_at, e.session_id FROM events e
        WHERE ${where} AND e.created_at <= w.t AND e.session_id <> ALL(w.seen)
        ORDER BY e.created_at DESC LIMIT 1
      ) f
      WHERE w.counted < ${w.stop} AND cardinality(w.seen) < ${w.most ?? `2 * ${w.stop} + 10`}
    )`;
}

/** A real (not bot, not session_start / session_end) event of the profile, alias `e`. */
export function realEventOf(p: SqlParams, project: string, profile: string): string {
  return `e.project_id = ${project} AND e.profile_id = ${profile} AND NOT e.is_bot AND e.name <> ALL(${p.add([...RESERVED_EVENT_NAMES])}::text[])`;
}
