// /readyz tells the truth about the worker: a worker process whose batch cannot commit (here
// the events table held by another session, as a stalled PostgreSQL holds it) is unready and
// says why; beside the API role the process stays in rotation, degraded, since its 202s are
// durable without PostgreSQL. /healthz (liveness) stays 200 throughout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { get, post, startApp, TestEnv, track, waitFor } from './support/harness';

test('a worker whose batch cannot commit for 20 s is unready (/readyz 503, why in checks.worker), live, and ready again once it commits', { timeout: 120_000 }, async () => {
  const env = await new TestEnv('readyw').setup();
  let api: Awaited<ReturnType<typeof startApp>> | null = null;
  let worker: Awaited<ReturnType<typeof startApp>> | null = null;
  let both: Awaited<ReturnType<typeof startApp>> | null = null;
  const blocker = new pg.Client({ connectionString: env.databaseUrl });
  try {
    const projectId = await env.project();
    const writer = await env.client(projectId, 'write');
    api = await startApp(env, { api: true, worker: false });
    worker = await startApp(env, { api: false, worker: true });
    const workerUrl = `http://127.0.0.1:${worker.port}`;
    assert.equal((await post(`${api.url}/track`, track('first'), writer)).status, 202);
    await waitFor(async () => Number((await env.db.query(`SELECT count(*) AS n FROM events WHERE name = 'first'`)).rows[0].n) === 1, { what: 'first event stored' });
    await waitFor(async () => (await get(`${workerUrl}/readyz`, null)).status === 200, { what: 'worker ready' });

    await blocker.connect();
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
    assert.equal((await post(`${api.url}/track`, track('held'), writer)).status, 202, 'ingest does not wait for PostgreSQL');
    const unready = await waitFor(async () => {
      const r = await get(`${workerUrl}/readyz`, null);
      return r.status === 503 ? r : null;
    }, { timeoutMs: 45_000, intervalMs: 500, what: 'worker /readyz 503 while its batch cannot commit' });
    assert.match(unready!.body.checks.worker, /committing for \d+ s/);
    assert.equal((await get(`${workerUrl}/healthz`, null)).status, 200, 'liveness is not readiness');
    assert.equal((await get(`${api.url}/readyz`, null)).status, 200, 'the API process alone stays ready');

    await blocker.query('ROLLBACK');
    await waitFor(async () => Number((await env.db.query(`SELECT count(*) AS n FROM events WHERE name = 'held'`)).rows[0].n) === 1, { timeoutMs: 30_000, what: 'the held event stored' });
    await waitFor(async () => (await get(`${workerUrl}/readyz`, null)).status === 200, { timeoutMs: 10_000, what: 'worker ready again' });

    // Both roles in one process: the stall shows, degraded, and the process stays in rotation.
    await worker.drain();
    worker = null;
    await api.drain();
    api = null;
    both = await startApp(env, { api: true, worker: true });
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
    assert.equal((await post(`${both.url}/track`, track('held2'), writer)).status, 202);
    const degraded = await waitFor(async () => {
      const r = await get(`${both!.url}/readyz`, null);
      return r.body.checks?.worker && r.body.checks.worker !== 'ok' ? r : null;
    }, { timeoutMs: 45_000, intervalMs: 500, what: 'the stall reported beside the API' });
    assert.equal(degraded!.status, 200);
    assert.equal(degraded!.body.status, 'degraded');
    await blocker.query('ROLLBACK');
    await waitFor(async () => Number((await env.db.query(`SELECT count(*) AS n FROM events WHERE name = 'held2'`)).rows[0].n) === 1, { timeoutMs: 30_000, what: 'the second held event stored' });
  } finally {
    await blocker.end().catch(() => {});
    await both?.drain();
    await worker?.drain();
    await api?.drain();
    await env.teardown();
  }
});
