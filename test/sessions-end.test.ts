// Session end by the BullMQ sweeps: SESSION_TIMEOUT_MINUTES has no sub-minute setting, so
// the worker side (JobRunner, SessionEndScheduler, ShardManager/ShardRunner) is built here
// with a 1.5 s timeout, behind a real API (startApp with the api role only).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Queue } from 'bullmq';
import { SaltKeeper } from '../internal/ingest/identity';
import { JobRunner, sweepSlotMs } from '../internal/jobs/jobs';
import type { QueuedOp, QueuedTrack } from '../internal/model/event';
import { createLogger } from '../internal/obs/log';
import { redisKeys } from '../internal/redis/redis';
import type { SessionState } from '../internal/sessionize/session';
import { PartitionKeeper } from '../internal/store/partitions';
import { commitShardBatch, committedSeq } from '../internal/store/writes';
import { deviceKey, processOps } from '../internal/worker/processor';
import { TestEnv, closeWorker, post, sleep, startApp, startTestWorker, track, waitFor, type Credentials, type TestWorker } from './support/harness';

const TIMEOUT_MS = 1500;
const UA = 'Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0';

let env: TestEnv;
let api: Awaited<ReturnType<typeof startApp>>;
let writer: Credentials;
let worker: TestWorker;
let timescale = false;
/** Checks the sweeps published (JobRunner's onChecks, the tidemark_session_end_checks_total counter). */
let checksPublished = 0;
/** Session ids whose end-check scheduling is made to fail (a Redis blip, or a crash right after the commit). */
const failScheduleFor = new Set<string>();

before(async () => {
  env = await new TestEnv('send').setup();
  api = await startApp(env, { api: true, worker: false });
  const projectId = await env.project({ timezone: 'UTC' });
  writer = await env.client(projectId, 'write');

  const w = await startTestWorker(env, {
    tickMs: 500,
    jobs: async (c) => {
      const jobs = new JobRunner({
        redisUrl: env.config().REDIS_URL, namespace: env.namespace, bus: c.bus, db: c.db, salts: new SaltKeeper(c.redis, redisKeys(env.namespace)),
        log: createLogger('silent'), timeoutMs: TIMEOUT_MS, retentionDays: 0, onChecks: (n) => { checksPublished += n; },
      });
      await jobs.start();
      return jobs;
    },
    runner: ({ jobs }) => ({
      timeoutMs: TIMEOUT_MS, batchMax: 100,
      // One device per shard in memory (WORKER_SESSION_CACHE's floor): every other device's
      // session is loaded from PostgreSQL on its next event, and must continue all the same.
      cacheMax: 1,
      onOpened: async (sessions) => {
        if (sessions.some((s) => failScheduleFor.has(s.deviceId))) throw new Error('simulated: Redis unavailable');
        await jobs!.scheduler.schedule(sessions);
      },
    }),
  });
  timescale = w.timescale;
  worker = w;
});

after(async () => {
  await closeWorker(worker);
  await api?.drain();
  await env?.teardown();
});

async function send(ip: string, name: string, atMs: number, path = '/'): Promise<string> {
  const res = await post(`${api.url}/track`, track(name, { __timestamp: new Date(atMs).toISOString(), __path: `https://shop.example${path}` }), writer, { ip, userAgent: UA });
  assert.equal(res.status, 202);
  return res.body.deviceId;
}

const sessionsOf = async (deviceId: string) =>
  (await env.db.query('SELECT * FROM sessions WHERE device_id = $1 ORDER BY started_at', [deviceId])).rows;
const endsOf = async (sessionId: string) =>
  (await env.db.query("SELECT created_at FROM events WHERE session_id = $1 AND name = 'session_end'", [sessionId])).rows.map((r) => r.created_at.getTime());

test('an idle live session is ended by the BullMQ sweep: session_end row at its last event, ended = true', { timeout: 30_000 }, async () => {
  const t0 = Date.now() - 60_000;
  const dev = await send('81.2.69.160', 'screen_view', t0, '/a');
  await waitFor(async () => (await sessionsOf(dev)).length === 1, { what: 'session row' });
  // A second event while the first sweep is pending: that sweep finds it active and the chain
  // of sweeps comes back when it falls due.
  await sleep(700);
  await send('81.2.69.160', 'click', t0 + 700);
  const [s] = (await waitFor(async () => {
    const rows = await sessionsOf(dev);
    return rows[0]?.ended ? rows : null;
  }, { timeoutMs: 15_000, what: 'session ended by the check' }))!;
  assert.equal(s.event_count, 2, 'the event that came in meanwhile is in the session');
  assert.equal(s.last_event_at.getTime(), t0 + 700);
  assert.ok(Date.now() - s.updated_at.getTime() >= TIMEOUT_MS, 'ended only after the idle timeout of wall time');
  assert.deepEqual(await endsOf(s.id), [t0 + 700]);
});

test('sessions that fall due together share one delayed sweep, and every one of them ends', { timeout: 30_000 }, async () => {
  const u = new URL(env.config().REDIS_URL);
  const queue = new Queue('session-end', { connection: { host: u.hostname, port: Number(u.port || 6379) }, prefix: `${env.namespace}:bull` });
  try {
    const t0 = Date.now() - 60_000;
    const checksBefore = checksPublished;
    const devices: string[] = [];
    const ips = Array.from({ length: 24 }, (_, i) => `81.2.70.${10 + i}`);
    await Promise.all(ips.map(async (ip, i) => devices.push(await send(ip, 'screen_view', t0 + i, `/many/${i}`))));
    await waitFor(async () => {
      const r = await env.db.query('SELECT count(*)::int AS n FROM sessions WHERE device_id = ANY($1)', [devices]);
      return r.rows[0].n === devices.length;
    }, { what: 'the 24 sessions written' });
    // Written within a few batches: their due times fall in a slot or two, one job each (a
    // job per session before), whatever else the chain of sweeps has waiting.
    const jobs = (await queue.getJobs(['delayed', 'wait', 'active'])).filter((j) => j?.name === 'sweep');
    const slots = new Set(jobs.map((j) => j!.data.slot as number));
    assert.ok(jobs.length <= 4, `${jobs.length} sweep jobs waiting for 24 sessions`);
    assert.ok([...slots].every((s) => s % sweepSlotMs(TIMEOUT_MS) === 0), 'jobs are per slot');
    const ended = await waitFor(async () => {
      const r = await env.db.query('SELECT id, last_event_at FROM sessions WHERE device_id = ANY($1) AND ended', [devices]);
      return r.rows.length === devices.length ? r.rows : null;
    }, { timeoutMs: 15_000, what: 'all 24 sessions ended' });
    for (const s of ended!) assert.deepEqual(await endsOf(s.id), [s.last_event_at.getTime()], 'one session_end at its last event');
    assert.ok(checksPublished - checksBefore >= devices.length, `${checksPublished - checksBefore} checks counted for ${devices.length} ended sessions`);
  } finally {
    await queue.close();
  }
});

test(
  'a session reopened after its idle end is ended again by the next check',
  {
    timeout: 30_000,
  },
  async () => {
    const t0 = Date.now() - 60_000;
    const dev = await send('8.8.8.8', 'screen_view', t0, '/a');
    const [s] = (await waitFor(async () => {
      const rows = await sessionsOf(dev);
      return rows[0]?.ended ? rows : null;
    }, { timeoutMs: 15_000, what: 'first idle end' }))!;
    assert.deepEqual(await endsOf(s.id), [t0]);
    // Within the timeout of its last event (event time): the same session continues.
    await send('8.8.8.8', 'click', t0 + 1000);
    await waitFor(async () => (await sessionsOf(dev))[0]?.event_count === 2, { what: 'reopened' });
    const [again] = (await waitFor(async () => {
      const rows = await sessionsOf(dev);
      return rows.length === 1 && rows[0].ended ? rows : null;
    }, { timeoutMs: 4 * TIMEOUT_MS + 1000, what: 'second idle end' }))!;
    assert.deepEqual(await endsOf(again.id), [t0 + 1000]);
  },
);

test(
  'a session whose end check could not be scheduled still ends',
  {
    timeout: 30_000,
  },
  async () => {
    const t0 = Date.now() - 60_000;
    failScheduleFor.add('f'.repeat(32));
    const res = await post(`${api.url}/track`, track('screen_view', { __timestamp: new Date(t0).toISOString(), __path: 'https://shop.example/x', __deviceId: 'f'.repeat(32) }), writer);
    assert.equal(res.status, 202);
    const dev = res.body.deviceId as string;
    await waitFor(async () => (await sessionsOf(dev)).length === 1, { what: 'session row' });
    await waitFor(async () => (await sessionsOf(dev))[0]?.ended === true, { timeoutMs: 4 * TIMEOUT_MS + 1000, what: 'session ended' });
  },
);

// Store level: the batch that reopens an idle-ended session S and then (30+ min later in
// event time) closes it again writes S's new session_end row, then deletes "the session_end
// rows of reopened sessions" in the same transaction.
test(
  'reopen then re-end in one batch keeps exactly one session_end row',
  {},
  async () => {
    const stream = `unit-${env.namespace}`;
    const T0 = Date.parse('2024-05-01T10:00:00Z');
    const MIN = 60_000;
    const timeoutMs = 30 * MIN;
    const dev = 'e'.repeat(32);
    const cache = new Map<string, SessionState>();
    let now = Date.parse('2024-05-02T12:00:00Z');
    const partitions = new PartitionKeeper(env.db, timescale);
    let seq = await committedSeq(env.db, stream, 0);
    const run = async (ops: QueuedOp[]) => {
      const out = await processOps(ops, {
        enricher: worker.enricher, cache, loadSessions: async () => [], timeoutMs, nowMs: () => now,
      });
      await partitions.ensureFor(out.events);
      await commitShardBatch(env.db, {
        stream, shard: 0, fromSeq: seq, toSeq: seq + 1, events: out.events, viewDurations: out.viewDurations,
        sessions: out.sessions, reopenedSessionIds: out.reopenedSessionIds, profileOps: out.profileOps,
      });
      seq++;
      for (const [k, s] of out.states) cache.set(k, s);
      return out;
    };
    let n = 0;
    const op = (at: number, name: string): QueuedTrack => ({
      kind: 'track', id: `0190c0de-0000-7000-8000-${String(++n).padStart(12, '0')}`, projectId: 'p-unit', deviceId: dev,
      receivedAt: new Date(now).toISOString(), name, profileId: dev, createdAt: new Date(at).toISOString(), properties: {},
      groups: [], url: 'https://shop.example/p', title: null, referrer: null, ip: null, userAgent: UA,
    });
    const first = await run([op(T0, 'screen_view')]);
    const sid = first.sessions[0]!.id;
    now += timeoutMs;
    await run([{ kind: 'session_check', id: 'c1', projectId: 'p-unit', deviceId: dev, receivedAt: '', sessionId: sid }]);
    assert.deepEqual(await endsOf(sid), [T0]);
    assert.equal(cache.get(deviceKey('p-unit', dev))!.ended, true);
    now += 1000;
    await run([op(T0 + 10 * MIN, 'click'), op(T0 + 50 * MIN, 'screen_view')]);
    const row = (await env.db.query('SELECT ended, last_event_at FROM sessions WHERE id = $1', [sid])).rows[0];
    assert.equal(row.ended, true);
    assert.equal(row.last_event_at.getTime(), T0 + 10 * MIN);
    assert.deepEqual(await endsOf(sid), [T0 + 10 * MIN], 'S ended by the following session has its session_end row');
  },
);
