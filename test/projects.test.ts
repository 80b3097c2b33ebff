// GET /projects (docs/api.md "Projects"): what the dashboard's sign-in and project picker read.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { TestEnv, get, startApp } from './support/harness';
import type { Running } from '../internal/app/runtime';

let env: TestEnv;
let app: Running & { url: string };

before(async () => {
  env = await new TestEnv('projects').setup();
  app = await startApp(env, { api: true, worker: false });
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

test('a read client sees its own project, a root client every project; write clients and strangers are refused', async () => {
  const a = await env.project({ name: 'Shop', timezone: 'Europe/Berlin' });
  const b = await env.project({ name: 'Blog', timezone: 'America/New_York' });
  const [readA, rootB, writeA] = await Promise.all([env.client(a, 'read'), env.client(b, 'root'), env.client(a, 'write')]);
  const own = await get(`${app.url}/projects`, readA);
  assert.equal(own.status, 200);
  assert.deepEqual(own.body, [{ id: a, name: 'Shop', timezone: 'Europe/Berlin' }]);
  assert.ok(own.headers.get('x-ratelimit-limit'), 'rate limited like every read');
  const all = await get(`${app.url}/projects`, rootB);
  assert.deepEqual(all.body, [{ id: a, name: 'Shop', timezone: 'Europe/Berlin' }, { id: b, name: 'Blog', timezone: 'America/New_York' }]);
  assert.equal((await get(`${app.url}/projects`, writeA)).status, 403);
  const anonymous = await get(`${app.url}/projects`, null);
  assert.equal(anonymous.status, 401);
  assert.deepEqual(Object.keys(anonymous.body).sort(), ['error', 'message']);
});
