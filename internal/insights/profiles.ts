// OpenPanel's profile routes: GET /insights/{projectId}/profiles (search), profiles/{profileId}
// (one profile and its recent events), profiles/{profileId}/sessions and .../metrics (its
// profile.service.ts: findProfilesCore, getProfileWithEvents, getProfileSessionsCore,
// getProfileMetricsCore). docs/api.md ("Events, sessions and profiles") and
// docs/insights-decisions.md say what each answers and where it differs from OpenPanel.
//
// Every read goes through an index with a bound (see each function): the profile's row by the
// primary key, its events through events_project_profile_idx newest first, its sessions
// through ./profile-walk.ts; a search checks the activity conditions on a bounded number of
// candidate profiles, never on the project's whole event history.
import { RESERVED_EVENT_NAMES } from '../model/event';
import { DEFAULT_STATEMENT_TIMEOUT_MS, type ReadOptions } from '../query/db';
import { compileAll, escapeLike, indexed, SqlParams } from '../query/filters';
import { withRead } from '../query/lookups';
import type { ConnectionSource, Queryable } from '../query/source';
import { bounceRate, roundedRatio, toNumber } from './numbers';
import { sessionWalkSql, realEventOf } from './profile-walk';
import type { ProfileParams, ProfileSessionsParams, ProfilesParams } from './raw-params';
import { checkProfileId } from './raw-params';
import { EVENT_COLUMNS_SQL, eventRow, ProfileNotFoundError, profileRow, revenueSql, SESSION_COLUMNS_SQL, sessionRow, type ProfileSource } from './raw-rows';

/**
 * A search with an activity condition (country, city, device, browser, inactiveDays,
 * minSessions) checks it on at most this many profiles: the newest (or oldest, sortOrder=asc)
 * that meet the conditions on the profile itself (name, email, filters, performedEvent).
 */
export const PROFILE_CANDIDATES = 1000;
/** performedEvent: the profiles of the event name's latest this-many (non-bot) events. */
export const PERFORMED_EVENTS = 10_000;
/** Metrics read the profile's latest this-many events (and their sessions). */
export const METRICS_EVENTS = 10_000;
/** At most this many words of `name` are matched (as OpenPanel). */
const NAME_WORDS = 5;
/**
 * The text `name` and `email` search, lower case: the expression of profiles_search_idx
 * (sql/031_profiles_created_idx.sql, a trigram index where pg_trgm exists), character for character.
 */
const SEARCH_TEXT = "lower(p.id || ' ' || coalesce(p.email, '') || ' ' || coalesce(p.first_name, '') || ' ' || coalesce(p.last_name, ''))";

const read = <T>(pool: ConnectionSource, options: ReadOptions, projectId: string, fn: (db: Queryable, timezone: string) => Promise<T>) =>
  withRead<T>(pool, { statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS }, projectId, [], fn);

const PROFILE_COLUMNS = 'p.id, p.project_id, p.first_name, p.last_name, p.email, p.properties, p.groups, p.created_at';

type Row = Record<string, unknown>;
const stored = (r: Row, lastSeen: unknown, deviceId: unknown): ProfileSource => ({
  id: r.id as string, project_id: r.project_id as string,
  first_name: r.first_name as string | null, last_name: r.last_name as string | null, email: r.email as string | null,
  properties: r.properties as Record<string, unknown> | null, groups: r.groups as string[] | null,
  created_at: r.created_at as Date, last_seen_at: (lastSeen as Date | null) ?? null, device_id: (deviceId as string | null) ?? null,
});

// ---------------------------------------------------------------------------------------
// GET profiles

/**
 * Stored profiles (identified, or written by increment / decrement / a group assignment) that
 * meet every condition, by created_at (then id), at most `limit`.
 */
export async function findProfiles(
  pool: ConnectionSource,
  projectId: string,
  params: ProfilesParams,
  now: Date = new Date(),
  options: ReadOptions = {},
) {
  return withRead(pool, { statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS }, projectId, params.filters, async (db) => {
    const p = new SqlParams();
    const project = p.add(projectId);
    const own = [`p.project_id = ${project}`];
    const words = (params.name ?? '').trim().split(/\s+/).filter(Boolean).slice(0, NAME_WORDS);
    for (const word of words) {
      // A word holds no space, so it is in the joined text exactly when it is in one field
      // (OpenPanel tests id, email, first, last and full name one by one: the same rows).
      own.push(`${SEARCH_TEXT} LIKE lower(${p.add(`%${escapeLike(word)}%`)})`);
    }
    if (params.email) {
      // The email holds it, so the joined text does too: that condition finds the candidates by index.
      const like = p.add(`%${escapeLike(params.email)}%`);
      own.push(`${SEARCH_TEXT} LIKE lower(${like})`, `lower(coalesce(p.email, '')) LIKE lower(${like})`);
    }
    if (params.filters.length) own.push(compileAll(indexed(params.filters), 'p', p));
    if (params.performedEvent !== undefined && (RESERVED_EVENT_NAMES as readonly string[]).includes(params.performedEvent)) {
      own.push('false'); // the service's session rows are not events anyone performed
    } else if (params.performedEvent) {
      // The profiles of the name's latest PERFORMED_EVENTS events (events_name_time_idx).
      own.push(`p.id IN (SELECT x.profile_id FROM (
          SELECT e.profile_id FROM events e
          WHERE e.project_id = ${project} AND e.name = ${p.add(params.performedEvent)} AND NOT e.is_bot
          ORDER BY e.created_at DESC LIMIT ${p.add(PERFORMED_EVENTS)}) x)`);
    }
    const activity: string[] = [];
    for (const column of ['country', 'city', 'device', 'browser'] as const) {
      const value = params[column];
      if (value) activity.push(`le.${column} = ${p.add(value)}`);
    }
    if (params.inactiveDays !== undefined) {
      const cut = new Date(now.getTime() - params.inactiveDays * 86_400_000).toISOString();
      activity.push(`(le.created_at IS NULL OR le.created_at < ${p.add(cut)}::timestamptz)`);
    }
    if (params.minSessions !== undefined) {
      const stop = p.add(params.minSessions);
      const walk = sessionWalkSql(p, {
        project, profile: 'p.id', stop: `${stop}::int`,
        counts: `s.project_id = ${project} AND s.profile_id = p.id AND NOT s.is_bot`,
      });
      activity.push(`coalesce((WITH RECURSIVE ${walk} SELECT max(counted) FROM walk), 0) >= ${stop}::int`);
    }
    const dir = params.sortOrder === 'asc' ? 'ASC' : 'DESC';
    const order = `ORDER BY p.created_at ${dir}, p.id ${dir}`;
    // Without an activity condition the candidates are the answer; with one, a bounded set.
    const candidates = p.add(activity.length ? PROFILE_CANDIDATES : params.limit);
    const { rows } = await db.query(
      `SELECT ${PROFILE_COLUMNS}, greatest(p.updated_at, le.created_at) AS last_seen_at, le.device_id AS latest_device_id
       FROM (
         SELECT p.* FROM (SELECT pr.*, pr.id AS profile_id FROM profiles pr) p
         WHERE ${own.join('\n AND ')}
         ${order} LIMIT ${candidates}
       ) p
       LEFT JOIN LATERAL (
         SELECT e.created_at, e.device_id, e.country, e.city, e.device, e.browser FROM events e
         WHERE ${realEventOf(p, project, 'p.id')}
         ORDER BY e.created_at DESC LIMIT 1
       ) le ON true
       WHERE ${activity.length ? activity.join('\n AND ') : 'true'}
       ${order} LIMIT ${p.add(params.limit)}`,
      p.values,
    );
    return rows.map((r) => profileRow(stored(r, r.last_seen_at, r.latest_device_id)));
  });
}

// ---------------------------------------------------------------------------------------
// GET profiles/{profileId}

/** The profile's row, or null. */
async function profileRowOf(db: Queryable, projectId: string, profileId: string): Promise<Row | null> {
  const { rows } = await db.query(
    `SELECT ${PROFILE_COLUMNS}, p.updated_at FROM profiles p WHERE p.project_id = $1 AND p.id = $2`,
    [projectId, profileId],
  );
  return rows[0] ?? null;
}

/** The time of the profile's first or latest real event (one index probe), or null. */
async function edgeEvent(db: Queryable, projectId: string, profileId: string, which: 'first' | 'latest'): Promise<Date | null> {
  const p = new SqlParams();
  const where = realEventOf(p, p.add(projectId), p.add(profileId));
  const { rows } = await db.query<{ created_at: Date }>(
    `SELECT e.created_at FROM events e WHERE ${where} ORDER BY e.created_at ${which === 'first' ? 'ASC' : 'DESC'} LIMIT 1`,
    p.values,
  );
  return rows[0]?.created_at ?? null;
}

const later = (a: Date | null | undefined, b: Date | null | undefined): Date | null => (!a ? (b ?? null) : !b ? a : a > b ? a : b);
const earlier = (a: Date | null | undefined, b: Date | null | undefined): Date | null => (!a ? (b ?? null) : !b ? a : a < b ? a : b);

/**
 * The profile (its stored row; else, when it has real events, the anonymous profile those
 * make, as OpenPanel keeps one for every device) and its latest `eventLimit` real events,
 * newest first. Neither: ProfileNotFoundError (404).
 */
export async function getProfile(pool: ConnectionSource, projectId: string, profileId: string, params: ProfileParams, options: ReadOptions = {}) {
  checkProfileId(profileId);
  return read(pool, options, projectId, async (db) => {
    const row = await profileRowOf(db, projectId, profileId);
    const p = new SqlParams();
    const { rows } = await db.query(
      `SELECT ${EVENT_COLUMNS_SQL} FROM events e WHERE ${realEventOf(p, p.add(projectId), p.add(profileId))}
       ORDER BY e.created_at DESC, e.id DESC LIMIT ${p.add(params.eventLimit)}`,
      p.values,
    );
    const latest = (rows[0]?.created_at as Date | undefined) ?? null;
    const device = (rows[0]?.device_id as string | undefined) ?? null;
    let profile: ProfileSource;
    if (row) profile = stored(row, later(row.updated_at as Date, latest), device);
    else if (latest) {
      const first = (await edgeEvent(db, projectId, profileId, 'first')) ?? latest;
      profile = {
        id: profileId, project_id: projectId, first_name: null, last_name: null, email: null,
        properties: {}, groups: [], created_at: first, last_seen_at: latest, device_id: device,
      };
    } else throw new ProfileNotFoundError(profileId);
    return { profile: profileRow(profile), recentEvents: rows.map(eventRow) };
  });
}

/** 404 unless the profile is stored or has a real event. */
async function mustExist(db: Queryable, projectId: string, profileId: string): Promise<Row | null> {
  const row = await profileRowOf(db, projectId, profileId);
  if (row || (await edgeEvent(db, projectId, profileId, 'latest'))) return row;
  throw new ProfileNotFoundError(profileId);
}

// ---------------------------------------------------------------------------------------
// GET profiles/{profileId}/sessions

/** The profile's sessions (not bots), newest start first, at most `limit`. */
export async function getProfileSessions(
  pool: ConnectionSource,
  projectId: string,
  profileId: string,
  params: ProfileSessionsParams,
  options: ReadOptions = {},
) {
  checkProfileId(profileId);
  return read(pool, options, projectId, async (db) => {
    await mustExist(db, projectId, profileId);
    const p = new SqlParams();
    const project = p.add(projectId);
    const profile = p.add(profileId);
    const counts = `s.project_id = ${project} AND s.profile_id = ${profile} AND NOT s.is_bot`;
    const limit = p.add(params.limit);
    const walk = sessionWalkSql(p, { project, profile, counts, stop: `${limit}::int` });
    const { rows } = await db.query(
      `WITH RECURSIVE ${walk}
       SELECT ${SESSION_COLUMNS_SQL} FROM sessions s
       WHERE s.id IN (SELECT sid FROM walk) AND ${counts}
       ORDER BY s.started_at DESC, s.id DESC LIMIT ${limit}`,
      p.values,
    );
    return rows.map(sessionRow);
  });
}

// ---------------------------------------------------------------------------------------
// GET profiles/{profileId}/metrics

interface MetricsRow {
  screen_views: string; total_events: string; conversion_events: string; days: string; revenue: number | null;
  sessions: string; bounces: string; timed: string; duration_ms: string; p90_ms: number | null;
  first_start: Date | null; last_start: Date | null;
}

/**
 * OpenPanel's profile metrics over the profile's latest METRICS_EVENTS events and their
 * sessions (the profile's own, not bots), by docs/semantics.md: real events only, durations of
 * sessions above 0, days in the project's timezone.
 */
export async function getProfileMetrics(pool: ConnectionSource, projectId: string, profileId: string, options: ReadOptions = {}) {
  checkProfileId(profileId);
  return read(pool, options, projectId, async (db, timezone) => {
    const row = await mustExist(db, projectId, profileId);
    const p = new SqlParams();
    const project = p.add(projectId);
    const profile = p.add(profileId);
    const reserved = p.add([...RESERVED_EVENT_NAMES]);
    const { rows } = await db.query<MetricsRow>(
      `WITH ev AS (
         SELECT e.name, e.created_at, e.session_id, e.is_bot, ${revenueSql('e')} AS revenue
         FROM events e WHERE e.project_id = ${project} AND e.profile_id = ${profile}
         ORDER BY e.created_at DESC LIMIT ${p.add(METRICS_EVENTS)}
       ),
       real AS (SELECT * FROM ev WHERE NOT ev.is_bot AND ev.name <> ALL(${reserved}::text[])),
       sess AS (
         SELECT s.duration_ms, s.is_bounce, s.started_at FROM sessions s
         WHERE s.id IN (SELECT ev.session_id FROM ev WHERE ev.session_id IS NOT NULL AND NOT ev.is_bot)
           AND s.project_id = ${project} AND s.profile_id = ${profile} AND NOT s.is_bot
       )
       SELECT r.*, ss.* FROM
         (SELECT count(*) FILTER (WHERE name = 'screen_view') AS screen_views, count(*) AS total_events,
                 count(*) FILTER (WHERE name <> 'screen_view') AS conversion_events,
                 count(DISTINCT (created_at AT TIME ZONE ${p.add(timezone)})::date) AS days,
                 sum(revenue) AS revenue
          FROM real) r,
         (SELECT count(*) AS sessions, count(*) FILTER (WHERE is_bounce) AS bounces,
                 count(*) FILTER (WHERE duration_ms > 0) AS timed,
                 coalesce(sum(duration_ms) FILTER (WHERE duration_ms > 0), 0) AS duration_ms,
                 percentile_cont(0.9) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE duration_ms > 0) AS p90_ms,
                 min(started_at) AS first_start, max(started_at) AS last_start
          FROM sess) ss`,
      p.values,
    );
    const m = rows[0]!;
    const [first, latest] = [await edgeEvent(db, projectId, profileId, 'first'), await edgeEvent(db, projectId, profileId, 'latest')];
    const sessions = toNumber(m.sessions);
    const totalEvents = toNumber(m.total_events);
    const firstSeen = earlier(row?.created_at as Date | undefined, first);
    const lastSeen = later(row?.updated_at as Date | undefined, latest);
    const gapMs = m.first_start && m.last_start ? m.last_start.getTime() - m.first_start.getTime() : 0;
    return {
      profileId,
      firstSeen: firstSeen?.toISOString() ?? null,
      lastSeen: lastSeen?.toISOString() ?? null,
      sessions,
      screenViews: toNumber(m.screen_views),
      totalEvents,
      conversionEvents: toNumber(m.conversion_events),
      uniqueDaysActive: toNumber(m.days),
      avgSessionDurationMin: roundedRatio(toNumber(m.duration_ms), toNumber(m.timed) * 60_000),
      p90SessionDurationMin: m.p90_ms === null ? 0 : Math.round((m.p90_ms * 100) / 60_000) / 100,
      avgEventsPerSession: roundedRatio(totalEvents, sessions),
      avgTimeBetweenSessionsSec: sessions <= 1 ? 0 : roundedRatio(gapMs, (sessions - 1) * 1000),
      bounceRate: bounceRate(toNumber(m.bounces), sessions),
      revenue: m.revenue === null ? 0 : Number(m.revenue),
    };
  });
}
