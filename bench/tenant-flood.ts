// Tenant flood: one project's write client sends event times that each land in their own
// month or hour, while another project writes and reads (docs/rollups.md "Bounds and
// fairness", docs/operating.md "Event time and partitions"). As a user runs the service
// (`npm start`: API + worker thread + the periodic rollup refresh).
//
//   1. Far past: 1,200 `/track` events with `__timestamp` in distinct months from 1800 (before
//      the bounds, every one was a 202, a partition of events and a late hour).
//   2. In window: the window's ~120 distinct months and `--hours` distinct hours of the last
//      ten years (a backfill of the worst shape: every event its own month or hour), shuffled.
//   Meanwhile, every `--probe-s` seconds until the flood is stored and every late hour of it
//   refreshed, the other project sends 20 live events (from 20 devices) and one late event
//   (yesterday, a new hour each time), and reads `/insights/{id}/pages` and `/export/events`.
//   Reported: the flood's answers; for the other project, how long its 20 events took to be
//   stored (worst and median probe), its reads' statuses and worst latency, how long its late
//   hours waited for the refresh; the flood's time to be stored and refreshed; the most locks
//   one backend of the database held at once and the longest a lock on `events` waited
//   (sampled each second); errors in the service's log (`out of shared memory`, partitions
//   not created in time).
//
//   npx tsx bench/tenant-flood.ts [--far 1200] [--hours 5000] [--quiet 0] [--probe-s 5] [--no-write]
import os from 'node:os';
import { parseArgs } from 'node:util';
import { get, inPool as pool, post, sleep, track, type Credentials } from '../test/support/harness';
import { withNpmStart } from './e2e';
import { machineInfo, writeSection } from './run';

const { values: args } = parseArgs({
  options: {
    far: { type: 'string', default: '1200' },
    hours: { type: 'string', default: '5000' },
    quiet: { type: 'string', default: '0' },
    'probe-s': { type: 'string', default: '5' },
    'no-write': { type: 'boolean', default: false },
  },
});
const FAR = Number(args.far);
const HOURS = Number(args.hours);
const QUIET = Number(args.quiet);
const PROBE_MS = Number(args['probe-s']) * 1000;
const HOUR = 3_600_000;
const log = (m: string) => console.error(`[tenant-flood ${new Date().toISOString().slice(11, 19)}] ${m}`);


/** A deterministic shuffle. */
function shuffle<T>(xs: T[]): T[] {
  let s = 42;
  for (let i = xs.length - 1; i > 0; i--) {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    const j = s % (i + 1);
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}

interface Probe {
  phase: string;
  storedMs: number | null;
  lateRefreshedMs: number | null;
  reads: { status: number; ms: number }[];
}

const machine = machineInfo();
log(`${machine.nproc} CPUs (${machine.cpu}), node ${machine.node}, load ${machine.load}`);

const result = await withNpmStart('flood', { ROLLUP_REFRESH_QUIET_MS: String(QUIET) }, async (env, app) => {
  const flooder = await env.project({ name: 'Flooder', timezone: 'UTC' });
  const other = await env.project({ name: 'Other', timezone: 'Europe/Berlin' });
  const fw = await env.client(flooder, 'write', 0);
  const ow = await env.client(other, 'write', 0);
  const or = await env.client(other, 'read', 0);
  const n = async (sql: string, params: unknown[] = []) => Number((await env.db.query(sql, params)).rows[0].n);

  // Each second: the most locks one backend of this database holds, and the oldest lock wait on events or a partition of it.
  const samples = { maxLocks: 0, maxEventsWaitMs: 0, partitions: 0 };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try {
        const r = (await env.db.query<{ locks: number; wait_ms: number }>(
          `SELECT (SELECT coalesce(max(c), 0) FROM (SELECT count(*) AS c FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE a.datname = current_database() GROUP BY l.pid) x)::int AS locks,
                  (SELECT coalesce(max(extract(epoch FROM now() - l.waitstart) * 1000), 0) FROM pg_locks l
                    JOIN pg_class c ON c.oid = l.relation
                    WHERE NOT l.granted AND (c.relname = 'events' OR c.relname LIKE 'events\\_p%'))::float8 AS wait_ms`)).rows[0]!;
        samples.maxLocks = Math.max(samples.maxLocks, r.locks);
        samples.maxEventsWaitMs = Math.max(samples.maxEventsWaitMs, r.wait_ms);
      } catch {}
      await sleep(1000);
    }
  })();

  let late = 0;
  /** The other project's probe: 20 live events and one late one, then its reads. */
  const probe = async (phase: string): Promise<Probe> => {
    const before = await n(`SELECT count(*) AS n FROM events WHERE project_id = $1 AND name = 'screen_view'`, [other]);
    const lateAt = new Date(Math.floor(Date.now() / HOUR) * HOUR - (26 + late++) * HOUR + 5 * 60_000);
    const t0 = Date.now();
    const sent = await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => post(`${app.url}/track`, track('screen_view', { __path: `https://other.example/p${i % 4}` }), ow, { ip: `198.51.${late % 200}.${i + 1}` })),
      post(`${app.url}/track`, track('late', { __timestamp: lateAt.toISOString() }), ow, { ip: '198.51.250.1' }),
    ]);
    if (sent.some((r) => r.status !== 202)) throw new Error(`other project: ${sent.map((r) => r.status).join(',')}`);
    let storedMs: number | null = null;
    let lateRefreshedMs: number | null = null;
    const reads: Probe['reads'] = [];
    for (const url of [`${app.url}/insights/${other}/pages?range=today`, `${app.url}/export/events?projectId=${other}&event=screen_view&limit=10`]) {
      const r0 = Date.now();
      const r = await get(url, or);
      reads.push({ status: r.status, ms: Date.now() - r0 });
      if (r.status !== 200 || Date.now() - r0 > 1000) log(`slow or failed read: ${r.status} in ${Date.now() - r0} ms, ${url.replace(app.url, '')}`);
    }
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline && (storedMs === null || lateRefreshedMs === null)) {
      if (storedMs === null && (await n(`SELECT count(*) AS n FROM events WHERE project_id = $1 AND name = 'screen_view'`, [other])) >= before + 20) storedMs = Date.now() - t0;
      if (storedMs !== null && lateRefreshedMs === null
        && (await n(`SELECT count(*) AS n FROM events WHERE project_id = $1 AND name = 'late' AND created_at = $2`, [other, lateAt.toISOString()])) === 1
        && (await n('SELECT count(*) AS n FROM rollup_invalidations WHERE project_id = $1 AND bucket = $2', [other, new Date(Math.floor(lateAt.getTime() / HOUR) * HOUR).toISOString()])) === 0) {
        lateRefreshedMs = Date.now() - t0;
      }
      await sleep(200);
    }
    return { phase, storedMs, lateRefreshedMs, reads };
  };

  const probes: Probe[] = [];
  let phase = 'far past';
  let probing = true;
  const prober = (async () => {
    while (probing) {
      const t = Date.now();
      probes.push(await probe(phase));
      await sleep(Math.max(0, PROBE_MS - (Date.now() - t)));
    }
  })();

  // 1. Far past: distinct months from 1800.
  const far = Array.from({ length: FAR }, (_, i) => new Date(Date.UTC(1800 + Math.floor(i / 12), i % 12, 15, 12)).toISOString());
  log(`${FAR} far-past months`);
  const t1 = Date.now();
  const farAnswers = await pool(far, 16, async (ts) => (await post(`${app.url}/track`, track('flood', { __timestamp: ts }), fw, { ip: '203.0.113.9' })).status);
  const farS = (Date.now() - t1) / 1000;
  const farCount = (s: number) => farAnswers.filter((x) => x === s).length;
  log(`far past: ${farCount(202)} x 202, ${farCount(400)} x 400 in ${farS.toFixed(1)} s`);

  // 2. In window: every month of the window and HOURS distinct hours, shuffled.
  phase = 'in window';
  const now = new Date();
  const months = Array.from({ length: 119 }, (_, i) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1 - i, 12, i % 24, 30)).toISOString());
  const span = 3650 * 24 - 48;
  const hours = Array.from({ length: HOURS }, (_, i) => new Date(Math.floor(now.getTime() / HOUR) * HOUR - (48 + Math.floor((i * span) / HOURS)) * HOUR + 20 * 60_000).toISOString());
  const inWindow = shuffle([...months, ...hours]);
  log(`${inWindow.length} in-window events (${months.length} months, ${hours.length} distinct hours)`);
  const t2 = Date.now();
  const winAnswers = await pool(inWindow, 16, async (ts) => (await post(`${app.url}/track`, track('flood', { __timestamp: ts }), fw, { ip: '203.0.113.10' })).status);
  const winS = (Date.now() - t2) / 1000;
  const accepted = farAnswers.filter((x) => x === 202).length + winAnswers.filter((x) => x === 202).length;
  log(`in window: ${winAnswers.filter((x) => x === 202).length} x 202 of ${winAnswers.length} in ${winS.toFixed(1)} s`);

  // Until every 202 is stored and every late hour of the flood refreshed.
  let storedS = 0;
  let refreshedS = 0;
  for (;;) {
    const stored = await n(`SELECT count(*) AS n FROM events WHERE project_id = $1 AND name = 'flood'`, [flooder]);
    if (!storedS && stored >= accepted) {
      storedS = (Date.now() - t1) / 1000;
      log(`flood stored (${stored}) ${storedS.toFixed(1)} s after it began`);
    }
    const logged = await n('SELECT count(*) AS n FROM rollup_invalidations WHERE project_id = $1', [flooder]);
    if (storedS && logged === 0) {
      refreshedS = (Date.now() - t1) / 1000;
      break;
    }
    if (Date.now() - t1 > 3 * 3_600_000) throw new Error(`gave up: ${stored} of ${accepted} stored, ${logged} hours logged`);
    log(`${stored}/${accepted} stored, ${logged} hours of the flood logged; ${probes.length} probes`);
    await sleep(10_000);
  }
  log(`flood refreshed ${refreshedS.toFixed(1)} s after it began`);
  probing = false;
  await prober;
  sampling = false;
  await sampler;
  samples.partitions = await n(`SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'events'::regclass`);
  const logs = app.logs();
  const errors = {
    outOfSharedMemory: (logs.match(/out of shared memory/g) ?? []).length,
    partitionBusy: (logs.match(/not created: its lock on events was not granted/g) ?? []).length,
    refreshFailed: (logs.match(/periodic job failed/g) ?? []).length,
  };
  return { farAnswers, farS, winAnswers, winS, accepted, storedS, refreshedS, probes, samples, errors };
});

const { probes } = result;
const median = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]! : NaN);
const worst = (xs: number[]) => (xs.length ? Math.max(...xs) : NaN);
const stored = probes.map((p) => p.storedMs).filter((x): x is number => x !== null);
const lateWaits = probes.map((p) => p.lateRefreshedMs).filter((x): x is number => x !== null);
const reads = probes.flatMap((p) => p.reads);
const statuses = (xs: number[]) => [...new Set(xs)].sort().map((s) => `${xs.filter((x) => x === s).length} x ${s}`).join(', ');
const command = `npx tsx bench/tenant-flood.ts --far ${FAR} --hours ${HOURS} --quiet ${QUIET} --probe-s ${PROBE_MS / 1000}`;
const s = (ms: number) => (ms / 1000).toFixed(1);
const md = [
  '## Tenant flood',
  '',
  `Command: \`${command}\``,
  '',
  `Machine: ${machine.nproc} CPUs, ${machine.cpu}, Node ${machine.node}; PostgreSQL ${'15'}, Redis and NATS on the same machine (the 2-core node-svc box, shared). Load average before: ${machine.load}; after: ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}. Date: ${machine.date}.`,
  '',
  `\`npm start\` (default settings but \`ROLLUP_REFRESH_QUIET_MS=${QUIET}\`${QUIET === 0 ? ': the refresh works on the flood while it arrives, the harder case' : ''}). One project's write client sends, 16 at a time, ${FAR} \`/track\` events in distinct months from 1800, then ${result.winAnswers.length} in the window (the window's ${119} months and ${HOURS} distinct hours of the last ten years, shuffled). Every ${PROBE_MS / 1000} s meanwhile, another project sends 20 live events from 20 devices and one late event (a new past hour each time) and reads \`/insights/{id}/pages\` and \`/export/events\`, until the flood is stored and all its late hours refreshed.`,
  '',
  '| | result |',
  '|---|---|',
  `| far-past flood | ${statuses(result.farAnswers)} in ${result.farS.toFixed(1)} s |`,
  `| in-window flood | ${statuses(result.winAnswers)} in ${result.winS.toFixed(1)} s |`,
  `| flood: every 202 stored | ${result.storedS.toFixed(1)} s after it began (${result.accepted} events) |`,
  `| flood: every late hour refreshed | ${result.refreshedS.toFixed(1)} s after it began |`,
  `| other project: probes | ${probes.length} (${probes.filter((p) => p.phase === 'far past').length} during the far-past flood) |`,
  `| other project: 20 live events stored after | median ${s(median(stored))} s, worst **${s(worst(stored))} s**${stored.length < probes.length ? ` (${probes.length - stored.length} probes not stored within 120 s)` : ''} |`,
  `| other project: its late hour refreshed after | median ${s(median(lateWaits))} s, worst ${s(worst(lateWaits))} s${lateWaits.length < probes.length ? ` (${probes.length - lateWaits.length} not within 120 s)` : ''} |`,
  `| other project: reads (pages, export) | ${statuses(reads.map((r) => r.status))}; worst ${worst(reads.map((r) => r.ms))} ms |`,
  `| partitions of events at the end | ${result.samples.partitions} |`,
  `| most locks one backend held (sampled each second) | ${result.samples.maxLocks} |`,
  `| longest wait for a lock on events (sampled) | ${Math.round(result.samples.maxEventsWaitMs)} ms |`,
  `| service log: \`out of shared memory\` / partition not created in time / periodic job failed | ${result.errors.outOfSharedMemory} / ${result.errors.partitionBusy} / ${result.errors.refreshFailed} |`,
].join('\n');
console.log(md);
if (!args['no-write']) writeSection('Tenant flood', md);
process.exit(0);
