// Who is calling: client credentials (and the OpenPanel header aliases), browser clients
// by Origin, and the mode/project rules of semantics.md "Access".
import { LRUCache } from 'lru-cache';
import { ForbiddenError, ServiceUnavailableError, UnauthorizedError } from '../http/errors';
import type { HttpRequest } from '../http/types';
import { getClient, getProject, type ClientRow, type ProjectRow } from '../store/accounts';
import type { Pool } from '../store/db';
import { originAllowed } from './origins';
import { fingerprint, sameFingerprint, verifySecret } from './secrets';

export interface AuthedClient {
  id: string;
  projectId: string;
  mode: ClientRow['mode'];
  ingestRate: number;
}

interface AuthOptions {
  /** How long a client or project row is reused before being read again. */
  cacheTtlMs?: number;
  /** The clock the row caches age by (milliseconds); tests pass their own. */
  now?: () => number;
}

export function credentialsOf(req: Pick<HttpRequest, 'headers'>): { clientId: string | undefined; secret: string | undefined } {
  const h = req.headers;
  return {
    clientId: (h['service-client-id'] ?? h['openpanel-client-id'])?.trim() || undefined,
    secret: (h['service-client-secret'] ?? h['openpanel-client-secret'])?.trim() || undefined,
  };
}

export class Authenticator {
  private readonly clients: RowCache<ClientRow>;
  private readonly projects: RowCache<ProjectRow>;
  /** Fingerprint of the secret verified against a stored hash, kept across row reloads. */
  private readonly verifiedSecrets = new LRUCache<string, { secretHash: string; fp: Buffer }>({ max: 10_000 });
  /** Recently refused secrets, so a flood of one wrong secret costs one scrypt, not one each. */
  private readonly refused = new LRUCache<string, true>({ max: 10_000, ttl: 10_000 });
  /** Concurrent requests share one verification. */
  private readonly verifying = new Map<string, Promise<boolean>>();

  constructor(db: Pool, opts: AuthOptions = {}) {
    const ttl = opts.cacheTtlMs ?? 5_000;
    this.clients = new RowCache((id) => getClient(db, id), ttl, opts.now);
    this.projects = new RowCache((id) => getProject(db, id), ttl, opts.now);
  }

  project(id: string): Promise<ProjectRow | null> {
    return this.projects.get(id);
  }

  /** Forgets a project row at once (a change announced by `cli project update`), or every one (null). */
  forgetProject(projectId: string | null): void {
    if (projectId === null) this.projects.forgetAll();
    else this.projects.forget(projectId);
  }

  private client(id: string): Promise<ClientRow | null> {
    return this.clients.get(id);
  }

  private async verified(clientId: string, secret: string): Promise<ClientRow> {
    const row = await this.client(clientId);
    if (!row || row.revokedAt) throw new UnauthorizedError('invalid client credentials');
    const fp = fingerprint(secret);
    const known = this.verifiedSecrets.get(clientId);
    if (known && known.secretHash === row.secretHash && sameFingerprint(known.fp, fp)) return row;
    const key = `${clientId}:${fp.toString('hex')}`;
    if (this.refused.get(key)) throw new UnauthorizedError('invalid client credentials');
    let check = this.verifying.get(key);
    if (!check) {
      check = verifySecret(secret, row.secretHash).finally(() => this.verifying.delete(key));
      this.verifying.set(key, check);
    }
    if (!(await check)) {
      this.refused.set(key, true);
      throw new UnauthorizedError('invalid client credentials');
    }
    // Kept for long: a copy of its own rather than a slice that would hold a Buffer pool slab.
    const kept = Buffer.allocUnsafeSlow(fp.length);
    fp.copy(kept);
    this.verifiedSecrets.set(clientId, { secretHash: row.secretHash, fp: kept });
    return row;
  }

  /**
   * `forIngest` without a promise when its answer is already known to be a client: a cached
   * write or root client whose secret matches the one verified before. Undefined in every
   * other case (call `forIngest`, which decides it: loads, verifies, or refuses).
   */
  cachedForIngest(req: HttpRequest): AuthedClient | undefined {
    const h = req.headers;
    const clientId = (h['service-client-id'] ?? h['openpanel-client-id'])?.trim();
    const secret = (h['service-client-secret'] ?? h['openpanel-client-secret'])?.trim();
    if (!clientId || !secret) return undefined;
    const row = this.clients.cached(clientId)?.row;
    if (!row || row.revokedAt || row.mode === 'read') return undefined;
    const known = this.verifiedSecrets.get(clientId);
    if (!known || known.secretHash !== row.secretHash || !sameFingerprint(known.fp, fingerprint(secret))) return undefined;
    return toAuthed(row);
  }

  /** Ingest: a write or root client with its secret, or a secret-less browser client from an allowed Origin. */
  async forIngest(req: HttpRequest): Promise<AuthedClient> {
    const { clientId, secret } = credentialsOf(req);
    if (!clientId) throw new UnauthorizedError('missing client id (service-client-id header)');
    let row: ClientRow;
    if (secret) {
      row = await this.verified(clientId, secret);
    } else {
      const found = await this.client(clientId);
      if (!found || found.revokedAt) throw new UnauthorizedError('invalid client credentials');
      row = found;
      const origin = req.headers.origin;
      const project = await this.project(row.projectId);
      if (!origin || !project || !originAllowed(origin, project.allowedOrigins)) {
        throw new UnauthorizedError('missing client secret (service-client-secret header); browser clients need an allowed Origin');
      }
    }
    if (row.mode === 'read') throw new ForbiddenError('a read client cannot ingest');
    return toAuthed(row);
  }

  /** Insights and export: a read or root client with its secret; a read client only for its project. */
  async forRead(req: HttpRequest, projectId?: string): Promise<AuthedClient> {
    const { clientId, secret } = credentialsOf(req);
    if (!clientId || !secret) throw new UnauthorizedError('missing client credentials (service-client-id and service-client-secret headers)');
    return this.forReadCredentials(clientId, secret, projectId);
  }

  /** `forRead` with the credentials given apart from headers (a live socket's first message). */
  async forReadCredentials(clientId: string, secret: string, projectId?: string): Promise<AuthedClient> {
    const row = await this.verified(clientId, secret);
    if (row.mode === 'write') throw new ForbiddenError('a write client cannot read; use a read or root client');
    if (projectId !== undefined && row.mode === 'read' && row.projectId !== projectId) {
      throw new ForbiddenError('this client has no access to that project');
    }
    return toAuthed(row);
  }
}

const toAuthed = (r: ClientRow): AuthedClient => ({ id: r.id, projectId: r.projectId, mode: r.mode, ingestRate: r.ingestRate });

/**
 * Rows (clients, projects) read from PostgreSQL and kept `ttl` ms. Refresh-ahead: a cached row
 * past half its TTL is read again in the background while the cached one still answers, so a
 * busy caller never waits for PostgreSQL when its row expires (that wait was the 1% tail of
 * /live: ~1 ms every 5 s per client). A row is never used longer than the TTL after it was
 * read; an idle one expires and is read in line. Concurrent callers share one read. While
 * PostgreSQL cannot be read, the row last read answers (ingest goes on; revocation is still
 * checked per request in Redis); a row never read gets a 503, not a 500.
 */
class RowCache<T extends object> {
  private readonly fresh: LRUCache<string, { row: T | null }>;
  private readonly lastKnown = new LRUCache<string, { row: T | null }>({ max: 10_000 });
  private readonly loading = new Map<string, Promise<T | null>>();
  /** Bumped by forget: a read that started before it must not store the row it got. */
  private generation = 0;

  constructor(private readonly read: (id: string) => Promise<T | null>, private readonly ttl: number, now?: () => number) {
    this.fresh = new LRUCache({ max: 10_000, ttl, ...(now ? { perf: { now }, ttlResolution: 0 } : {}) });
  }

  /** The cached row (read again in the background when ageing), or undefined. */
  cached(id: string): { row: T | null } | undefined {
    const hit = this.fresh.get(id);
    if (hit && this.fresh.getRemainingTTL(id) < this.ttl / 2) this.load(id).catch(() => {});
    return hit;
  }

  async get(id: string): Promise<T | null> {
    const hit = this.cached(id);
    if (hit) return hit.row;
    return this.load(id).catch((err) => {
      const known = this.lastKnown.get(id);
      if (known) return known.row;
      throw Object.assign(new ServiceUnavailableError('client store unavailable; retry with backoff'), { cause: err });
    });
  }

  forget(id: string): void {
    this.generation++;
    this.fresh.delete(id);
    this.lastKnown.delete(id);
    this.loading.delete(id);
  }

  forgetAll(): void {
    this.generation++;
    this.fresh.clear();
    this.lastKnown.clear();
    this.loading.clear();
  }

  private load(id: string): Promise<T | null> {
    let pending = this.loading.get(id);
    if (!pending) {
      const generation = this.generation;
      const read: Promise<T | null> = this.read(id)
        .then((row) => {
          if (generation === this.generation) {
            this.fresh.set(id, { row });
            this.lastKnown.set(id, { row });
          }
          return row;
        })
        .finally(() => {
          if (this.loading.get(id) === read) this.loading.delete(id);
        });
      pending = read;
      this.loading.set(id, pending);
    }
    return pending;
  }
}
