// Revoked clients are refused at once, in every process: two API processes on one
// environment both serve a write and a read client (so both have them cached and verified),
// the CLI revokes them, and the very next request to EACH process is a 401, for ingest and
// for reads, under both header spellings. Other clients keep working.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { ROOT, TestEnv, spawnApp, sleep, type Credentials } from './support/harness';
import { CaseCounter, credHeaders, request } from './support/fuzz-kit';
import { Redis } from 'ioredis';
import { runCli } from '../internal/cli/cli';
import { redisKeys } from '../internal/redis/redis';
import { acksOf } from '../internal/redis/announce';

const run = promisify(execFile);
const cases = new CaseCounter();
const started = Date.now();

let env: TestEnv;
let apis: { child: ChildProcess; url: string }[] = [];
let projectId: string;
let writer: Credentials;
let reader: Credentials;
let otherWriter: Credentials;
let otherReader: Credentials;

before(async () => {
  env = await new TestEnv('secrevoke').setup();
  projectId = await env.project({ name: 'Revocation' });
  [writer, reader, otherWriter, otherReader] = await Promise.all([
    env.client(projectId, 'write', 0), env.client(projectId, 'read', 0), env.client(projectId, 'write', 0), env.client(projectId, 'read', 0),
  ]);
  apis = await Promise.all([spawnApp(env, 'api'), spawnApp(env, 'api')]);
});

after(async (t) => {
  (t as unknown as { diagnostic(m: string): void }).diagnostic(`security-revocation: ${cases.total} cases (${cases.summary()}); ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await Promise.all(apis.map(async ({ child }) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(5_000)]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }));
  await env?.teardown();
});

const body = JSON.stringify({ type: 'track', payload: { name: 'revocation_probe', properties: {} } });
const ingest = (url: string, c: Credentials, alias = false) =>
  request(`${url}/track`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(alias ? { 'openpanel-client-id': c.clientId, 'openpanel-client-secret': c.clientSecret } : credHeaders(c)) },
    body,
  }).then((a) => (cases.add('ingest'), a));
const read = (url: string, c: Credentials, p = `/insights/${projectId}/metrics`) => request(`${url}${p}`, { headers: credHeaders(c) }).then((a) => (cases.add('read'), a));

async function cli(...args: string[]): Promise<unknown> {
  const { stdout } = await run('npm', ['run', '--silent', 'cli', '--', ...args], { cwd: ROOT, env: { ...process.env, ...env.env() } });
  cases.add('cli');
  return JSON.parse(stdout.trim());
}

test('a client revoked with the CLI gets 401 on the very next request to each API process', async () => {
  // Warm both processes: the clients are cached and their secrets verified in each.
  for (const { url } of apis) {
    for (let i = 0; i < 3; i++) {
      assert.equal((await ingest(url, writer)).status, 202);
      assert.equal((await ingest(url, writer, true)).status, 202);
      assert.equal((await read(url, reader)).status, 200);
      assert.equal((await read(url, reader, '/export/events')).status, 200);
    }
  }
  assert.deepEqual(await cli('client', 'revoke', '--id', writer.clientId), { clientId: writer.clientId, revoked: true });
  assert.deepEqual(await cli('client', 'revoke', '--id', reader.clientId), { clientId: reader.clientId, revoked: true });

  for (const { url } of apis) {
    const [i, ia, r, e] = await Promise.all([ingest(url, writer), ingest(url, writer, true), read(url, reader), read(url, reader, '/export/events')]);
    assert.equal(i.status, 401, `ingest on ${url}: ${i.text}`);
    assert.equal(ia.status, 401, `ingest (openpanel headers) on ${url}: ${ia.text}`);
    assert.equal(r.status, 401, `insights on ${url}: ${r.text}`);
    assert.equal(e.status, 401, `export on ${url}: ${e.text}`);
    assert.deepEqual(Object.keys(i.json as object).sort(), ['error', 'status']);
    assert.deepEqual(Object.keys(r.json as object).sort(), ['error', 'message']);
  }
  // And it stays so, past the 5 s client cache, on every path.
  await sleep(5_500);
  for (const { url } of apis) {
    assert.equal((await ingest(url, writer)).status, 401);
    assert.equal((await read(url, reader, `/insights/${projectId}/pages`)).status, 401);
    assert.equal((await read(url, reader, `/export/charts?series=${encodeURIComponent('[{"name":"*"}]')}`)).status, 401);
  }
  // Other clients of the project are untouched.
  for (const { url } of apis) {
    assert.equal((await ingest(url, otherWriter)).status, 202);
    assert.equal((await read(url, otherReader)).status, 200);
  }
  const listed = (await cli('client', 'list', '--project', projectId)) as { clientId: string; revoked: boolean }[];
  assert.deepEqual(listed.filter((c) => c.revoked).map((c) => c.clientId).sort(), [writer.clientId, reader.clientId].sort());
});

test('client revoke returns once every subscribed API thread has the revocation in its mirror, and at most ~2 s after one that never answers', async () => {
  const cfg = env.config();
  const keys = redisKeys(cfg.TIDEMARK_NAMESPACE);
  // A slow thread: it hears the announcement and answers 400 ms later; a dead one never answers.
  const slow = new Redis(cfg.REDIS_URL);
  const dead = new Redis(cfg.REDIS_URL);
  const heard: string[] = [];
  try {
    slow.on('message', (_ch: string, id: string) => {
      heard.push(id);
      setTimeout(() => {
        const p = new Redis(cfg.REDIS_URL);
        void p.publish(acksOf(keys.revocations), id).finally(() => p.disconnect());
      }, 400);
    });
    await slow.subscribe(keys.revocations);
    const slowOne = await env.client(projectId, 'write', 0);
    let t0 = performance.now();
    assert.deepEqual(await runCli(['client', 'revoke', '--id', slowOne.clientId], cfg), { clientId: slowOne.clientId, revoked: true });
    let ms = performance.now() - t0;
    assert.deepEqual(heard, [slowOne.clientId]);
    assert.ok(ms >= 400 && ms < 1_900, `revoke returned after ${ms.toFixed(0)} ms: it waits for the slow thread's answer, not for the timeout`);
    // Both API processes answered too: each refuses at once.
    for (const { url } of apis) assert.equal((await ingest(url, slowOne)).status, 401);

    await dead.subscribe(keys.revocations);
    const deadOne = await env.client(projectId, 'write', 0);
    t0 = performance.now();
    await runCli(['client', 'revoke', '--id', deadOne.clientId], cfg);
    ms = performance.now() - t0;
    assert.ok(ms >= 1_900 && ms < 5_000, `revoke returned after ${ms.toFixed(0)} ms: bounded wait for a thread that never answers`);
  } finally {
    slow.disconnect();
    dead.disconnect();
  }
});
