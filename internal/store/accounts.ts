// Projects and clients: the SQL behind the CLI and the auth cache.
import { randomBytes, randomUUID } from 'node:crypto';
import { transaction, type Pool, type PoolClient } from './db';

export type ClientMode = 'read' | 'write' | 'root';

export interface ProjectRow {
  id: string;
  name: string;
  timezone: string;
  allowedOrigins: string[];
  createdAt: Date;
}

export interface ClientRow {
  id: string;
  projectId: string;
  mode: ClientMode;
  secretHash: string;
  ingestRate: number;
  revokedAt: Date | null;
  createdAt: Date;
}

const projectCols = 'id, name, timezone, allowed_origins, created_at';
const toProject = (r: Record<string, unknown>): ProjectRow => ({
  id: r.id as string,
  name: r.name as string,
  timezone: r.timezone as string,
  allowedOrigins: r.allowed_origins as string[],
  createdAt: r.created_at as Date,
});
const clientCols = 'id, project_id, mode, secret_hash, ingest_rate, revoked_at, created_at';
const toClient = (r: Record<string, unknown>): ClientRow => ({
  id: r.id as string,
  projectId: r.project_id as string,
  mode: r.mode as ClientMode,
  secretHash: r.secret_hash as string,
  ingestRate: r.ingest_rate as number,
  revokedAt: (r.revoked_at as Date | null) ?? null,
  createdAt: r.created_at as Date,
});

/** A URL-safe project id from its name plus a random suffix, e.g. "my-shop-4f9c2a". */
function projectIdFor(name: string): string {
  const slug = name
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
  return `${slug || 'project'}-${randomBytes(3).toString('hex')}`;
}

export async function createProject(db: Pool, p: { name: string; timezone: string; origins: string[] }): Promise<ProjectRow> {
  const res = await db.query(
    `INSERT INTO projects (id, name, timezone, allowed_origins) VALUES ($1, $2, $3, $4) RETURNING ${projectCols}`,
    [projectIdFor(p.name), p.name, p.timezone, p.origins],
  );
  return toProject(res.rows[0]);
}

/** What `project update` may change; a field left out stays as it is. */
export interface ProjectPatch {
  name?: string;
  timezone?: string;
  /** The whole list (replaces the stored one); [] allows no browser origin. */
  origins?: string[];
}

/**
 * Runs inside updateProject's transaction when the timezone really changed (stored data is
 * UTC; what is kept per local day of the project is not). A no-op for now: the rebuild of the
 * daily rollups kept in the project's timezone goes here, so it commits with the change.
 */
async function afterTimezoneChange(_c: PoolClient, _project: ProjectRow, _previousTimezone: string): Promise<void> {}

/**
 * Changes a project in one transaction (the row locked, then updated, then
 * afterTimezoneChange when the timezone differs); null when there is no such project.
 * Callers announce the change to every process afterwards (the cached rows: auth).
 */
export async function updateProject(db: Pool, id: string, patch: ProjectPatch): Promise<ProjectRow | null> {
  return transaction(db, async (c) => {
    const found = await c.query(`SELECT ${projectCols} FROM projects WHERE id = $1 FOR UPDATE`, [id]);
    if (!found.rows[0]) return null;
    const before = toProject(found.rows[0]);
    const res = await c.query(
      `UPDATE projects SET name = coalesce($2, name), timezone = coalesce($3, timezone), allowed_origins = coalesce($4, allowed_origins)
       WHERE id = $1 RETURNING ${projectCols}`,
      [id, patch.name ?? null, patch.timezone ?? null, patch.origins ?? null],
    );
    const after = toProject(res.rows[0]);
    if (after.timezone !== before.timezone) await afterTimezoneChange(c, after, before.timezone);
    return after;
  });
}

export async function getProject(db: Pool, id: string): Promise<ProjectRow | null> {
  const res = await db.query(`SELECT ${projectCols} FROM projects WHERE id = $1`, [id]);
  return res.rows[0] ? toProject(res.rows[0]) : null;
}

export async function listProjects(db: Pool): Promise<ProjectRow[]> {
  return (await db.query(`SELECT ${projectCols} FROM projects ORDER BY created_at, id`)).rows.map(toProject);
}

export async function createClient(
  db: Pool,
  c: { projectId: string; mode: ClientMode; secretHash: string; ingestRate: number },
): Promise<ClientRow> {
  const res = await db.query(
    `INSERT INTO clients (id, project_id, mode, secret_hash, ingest_rate) VALUES ($1, $2, $3, $4, $5) RETURNING ${clientCols}`,
    [randomUUID(), c.projectId, c.mode, c.secretHash, c.ingestRate],
  );
  return toClient(res.rows[0]);
}

export async function getClient(db: Pool, id: string): Promise<ClientRow | null> {
  const res = await db.query(`SELECT ${clientCols} FROM clients WHERE id = $1`, [id]);
  return res.rows[0] ? toClient(res.rows[0]) : null;
}

export async function listClients(db: Pool, projectId?: string): Promise<ClientRow[]> {
  const res = projectId
    ? await db.query(`SELECT ${clientCols} FROM clients WHERE project_id = $1 ORDER BY created_at, id`, [projectId])
    : await db.query(`SELECT ${clientCols} FROM clients ORDER BY created_at, id`);
  return res.rows.map(toClient);
}

/** The ids of every revoked client (the API's revocation mirror loads them: internal/ratelimit/revocation.ts). */
export async function listRevokedClientIds(db: Pool): Promise<string[]> {
  return (await db.query('SELECT id FROM clients WHERE revoked_at IS NOT NULL')).rows.map((r) => r.id as string);
}

/** Marks a client revoked; returns false when there is no such client. */
export async function revokeClient(db: Pool, id: string): Promise<boolean> {
  const res = await db.query('UPDATE clients SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1', [id]);
  return (res.rowCount ?? 0) > 0;
}
