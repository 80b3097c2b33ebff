// Live push (semantics.md "Live push") against the real Redis, NATS and PostgreSQL:
// /insights/{projectId}/live upgrades to a WebSocket; credentials in headers or as the first
// message; {"visitors": N} at once, then on every change (pushed, not polled: well before
// the hub's 5 s resync), at most 4 a second; refusals close with a code and no count; 200
// watchers; one change reaches sockets on other API processes and threads; a visitor ageing
// out is pushed; revocation closes sockets; SIGTERM closes them with 1001.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import WebSocket from 'ws';
import { ROOT, TestEnv, get, post, sleep, spawnApp, startApp, track, waitFor, type Credentials } from './support/harness';
import type { Running } from '../internal/app/runtime';

const run = promisify(execFile);

let env: TestEnv;
let app: Running & { url: string };
let projectId: string;
let otherProjectId: string;
let reader: Credentials;
let writer: Credentials;
let root: Credentials;
let otherReader: Credentials;
let visitorSeq = 0;

before(async () => {
  env = await new TestEnv('livepush').setup();
  projectId = await env.project({ name: 'Live' });
  otherProjectId = await env.project({ name: 'Other' });
  [reader, writer, root, otherReader] = await Promise.all([
    env.client(projectId, 'read'), env.client(projectId, 'write'), env.client(otherProjectId, 'root'), env.client(otherProjectId, 'read'),
  ]);
  app = await startApp(env, { api: true, worker: false });
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

/** A socket that records what it gets. */
class Watch {
  readonly ws: WebSocket;
  readonly messages: { at: number; visitors: number }[] = [];
  closed: { code: number; reason: string } | null = null;
  readonly opened: Promise<void>;
  readonly closedP: Promise<{ code: number; reason: string }>;

  constructor(url: string, projectId: string, opts: { headers?: Record<string, string>; first?: string } = {}) {
    this.ws = new WebSocket(`${url.replace(/^http/, 'ws')}/insights/${encodeURIComponent(projectId)}/live`, { headers: opts.headers });
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', () => {
        if (opts.first !== undefined) this.ws.send(opts.first);
        resolve();
      });
      this.ws.once('error', reject);
    });
    this.closedP = new Promise((resolve) => {
      this.ws.once('close', (code, reason) => {
        this.closed = { code, reason: String(reason) };
        resolve(this.closed);
      });
    });
    this.ws.on('message', (data) => this.messages.push({ at: Date.now(), visitors: (JSON.parse(String(data)) as { visitors: number }).visitors }));
  }

  get last(): number | undefined {
    return this.messages.at(-1)?.visitors;
  }

  /** Resolves with the time of the first message (from index `from`) that carries `visitors`. */
  async until(visitors: number, from = 0, timeoutMs = 10_000): Promise<number> {
    await waitFor(() => this.messages.slice(from).some((m) => m.visitors === visitors) || this.closed !== null, { timeoutMs, intervalMs: 5, what: `{"visitors": ${visitors}}` });
    const m = this.messages.slice(from).find((x) => x.visitors === visitors);
    if (!m) throw new Error(`closed before {"visitors": ${visitors}}: ${JSON.stringify(this.closed)}`);
    return m.at;
  }

  close(): void {
    this.ws.close();
  }
}

const headersOf = (c: Credentials, prefix = 'service') => ({ [`${prefix}-client-id`]: c.clientId, [`${prefix}-client-secret`]: c.clientSecret });
const firstMessage = (c: Credentials) => JSON.stringify({ clientId: c.clientId, clientSecret: c.clientSecret });

/** A new visitor now (a profile never seen): the live count goes up by one. Resolves at the 202. */
async function newVisitor(url: string, project = projectId, properties: Record<string, unknown> = {}): Promise<number> {
  const w = project === projectId ? writer : await env.client(project, 'write');
  const res = await post(`${url}/track`, track('screen_view', { __path: `https://live.example/p${visitorSeq}`, ...properties }, { profileId: `visitor-${visitorSeq++}` }), w);
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return Date.now();
}

async function liveOverHttp(project = projectId): Promise<number> {
  const res = await get(`${app.url}/insights/${project}/live`, project === projectId ? reader : root);
  assert.equal(res.status, 200);
  return res.body.visitors as number;
}

test('headers, the OpenPanel aliases or a first message: the count at once, then every change pushed', async () => {
  await newVisitor(app.url);
  await newVisitor(app.url);
  const expected = await liveOverHttp();
  assert.equal(expected, 2);
  const byHeaders = new Watch(app.url, projectId, { headers: headersOf(reader) });
  const byAlias = new Watch(app.url, projectId, { headers: headersOf(reader, 'openpanel') });
  const byMessage = new Watch(app.url, projectId, { first: firstMessage(reader) });
  const sockets = [byHeaders, byAlias, byMessage];
  await Promise.all(sockets.map((s) => s.until(2)));
  assert.deepEqual(sockets.map((s) => s.messages.length), [1, 1, 1], 'one message each at once');

  // The hub re-counts by itself only every 5 s: arriving well before that, the change was pushed.
  const acceptedAt = await newVisitor(app.url);
  const arrived = await Promise.all(sockets.map((s) => s.until(3, 1)));
  const latency = Math.max(...arrived) - acceptedAt;
  assert.ok(latency < 4000, `pushed ${latency} ms after the 202`);
  assert.equal(await liveOverHttp(), 3, 'the pushed count is the HTTP one');

  // The same visitor again: the count does not change, nothing is sent.
  await post(`${app.url}/track`, track('screen_view', { __path: 'https://live.example/again' }, { profileId: `visitor-${visitorSeq - 1}` }), writer);
  await sleep(600);
  assert.deepEqual(sockets.map((s) => s.messages.length), [2, 2, 2]);
  // A plain GET on the same path is still the HTTP endpoint.
  assert.equal(await liveOverHttp(), 3);
  for (const s of sockets) s.close();
});

test('refused sockets are closed with a code and a reason, and never get a count', async () => {
  const cases: [string, Watch, number][] = [
    ['no credentials within 5 s', new Watch(app.url, projectId), 4408],
    ['a first message that is not credentials', new Watch(app.url, projectId, { first: 'hello' }), 4400],
    ['a wrong secret', new Watch(app.url, projectId, { headers: { ...headersOf(reader), 'service-client-secret': 'sec_wrong' } }), 4401],
    ['a wrong secret in the first message', new Watch(app.url, projectId, { first: JSON.stringify({ clientId: reader.clientId, clientSecret: 'nope' }) }), 4401],
    ['an unknown client', new Watch(app.url, projectId, { headers: { 'service-client-id': '00000000-0000-0000-0000-000000000000', 'service-client-secret': 'x' } }), 4401],
    ['a client id without a secret', new Watch(app.url, projectId, { headers: { 'service-client-id': reader.clientId } }), 4401],
    ['a write client', new Watch(app.url, projectId, { headers: headersOf(writer) }), 4403],
    ["a read client of another project", new Watch(app.url, projectId, { headers: headersOf(otherReader) }), 4403],
    ['a root client, unknown project', new Watch(app.url, 'no-such-project', { headers: headersOf(root) }), 4404],
  ];
  const results = await Promise.all(cases.map(([, w]) => w.closedP));
  cases.forEach(([what, w, code], i) => {
    assert.equal(results[i]!.code, code, `${what}: ${JSON.stringify(results[i])}`);
    assert.ok(results[i]!.reason.length > 0, `${what}: a reason`);
    assert.equal(w.messages.length, 0, `${what}: no count`);
  });
  // A root client of another project may watch this one.
  const rootWatch = new Watch(app.url, projectId, { headers: headersOf(root) });
  await rootWatch.until(await liveOverHttp());
  rootWatch.close();
});

test('200 watchers, half by headers and half by first message, all get the change', async () => {
  const before = await liveOverHttp();
  const watchers = Array.from({ length: 200 }, (_, i) => (i % 2 ? new Watch(app.url, projectId, { headers: headersOf(reader) }) : new Watch(app.url, projectId, { first: firstMessage(reader) })));
  await Promise.all(watchers.map((w) => w.until(before)));
  await newVisitor(app.url);
  await Promise.all(watchers.map((w) => w.until(before + 1, 1)));
  assert.ok(watchers.every((w) => w.messages.length === 2 && w.closed === null));
  for (const w of watchers) w.close();
});

test('at most 4 messages in any second, and the last one is the final count', async () => {
  const w = new Watch(app.url, projectId, { headers: headersOf(reader) });
  const start = await liveOverHttp();
  await w.until(start);
  for (let i = 0; i < 24; i++) {
    await newVisitor(app.url);
    await sleep(40);
  }
  await w.until(start + 24, 1);
  const times = w.messages.map((m) => m.at);
  for (let i = 4; i < times.length; i++) assert.ok(times[i]! - times[i - 4]! >= 1000, `5 messages within ${times[i]! - times[i - 4]!} ms`);
  w.close();
});

test('a visitor leaving the 5-minute window is pushed without any event', async () => {
  const project = await env.project({ name: 'Ageing' });
  const watcher = await env.client(project, 'read');
  // Live for 3 more seconds: its event time is 4 min 57 s ago.
  await newVisitor(app.url, project, { __timestamp: new Date(Date.now() - 5 * 60_000 + 3_000).toISOString() });
  await newVisitor(app.url, project);
  const w = new Watch(app.url, project, { headers: headersOf(watcher) });
  await w.until(2);
  const left = await w.until(1, 1, 10_000);
  assert.ok(w.messages.length === 2, JSON.stringify(w.messages));
  assert.ok(left >= w.messages[0]!.at, 'after the first count');
  w.close();
});

test('revoking a client closes its sockets; other clients keep watching', async () => {
  const doomed = await env.client(projectId, 'read');
  const a = new Watch(app.url, projectId, { headers: headersOf(doomed) });
  const b = new Watch(app.url, projectId, { first: firstMessage(doomed) });
  const kept = new Watch(app.url, projectId, { headers: headersOf(reader) });
  const n = await liveOverHttp();
  await Promise.all([a.until(n), b.until(n), kept.until(n)]);
  const revokedAt = Date.now();
  await run(process.execPath, ['--import', 'tsx', 'cmd/cli/main.ts', 'client', 'revoke', '--id', doomed.clientId], {
    cwd: ROOT, env: { ...process.env, ...env.env() },
  });
  const [ca, cb] = await Promise.all([a.closedP, b.closedP]);
  assert.deepEqual([ca.code, cb.code], [4401, 4401]);
  assert.ok(Date.now() - revokedAt < 15_000);
  assert.equal(kept.closed, null);
  // And it cannot come back.
  const again = new Watch(app.url, projectId, { headers: headersOf(doomed) });
  assert.equal((await again.closedP).code, 4401);
  kept.close();
});

test('one change reaches sockets on another API process with two API threads; SIGTERM closes them with 1001', async () => {
  let other: { child: ChildProcess; url: string } | null = null;
  try {
    other = await spawnApp(env, 'api', { API_THREADS: '2' });
    const n = await liveOverHttp();
    // Enough sockets that both threads of the other process hold some (the kernel spreads connections).
    const watchers = Array.from({ length: 24 }, () => new Watch(other!.url, projectId, { headers: headersOf(reader) }));
    await Promise.all(watchers.map((w) => w.until(n)));
    await newVisitor(app.url); // accepted by this process
    await Promise.all(watchers.map((w) => w.until(n + 1, 1)));
    const metrics = await (await fetch(`${other.url}/metrics`)).text();
    assert.match(metrics, /tidemark_live_sockets\{state="watching"\} 24/);
    other.child.kill('SIGTERM');
    const codes = await Promise.all(watchers.map((w) => w.closedP));
    assert.deepEqual(new Set(codes.map((c) => c.code)), new Set([1001]));
  } finally {
    if (other && other.child.exitCode === null) {
      const exited = new Promise((r) => other!.child.once('exit', r));
      other.child.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000)]);
      if (other.child.exitCode === null) other.child.kill('SIGKILL');
    }
  }
});
