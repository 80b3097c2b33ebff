// Faults on the read side (issue 19): clients that go away or stall in the middle of an
// NDJSON export, regex filters that would run past the request's budget, a client that
// leaves while its query runs, and PostgreSQL refusing connections (down or pool
// exhausted). Real HTTP clients (raw TCP) against the real Router/HttpServer, the real
// PostgreSQL; the connection counts come from pg_stat_activity and the pool itself.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { TestEnv, sleep, spawnApp, waitFor, type Credentials } from './support/harness';
import { stopChild } from './support/private-services';
import { eventRow, insertEvents, startExportServer, type ExportServer } from './support/export-server';

let env: TestEnv;
let server: ExportServer;
let projectId: string;
let readers: Credentials[] = [];
let turn = 0;
const reader = () => readers[turn++ % readers.length]!;

const EVENTS = 3000;
const BASE = Date.UTC(2026, 3, 1, 0, 0, 0);

before(async () => {
  env = await new TestEnv('freads').setup();
  projectId = await env.project({ name: 'Reads' });
  readers = await Promise.all([1, 2, 3, 4].map(() => env.client(projectId, 'read', 0)));
  // ~4 KB of properties per event: an export of ~13 MB, far more than the socket buffers hold.
  const filler = 'x'.repeat(4000);
  const rows = Array.from({ length: EVENTS }, (_, i) => eventRow(projectId, {
    created_at: new Date(BASE + i * 1000).toISOString(), properties: { i, filler }, path: `/p/${i % 50}`,
  }));
  await insertEvents(env.db, rows);
  server = await startExportServer(env, { streaming: true });
});

after(async () => {
  // Bounded: a leaked connection would make the pool's end() wait forever.
  await Promise.race([server?.close(), sleep(5000)]);
  await env?.teardown();
});

/** Backends of the test database that hold a transaction or run a statement (not ours). */
async function busyBackends(): Promise<{ pid: number; state: string; query: string }[]> {
  const { rows } = await env.db.query<{ pid: number; state: string; query: string }>(
    `SELECT pid, state, left(query, 120) AS query FROM pg_stat_activity
      WHERE datname = $1 AND pid <> pg_backend_pid() AND state IS NOT NULL AND state <> 'idle'`,
    [env.dbName],
  );
  return rows;
}

/** Connections the export server's pool has lent out and not got back. */
const lentOut = () => server.deps.db.totalCount - server.deps.db.idleCount;

async function assertBackToBaseline(what: string, timeoutMs: number): Promise<void> {
  await waitFor(async () => lentOut() === 0 && (await busyBackends()).length === 0, {
    timeoutMs,
    what: `${what}: pool lent ${lentOut()}, busy backends ${JSON.stringify(await busyBackends())}`,
  });
}

function exportRequest(creds: Credentials, query: string): string {
  return `GET /export/events?projectId=${projectId}&${query} HTTP/1.1\r\nHost: t\r\n`
    + `service-client-id: ${creds.clientId}\r\nservice-client-secret: ${creds.clientSecret}\r\n\r\n`;
}

/** Sends `request`, resolves with the socket once `bytes` bytes of the answer have arrived (then paused). */
function readSome(request: string, bytes: number): Promise<{ sock: net.Socket; head: string }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(new URL(server.url).port), '127.0.0.1');
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => reject(new Error(`no ${bytes} bytes within 10 s: ${got.toString('latin1').slice(0, 300)}`)), 10_000);
    sock.on('data', (d) => {
      got = Buffer.concat([got, d]);
      if (got.length >= bytes) {
        sock.pause();
        sock.removeAllListeners('data');
        clearTimeout(timer);
        resolve({ sock, head: got.toString('latin1') });
      }
    });
    sock.on('error', reject);
    sock.write(request);
  });
}

describe('NDJSON export: the connection is released whatever the client does', () => {
  it('a client that reads 100 bytes and disconnects', async () => {
    assert.deepEqual(await busyBackends(), []);
    for (let i = 0; i < 3; i++) {
      const { sock, head } = await readSome(exportRequest(reader(), 'format=ndjson&includes=properties'), 100);
      assert.match(head, /^HTTP\/1\.1 200/);
      await sleep(300); // the server fills the socket buffers and waits for the client
      sock.destroy();
    }
    await assertBackToBaseline('after 3 disconnected exports', 15_000);
  });

  it('a client that stalls (never reads, never closes) is cut at the idle timeout and its connection released', { timeout: 60_000 }, async () => {
    const { sock, head } = await readSome(exportRequest(reader(), 'format=ndjson&includes=properties'), 100);
    assert.match(head, /^HTTP\/1\.1 200/);
    try {
      await waitFor(() => lentOut() >= 1, { timeoutMs: 5000, what: 'the stalled export to hold its connection' });
      // uWebSockets.js closes a connection that makes no progress for 10 s.
      await assertBackToBaseline('after a stalled export', 30_000);
    } finally {
      sock.destroy();
    }
  });

  it('the service still answers a whole export afterwards', async () => {
    const c = reader();
    const res = await fetch(`${server.url}/export/events?projectId=${projectId}&format=ndjson`, {
      headers: { 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret },
    });
    assert.equal(res.status, 200);
    const lines = (await res.text()).split('\n').filter(Boolean);
    assert.equal(lines.length, EVENTS);
    await assertBackToBaseline('after a whole export', 5000);
  });
});

describe('SIGTERM with an export in progress', () => {
  it('a stalled NDJSON export does not keep the API process from exiting', { timeout: 90_000 }, async () => {
    const api = await spawnApp(env, 'api');
    let sock: net.Socket | null = null;
    try {
      const c = reader();
      sock = await new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect(api.port, '127.0.0.1');
        s.once('data', () => {
          s.pause(); // the export stalls: the server's writes back up
          resolve(s);
        });
        s.on('error', reject);
        s.write(`GET /export/events?projectId=${projectId}&format=ndjson&includes=properties HTTP/1.1\r\nHost: t\r\n`
          + `service-client-id: ${c.clientId}\r\nservice-client-secret: ${c.clientSecret}\r\n\r\n`);
      });
      await sleep(500);
      const signalled = Date.now();
      await stopChild(api.child, 'SIGTERM', 45_000);
      const tookMs = Date.now() - signalled;
      assert.equal(api.child.signalCode, null, `the API exited on its own, not killed after 45 s (took ${tookMs} ms)\n${api.logs().slice(-2000)}`);
      assert.equal(api.child.exitCode, 0, api.logs().slice(-2000));
    } finally {
      sock?.destroy();
      await stopChild(api.child, 'SIGKILL');
    }
  });
});
