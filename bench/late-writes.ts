// Late-write cost: what a write into a past hour costs PostgreSQL, as a user runs
// the service (`npm start`: API + worker thread + the periodic rollup refresh).
//
//   1. A past UTC hour (two days ago, 10:00) holding M events is put in the database the
//      way the worker leaves it: sessions of ~5 screen views each, the hour rolled up (its
//      log entry refreshed away).
//   2. Idle: PostgreSQL CPU of the benchmark database's backends over a window of the same
//      length as step 3 (the refresh job, the worker's polls, the API's checks).
//   3. N late events (`__timestamp` in that hour), one a second, through POST /track, each a
//      new session; with SESSION_TIMEOUT_MINUTES=1 each session is ended by the service's
//      check about a minute later, which writes its session_end into the same past hour
//      (what every session does 30 minutes after its last event); then until every event
//      and session_end is stored and the hour's log entry is gone (the rollups caught up).
//   Reported: PostgreSQL CPU seconds of step 3 less step 2's, per late event, and how many
//   refresh rounds recomputed the hour. The aim: at most 2 s for 30 late events
//   into a 40,000-event hour, and no growth from a 40k- to a 400k-event hour.
//
// Each size runs once per ROLLUP_REFRESH_QUIET_MS in --quiet (30000: the service's default;
// since sql/025 it only delays recomputes of the current hour, a past hour takes deltas).
//
//   npx tsx bench/late-writes.ts [--events 40000,400000] [--late 30] [--quiet 30000] [--no-write]
import os from 'node:os';
import { parseArgs } from 'node:util';
import { sleep, post, track } from '../test/support/harness';
import { blankEventRecord } from '../internal/enrich';
import { PartitionKeeper } from '../internal/store/partitions';
import { cpuDelta, cpuNow, withNpmStart } from './e2e';
import { machineInfo, writeSection } from './run';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '40000,400000' },
    late: { type: 'string', default: '30' },
    quiet: { type: 'string', default: '30000' },
    'no-write': { type: 'boolean', default: false },
  },
});
const SIZES = String(args.events).split(',').map(Number);
const LATE = Number(args.late);
const QUIETS = String(args.quiet).split(',').map(Number);
const log = (m: string) => console.error(`[late-writes ${new Date().toISOString().slice(11, 19)}] ${m}`);

interface Row {
  events: number;
  quietMs: number;
  rounds: number;
  late: number;
  idleS: number;
  windowS: number;
  pgCpuS: number;
  pgIdleS: number;
  extraS: number;
  perLateMs: number;
  stored: number;
}

async function one(m: number, quietMs: number): Promise<Row> {
  const hour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 86_400_000);
  hour.setUTCHours(10);
  return withNpmStart('late', { ROLLUP_REFRESH_QUIET_MS: String(quietMs), SESSION_TIMEOUT_MINUTES: '1' }, async (env, app) => {
    const pid = app.child.pid!;
    const projectId = await env.project({ name: `late ${m}`, timezone: 'UTC' });
    const writer = await env.client(projectId, 'write', 0);
    const timescale = (await env.db.query<{ ts: boolean }>('SELECT tm_timescale() AS ts')).rows[0]!.ts;
    await new PartitionKeeper(env.db, timescale).ensureFor([blankEventRecord({ id: '00000000-0000-7000-8000-000000000000', projectId, name: 'x', deviceId: 'x', profileId: 'x', createdAt: hour })]);
    // The hour as the worker leaves it: sessions of 5 views each, with their dimensions.
    const sessions = Math.ceil(m / 5);
    await env.db.query(
      `INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, duration_ms, ended,
         entry_origin, entry_path, exit_origin, exit_path, screen_view_count, event_count, is_bounce, is_bot,
         referrer_name, referrer_type, utm_source, country, city, device, browser, os)
       SELECT gen_random_uuid(), $1, 'dev' || g, 'dev' || g, t, t + interval '4 minutes', 240000, true,
         'https://shop.example', '/p/' || (g % 40), 'https://shop.example', '/p/' || (g % 37), 5, 5, false, false,
         (ARRAY['', 'Google', 'Twitter'])[1 + g % 3], (ARRAY['', 'search', 'social'])[1 + g % 3], (ARRAY['', 'newsletter'])[1 + g % 2],
         (ARRAY['US', 'DE', 'FR', 'GB'])[1 + g % 4], (ARRAY['Paris', 'Berlin', 'London', 'Austin'])[1 + g % 4],
         (ARRAY['desktop', 'mobile'])[1 + g % 2], (ARRAY['Chrome', 'Firefox', 'Safari'])[1 + g % 3], (ARRAY['Windows', 'macOS', 'iOS'])[1 + g % 3]
       FROM (SELECT g, $2::timestamptz + (g % 3300) * interval '1 second' AS t FROM generate_series(1, $3::int) g) x`,
      [projectId, hour.toISOString(), sessions],
    );
    await env.db.query(
      `INSERT INTO events (id, project_id, name, device_id, profile_id, session_id, created_at, origin, path, title,
         referrer_name, referrer_type, utm_source, country, city, device, browser, os, properties, is_bot)
       SELECT gen_random_uuid(), s.project_id, 'screen_view', s.device_id, s.profile_id, s.id, s.started_at + v * interval '1 minute',
         'https://shop.example', '/p/' || ((hashtext(s.id::text) + v) % 40), 'Item', s.referrer_name, s.referrer_type, s.utm_source,
         s.country, s.city, s.device, s.browser, s.os, jsonb_build_object('plan', 'pro', 'cart_items', v), false
       FROM sessions s CROSS JOIN generate_series(0, 4) v WHERE s.project_id = $1`,
      [projectId],
    );
    await env.db.query('INSERT INTO rollup_invalidations (project_id, bucket) VALUES ($1, $2) ON CONFLICT DO NOTHING', [projectId, hour.toISOString()]);
    await env.db.query('ANALYZE');
    const logged = async () => Number((await env.db.query('SELECT count(*) AS n FROM rollup_invalidations WHERE project_id = $1', [projectId])).rows[0].n);
    // Polled only once the hour's log entry is gone (its backends' CPU counts in the window).
    const stored = async () => Number((await env.db.query(
      `SELECT count(*) FILTER (WHERE e.name = 'screen_view') AS views,
              count(*) FILTER (WHERE e.name = 'session_end') AS ends
       FROM events e WHERE e.project_id = $1 AND e.session_id IN (
         SELECT v.session_id FROM events v WHERE v.project_id = $1 AND v.name = 'screen_view' AND v.path = '/late')`,
      [projectId])).rows.map((r) => Math.min(Number(r.views), Number(r.ends)))[0]);
    log(`${m} events in ${hour.toISOString()}; waiting for the refresh job to roll the hour up`);
    for (let i = 0; (await logged()) > 0; i++) {
      if (i > 600) throw new Error('the hour was never rolled up');
      await sleep(500);
    }
    await sleep(2000);
    // Step 2: idle, about as long as step 3 is expected to take (LATE s of sends, the ends a
    // minute or two later, refresh rounds).
    const idleS = LATE + 120;
    log(`idle for ${idleS} s`);
    const i0 = await cpuNow(pid, env);
    await sleep(idleS * 1000);
    const i1 = await cpuNow(pid, env);
    const idle = cpuDelta(i0, i1);
    // Step 3: the late events, one a second.
    log(`${LATE} late events, one a second`);
    const c0 = await cpuNow(pid, env);
    const t0 = performance.now();
    let roundsDuringSends = 0;
    let loggedBefore = false;
    for (let i = 0; i < LATE; i++) {
      const l = await logged();
      if (loggedBefore && l === 0) roundsDuringSends++;
      loggedBefore = l > 0;
      const at = new Date(hour.getTime() + 60_000 + i * 97_000).toISOString();
      const r = await post(`${app.url}/track`, track('screen_view', { __path: 'https://shop.example/late', __timestamp: at }), writer, {
        ip: `10.9.${i >> 8}.${i & 255}`, userAgent: 'Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0 Safari/537.36',
      });
      if (r.status !== 202) throw new Error(`late event ${i}: ${r.status}`);
      await sleep(1000);
    }
    let n = 0;
    let rounds = roundsDuringSends;
    let wasLogged = true;
    for (let i = 0; ; i++) {
      const l = await logged();
      if (wasLogged && l === 0) rounds++;
      wasLogged = l > 0;
      if (l === 0) {
        n = await stored();
        if (n >= LATE) break;
      }
      if (i > 900) throw new Error(`late events never caught up: ${n} stored, ${l} logged`);
      await sleep(500);
    }
    const windowS = (performance.now() - t0) / 1000;
    const c1 = await cpuNow(pid, env);
    const busy = cpuDelta(c0, c1);
    const pgIdle = (idle.postgres * windowS) / idleS;
    const extra = Math.max(0, busy.postgres - pgIdle);
    const row: Row = { events: m, quietMs, rounds, late: LATE, idleS, windowS, pgCpuS: busy.postgres, pgIdleS: pgIdle, extraS: extra, perLateMs: (extra * 1000) / LATE, stored: n };
    log(JSON.stringify(row));
    return row;
  });
}

const machine = machineInfo();
log(`${machine.nproc} CPUs (${machine.cpu}), node ${machine.node}, load ${machine.load}`);
const rows: Row[] = [];
for (const m of SIZES) for (const q of QUIETS) rows.push(await one(m, q));
const f = (n: number, d = 2) => n.toFixed(d);
const command = `npx tsx bench/late-writes.ts --events ${SIZES.join(',')} --late ${LATE} --quiet ${QUIETS.join(',')}`;
const md = [
  '## Late writes',
  '',
  `Command: \`${command}\``,
  '',
  `Machine: ${machine.nproc} CPUs, ${machine.cpu}, Node ${machine.node}; PostgreSQL, Redis and NATS on the same machine. Load average before: ${machine.load}; after: ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}. Date: ${machine.date}.`,
  '',
  `\`npm start\` (16 shards, the periodic rollup refresh every 10 s). A past UTC hour holding M events (sessions of 5 views), rolled up; then ${LATE} late events into it through POST /track, one a second, each a new session ended by the service about a minute later (\`SESSION_TIMEOUT_MINUTES=1\`: its session_end lands in the same past hour), until all events and session_ends are stored and the hour's log entry is refreshed away (rounds: the times the hour's entry was refreshed away, seen by polling; since sql/025 a past hour takes deltas, whatever \`ROLLUP_REFRESH_QUIET_MS\`). PostgreSQL CPU: the benchmark database's backends over that window, less the same backends' idle CPU over an idle window (scaled to its length). The aim: at most 2 s for 30 late events into a 40,000-event hour, not growing with M.`,
  '',
  '| events in the hour | ROLLUP_REFRESH_QUIET_MS | late events | refresh rounds | window s | PostgreSQL CPU s | of which idle s | late-write cost s | per late event ms | stored (events with their session_end) |',
  '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ...rows.map((r) => `| ${r.events.toLocaleString('en-US')} | ${r.quietMs} | ${r.late} | ${r.rounds} | ${f(r.windowS, 1)} | ${f(r.pgCpuS)} | ${f(r.pgIdleS)} | **${f(r.extraS)}** | ${f(r.perLateMs, 0)} | ${r.stored} |`),
].join('\n');
console.log(md);
if (!args['no-write']) writeSection('Late writes', md);
process.exit(0);
