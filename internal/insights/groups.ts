// OpenPanel's group routes: groups/types, groups (a search) and groups/{groupId} (a group with its
// members), over the groups `/track` `group` creates and the profiles `assign_group` links to them
// (profiles.groups). docs/api.md ("Groups") and docs/insights-decisions.md ("Groups") say what
// each answers and where it differs from OpenPanel.
import { z } from 'zod';
import { BadRequestError, NotFoundError } from '../http/errors';
import { RESERVED_EVENT_NAMES } from '../model/event';
import { DEFAULT_STATEMENT_TIMEOUT_MS, type ReadOptions } from '../query/db';
import { escapeLike } from '../query/filters';
import { withRead } from '../query/lookups';
import { noNul, pickParams, positiveIntSchema } from '../query/params';
import type { ConnectionSource, Queryable } from '../query/source';
import { MAX_TEXT_PARAM, textParam } from './report-params';

/** groups: default and largest `limit`; groups/{id}: of `memberLimit` (OpenPanel's). */
export const DEFAULT_GROUPS_LIMIT = 20;
export const MAX_GROUPS_LIMIT = 100;
export const DEFAULT_MEMBER_LIMIT = 10;
export const MAX_MEMBER_LIMIT = 50;

export const groupsParamsSchema = z.object({
  type: textParam.optional().describe('Only groups of this type (absent or empty: every type)'),
  search: textParam.optional().describe('Only groups whose name or id contains this text, case-insensitive'),
  limit: positiveIntSchema(MAX_GROUPS_LIMIT, 'limit').default(DEFAULT_GROUPS_LIMIT),
});
export type GroupsParams = z.infer<typeof groupsParamsSchema>;

export const groupParamsSchema = z.object({
  memberLimit: positiveIntSchema(MAX_MEMBER_LIMIT, 'memberLimit').default(DEFAULT_MEMBER_LIMIT),
});
export type GroupParams = z.infer<typeof groupParamsSchema>;

function parse<S extends z.ZodType>(schema: S, query: URLSearchParams, names: readonly string[]): z.infer<S> {
  const result = schema.safeParse(pickParams(query, names));
  if (!result.success) throw BadRequestError.fromZod(result.error);
  return result.data;
}

export const parseGroupsParams = (query: URLSearchParams): GroupsParams => parse(groupsParamsSchema, query, ['type', 'search', 'limit']);
export const parseGroupParams = (query: URLSearchParams): GroupParams => parse(groupParamsSchema, query, ['memberLimit']);

/** A group as OpenPanel's API gives it (its IServiceGroup). */
export interface GroupRecord {
  id: string;
  projectId: string;
  type: string;
  name: string;
  properties: Record<string, unknown>;
  /** ISO 8601. */
  createdAt: string;
  updatedAt: string;
}

/** A member profile as OpenPanel's API gives it (its IServiceProfile). */
export interface MemberProfile {
  id: string;
  email: string;
  avatar: string;
  firstName: string;
  lastName: string;
  createdAt: string;
  /** The later of the profile's last change and its latest event (as the profile routes). */
  lastSeenAt: string;
  /** False when the id has a device id's form (assign_group without a profileId). */
  isExternal: boolean;
  projectId: string;
  groups: string[];
  properties: Record<string, unknown>;
}

export interface GroupResponse {
  group: GroupRecord;
  member_count: number;
  members: MemberProfile[];
}

const read = <T>(pool: ConnectionSource, options: ReadOptions, projectId: string, fn: (db: Queryable) => Promise<T>) =>
  withRead<T>(pool, { statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS }, projectId, [], (db) => fn(db));

const GROUP_COLUMNS = 'g.id, g.project_id, g.type, g.name, g.properties, g.created_at, g.updated_at';

interface GroupSqlRow {
  id: string;
  project_id: string;
  type: string;
  name: string;
  properties: unknown;
  created_at: Date;
  updated_at: Date;
}

const asObject = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

function groupRecord(r: GroupSqlRow): GroupRecord {
  return {
    id: r.id,
    projectId: r.project_id,
    type: r.type,
    name: r.name,
    properties: asObject(r.properties),
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  };
}

/** The project's distinct group types, byte order. */
export async function listGroupTypes(pool: ConnectionSource, projectId: string, options: ReadOptions = {}): Promise<{ types: string[] }> {
  return read(pool, options, projectId, async (db) => {
    const { rows } = await db.query<{ type: string }>(
      'SELECT DISTINCT g.type COLLATE "C" AS type FROM groups g WHERE g.project_id = $1 ORDER BY 1',
      [projectId],
    );
    return { types: rows.map((r) => r.type) };
  });
}

/** The project's groups (of `type`, matching `search`), newest first (then by id), at most `limit`. */
export async function findGroups(pool: ConnectionSource, projectId: string, params: GroupsParams, options: ReadOptions = {}): Promise<GroupRecord[]> {
  return read(pool, options, projectId, async (db) => {
    const values: unknown[] = [projectId, params.limit];
    const conditions = ['g.project_id = $1'];
    if (params.type) conditions.push(`g.type = $${values.push(params.type)}`);
    if (params.search) {
      const pattern = `$${values.push(`%${escapeLike(params.search)}%`)}`;
      conditions.push(`(g.name ILIKE ${pattern} OR g.id ILIKE ${pattern})`);
    }
    // groups_project_created_idx (sql/032): the newest first, stopping at the limit.
    const { rows } = await db.query<GroupSqlRow>(
      `SELECT ${GROUP_COLUMNS} FROM groups g
       WHERE ${conditions.join(' AND ')}
       ORDER BY g.created_at DESC, g.id COLLATE "C"
       LIMIT $2`,
      values,
    );
    return rows.map(groupRecord);
  });
}

/** A device id's form (32 lowercase hex characters): the id of a profile assign_group made without a profileId. */
const DEVICE_ID_FORM = /^[0-9a-f]{32}$/;

interface MemberSqlRow {
  id: string;
  project_id: string;
  first_name: string | null;
  last_name: string | null;
  email: string | null;
  properties: unknown;
  groups: string[];
  created_at: Date;
  updated_at: Date;
  last_event_at: Date | null;
  member_count: string;
}

/** The group and its members (profiles whose groups hold its id): newest profiles first, then by id. */
export async function getGroup(
  pool: ConnectionSource,
  projectId: string,
  groupId: string,
  params: GroupParams,
  options: ReadOptions = {},
): Promise<GroupResponse> {
  if (!noNul(groupId) || groupId.length > MAX_TEXT_PARAM) {
    throw new BadRequestError(`groupId: at most ${MAX_TEXT_PARAM} characters, no NUL`, [{ path: ['groupId'], message: `At most ${MAX_TEXT_PARAM} characters, no NUL` }]);
  }
  return read(pool, options, projectId, async (db) => {
    const found = await db.query<GroupSqlRow>(`SELECT ${GROUP_COLUMNS} FROM groups g WHERE g.project_id = $1 AND g.id = $2`, [projectId, groupId]);
    const group = found.rows[0];
    if (!group) throw new NotFoundError(`Group not found: ${groupId}`);
    // profiles_groups_idx (sql/032): the group's members only; the latest event of each shown
    // one by events_project_profile_idx.
    const { rows } = await db.query<MemberSqlRow>(
      `SELECT m.*, (
         SELECT e.created_at FROM events e
         WHERE e.project_id = $1 AND e.profile_id = m.id AND NOT e.is_bot AND e.name <> ALL($4::text[])
         ORDER BY e.created_at DESC LIMIT 1) AS last_event_at
       FROM (
         SELECT p.id, p.project_id, p.first_name, p.last_name, p.email, p.properties, p.groups, p.created_at, p.updated_at,
                count(*) OVER () AS member_count
         FROM profiles p
         WHERE p.project_id = $1 AND p.groups <> '{}' AND p.groups @> ARRAY[$2::text]
         ORDER BY p.created_at DESC, p.id COLLATE "C"
         LIMIT $3
       ) m
       ORDER BY m.created_at DESC, m.id COLLATE "C"`,
      [projectId, groupId, params.memberLimit, [...RESERVED_EVENT_NAMES]],
    );
    return {
      group: groupRecord(group),
      member_count: rows.length ? Number(rows[0]!.member_count) : 0,
      members: rows.map(memberProfile),
    };
  });
}

function memberProfile(r: MemberSqlRow): MemberProfile {
  const properties = asObject(r.properties);
  return {
    id: r.id,
    email: r.email ?? '',
    avatar: typeof properties.avatar === 'string' ? properties.avatar : '',
    firstName: r.first_name ?? '',
    lastName: r.last_name ?? '',
    createdAt: r.created_at.toISOString(),
    lastSeenAt: (r.last_event_at && r.last_event_at > r.updated_at ? r.last_event_at : r.updated_at).toISOString(),
    isExternal: !DEVICE_ID_FORM.test(r.id),
    projectId: r.project_id,
    groups: r.groups,
    properties,
  };
}
