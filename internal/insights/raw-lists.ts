// OpenPanel's raw lists: GET /insights/{projectId}/events and /sessions (its event.service.ts
// queryEventsCore and session.service.ts querySessionsCore): the rows of a period that meet
// OpenPanel's column parameters and the insights filters, newest first, at most `limit`.
// docs/api.md ("Events, sessions and profiles") and docs/insights-decisions.md say what each
// answers and where it differs from OpenPanel.
//
// Cost: rows are read newest first through an index (events: events_time_idx, or
// events_name_time_idx per event name, or events_project_profile_idx for a profile;
// sessions: sessions_visitors_idx, or the profile's walk of ./profile-walk.ts), so an answer
// stops after `limit` rows. A condition the index cannot serve (a column parameter, a filter,
// `properties`) is tested on at most the latest SCAN_ROWS rows of the period: a rare value
// cannot make a list read the whole period (narrow the period to reach older rows).
import { RESERVED_EVENT_NAMES } from '../model/event';
import type { ReadOptions } from '../query/db';
import { compileAll, indexed, splitFilters, SqlParams } from '../query/filters';
import { withRead } from '../query/lookups';
import type { Filter } from '../query/params';
import { resolvePeriod } from '../query/period';
import type { ConnectionSource } from '../query/source';
import { sessionWalkSql } from './profile-walk';
import { columnFilters, type EventsParams, type SessionsParams } from './raw-params';
import { EVENT_COLUMNS_SQL, eventRow, SESSION_COLUMNS_SQL, sessionRow } from './raw-rows';

/** Rows of the period a condition the index cannot serve is tested on, at most. */
export const SCAN_ROWS = 20_000;
/** With profileId, the profile's sessions of the period a condition is tested on, at most. */
export const PROFILE_SCAN_SESSIONS = 250;

/** The events of the period (no bots, no session_start / session_end), newest first. */
export async function queryEvents(pool: ConnectionSource, projectId: string, params: EventsParams, now: Date = new Date(), options: ReadOptions = {}) {
  return withRead(pool, options, projectId, params.filters, async (db, timezone) => {
    const period = resolvePeriod(params.period, timezone, now);
    const p = new SqlParams();
    const base = [
      `e.project_id = ${p.add(projectId)}`,
      `e.created_at >= ${p.add(period.start.toISOString())}::timestamptz`,
      `e.created_at < ${p.add(period.end.toISOString())}::timestamptz`,
      'NOT e.is_bot',
      `e.name <> ALL(${p.add([...RESERVED_EVENT_NAMES])}::text[])`,
    ];
    if (params.profileId) base.push(`e.profile_id = ${p.add(params.profileId)}`);
    const tested: Filter[] = [...params.filters, ...columnFilters(params)];
    if (params.path) tested.push({ name: 'path', operator: 'is', value: [params.path] });
    for (const [key, value] of Object.entries(params.properties ?? {})) tested.push({ name: `properties.${key}`, operator: 'is', value: [value] });
    const inner = p.add(tested.length ? SCAN_ROWS : params.limit);
    const order = 'ORDER BY e.created_at DESC, e.id DESC';
    // One branch per event name, each newest first on its own index range, merged.
    const branches = (params.eventNames.length ? [...new Set(params.eventNames)] : [null]).map((name) => {
      const where = name === null ? base : [...base, `e.name = ${p.add(name)}`];
      return `(SELECT e.* FROM events e WHERE ${where.join(' AND ')} ${order} LIMIT ${inner})`;
    });
    const { rows } = await db.query(
      `SELECT ${EVENT_COLUMNS_SQL} FROM (${branches.join(' UNION ALL ')}) e
       WHERE ${compileAll(indexed(tested), 'e', p)}
       ${order} LIMIT ${p.add(params.limit)}`,
      p.values,
    );
    return rows.map(eventRow);
  });
}

/** The sessions (no bots) that started in the period, newest start first. */
export async function querySessions(pool: ConnectionSource, projectId: string, params: SessionsParams, now: Date = new Date(), options: ReadOptions = {}) {
  return withRead(pool, options, projectId, params.filters, async (db, timezone) => {
    const period = resolvePeriod(params.period, timezone, now);
    const p = new SqlParams();
    const project = p.add(projectId);
    const start = period.start.toISOString();
    const end = period.end.toISOString();
    const own = [
      `s.project_id = ${project}`, `s.started_at >= ${p.add(start)}::timestamptz`, `s.started_at < ${p.add(end)}::timestamptz`, 'NOT s.is_bot',
    ];
    // Session-level filters test the session; event-level ones keep a session when one of its
    // real events meets them all (as on every insights route).
    const split = splitFilters([...params.filters, ...columnFilters(params)]);
    const tested: string[] = [];
    if (split.session.length) tested.push(compileAll(split.session, 's', p));
    if (split.event.length) {
      tested.push(`EXISTS (
        SELECT 1 FROM events e
        WHERE e.session_id = s.id AND e.project_id = s.project_id
          AND e.created_at >= s.started_at AND e.created_at <= s.last_event_at
          AND NOT e.is_bot AND e.name <> ALL(${p.add([...RESERVED_EVENT_NAMES])}::text[])
          AND ${compileAll(split.event, 'e', p)})`);
    }
    const order = 'ORDER BY s.started_at DESC, s.id DESC';
    const limit = p.add(params.limit);
    let sql: string;
    if (params.profileId) {
      // The profile's sessions of the period, found by walking its events of the period.
      const counts = [...own, `s.profile_id = ${p.add(params.profileId)}`, ...tested].join(' AND ');
      // With conditions, up to PROFILE_SCAN_SESSIONS of its sessions are tested.
      const most = tested.length ? `${p.add(PROFILE_SCAN_SESSIONS)}::int` : undefined;
      const walk = sessionWalkSql(p, { project, profile: p.add(params.profileId), counts, stop: `${limit}::int`, start, end, ...(most ? { most } : {}) });
      sql = `WITH RECURSIVE ${walk}
        SELECT ${SESSION_COLUMNS_SQL} FROM sessions s WHERE s.id IN (SELECT sid FROM walk) AND ${counts} ${order} LIMIT ${limit}`;
    } else {
      const inner = p.add(tested.length ? SCAN_ROWS : params.limit);
      sql = `SELECT ${SESSION_COLUMNS_SQL} FROM (
          SELECT s.* FROM sessions s WHERE ${own.join(' AND ')} ${order} LIMIT ${inner}
        ) s
        WHERE ${tested.length ? tested.join(' AND ') : 'true'} ${order} LIMIT ${limit}`;
    }
    const { rows } = await db.query(sql, p.values);
    return rows.map(sessionRow);
  });
}
