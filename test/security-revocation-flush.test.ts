// Revocation survives Redis losing its data (a private, non-persistent Redis, so FLUSHALL and
// restarts touch nothing else): PostgreSQL holds the revoked state, every API thread keeps the
// revocations it has learnt, and Redis' revoked set is seeded again from PostgreSQL. After
// `client revoke` and then FLUSHALL, the very first request of the revoked clients to each API
// process is refused: ingest 401, insights and export 401, a live socket 4401; an open live
// socket of a revoked client is closed. The same after Redis restarts empty, and in an API
// process started after the flush. Other clients keep working.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { sleep, waitFor, type Credentials } from './support/harness';
import { CaseCounter, credHeaders, request } from './support/fuzz-kit';
import { PrivateEnv, PrivateRedis, stopAllPrivate, stopChild, spawnAppRetry } from './support/private-services';
import { runCli } from '../internal/cli/cli';
import { redisKeys } from '../internal/redis/redis';

type Child = Awaited<ReturnType<typeof spawnAppRetry>>;

const cases = new CaseCounter();
const started = Date.now();

let redisServer: PrivateRedis;
let env: PrivateEnv;
let redis: Redis;
let apis: Child[] = [];
let projectId: string;

before(async () => {
  redisServer = await PrivateRedis.start();
  env = await new PrivateEnv('secrevflush', { redisUrl: redisServer.url }).setup();
  redis = new Redis(redisServer.url, { maxRetriesPerRequest: 1, retryStrategy: () => 200 });
  redis.on('error', () => {});
  projectId = await env.project({ name: 'Revocation after a flush' });
  // Two API processes, one of them with two API threads (each thread holds its own mirror).
  apis = await Promise.all([spawnAppRetry(env, 'api'), spawnAppRetry(env, 'api', { API_THREADS: '2' })]);
});

after(async (t) => {
  (t as unknown as { diagnostic(m: string): void }).diagnostic(`security-revocation-flush: ${cases.total} cases (${cases.summary()}); ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await Promise.all(apis.map(({ child }) => stopChild(child, 'SIGTERM', 5_000)));
  redis?.disconnect();
  await env?.teardown();
  await stopAllPrivate();
});

const body = JSON.stringify({ type: 'track', payload: { name: 'revocation_probe', properties: {} } });
const ingest = (url: string, c: Credentials) =>
  request(`${url}/track`, { method: 'POST', headers: { 'content-type': 'application/json', ...credHeaders(c) }, body }).then((a) => (cases.add('ingest'), a));
const read = (url: string, c: Credentials, p = `/insights/${projectId}/metrics`) =>
  request(`${url}${p}`, { headers: credHeaders(c) }).then((a) => (cases.add('read'), a));

/** A live socket with credentials in headers: resolves with the first message or the close. */
class Live {
  readonly ws: WebSocket;
  readonly first: Promise<{ visitors?: number; close?: number }>;
  readonly closed: Promise<number>;
  constructor(url: string, c: Credentials) {
    this.ws = new WebSocket(`${url.replace(/^http/, 'ws')}/insights/${encodeURIComponent(projectId)}/live`, { headers: credHeaders(c) });
    this.ws.on('error', () => {});
    this.closed = new Promise((resolve) => this.ws.once('close', (code) => resolve(code)));
    this.first = Promise.race([
      new Promise<{ visitors: number }>((resolve) => this.ws.once('message', (d) => resolve(JSON.parse(String(d)) as { visitors: number }))),
      this.closed.then((close) => ({ close })),
    ]);
    cases.add('live');
  }
}
const liveFirst = async (url: string, c: Credentials) => {
  const l = new Live(url, c);
  const first = await l.first;
  l.ws.close();
  return first;
};

async function clients() {
  const [writer, reader, liveReader, openReader] = await Promise.all([
    env.client(projectId, 'write', 0), env.client(projectId, 'read', 0), env.client(projectId, 'read', 0), env.client(projectId, 'read', 0),
  ]);
  return { writer, reader, liveReader, openReader };
}

/** Warms every API process (and both threads of the second): clients cached and verified. */
async function warm(c: Awaited<ReturnType<typeof clients>>): Promise<void> {
  for (const { url } of apis) {
    for (let i = 0; i < 4; i++) {
      assert.equal((await ingest(url, c.writer)).status, 202);
      assert.equal((await read(url, c.reader)).status, 200);
      assert.equal((await read(url, c.reader, '/export/events')).status, 200);
      assert.equal(typeof (await liveFirst(url, c.liveReader)).visitors, 'number');
    }
  }
}

async function revoke(...ids: string[]): Promise<void> {
  for (const id of ids) assert.deepEqual(await runCli(['client', 'revoke', '--id', id], env.config()), { clientId: id, revoked: true });
  cases.add('cli');
}

/** The first requests of the revoked clients to each API process, and a few more: all refused. */
async function assertRefused(c: Awaited<ReturnType<typeof clients>>, urls: string[], what: string): Promise<void> {
  for (const url of urls) {
    for (let i = 0; i < 4; i++) {
      const [ig, r, e, l] = await Promise.all([ingest(url, c.writer), read(url, c.reader), read(url, c.reader, '/export/events'), liveFirst(url, c.liveReader)]);
      assert.equal(ig.status, 401, `${what}: ingest #${i + 1} on ${url}: ${ig.text}`);
      assert.equal(r.status, 401, `${what}: insights #${i + 1} on ${url}: ${r.text}`);
      assert.equal(e.status, 401, `${what}: export #${i + 1} on ${url}: ${e.text}`);
      assert.deepEqual(l, { close: 4401 }, `${what}: live socket #${i + 1} on ${url}`);
    }
  }
}

test('revoke, FLUSHALL: the very first request of a revoked client to each API process is refused (ingest, insights, export, live)', async () => {
  const c = await clients();
  const other = await clients();
  await warm(c);
  await warm(other);
  // A socket opened before the revocation: closed with 4401 although Redis forgot the revocation.
  const open = apis.map(({ url }) => new Live(url, c.openReader));
  for (const l of open) assert.equal(typeof (await l.first).visitors, 'number');

  await revoke(c.writer.clientId, c.reader.clientId, c.liveReader.clientId, c.openReader.clientId);
  assert.equal(await redis.flushall(), 'OK');
  await assertRefused(c, apis.map((a) => a.url), 'after FLUSHALL');
  for (const l of open) assert.equal(await Promise.race([l.closed, sleep(6_000).then(() => 'still open')]), 4401, 'an open socket of a revoked client');

  // Redis' set is seeded again from PostgreSQL (so every reader of it agrees again).
  const keys = redisKeys(env.namespace);
  await waitFor(async () => (await redis.smismember(keys.revoked, c.writer.clientId, c.reader.clientId)).every((f) => f === 1), {
    timeoutMs: 10_000, what: 'the revoked set seeded again from PostgreSQL',
  });
  // Past the 5 s client cache, still refused; the other clients work throughout.
  await sleep(5_500);
  await assertRefused(c, apis.map((a) => a.url), 'after FLUSHALL and the client cache TTL');
  for (const { url } of apis) {
    assert.equal((await ingest(url, other.writer)).status, 202);
    assert.equal((await read(url, other.reader)).status, 200);
    assert.equal(typeof (await liveFirst(url, other.liveReader)).visitors, 'number');
  }
});

test('revoke, Redis restarted empty: the first request after it is back is refused; an API process started after a flush refuses too', { timeout: 120_000 }, async () => {
  const c = await clients();
  const other = await clients();
  await warm(c);
  await warm(other);
  await revoke(c.writer.clientId, c.reader.clientId, c.liveReader.clientId);
  await redisServer.restart(); // non-persistent: it comes back empty
  await assertRefused(c, apis.map((a) => a.url), 'after a Redis restart');

  // FLUSHALL, then a new API process: it learns the revocations from PostgreSQL.
  assert.equal(await redis.flushall(), 'OK');
  const late = await spawnAppRetry(env, 'api');
  apis.push(late);
  await assertRefused(c, [late.url], 'new API process after FLUSHALL');
  assert.equal((await ingest(late.url, other.writer)).status, 202);
  assert.equal((await read(late.url, other.reader)).status, 200);
});
