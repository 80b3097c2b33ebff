// The Authenticator's row cache on a real PostgreSQL: a busy client's row is read again ahead
// of its expiry, in the background (no request waits for PostgreSQL), and no row answers
// longer than the TTL after it was read. The caches age by a clock the test moves, so a loaded
// machine's late timers cannot change what is asserted; only the background read is waited for.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type pg from 'pg';
import type { HttpRequest } from '../http/types';
import { createClient, createProject } from '../store/accounts';
import { createSqlDb, dropSqlDb } from '../../test/support/sql-db';
import { Authenticator } from './auth';
import { generateSecret, hashSecret } from './secrets';

const DB_NAME = `tidemark_test_auth_${randomBytes(6).toString('hex')}`;
const TTL = 2000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The cache's clock: moved by the test, never by the wall. */
let clock = 1_000_000; // not 0: the LRU cache reads a start time of 0 as "no TTL"
const now = () => clock;
/** Polls until `read` gives `want` (the background read has landed), or gives up after 10 s. */
async function until<T>(read: () => Promise<T>, want: T): Promise<T> {
  const deadline = Date.now() + 10_000;
  let got = await read();
  while (got !== want && Date.now() < deadline) {
    await sleep(20);
    got = await read();
  }
  return got;
}

let pool: pg.Pool;
let clientId: string;
let projectId: string;
let secret: string;
/** Client-row reads issued by the Authenticator (SELECT ... FROM clients). */
let clientReads = 0;

const request = (): HttpRequest => ({
  method: 'GET', path: '/insights/x/live', params: {}, query: new URLSearchParams(), body: Buffer.alloc(0),
  headers: { 'service-client-id': clientId, 'service-client-secret': secret }, remoteAddress: '127.0.0.1', requestId: 'r',
});

before(async () => {
  pool = await createSqlDb(DB_NAME, { max: 4 });
  const project = await createProject(pool, { name: 'auth', timezone: 'UTC', origins: [] });
  projectId = project.id;
  secret = generateSecret();
  clientId = (await createClient(pool, { projectId, mode: 'read', secretHash: await hashSecret(secret), ingestRate: 0 })).id;
  const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
  (pool as unknown as { query: (...a: unknown[]) => unknown }).query = (...a: unknown[]) => {
    if (typeof a[0] === 'string' && /FROM clients WHERE id/.test(a[0])) clientReads++;
    return query(...a);
  };
});

after(async () => {
  await dropSqlDb(pool, DB_NAME);
});

const setMode = (mode: string) => pool.query('UPDATE clients SET mode = $2 WHERE id = $1', [clientId, mode]);

describe('Authenticator row cache', () => {
  it('refreshes a busy row ahead of its expiry without making a request wait, and never answers past the TTL', async () => {
    const auth = new Authenticator(pool, { cacheTtlMs: TTL, now });
    assert.equal((await auth.forRead(request(), projectId)).mode, 'read');
    assert.equal(clientReads, 1);

    // Fresh: no read at all.
    await setMode('root');
    assert.equal((await auth.forRead(request(), projectId)).mode, 'read');
    assert.equal(clientReads, 1);

    // Past half the TTL: the cached row answers at once, a background read starts...
    clock += TTL * 0.6;
    const reads = clientReads;
    assert.equal((await auth.forRead(request(), projectId)).mode, 'read');
    assert.equal(clientReads, reads + 1);
    // ...and the requests after it get the row it read once it lands (none reads on its own).
    assert.equal(await until(async () => (await auth.forRead(request(), projectId)).mode, 'root'), 'root');
    assert.equal(clientReads, reads + 1);

    // Idle past the TTL: the row has expired and is read in line (a change shows at once).
    await setMode('read');
    clock += TTL + 100;
    assert.equal((await auth.forRead(request(), projectId)).mode, 'read');
    assert.equal(clientReads, reads + 2);
  });

  it('refreshes a project row ahead of its expiry the same way', async () => {
    const auth = new Authenticator(pool, { cacheTtlMs: TTL, now });
    assert.equal((await auth.project(projectId))?.timezone, 'UTC');
    await pool.query(`UPDATE projects SET timezone = 'Europe/Berlin' WHERE id = $1`, [projectId]);
    assert.equal((await auth.project(projectId))?.timezone, 'UTC');
    clock += TTL * 0.6;
    assert.equal((await auth.project(projectId))?.timezone, 'UTC'); // answered from the cache, read in the background
    assert.equal(await until(async () => (await auth.project(projectId))?.timezone, 'Europe/Berlin'), 'Europe/Berlin');
  });
});
