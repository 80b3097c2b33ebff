// Faults on the read side: clients that go away or stall in the middle of an
// NDJSON export, regex filters that would run past the request's budget, a client that
// leaves while its query runs, and PostgreSQL refusing connections (down or pool
// exhausted). Real HTTP clients (raw TCP) against the real Router/HttpServer, the real
// PostgreSQL; the connection counts come from pg_stat_activity and the pool itself.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { TestEnv, sleep, spawnApp, waitFor, type Credentials } from './support/harness';
import { PrivateEnv, PrivatePostgres, stopAllPrivate, stopChild } from './support/private-services';
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

// ---------------------------------------------------------------------------------------
// One query budget per request, and cancellation when the client leaves

// PostgreSQL's regex engine must backtrack a back-reference: ^(aa+)\1+$ on a run of a's of
// prime length tries every divisor (test/security-regex.test.ts).
const SLOW = '^(aa+)\\1+$';
// Steps of ~10-15% in length (~25% in time: the backtracking grows about as the square).
const PRIMES = [4001, 6007, 8009, 10007, 12007, 14009, 16001, 18013, 20011, 22003, 24001, 28001, 32003, 36007, 40009];
const BUDGET_MS = 1500;

describe('one query budget per read request', () => {
  let slow: ExportServer;
  let slowProject: string;
  let slowReader: Credentials;
  /** ms one statement over the project's one event takes (below the budget: no statement timeout fires). */
  let statementMs = 0;

  before(async () => {
    // The length whose regex test takes about half the budget on this machine now.
    let length = PRIMES[0]!;
    let prev: { length: number; ms: number } | null = null;
    for (const p of PRIMES) {
      const t0 = performance.now();
      await env.db.query('SELECT repeat($1, $2::int) ~ $3 AS m', ['a', p, SLOW]);
      statementMs = performance.now() - t0;
      length = p;
      // Overshot the budget (a busy machine): the previous length, if it took a quarter of it.
      if (statementMs >= BUDGET_MS * 0.9 && prev && prev.ms > BUDGET_MS / 4) {
        length = prev.length;
        statementMs = prev.ms;
        break;
      }
      if (statementMs > BUDGET_MS / 2) break;
      prev = { length: p, ms: statementMs };
    }
    assert.ok(statementMs > BUDGET_MS / 4 && statementMs < BUDGET_MS, `a statement takes ${Math.round(statementMs)} ms (length ${length}): the test needs it between a quarter of the budget and the budget`);
    slowProject = await env.project({ name: 'Slow' });
    slowReader = await env.client(slowProject, 'read', 0);
    await insertEvents(env.db, [eventRow(slowProject, { created_at: new Date(Date.now() - 3600_000).toISOString(), properties: { long: 'a'.repeat(length) } })]);
    slow = await startExportServer(env, { streaming: true, queryTimeoutMs: BUDGET_MS });
  });

  after(async () => {
    await Promise.race([slow?.close(), sleep(5000)]);
  });

  const eightSlowSeries = () => encodeURIComponent(JSON.stringify(Array.from({ length: 8 }, () => ({ name: '*', filters: [{ name: 'properties.long', operator: 'regex', value: [SLOW] }] }))));
  const chartPath = () => `/export/charts?projectId=${slowProject}&range=7d&series=${eightSlowSeries()}`;

  it('8 slow regex series (one statement each, each under the budget alone) answer 503 naming the budget within it', async () => {
    const t0 = performance.now();
    const res = await fetch(`${slow.url}${chartPath()}`, { headers: { 'service-client-id': slowReader.clientId, 'service-client-secret': slowReader.clientSecret } });
    const ms = performance.now() - t0;
    const body = await res.json() as { error: string; message: string };
    assert.equal(res.status, 503, JSON.stringify(body));
    assert.equal(body.error, 'Service Unavailable');
    assert.match(body.message, new RegExp(`${BUDGET_MS} ms`));
    assert.match(body.message, /QUERY_TIMEOUT_MS/);
    // The eight statements one after the other would take 8 x statementMs.
    assert.ok(ms < BUDGET_MS + 4 * statementMs, `answered after ${Math.round(ms)} ms; budget ${BUDGET_MS} ms, one statement ${Math.round(statementMs)} ms`);
    await assertBackToBaselineOf(slow, 'after the budget ran out', 5000);
  });

  it('a client that leaves while its query runs leaves no busy backend', async () => {
    const sock = net.connect(Number(new URL(slow.url).port), '127.0.0.1');
    sock.on('error', () => {});
    sock.write(`GET ${chartPath()} HTTP/1.1\r\nHost: t\r\nservice-client-id: ${slowReader.clientId}\r\nservice-client-secret: ${slowReader.clientSecret}\r\n\r\n`);
    await waitFor(async () => (await busyBackends()).some((b) => b.state === 'active'), { timeoutMs: 5000, what: 'the regex statement to run' });
    const left = performance.now();
    sock.destroy();
    // Without cancellation the statement runs on, then the next seven series.
    await waitFor(async () => (await busyBackends()).length === 0, { timeoutMs: statementMs, intervalMs: 20, what: `no busy backend within ${Math.round(statementMs)} ms of the client leaving: ${JSON.stringify(await busyBackends())}` });
    const ms = performance.now() - left;
    assert.ok(ms < statementMs, `${Math.round(ms)} ms`);
    await assertBackToBaselineOf(slow, 'after the client left', 5000);
  });
});

async function assertBackToBaselineOf(s: ExportServer, what: string, timeoutMs: number): Promise<void> {
  const lent = () => s.deps.db.totalCount - s.deps.db.idleCount;
  await waitFor(async () => lent() === 0 && (await busyBackends()).length === 0, {
    timeoutMs, what: `${what}: pool lent ${lent()}, busy backends ${JSON.stringify(await busyBackends())}`,
  });
}

// ---------------------------------------------------------------------------------------
// PostgreSQL unavailable: 503 with Retry-After, not 500

describe('reads while PostgreSQL cannot give a connection', () => {
  it('the pool is exhausted: 503 with Retry-After within the budget', async () => {
    const small = await startExportServer(env, { streaming: true, queryTimeoutMs: BUDGET_MS, poolMax: 2, insights: true });
    const held = [await small.deps.db.connect(), await small.deps.db.connect()];
    try {
      const c = reader();
      const h = { 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret };
      held.forEach((x) => x.release());
      held.length = 0;
      for (const path of [`/export/events?projectId=${projectId}&limit=1`, `/export/charts?projectId=${projectId}&series=${encodeURIComponent('[{"name":"*"}]')}`, `/insights/${projectId}/metrics`, `/export/events?projectId=${projectId}&format=ndjson`]) {
        // The client and project rows are read (and cached for 5 s) before the pool is taken:
        // the budget covers the request's queries, not the credential check.
        assert.equal((await fetch(`${small.url}/export/events?projectId=${projectId}&limit=1`, { headers: h })).status, 200);
        held.forEach((x) => x.release());
        held.splice(0, held.length, await small.deps.db.connect(), await small.deps.db.connect());
        const t0 = performance.now();
        const res = await fetch(`${small.url}${path}`, { headers: h });
        const ms = performance.now() - t0;
        const text = await res.text();
        assert.equal(res.status, 503, `${path}: ${text}`);
        assert.ok(Number(res.headers.get('retry-after')) >= 1, `${path}: Retry-After ${res.headers.get('retry-after')}`);
        assert.equal(JSON.parse(text).error, 'Service Unavailable');
        assert.ok(ms < BUDGET_MS + 2000, `${path}: ${Math.round(ms)} ms`);
        held.forEach((x) => x.release());
        held.length = 0;
      }
    } finally {
      held.forEach((x) => x.release());
      await Promise.race([small.close(), sleep(5000)]);
    }
  });

  it('PostgreSQL is down: 503 with Retry-After on every read route', { timeout: 120_000 }, async () => {
    const pgs = await PrivatePostgres.start();
    const penv = new PrivateEnv('freadsdown', { pgBase: pgs.url });
    let s: ExportServer | null = null;
    try {
      await penv.setup();
      const p = await penv.project();
      const c = await penv.client(p, 'read', 0);
      await insertEvents(penv.db, [eventRow(p, { created_at: new Date(Date.now() - 3600_000).toISOString() })]);
      s = await startExportServer(penv, { streaming: true, databaseUrl: penv.dbUrl, insights: true });
      const h = { 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret };
      const paths = [`/export/events?limit=1`, `/export/events?format=ndjson`, `/export/charts?series=${encodeURIComponent('[{"name":"*"}]')}`, `/insights/${p}/metrics`, `/insights/${p}/pages`, `/insights/${p}/country`];
      for (const path of paths) assert.equal((await fetch(`${s.url}${path}`, { headers: h })).status, 200, path);
      await pgs.stop();
      for (const path of paths) {
        const res = await fetch(`${s.url}${path}`, { headers: h });
        const text = await res.text();
        assert.equal(res.status, 503, `${path}: ${text}`);
        assert.ok(Number(res.headers.get('retry-after')) >= 1, `${path}: Retry-After ${res.headers.get('retry-after')}`);
        assert.equal(JSON.parse(text).error, 'Service Unavailable');
      }
      await pgs.start();
      await waitFor(async () => (await fetch(`${s!.url}/export/events?limit=1`, { headers: h })).status === 200, { timeoutMs: 20_000, what: 'reads to answer again once PostgreSQL is back' });
    } finally {
      await Promise.race([s?.close(), sleep(5000)]);
      await penv.teardown();
      await stopAllPrivate();
    }
  });
});
