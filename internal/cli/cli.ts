// The command line: projects and clients (semantics.md "Running it"). Results are one line
// of JSON on stdout; anything else goes to stderr.
import { parseArgs } from 'node:util';
import type { Config } from '../config/config';
import { hashSecret, generateSecret } from '../auth/secrets';
import { connectRedis, redisKeys } from '../redis/redis';
import { createClient, createProject, getProject, listClients, listProjects, revokeClient, type ClientMode } from '../store/accounts';
import { createPool, ensureDatabase } from '../store/db';
import { migrate } from '../store/migrate';

export class UsageError extends Error {}

const USAGE = `usage:
  cli project create --name NAME [--timezone IANA_TZ] [--origins https://a.example,https://b.example]
  cli project list
  cli client create --project PROJECT_ID [--mode read|write|root (default write)] [--ingest-rate N]
  cli client list [--project PROJECT_ID]
  cli client revoke --id CLIENT_ID
  cli migrate`;

export function isValidTimezone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export function parseOrigins(raw: string | undefined): string[] {
  if (!raw) return [];
  const out: string[] = [];
  for (const part of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    if (part === '*') {
      out.push('*');
      continue;
    }
    let u: URL;
    try {
      u = new URL(part);
    } catch {
      throw new UsageError(`--origins: "${part}" is not an origin like https://example.com`);
    }
    if (!/^https?:$/.test(u.protocol)) throw new UsageError(`--origins: "${part}" must be http or https`);
    out.push(u.origin);
  }
  return out;
}

/** Runs one CLI command; returns the value to print as JSON. */
export async function runCli(argv: string[], cfg: Config): Promise<unknown> {
  const [group, action, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      name: { type: 'string' }, timezone: { type: 'string' }, origins: { type: 'string' },
      project: { type: 'string' }, mode: { type: 'string' }, 'ingest-rate': { type: 'string' }, id: { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  });
  const cmd = `${group ?? ''} ${action ?? ''}`.trim();
  const known = ['project create', 'project list', 'client create', 'client list', 'client revoke', 'migrate'];
  if (!known.includes(cmd)) throw new UsageError(`unknown command "${cmd}"\n${USAGE}`);

  await ensureDatabase(cfg.DATABASE_URL);
  const db = createPool(cfg.DATABASE_URL, 2);
  try {
    const migrated = await migrate(db);
    switch (cmd) {
      case 'migrate':
        return { applied: migrated.applied, timescale: migrated.timescale };
      case 'project create': {
        const name = values.name?.trim();
        if (!name) throw new UsageError('project create needs --name');
        const timezone = values.timezone?.trim() || 'UTC';
        if (!isValidTimezone(timezone)) throw new UsageError(`--timezone: "${timezone}" is not an IANA time zone`);
        const p = await createProject(db, { name, timezone, origins: parseOrigins(values.origins) });
        return { id: p.id, name: p.name, timezone: p.timezone };
      }
      case 'project list':
        return (await listProjects(db)).map((p) => ({ id: p.id, name: p.name, timezone: p.timezone, origins: p.allowedOrigins }));
      case 'client create': {
        const projectId = values.project?.trim();
        if (!projectId) throw new UsageError('client create needs --project');
        // interface.md: "The modes named are read, root and the default write mode."
        const mode = (values.mode ?? 'write') as ClientMode;
        if (!['read', 'write', 'root'].includes(mode)) throw new UsageError('--mode must be read, write or root');
        const rateRaw = values['ingest-rate'] ?? '1000';
        if (!/^\d+$/.test(rateRaw)) throw new UsageError('--ingest-rate must be a whole number (requests per second; 0 = no limit)');
        if (!(await getProject(db, projectId))) throw new UsageError(`no project with id "${projectId}"`);
        const secret = generateSecret();
        const c = await createClient(db, { projectId, mode, secretHash: await hashSecret(secret), ingestRate: Number(rateRaw) });
        return { clientId: c.id, clientSecret: secret, mode: c.mode, projectId: c.projectId };
      }
      case 'client list':
        return (await listClients(db, values.project)).map((c) => ({
          clientId: c.id, mode: c.mode, projectId: c.projectId, ingestRate: c.ingestRate, revoked: c.revokedAt !== null,
        }));
      case 'client revoke': {
        const id = values.id?.trim();
        if (!id) throw new UsageError('client revoke needs --id');
        if (!(await revokeClient(db, id))) throw new UsageError(`no client with id "${id}"`);
        // Every API process checks this set on each request: revocation holds at once.
        const redis = await connectRedis(cfg.REDIS_URL);
        try {
          const keys = redisKeys(cfg.TIDEMARK_NAMESPACE);
          await redis.sadd(keys.revoked, id);
          // API processes keep a mirror of the set; they learn of the change here.
          await redis.publish(keys.revocations, id);
        } finally {
          redis.disconnect();
        }
        return { clientId: id, revoked: true };
      }
    }
  } finally {
    await db.end();
  }
  return null;
}
