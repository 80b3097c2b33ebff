// The command line: projects and clients (semantics.md "Running it"), migrations, and the
// rollups' repair tool (rollup-rebuild.ts). Results are one line
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
import { firstRawHour, rebuildRollups, RebuildRangeError, unfinishedRebuildEnd, type RebuildProgress } from '../store/rollup-rebuild';

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
  cli rollups rebuild --project PROJECT_ID [--from TIME] [--to TIME] [--chunk-hours N]
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

/** `--from` / `--to`: an ISO 8601 date or time (a date alone: its UTC midnight). */
function parseTime(flag: string, raw: string): Date {
  const t = Date.parse(raw.trim());
  if (!raw.trim() || Number.isNaN(t)) throw new UsageError(`--${flag}: "${raw}" is not an ISO 8601 date or time (e.g. 2026-11-01 or 2026-11-01T13:00:00Z)`);
  return new Date(t);
}

/** One line on stderr per step of a rebuild: hours done of the span's, pace and what is left. */
function rebuildProgressLine(p: RebuildProgress): string {
  const pct = p.hoursTotal ? Math.floor((p.hoursDone / p.hoursTotal) * 100) : 100;
  const perS = p.elapsedMs > 0 ? p.hoursDone / (p.elapsedMs / 1000) : 0;
  const left = perS > 0 ? ` about ${Math.ceil((p.hoursTotal - p.hoursDone) / perS)} s left,` : '';
  return `tidemark cli: rollups rebuild ${p.projectId}: ${p.hoursDone}/${p.hoursTotal} hours (${pct}%),${left} at ${p.next.toISOString()}\n`;
}

async function rollupsRebuild(
  db: ReturnType<typeof createPool>, cfg: Config, timescale: boolean, values: Record<string, string | boolean | undefined>,
): Promise<unknown> {
  const projectId = typeof values.project === 'string' ? values.project.trim() : '';
  if (!projectId) throw new UsageError('rollups rebuild needs --project');
  if (!(await getProject(db, projectId))) throw new UsageError(`no project with id "${projectId}"`);
  const chunkRaw = typeof values['chunk-hours'] === 'string' ? values['chunk-hours'] : undefined;
  if (chunkRaw !== undefined && !/^[1-9]\d*$/.test(chunkRaw)) throw new UsageError('--chunk-hours must be a whole number of hours, at least 1');
  const now = new Date();
  const from = typeof values.from === 'string' ? parseTime('from', values.from) : await firstRawHour(db, projectId);
  // Without --to: the end of an unfinished rebuild from the same start (so a rerun in a later
  // hour goes on with it), else the current hour's start.
  const to = typeof values.to === 'string' ? parseTime('to', values.to) : (from && await unfinishedRebuildEnd(db, projectId, from)) ?? now;
  if (!from) return { projectId, from: null, to: to.toISOString(), hours: 0, hoursTotal: 0, resumedFrom: null, seconds: 0 };
  try {
    const r = await rebuildRollups(db, {
      projectId, from, to, timescale, now,
      chunkHours: chunkRaw === undefined ? undefined : Number(chunkRaw),
      refresh: {
        quietMs: cfg.ROLLUP_REFRESH_QUIET_MS, maxDelayMs: cfg.ROLLUP_REFRESH_MAX_DELAY_MS,
        roundHours: cfg.ROLLUP_REFRESH_ROUND_HOURS, transactionHours: cfg.ROLLUP_REFRESH_TRANSACTION_HOURS,
      },
      onProgress: (p) => process.stderr.write(rebuildProgressLine(p)),
    });
    return {
      projectId, from: r.from.toISOString(), to: r.to.toISOString(), hours: r.hours, hoursTotal: r.hoursTotal,
      resumedFrom: r.resumedFrom?.toISOString() ?? null, seconds: Math.round(r.seconds * 10) / 10,
    };
  } catch (err) {
    if (err instanceof RebuildRangeError) throw new UsageError(err.message);
    throw err;
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
      from: { type: 'string' }, to: { type: 'string' }, 'chunk-hours': { type: 'string' },
    },
    allowPositionals: true,
    strict: true,
  });
  const cmd = `${group ?? ''} ${action ?? ''}`.trim();
  const known = ['project create', 'project update', 'project list', 'client create', 'client list', 'client revoke', 'rollups rebuild', 'migrate'];
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
      case 'rollups rebuild':
        return await rollupsRebuild(db, cfg, migrated.timescale, values);
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
