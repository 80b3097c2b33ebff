// The hub's rules without a server: a count per project (not per socket), message spacing,
// re-counting when a visitor ages out, refusals and revocation, slots (per thread, per project,
// and the authenticating budget with its deadline). The source is an in-memory live set with
// the same meaning as the Redis one (internal/live/source.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LiveHub, type LiveCount, type LiveRefusalReason, type LiveSource } from './hub';
import { CLOSE } from './protocol';
import { ForbiddenError, UnauthorizedError } from '../http/errors';
import { LIVE_WINDOW_MS } from '../ratelimit/gate';
import type { SocketConnection, SocketHandlers, SocketRequest } from '../http/types';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

class MemorySource implements LiveSource {
  /** project -> profile -> last event ms */
  sets = new Map<string, Map<string, number>>();
  counts = 0;
  subscribed = new Set<string>();
  revokedIds = new Set<string>();

  constructor(private readonly now: () => number) {}

  visit(projectId: string, profile: string, atMs = this.now()): void {
    let s = this.sets.get(projectId);
    if (!s) this.sets.set(projectId, (s = new Map()));
    s.set(profile, atMs);
  }

  async count(projectId: string, nowMs: number): Promise<LiveCount> {
    this.counts++;
    const live = [...(this.sets.get(projectId)?.values() ?? [])].filter((t) => t > nowMs - LIVE_WINDOW_MS);
    return { visitors: live.length, oldestMs: live.length ? Math.min(...live) : null };
  }

  async subscribe(projectId: string): Promise<void> {
    this.subscribed.add(projectId);
  }

  async unsubscribe(projectId: string): Promise<void> {
    this.subscribed.delete(projectId);
  }

  async revoked(clientIds: string[]): Promise<Set<string>> {
    return new Set(clientIds.filter((id) => this.revokedIds.has(id)));
  }
}

class FakeSocket implements SocketConnection {
  messages: { at: number; visitors: number }[] = [];
  closedWith: { code: number; reason: string } | null = null;
  handlers: SocketHandlers | null = null;
  get isClosed(): boolean {
    return this.closedWith !== null;
  }
  send(text: string): boolean {
    if (this.closedWith) return false;
    this.messages.push({ at: Date.now(), visitors: (JSON.parse(text) as { visitors: number }).visitors });
    return true;
  }
  close(code: number, reason: string): void {
    if (this.closedWith) return;
    this.closedWith = { code, reason };
    this.handlers?.closed(code);
  }
  get last(): number | undefined {
    return this.messages.at(-1)?.visitors;
  }
}

const request = (projectId: string, headers: Record<string, string> = {}): SocketRequest => ({
  path: `/insights/${projectId}/live`, params: { projectId }, query: new URLSearchParams(), headers, remoteAddress: '127.0.0.1', requestId: 'r',
});

function setup(opts: { offsetMs?: () => number; authTimeoutMs?: number; maxSockets?: number; maxSocketsPerProject?: number; maxAuthenticating?: number } = {}) {
  const now = () => Date.now() + (opts.offsetMs?.() ?? 0);
  const source = new MemorySource(now);
  const refusals: LiveRefusalReason[] = [];
  const hub = new LiveHub({
    source, now,
    maxSocketsPerProject: opts.maxSocketsPerProject, maxAuthenticating: opts.maxAuthenticating,
    onRefused: (reason) => refusals.push(reason),
    authenticate: async ({ clientId, clientSecret }, projectId) => {
      if (clientId === 'hang') return new Promise<never>(() => {}); // a store that never answers
      if (clientSecret !== 'good') throw new UnauthorizedError('invalid client credentials');
      if (clientId.startsWith('writer')) throw new ForbiddenError('a write client cannot read; use a read or root client');
      if (!projectId.startsWith('p')) throw new ForbiddenError('this client has no access to that project');
      return { clientId };
    },
    authTimeoutMs: opts.authTimeoutMs ?? 5000, maxSockets: opts.maxSockets, minIntervalMs: 250, resyncMs: 60_000, revocationCheckMs: 50,
  });
  const open = (projectId: string, headers: Record<string, string> = {}) => {
    const s = new FakeSocket();
    const handlers = hub.connect(request(projectId, headers), s);
    // As internal/http/websocket.ts does: a socket closed inside connect() is told after it.
    if (s.closedWith) handlers.closed(s.closedWith.code);
    else s.handlers = handlers;
    return s;
  };
  const creds = (clientId = 'reader') => ({ 'service-client-id': clientId, 'service-client-secret': 'good' });
  return { hub, source, open, creds, refusals };
}

const until = async (cond: () => boolean, what: string, ms = 3000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await sleep(5);
  }
};

test('a hundred sockets of one project share one count, and each gets it at once', async () => {
  const { hub, source, open, creds } = setup();
  source.visit('p1', 'a');
  source.visit('p1', 'b');
  const sockets = Array.from({ length: 100 }, () => open('p1', creds()));
  await until(() => sockets.every((s) => s.messages.length === 1), 'every first message');
  assert.deepEqual(new Set(sockets.map((s) => s.last)), new Set([2]));
  assert.equal(source.counts, 1, 'one count for the project, not one per socket');
  assert.deepEqual([...source.subscribed], ['p1']);
  // A change: one more count, every socket told.
  source.visit('p1', 'c');
  hub.changed('p1');
  await until(() => sockets.every((s) => s.last === 3), 'the change');
  assert.equal(source.counts, 2);
  // Nothing changed: a change signal that leaves N as it was sends nothing.
  hub.changed('p1');
  await sleep(400);
  assert.ok(sockets.every((s) => s.messages.length === 2));
  for (const s of sockets) s.close(1000, 'bye');
  assert.deepEqual(hub.stats(), { sockets: 0, authenticating: 0, watching: 0, projects: 0 });
  assert.deepEqual([...source.subscribed], [], 'the last socket gone, the project is unsubscribed');
  hub.close();
});

test('a socket never gets two messages closer than 250 ms, and ends on the latest count', async () => {
  const { hub, source, open, creds } = setup();
  const s = open('p2', creds());
  await until(() => s.messages.length === 1, 'first message');
  for (let i = 0; i < 30; i++) {
    source.visit('p2', `v${i}`);
    hub.changed('p2');
    await sleep(30);
  }
  await until(() => s.last === 30, 'the last count', 2000);
  const gaps = s.messages.slice(1).map((m, i) => m.at - s.messages[i]!.at);
  assert.ok(gaps.every((g) => g >= 245), `gaps ${gaps.join(', ')}`); // timers may run a few ms early
  assert.ok(s.messages.length <= 2 + Math.ceil((s.messages.at(-1)!.at - s.messages[0]!.at) / 250), `${s.messages.length} messages`);
  hub.close();
});

test('the count drops by itself when a visitor leaves the 5-minute window', async () => {
  const { hub, source, open, creds } = setup();
  const now = Date.now();
  source.visit('p3', 'leaving', now - LIVE_WINDOW_MS + 300); // leaves in 300 ms
  source.visit('p3', 'staying', now);
  const s = open('p3', creds());
  await until(() => s.messages.length === 1, 'first message');
  assert.equal(s.last, 2);
  await until(() => s.last === 1, 'the aged-out count', 2000);
  const took = s.messages.at(-1)!.at - now;
  assert.ok(took >= 290, `told after ${took} ms, not before the visitor left`);
  hub.close();
});

test('credentials from the first message; refusals close with 4000 + the HTTP status and send no count', async () => {
  const { hub, source, open, creds } = setup({ authTimeoutMs: 100 });
  source.visit('p4', 'a');
  const browser = open('p4');
  browser.handlers!.message(JSON.stringify({ clientId: 'reader', clientSecret: 'good' }));
  const silent = open('p4');
  const garbage = open('p4');
  garbage.handlers!.message('hello');
  const wrong = open('p4', { 'openpanel-client-id': 'reader', 'openpanel-client-secret': 'bad' });
  const writer = open('p4', creds('writer-1'));
  const otherProject = open('q4', creds());
  const idOnly = open('p4', { 'service-client-id': 'reader' });
  await until(() => browser.messages.length === 1 && silent.isClosed, 'browser count and the timeout');
  assert.equal(browser.last, 1);
  assert.deepEqual(
    [silent, garbage, wrong, writer, otherProject, idOnly].map((s) => [s.closedWith?.code, s.messages.length]),
    [[CLOSE.authTimeout, 0], [CLOSE.badMessage, 0], [4401, 0], [4403, 0], [4403, 0], [4401, 0]],
  );
  assert.equal(hub.stats().sockets, 1);
  hub.close();
  assert.equal(browser.closedWith?.code, CLOSE.goingAway);
});

test('a revoked client\'s sockets are closed; others stay', async () => {
  const { hub, source, open, creds } = setup();
  const doomed = open('p5', creds('reader-doomed'));
  const kept = open('p5', creds('reader-kept'));
  await until(() => doomed.messages.length === 1 && kept.messages.length === 1, 'first messages');
  source.revokedIds.add('reader-doomed');
  await until(() => doomed.isClosed, 'the revoked socket closed');
  assert.deepEqual(doomed.closedWith, { code: CLOSE.unauthorized, reason: 'client revoked' });
  assert.equal(kept.isClosed, false);
  hub.close();
});

test('authenticated sockets beyond maxSockets are closed with 1013; sockets still authenticating take no slot', async () => {
  const { hub, open, creds, refusals } = setup({ maxSockets: 2, maxSocketsPerProject: 2 });
  const waiting = Array.from({ length: 5 }, () => open('p6')); // no credentials yet
  const a = open('p6', creds());
  const b = open('p7', creds());
  const c = open('p8', creds()); // checking with a and b: refused once a and b hold the slots
  assert.equal(hub.stats().authenticating, 8);
  await until(() => a.messages.length === 1 && b.messages.length === 1 && c.isClosed, 'a and b counted, c refused');
  assert.equal(c.closedWith?.code, CLOSE.tryAgainLater);
  assert.equal(c.messages.length, 0);
  // Full: a newcomer is refused at once, before any credential check.
  const d = open('p9', creds());
  assert.equal(d.closedWith?.code, CLOSE.tryAgainLater);
  assert.ok(waiting.every((w) => !w.isClosed), 'the waiting sockets were not counted against the slots');
  assert.deepEqual(hub.stats(), { sockets: 7, authenticating: 5, watching: 2, projects: 2 });
  // A slot freed: the next one gets it.
  a.close(1000, 'bye');
  waiting[0]!.handlers!.message(JSON.stringify({ clientId: 'reader', clientSecret: 'good' }));
  await until(() => waiting[0]!.messages.length === 1, 'the freed slot taken');
  assert.deepEqual(refusals, ['server_full', 'server_full']);
  for (const s of waiting) s.close(1000, 'bye');
  hub.close();
});

test('one project holds at most maxSocketsPerProject; the others still get in (4429)', async () => {
  const { hub, open, creds, refusals } = setup({ maxSockets: 4, maxSocketsPerProject: 2 });
  const mine = [open('p10', creds()), open('p10', creds()), open('p10', creds())];
  await until(() => mine.filter((s) => s.messages.length === 1).length === 2 && mine.some((s) => s.isClosed), 'two in, one refused');
  assert.deepEqual(mine.map((s) => s.closedWith?.code), [undefined, undefined, CLOSE.projectFull]);
  const other = [open('p11', creds()), open('p11', { 'service-client-id': 'root', 'service-client-secret': 'good' })];
  await until(() => other.every((s) => s.messages.length === 1), 'the other project in');
  // Server full now (4 of 4): 1013 at once, whatever the project.
  assert.equal(open('p12', creds()).closedWith?.code, CLOSE.tryAgainLater);
  assert.deepEqual(refusals, ['project_full', 'server_full']);
  hub.close();
});

test('the authenticating budget: a newcomer displaces the longest-waiting socket, never one being checked (4430)', async () => {
  const { hub, open, creds, refusals } = setup({ maxAuthenticating: 3 });
  const w = [open('p13'), open('p13'), open('p13')];
  const w4 = open('p13');
  assert.equal(w[0]!.closedWith?.code, CLOSE.authenticatingFull, 'the oldest waiting socket made room');
  assert.match(w[0]!.closedWith!.reason, /too many sockets are waiting for credentials/);
  const h = open('p13', creds()); // checking at once; displaces w[1]
  assert.equal(w[1]!.closedWith?.code, CLOSE.authenticatingFull);
  w[2]!.handlers!.message(JSON.stringify({ clientId: 'reader', clientSecret: 'good' })); // checking now
  const x = open('p13', creds()); // displaces w4, the only one still waiting
  assert.equal(w4.closedWith?.code, CLOSE.authenticatingFull);
  // Three checking, none waiting: the next one is refused, not any of them.
  const y = open('p13');
  assert.equal(y.closedWith?.code, CLOSE.authenticatingFull);
  assert.match(y.closedWith!.reason, /too many sockets are authenticating/);
  assert.equal(hub.stats().authenticating, 3);
  await until(() => [h, w[2]!, x].every((s) => s.messages.length === 1), 'the checked ones counted');
  assert.equal(hub.stats().authenticating, 0);
  assert.deepEqual(refusals, ['authenticating_displaced', 'authenticating_displaced', 'authenticating_displaced', 'authenticating_full']);
  hub.close();
});

test('one deadline from opening: 4408 without credentials, 4503 when their check does not end in time', async () => {
  const { hub, open, creds, refusals } = setup({ authTimeoutMs: 150 });
  const silent = open('p14');
  const hung = open('p14', creds('hang'));
  const late = open('p14');
  await sleep(100);
  late.handlers!.message(JSON.stringify({ clientId: 'hang', clientSecret: 'good' })); // sent in time, never checked
  await until(() => silent.isClosed && hung.isClosed && late.isClosed, 'all three closed', 2000);
  assert.deepEqual([silent, hung, late].map((s) => s.closedWith?.code), [CLOSE.authTimeout, CLOSE.unavailable, CLOSE.unavailable]);
  assert.match(hung.closedWith!.reason, /could not be checked within/);
  assert.deepEqual(refusals, ['auth_timeout', 'auth_timeout', 'auth_timeout']);
  assert.equal(hub.stats().authenticating, 0);
  hub.close();
});
