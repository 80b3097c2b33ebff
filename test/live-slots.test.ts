// Live-push slots and close codes against the real Redis, NATS and PostgreSQL, on an API with
// LIVE_MAX_SOCKETS=200 (so 100 per project by default) and LIVE_MAX_AUTHENTICATING=50:
// neither 200 sockets that never authenticate nor one tenant's 200 authenticated sockets keep
// another tenant's dashboard from authenticating and getting its count; the codes that tell
// "this project's share is full" (4429), "the server is full" (1013) and "too many sockets
// authenticating" (4430) apart; a 1 MiB message closes with 1009 and a close frame; a
// credential store that cannot be asked closes with 4503; with the defaults, 500 sockets of
// one project opened at once all get their count.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { TestEnv, post, sleep, startApp, track, waitFor, type Credentials } from './support/harness';
import type { Running } from '../internal/app/runtime';

type App = Running & { url: string };

let env: TestEnv;
let app: App;
/** A: the tenant that opens too many sockets; B: another tenant's dashboard; C: a third tenant. */
let projectA: string;
let projectB: string;
let projectC: string;
let readerA: Credentials;
let readerB: Credentials;
let readerC: Credentials;

before(async () => {
  env = await new TestEnv('liveslots').setup();
  [projectA, projectB, projectC] = await Promise.all([env.project({ name: 'A' }), env.project({ name: 'B' }), env.project({ name: 'C' })]);
  [readerA, readerB, readerC] = await Promise.all([env.client(projectA, 'read'), env.client(projectB, 'read'), env.client(projectC, 'read')]);
  app = await startApp(env, { api: true, worker: false }, { LIVE_MAX_SOCKETS: '200', LIVE_MAX_AUTHENTICATING: '50' });
  // Two live visitors in B: its dashboard's count is {"visitors": 2}.
  const writerB = await env.client(projectB, 'write');
  for (const profileId of ['b-1', 'b-2']) {
    const res = await post(`${app.url}/track`, track('screen_view', { __path: 'https://b.example/' }, { profileId }), writerB);
    assert.equal(res.status, 202);
  }
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

/** A socket that records what it gets. */
class Watch {
  readonly ws: WebSocket;
  readonly messages: number[] = [];
  closed: { code: number; reason: string } | null = null;
  readonly opened: Promise<void>;
  readonly closedP: Promise<{ code: number; reason: string }>;

  constructor(url: string, projectId: string, opts: { headers?: Record<string, string>; first?: string } = {}) {
    this.ws = new WebSocket(`${url.replace(/^http/, 'ws')}/insights/${encodeURIComponent(projectId)}/live`, { headers: opts.headers });
    this.ws.on('error', () => {}); // a dropped connection (1006) is an outcome here, not a failure
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', () => {
        if (opts.first !== undefined) this.ws.send(opts.first);
        resolve();
      });
      this.ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    });
    this.closedP = new Promise((resolve) => {
      this.ws.once('close', (code, reason) => {
        this.closed = { code, reason: String(reason) };
        resolve(this.closed);
      });
    });
    this.ws.on('message', (data) => this.messages.push((JSON.parse(String(data)) as { visitors: number }).visitors));
  }

  /** Resolves with the first count, or throws with the close code. */
  async count(timeoutMs = 15_000): Promise<number> {
    await waitFor(() => this.messages.length > 0 || this.closed !== null, { timeoutMs, intervalMs: 10, what: 'a count or a close' });
    if (!this.messages.length) throw new Error(`closed without a count: ${JSON.stringify(this.closed)}`);
    return this.messages[0]!;
  }

  /** Its first count, or its close code: what the server decided. */
  async outcome(timeoutMs = 15_000): Promise<{ count: number } | { code: number; reason: string }> {
    await waitFor(() => this.messages.length > 0 || this.closed !== null, { timeoutMs, intervalMs: 10, what: 'a count or a close' });
    return this.messages.length ? { count: this.messages[0]! } : this.closed!;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.ws.close();
    await this.closedP;
  }
}

const headersOf = (c: Credentials) => ({ 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret });
const firstMessage = (c: Credentials) => JSON.stringify({ clientId: c.clientId, clientSecret: c.clientSecret });

async function metric(name: string, labels: string): Promise<number> {
  const text = await app.metrics.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line ? Number(line.split(' ').pop()) : NaN;
}

/** B's dashboard as a browser opens it (credentials as the first message) and as a server client (headers). */
async function dashboardsOfB(): Promise<Watch[]> {
  const dashboards = [new Watch(app.url, projectB, { first: firstMessage(readerB) }), new Watch(app.url, projectB, { headers: headersOf(readerB) })];
  assert.deepEqual(await Promise.all(dashboards.map((d) => d.count())), [2, 2], "B's dashboards get their count");
  return dashboards;
}

/** `n` sockets of a reader opened `wave` at a time (the authenticating budget is 50); their outcomes. */
async function openAuthenticated(n: number, projectId: string, reader: Credentials, wave = 25): Promise<{ sockets: Watch[]; outcomes: Awaited<ReturnType<Watch['outcome']>>[] }> {
  const sockets: Watch[] = [];
  const outcomes: Awaited<ReturnType<Watch['outcome']>>[] = [];
  for (let i = 0; i < n; i += wave) {
    const batch = Array.from({ length: Math.min(wave, n - i) }, (_, k) => ((i + k) % 2 ? new Watch(app.url, projectId, { headers: headersOf(reader) }) : new Watch(app.url, projectId, { first: firstMessage(reader) })));
    sockets.push(...batch);
    outcomes.push(...(await Promise.all(batch.map((s) => s.outcome()))));
  }
  return { sockets, outcomes };
}

test('200 sockets that never authenticate take no slot: the longest-waiting make room (4430), and another tenant\'s dashboard gets in', async () => {
  const displacedBefore = await metric('tidemark_live_socket_refusals_total', 'reason="authenticating_displaced"');
  const idle = Array.from({ length: 200 }, () => new Watch(app.url, projectA));
  await Promise.all(idle.map((w) => w.opened));
  // At most 50 wait at a time: the others made room (4430), or (on a slow machine) ran out of their 5 s (4408).
  const closedWith = (code: number) => idle.filter((w) => w.closed?.code === code);
  await waitFor(() => idle.filter((w) => w.closed).length >= 150, { timeoutMs: 15_000, intervalMs: 20, what: '150 closed' });
  assert.deepEqual(idle.filter((w) => w.closed && ![4430, 4408].includes(w.closed.code)).map((w) => w.closed), []);
  assert.ok(closedWith(4430).length > 0);
  assert.match(closedWith(4430)[0]!.closed!.reason, /too many sockets are waiting for credentials/);
  const authenticating = await metric('tidemark_live_sockets', 'state="authenticating"');
  assert.ok(authenticating <= 50, `${authenticating} authenticating: the budget holds`);
  assert.equal(await metric('tidemark_live_sockets', 'state="watching"'), 0, 'none took a slot');

  const dashboards = await dashboardsOfB();
  assert.equal(await metric('tidemark_live_sockets', 'state="watching"'), 2);
  // The metric counts every socket displaced, the dashboards' newcomers' included.
  await waitFor(async () => (await metric('tidemark_live_socket_refusals_total', 'reason="authenticating_displaced"')) === displacedBefore + closedWith(4430).length, { timeoutMs: 5000, intervalMs: 20, what: 'the displaced counted' });
  assert.ok(idle.every((w) => w.messages.length === 0));
  await Promise.all([...idle, ...dashboards].map((w) => w.close()));
  await waitFor(async () => (await metric('tidemark_live_sockets', 'state="authenticating"')) === 0, { timeoutMs: 5000, intervalMs: 20, what: 'no socket authenticating' });
});

test("one tenant's 200 authenticated sockets hold half the slots (4429 past them); another tenant's dashboard gets its count; a full server says 1013", async () => {
  const a = await openAuthenticated(200, projectA, readerA);
  const counted = a.outcomes.filter((o) => 'count' in o);
  const refused = a.outcomes.filter((o) => 'code' in o) as { code: number; reason: string }[];
  assert.equal(counted.length, 100, 'A holds its share: half of LIVE_MAX_SOCKETS');
  assert.deepEqual(new Set(refused.map((o) => o.code)), new Set([4429]));
  assert.equal(refused.length, 100);
  assert.match(refused[0]!.reason, /this project holds as many live sockets on this server as it may/);
  assert.equal(await metric('tidemark_live_socket_refusals_total', 'reason="project_full"'), 100);

  const dashboards = await dashboardsOfB();
  assert.equal(await metric('tidemark_live_sockets', 'state="watching"'), 102);

  // C takes the rest of the server (98 slots); then every newcomer is told the server is full.
  const c = await openAuthenticated(98, projectC, readerC);
  assert.ok(c.outcomes.every((o) => 'count' in o), JSON.stringify(c.outcomes.find((o) => 'code' in o)));
  assert.equal(await metric('tidemark_live_sockets', 'state="watching"'), 200);
  const full = [new Watch(app.url, projectC, { headers: headersOf(readerC) }), new Watch(app.url, projectB, { first: firstMessage(readerB) }), new Watch(app.url, projectA)];
  const closes = await Promise.all(full.map((w) => w.closedP));
  assert.deepEqual(closes.map((x) => x.code), [1013, 1013, 1013]);
  assert.match(closes[0]!.reason, /this server holds as many live sockets as it may/);
  assert.ok(full.every((w) => w.messages.length === 0));
  // A slot freed: B's next dashboard gets in.
  await a.sockets.find((s) => s.messages.length && !s.closed)!.close();
  const next = new Watch(app.url, projectB, { first: firstMessage(readerB) });
  assert.equal(await next.count(), 2);
  await Promise.all([...a.sockets, ...c.sockets, ...dashboards, next].map((w) => w.close()));
  await waitFor(async () => (await metric('tidemark_live_sockets', 'state="watching"')) === 0, { timeoutMs: 5000, intervalMs: 20, what: 'every socket gone' });
});

test('a message over 4 KiB closes with 1009 and a close frame, 1 MiB included, before or after authentication', async () => {
  const unauthenticated = new Watch(app.url, projectB);
  await unauthenticated.opened;
  unauthenticated.ws.send('x'.repeat(1024 * 1024));
  const authenticated = new Watch(app.url, projectB, { headers: headersOf(readerB) });
  assert.equal(await authenticated.count(), 2);
  authenticated.ws.send(Buffer.alloc(4097));
  const browser = new Watch(app.url, projectB, { first: 'y'.repeat(5000) });
  for (const w of [unauthenticated, authenticated, browser]) {
    const closed = await w.closedP;
    assert.deepEqual(closed, { code: 1009, reason: 'message too big: at most 4096 bytes' });
  }
  // 4 KiB exactly is read (and is not credentials: 4400).
  const atLimit = new Watch(app.url, projectB, { first: 'z'.repeat(4096) });
  assert.equal((await atLimit.closedP).code, 4400);
  // Past 1 MiB the connection is dropped without a close frame (as documented), and the server carries on.
  const huge = new Watch(app.url, projectB);
  await huge.opened;
  huge.ws.send(Buffer.alloc(1024 * 1024 + 1));
  assert.equal((await huge.closedP).code, 1006);
  const after = new Watch(app.url, projectB, { headers: headersOf(readerB) });
  assert.equal(await after.count(), 2);
  await after.close();
});

test('a credential store that cannot be asked closes with 4503', async () => {
  // An API of its own whose Redis connection (revocation) is gone.
  const broken = await startApp(env, { api: true, worker: false });
  try {
    const reader = await env.client(projectB, 'read'); // not cached by any process
    broken.redis.disconnect();
    await sleep(50);
    const w = new Watch(broken.url, projectB, { headers: headersOf(reader) });
    const closed = await w.closedP;
    assert.equal(closed.code, 4503, JSON.stringify(closed));
    assert.equal(closed.reason, 'live visitors are unavailable right now; retry');
    assert.equal(w.messages.length, 0);
  } finally {
    await broken.drain().catch(() => {});
  }
});

test('with the default limits, 500 sockets of one project opened at once all get their count', async () => {
  const defaults = await startApp(env, { api: true, worker: false });
  try {
    const reader = await env.client(projectB, 'read');
    const sockets = Array.from({ length: 500 }, (_, i) => (i % 2 ? new Watch(defaults.url, projectB, { headers: headersOf(reader) }) : new Watch(defaults.url, projectB, { first: firstMessage(reader) })));
    const outcomes = await Promise.all(sockets.map((s) => s.outcome(30_000)));
    assert.deepEqual(outcomes.filter((o) => !('count' in o)), []);
    assert.deepEqual(new Set(outcomes.map((o) => (o as { count: number }).count)), new Set([2]));
    await Promise.all(sockets.map((s) => s.close()));
  } finally {
    await defaults.drain();
  }
});
