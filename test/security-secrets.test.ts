// Client secrets: compared in constant time (crypto.timingSafeEqual, checked at unit level;
// timing only as a loose sanity check), never logged (a child process at LOG_LEVEL=debug is
// fed good and bad credentials, its whole output is searched), never stored in clear, and
// never returned after creation (CLI list, every API answer).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { execFile, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { fingerprint, generateSecret, hashSecret, sameFingerprint, verifySecret } from '../internal/auth/secrets';
import { ROOT, TestEnv, spawnApp, sleep, waitFor, type Credentials } from './support/harness';
import { CaseCounter, credHeaders, request } from './support/fuzz-kit';

const run = promisify(execFile);
const cases = new CaseCounter();
const started = Date.now();

after((t) => {
  (t as unknown as { diagnostic(m: string): void }).diagnostic(`security-secrets: ${cases.total} cases (${cases.summary()}); ${((Date.now() - started) / 1000).toFixed(1)} s`);
});

describe('constant-time comparison (internal/auth/secrets.ts)', () => {
  test('verifySecret and sameFingerprint compare with crypto.timingSafeEqual', async () => {
    const source = await readFile(path.join(ROOT, 'internal/auth/secrets.ts'), 'utf8');
    assert.match(source, /import\s*\{[^}]*\btimingSafeEqual\b[^}]*\}\s*from\s*'node:crypto'/);
    // No ordinary comparison of secrets, hashes or buffers.
    assert.doesNotMatch(source, /(actual|expected|secret|hash|a|b)\s*===?\s*(actual|expected|secret|hash|stored|b)\b(?!\.length)/);
    assert.doesNotMatch(source, /\.equals\(|Buffer\.compare|localeCompare/);

    // And at run time: a spy on the builtin (ESM named imports follow syncBuiltinESMExports).
    const original = crypto.timingSafeEqual;
    let calls = 0;
    crypto.timingSafeEqual = ((a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => {
      calls++;
      return original(a, b);
    }) as typeof crypto.timingSafeEqual;
    syncBuiltinESMExports();
    try {
      const secret = generateSecret();
      const stored = await hashSecret(secret);
      assert.equal(await verifySecret(secret, stored), true);
      assert.equal(calls, 1, 'verifySecret used timingSafeEqual');
      // The last character changed to another one (a secret may end in 'x').
      assert.equal(await verifySecret(`${secret.slice(0, -1)}${secret.endsWith('x') ? 'y' : 'x'}`, stored), false);
      assert.equal(calls, 2, 'also for a wrong secret of the same length');
      assert.equal(await verifySecret('short', stored), false);
      assert.equal(calls, 3, 'also for a wrong secret of another length (the scrypt output has a fixed length)');
      assert.equal(sameFingerprint(fingerprint(secret), fingerprint(`${secret}x`)), false);
      assert.equal(calls, 4, 'the cached-secret check uses it too');
      assert.equal(fingerprint('a').length, fingerprint('a'.repeat(10_000)).length, 'fingerprints have one length: no length short-cut leaks');
      cases.add('unit', 5);
    } finally {
      crypto.timingSafeEqual = original;
      syncBuiltinESMExports();
    }
  });

  test('a wrong secret of the right length and one of another length take similar time (loose sanity check)', async () => {
    const secret = generateSecret();
    const stored = await hashSecret(secret);
    const sameLength = `${secret.slice(0, -4)}${secret.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const same: number[] = [];
    const other: number[] = [];
    for (let i = 0; i < 8; i++) {
      for (const [guess, into] of [[sameLength, same], ['x', other]] as const) {
        const t0 = performance.now();
        assert.equal(await verifySecret(guess, stored), false);
        into.push(performance.now() - t0);
      }
    }
    cases.add('timing', 16);
    const ratio = median(same) / median(other);
    // scrypt dominates and is independent of the guess; only a gross difference would matter.
    assert.ok(ratio > 0.33 && ratio < 3, `median ${median(same).toFixed(1)} ms vs ${median(other).toFixed(1)} ms`);
  });
});

describe('secrets never leak (a child process at LOG_LEVEL=debug)', () => {
  let env: TestEnv;
  let app: { child: ChildProcess; url: string; logs: () => string } | undefined;
  let projectId: string;
  const creds: Record<string, Credentials> = {};
  const wrongSecrets = [`sec_WRONG${crypto.randomBytes(12).toString('base64url')}`, `sec_${crypto.randomBytes(24).toString('base64url')}`];

  before(async () => {
    env = await new TestEnv('secsecret').setup();
    projectId = await env.project({ name: 'Secrets', origins: ['https://shop.example'] });
    creds.write = await env.client(projectId, 'write', 0);
    creds.read = await env.client(projectId, 'read', 0);
    creds.root = await env.client(projectId, 'root', 0);
    app = await spawnApp(env, 'all', { LOG_LEVEL: 'debug' });
  });

  after(async () => {
    if (app && app.child.exitCode === null) {
      const exited = new Promise((r) => app!.child.once('exit', r));
      app.child.kill('SIGTERM');
      await Promise.race([exited, sleep(5_000)]);
      if (app.child.exitCode === null && app.child.signalCode === null) app.child.kill('SIGKILL');
    }
    await env?.teardown();
  });

  const allSecrets = () => [...Object.values(creds).map((c) => c.clientSecret), ...wrongSecrets];

  test('good and bad credentials on every kind of route: no secret in the output, none in any answer', async () => {
    const url = app!.url;
    const w = creds.write!;
    const r = creds.read!;
    const answers: { what: string; text: string; headers: string }[] = [];
    const call = async (what: string, p: string, o: { method?: string; headers?: Record<string, string>; body?: string } = {}) => {
      const a = await request(`${url}${p}`, o);
      cases.add('leak-probe');
      answers.push({ what, text: a.text, headers: JSON.stringify([...a.headers]) });
      return a;
    };
    const body = JSON.stringify({ type: 'track', payload: { name: 'secret_probe', properties: {} } });
    const json = { 'content-type': 'application/json' };
    assert.equal((await call('ingest good', '/track', { method: 'POST', headers: { ...json, ...credHeaders(w) }, body })).status, 202);
    assert.equal((await call('ingest openpanel', '/event', { method: 'POST', headers: { ...json, 'openpanel-client-id': w.clientId, 'openpanel-client-secret': w.clientSecret }, body: '{"name":"x"}' })).status, 202);
    for (const bad of wrongSecrets) {
      assert.equal((await call('ingest wrong', '/track', { method: 'POST', headers: { ...json, 'service-client-id': w.clientId, 'service-client-secret': bad }, body })).status, 401);
      assert.equal((await call('read wrong', `/insights/${projectId}/metrics`, { headers: { 'service-client-id': r.clientId, 'service-client-secret': bad } })).status, 401);
      assert.equal((await call('openpanel wrong', '/track', { method: 'POST', headers: { ...json, 'openpanel-client-id': w.clientId, 'openpanel-client-secret': bad }, body })).status, 401);
    }
    // A secret paired with another client's id, a secret sent as the id, a read secret on ingest.
    assert.equal((await call('swapped', '/track', { method: 'POST', headers: { ...json, 'service-client-id': r.clientId, 'service-client-secret': w.clientSecret }, body })).status, 401);
    assert.equal((await call('secret as id', '/track', { method: 'POST', headers: { ...json, 'service-client-id': w.clientSecret, 'service-client-secret': w.clientSecret }, body })).status, 401);
    assert.equal((await call('read on ingest', '/track', { method: 'POST', headers: { ...json, ...credHeaders(r) }, body })).status, 403);
    assert.equal((await call('bad body', '/track', { method: 'POST', headers: { ...json, ...credHeaders(w) }, body: '{"type":' })).status, 400);
    assert.equal((await call('413', '/track', { method: 'POST', headers: { ...json, ...credHeaders(w) }, body: 'x'.repeat(1024 * 1024 + 10) })).status, 413);
    // Read paths, including error answers (404, 400, and a 500 that is logged with its error).
    for (const p of [`/insights/${projectId}/metrics`, `/insights/${projectId}/live`, `/insights/${projectId}/pages`, `/insights/${projectId}/country`, '/export/events?includes=profile,meta,properties,geo,device,referrer', `/export/charts?series=${encodeURIComponent('[{"name":"*"}]')}`, `/insights/${projectId}/nope`, `/insights/${projectId}/metrics?range=nope`]) {
      await call(`read ${p}`, p, { headers: credHeaders(r) });
      await call(`write on read ${p}`, p, { headers: credHeaders(w) });
    }
    await call('root 500', '/insights/%00/metrics', { headers: credHeaders(creds.root!) });
    await call('root export', `/export/events?projectId=${projectId}&includes=profile,meta,properties`, { headers: credHeaders(creds.root!) });
    for (const p of ['/healthz', '/readyz', '/metrics', '/openapi.json', '/dashboard']) await call(p, p, { headers: credHeaders(creds.root!) });
    // Let the worker log whatever it logs about these events.
    await waitFor(async () => Number((await env.db.query("SELECT count(*) AS n FROM events WHERE name = 'secret_probe'")).rows[0].n) >= 1, { what: 'probe stored' });
    await sleep(500);

    const logs = app!.logs();
    assert.ok(logs.split('\n').filter((l) => l.includes('"msg":"request"')).length >= 20, 'debug request logging is on (the search is not vacuous)');
    for (const s of allSecrets()) {
      assert.ok(!logs.includes(s), `a secret appears in the logs: …${logs.slice(Math.max(0, logs.indexOf(s) - 200), logs.indexOf(s) + 50)}`);
      for (const a of answers) assert.ok(!a.text.includes(s) && !a.headers.includes(s), `${a.what} returned a secret`);
    }
    // The stored hash is not returned either.
    const hashes = (await env.db.query('SELECT secret_hash FROM clients')).rows.map((x) => x.secret_hash as string);
    for (const h of hashes) {
      const salt = h.split('$')[4]!;
      for (const a of answers) assert.ok(!a.text.includes(salt), `${a.what} returned a secret hash`);
      assert.ok(!logs.includes(salt), 'a secret hash appears in the logs');
    }
  });

  test('the database keeps only salted scrypt hashes; `client list` shows no secret or hash', async () => {
    const { rows } = await env.db.query('SELECT * FROM clients');
    const dump = JSON.stringify(rows);
    for (const s of allSecrets()) assert.ok(!dump.includes(s), 'a secret is stored in clear');
    for (const row of rows) assert.match(row.secret_hash, /^scrypt\$16384\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    const { stdout } = await run('npm', ['run', '--silent', 'cli', '--', 'client', 'list', '--project', projectId], { cwd: ROOT, env: { ...process.env, ...env.env() } });
    cases.add('cli');
    const listed = JSON.parse(stdout.trim()) as Record<string, unknown>[];
    assert.equal(listed.length, 3);
    for (const c of listed) {
      assert.deepEqual(Object.keys(c).sort(), ['clientId', 'ingestRate', 'mode', 'projectId', 'revoked']);
    }
    for (const s of allSecrets()) assert.ok(!stdout.includes(s));
    assert.ok(!stdout.includes('scrypt$'));
  });
});
