// The worker's write path alone (docs/operating.md, "Writes"): S shards commit batches of
// B screen views from D devices through processOps + commitShardBatch, concurrently, into a
// scratch database, for a fixed number of events. Reports events/s and the CPU time the
// PostgreSQL backends of this run spent per event (from /proc/<backend pid>/stat, so other
// users of the same server do not count), and this process's own CPU per event (the worker's side:
// enrich, sessionize, build and send the writes). A diagnostic: capacity is judged by bench/e2e.ts.
//
//   npx tsx bench/write-path.ts [--shards 16] [--batch 34] [--devices 512] [--events 20000]
//                               [--concurrency N]  (at most N commits in flight; default shards)
//                               [--events-only]    (write the events alone: no session rows, no view durations)
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { createEnricher } from '../internal/enrich';
import type { QueuedTrack } from '../internal/model/event';
import type { SessionState } from '../internal/sessionize/session';
import { PartitionKeeper } from '../internal/store/partitions';
import { commitShardBatch, committedSeq, loadLatestSessions } from '../internal/store/writes';
import { processOps } from '../internal/worker/processor';
import { Semaphore } from '../internal/worker/semaphore';
import { TestEnv } from '../test/support/harness';

const { values } = parseArgs({
  options: {
    shards: { type: 'string', default: '16' },
    batch: { type: 'string', default: '34' },
    devices: { type: 'string', default: '512' },
    events: { type: 'string', default: '20000' },
    concurrency: { type: 'string' },
    'events-only': { type: 'boolean', default: false },
  },
});
const SHARDS = Number(values.shards);
const BATCH = Number(values.batch);
const DEVICES = Number(values.devices);
const EVENTS = Number(values.events);
const CONCURRENCY = Number(values.concurrency ?? SHARDS);
const EVENTS_ONLY = values['events-only'] === true;

const UAS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1',
];

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

const env = await new TestEnv('wpath').setup();
try {
  const projectId = await env.project();
  const enricher = await createEnricher();
  const timescale = (await env.db.query<{ ts: boolean }>('SELECT tm_timescale() AS ts')).rows[0]!.ts;
  const partitions = new PartitionKeeper(env.db, timescale);
  const { createPool } = await import('../internal/store/db');
  const pool = createPool(env.databaseUrl, CONCURRENCY);
  // Open every connection first, to know the backends whose CPU this run spends.
  const clients = await Promise.all(Array.from({ length: CONCURRENCY }, () => pool.connect()));
  const pids = await Promise.all(clients.map(async (c) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid));
  for (const c of clients) c.release();
  const stream = `bench-${env.namespace}`;
  const gate = new Semaphore(CONCURRENCY);
  const start = Date.now() - EVENTS * 10;
  let made = 0;
  const opFor = (shard: number, i: number): QueuedTrack => {
    const device = (i * SHARDS + shard) % DEVICES;
    const deviceId = device.toString(16).padStart(32, '0');
    const at = new Date(start + made++ * 10).toISOString();
    return {
      kind: 'track', id: crypto.randomUUID(), projectId, deviceId, receivedAt: at, name: 'screen_view', profileId: deviceId,
      createdAt: at, properties: { plan: 'pro', step: i % 7 }, groups: [],
      url: `https://shop.example/p/${i % 40}?utm_source=news&utm_medium=email`, title: `Page ${i % 40}`,
      referrer: 'https://www.google.com/', ip: `203.0.113.${device % 250}`, userAgent: UAS[device % UAS.length]!,
    };
  };
  const perShard = Math.ceil(EVENTS / SHARDS);
  const cpu0 = pids.map(cpuSeconds);
  const own0 = process.cpuUsage();
  const t0 = performance.now();
  let stored = 0;
  await Promise.all(Array.from({ length: SHARDS }, async (_, shard) => {
    const cache = new Map<string, SessionState>();
    let seq = await committedSeq(env.db, stream, shard);
    for (let i = 0; i < perShard; i += BATCH) {
      const ops = Array.from({ length: Math.min(BATCH, perShard - i) }, (_, j) => opFor(shard, i + j));
      const out = await processOps(ops, { enricher, cache, loadSessions: (k) => loadLatestSessions(pool, k), timeoutMs: 30 * 60_000, nowMs: Date.now });
      await partitions.ensureFor(out.events);
      await gate.run(() => commitShardBatch(pool, {
        stream, shard, fromSeq: seq, toSeq: seq + 1, events: out.events, viewDurations: EVENTS_ONLY ? [] : out.viewDurations,
        sessions: EVENTS_ONLY ? [] : out.sessions, reopenedSessionIds: out.reopenedSessionIds, profileOps: out.profileOps,
      }));
      seq++;
      stored += ops.length;
      for (const [k, s] of out.states) cache.set(k, s);
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  const pgCpu = pids.map(cpuSeconds).reduce((a, b, i) => a + b - cpu0[i]!, 0);
  const own = process.cpuUsage(own0);
  const rows = (await env.db.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE name = $1', ['screen_view'])).rows[0]!.n;
  console.log(JSON.stringify({
    shards: SHARDS, batch: BATCH, eventsOnly: EVENTS_ONLY, concurrency: CONCURRENCY, devices: DEVICES, events: stored, stored: rows,
    eventsPerSecond: Math.round(stored / seconds), pgCpuUsPerEvent: Math.round((pgCpu / stored) * 1e6),
    // This process: making the ops (small), enrich, sessionize and the worker's side of the writes.
    workerCpuUsPerEvent: Math.round((own.user + own.system) / stored),
  }));
  await pool.end();
} finally {
  await env.teardown();
}
