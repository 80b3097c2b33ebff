// The command line: projects and clients (semantics.md "Running it"). Results are one line
// of JSON on stdout; anything else goes to stderr.
import { parseArgs } from 'node:util';
import type { Config } from '../config/config';
import { OriginSyntaxError, parseAllowedOrigin } from '../auth/origins';
import { hashSecret, generateSecret } from '../auth/secrets';
import { connectRedis, redisKeys } from '../redis/redis';
import { announce as announceChange } from '../redis/announce';
import { createClient, createProject, getProject, listClients, listProjects, revokeClient, updateProject, type ClientMode, type ProjectPatch } from '../store/accounts';
import { createPool, ensureDatabase } from '../store/db';
import { migrate } from '../store/migrate';

export class UsageError extends Error {}

/** How long `client revoke` and `project update` wait for the API threads to say they have the change. */
const ANNOUNCE_WAIT_MS = 2_000;

const USAGE = `usage:
  cli project create --name NAME [--timezone IANA_TZ] [--origins https://a.example,https://b.example]
  cli project update --project PROJECT_ID [--name NAME] [--timezone IANA_TZ] [--origins a,b ("" for none)]
  cli project list
  cli client create --project PROJECT_ID [--mode read|write|root (default write)] [--ingest-rate N]
  cli client list [--project PROJECT_ID]
  cli client revoke --id CLIENT_ID
  cli migrate`;

function isValidTimezone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** `--origins a,b`: each an origin, a wildcard origin or a bare host (internal/auth/origins.ts). */
function parseOrigins(raw: string | undefined): string[] {
  if (!raw) return [];
  const out: string[] = [];
  for (const part of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    try {
      out.push(parseAllowedOrigin(part));
    } catch (err) {
      if (err instanceof OriginSyntaxError) throw new UsageError(`--origins: ${err.message}`);
      throw err;
    }
  }
  return [...new Set(out)];
}

/**
 * Tells the running API processes that a project changed, so none keeps its cached copy.
 * The change is committed already: Redis being away is a warning (processes then see it
 * within their 5 s cache), not a failed command.
 */
async function announce(cfg: Config, projectId: string): Promise<void> {
  try {
    const redis = await connectRedis(cfg.REDIS_URL);
    try {
      await announceChange(redis, redisKeys(cfg.TIDEMARK_NAMESPACE).projectChanges, projectId, ANNOUNCE_WAIT_MS);
    } finally {
      redis.disconnect();
    }
  } catch (err) {
    process.stderr.write(`tidemark cli: warning: project updated, but running API processes could not be told at once (${(err as Error).message}); they see it within 5 s\n`);
  }
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
  const known = ['project create', 'project update', 'project list', 'client create', 'client list', 'client revoke', 'migrate'];
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
      case 'project update': {
        const projectId = values.project?.trim();
        if (!projectId) throw new UsageError('project update needs --project');
        const patch: ProjectPatch = {};
        if (values.name !== undefined) {
          const name = values.name.trim();
          if (!name) throw new UsageError('--name must not be empty');
          patch.name = name;
        }
        if (values.timezone !== undefined) {
          const timezone = values.timezone.trim();
          if (!isValidTimezone(timezone)) throw new UsageError(`--timezone: "${timezone}" is not an IANA time zone`);
          patch.timezone = timezone;
        }
        if (values.origins !== undefined) patch.origins = parseOrigins(values.origins);
        if (Object.keys(patch).length === 0) throw new UsageError('project update needs at least one of --name, --timezone, --origins');
        const p = await updateProject(db, projectId, patch);
        if (!p) throw new UsageError(`no project with id "${projectId}"`);
        await announce(cfg, p.id);
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
        // API threads keep a mirror of the set: the command returns once each has the client
        // (internal/redis/announce.ts), so the next request to any API process is refused.
        const redis = await connectRedis(cfg.REDIS_URL);
        try {
          const keys = redisKeys(cfg.TIDEMARK_NAMESPACE);
          await redis.sadd(keys.revoked, id);
          await announceChange(redis, keys.revocations, id, ANNOUNCE_WAIT_MS);
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
