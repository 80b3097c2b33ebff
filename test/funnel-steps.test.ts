// The funnel by session from the sessions' steps (internal/insights/funnel-steps.ts): traffic
// sent through /track and the worker, then funnels over periods cut inside it, windows from
// 1 to 24 hours and several step lists, each equal to the same funnel read from the events
// alone (funnelSql, which test/insights-funnel.test.ts checks against hand-worked answers).
// The traffic has ties, an out-of-order event, a bot, sessions split by 30-minute gaps and one
// session whose steps span more than a day; the steps the worker wrote equal those worked out
// from the stored events (fillSessionSteps) wherever it knew them in order.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { funnelReached, funnelSql, parseFunnelParams } from '../internal/insights/funnel';
import { readStepsSummary, stepInstants } from '../internal/insights/funnel-steps';
import { SqlParams } from '../internal/query/filters';
import type { Queryable } from '../internal/query/source';
import { fillSessionSteps } from '../internal/store/session-steps';
import { inPool, post, startApp, TestEnv, track, waitFor, type Credentials } from './support/harness';

const MIN = 60_000;
const HOUR = 60 * MIN;
const UA = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36';
const BOT_UA = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let projectId: string;
let writer: Credentials;
/** Whole minutes, so that periods cut between events. */
const base = Math.floor(Date.now() / HOUR) * HOUR - 30 * HOUR;

interface Sent { device: number; name: string; at: number; ua?: string }

/** A seeded random source (the same traffic on every run). */
function random(seed: number): (n: number) => number {
  let s = seed;
  return (n) => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s % n;
  };
}

function traffic(): Sent[][] {
  const rnd = random(11);
  const names = ['a', 'b', 'c', 'x', 'screen_view', 'screen_view'];
  const devices: Sent[][] = [];
  for (let d = 0; d < 40; d++) {
    const events: Sent[] = [];
    let at = base + rnd(20 * 60) * MIN; // somewhere in the 20 hours after base
    const n = 2 + rnd(10);
    for (let i = 0; i < n; i++) {
      const name = names[rnd(names.length)]!;
      events.push({ device: d, name, at });
      if (rnd(5) === 0) events.push({ device: d, name: names[rnd(3)]!, at }); // a tie
      // mostly minutes apart, sometimes a gap that starts a new session
      at += rnd(6) === 0 ? (31 + rnd(120)) * MIN : (1 + rnd(20)) * MIN;
    }
    devices.push(events);
  }
  // then b, sent once c is stored (a batch is put in time order) but before it: out of order
  devices.push([{ device: 40, name: 'a', at: base + 60 * MIN }, { device: 40, name: 'c', at: base + 70 * MIN }]);
  // a bot: its steps count nowhere
  devices.push([0, 1, 2].map((i) => ({ device: 41, name: ['a', 'b', 'c'][i]!, at: base + 3 * HOUR + i * MIN, ua: BOT_UA })));
  // steps over more than a day in one session (events 20 minutes apart)
  const long: Sent[] = [{ device: 42, name: 'a', at: base - 2 * HOUR }];
  for (let t = base - 2 * HOUR + 20 * MIN; t < base + 24 * HOUR; t += 20 * MIN) long.push({ device: 42, name: 'x', at: t });
  long.push({ device: 42, name: 'b', at: base + 24 * HOUR + 10 * MIN }, { device: 42, name: 'c', at: base + 24 * HOUR + 15 * MIN });
  devices.push(long);
  return devices;
}

before(async () => {
  env = await new TestEnv('funnelsteps').setup();
  app = await startApp(env, { api: true, worker: true });
  projectId = await env.project({ name: 'steps' });
  writer = await env.client(projectId, 'write');
  // A new database: every session the worker writes carries its steps, so they hold for any period.
  const since = (await env.db.query<{ since: Date }>('SELECT since FROM session_steps_since')).rows[0]!.since;
  assert.equal(since.toISOString(), '1970-01-01T00:00:00.000Z');
  const send = async (e: Sent) => {
    const o = { ip: `81.2.69.${10 + e.device}`, userAgent: e.ua ?? UA };
    const res = await post(`${app.url}/track`, track(e.name, { __timestamp: new Date(e.at).toISOString() }), writer, o);
    assert.equal(res.status, 202, JSON.stringify(res.body));
  };
  const stored = (total: number) => waitFor(async () => (await env.db.query(
    "SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND name NOT IN ('session_start', 'session_end')", [projectId],
  )).rows[0].n === total, { what: 'every event stored', timeoutMs: 60_000 });
  const devices = traffic();
  await inPool(devices, 8, async (events) => {
    for (const e of events) await send(e);
  });
  const total = devices.reduce((n, d) => n + d.length, 0);
  await stored(total);
  await send({ device: 40, name: 'b', at: base + 65 * MIN });
  await stored(total + 1);
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

async function fromEvents(query: string, start: Date, end: Date): Promise<number[]> {
  const params = parseFunnelParams(new URLSearchParams(query));
  const p = new SqlParams();
  const { rows } = await env.db.query(funnelSql(projectId, params, start, end, p), p.values);
  return params.steps.map((_, i) => Number(rows[0][`r${i + 1}`]));
}

test('funnels from the steps equal funnels from the events, over periods that cut sessions', async () => {
  const queries = [
    'steps=a&steps=b', 'steps=a&steps=b&steps=c', 'steps=a&steps=b&steps=c&windowHours=1', 'steps=b&steps=a',
    'steps=a&steps=a', 'steps=x&steps=c&windowHours=2', 'steps=c&steps=b&steps=a&windowHours=24', 'steps=a&steps=x&steps=b&steps=c&windowHours=720',
  ];
  const periods: [number, number][] = [
    [base - 3 * HOUR, base + 30 * HOUR], // everything
    [base + 5 * HOUR + 7 * MIN, base + 11 * HOUR + 23 * MIN], // cuts sessions at both ends
    [base + 61 * MIN, base + 62 * MIN + 30_000], // inside the out-of-order session
    [base + 12 * HOUR, base + 25 * HOUR], // the long session crosses the start
  ];
  let fromSteps = 0;
  for (const [s, e] of periods) {
    const start = new Date(s);
    const end = new Date(e);
    for (const query of queries) {
      const params = parseFunnelParams(new URLSearchParams(query));
      assert.deepEqual(await funnelReached(env.db, projectId, params, start, end), await fromEvents(query, start, end), `${query} ${start.toISOString()} ${end.toISOString()}`);
      const summary = await readStepsSummary(env.db, projectId, params, start, end);
      assert.ok(summary, 'the steps answer');
      fromSteps += summary.reached[0]!;
    }
  }
  assert.ok(fromSteps > 100, `most sessions are answered from their steps (${fromSteps})`);
});

test('the sessions that the steps cannot answer are read from their events', async () => {
  const params = parseFunnelParams(new URLSearchParams('steps=a&steps=b&steps=c'));
  const all = await readStepsSummary(env.db, projectId, params, new Date(base - 3 * HOUR), new Date(base + 30 * HOUR));
  const ids = (await env.db.query<{ id: string; names: string[] | null; long: boolean }>(
    `SELECT id, step_names AS names, step_last_at - step_first_at > interval '1 day' AS long FROM sessions
     WHERE project_id = $1 AND step_first_at IS NOT NULL AND (step_names IS NULL OR step_last_at - step_first_at > interval '24 hours')`, [projectId],
  )).rows;
  // the out-of-order session (names unknown) and the long one (names past the limit, over a day)
  assert.equal(ids.length, 2);
  assert.ok(ids.some((r) => r.long));
  assert.deepEqual(new Set(all!.rawSessionIds), new Set(ids.map((r) => r.id)));
  // a period that begins before the sessions carried steps is read from the events alone
  await env.db.query('UPDATE session_steps_since SET since = $1', [new Date(base).toISOString()]);
  try {
    assert.equal(await readStepsSummary(env.db, projectId, params, new Date(base - HOUR), new Date(base + HOUR)), null);
    const start = new Date(base - HOUR);
    const end = new Date(base + 30 * HOUR);
    assert.deepEqual(await funnelReached(env.db, projectId, params, start, end), await fromEvents('steps=a&steps=b&steps=c', start, end));
  } finally {
    await env.db.query("UPDATE session_steps_since SET since = '1970-01-01T00:00:00Z'");
  }
});

test("the worker's steps equal those worked out from the stored events, and a bot's session has none", async () => {
  const read = async (db: Queryable = env.db) => new Map((await db.query<{ id: string; names: string[] | null; first_at: Date | null; last_at: Date | null }>(
    'SELECT id, step_names AS names, step_first_at AS first_at, step_last_at AS last_at FROM sessions WHERE project_id = $1', [projectId],
  )).rows.map((r) => [r.id, r]));
  const written = await read();
  const bots = await env.db.query<{ id: string }>('SELECT DISTINCT session_id AS id FROM events WHERE project_id = $1 AND is_bot', [projectId]);
  assert.ok(bots.rows.length >= 1, 'the bot was stored as a bot');
  for (const b of bots.rows) assert.equal(written.get(b.id)?.first_at ?? null, null);
  const c = await env.db.connect();
  await c.query('BEGIN');
  try {
    await fillSessionSteps(c);
    const worked = await read(c);
    // one instant's names in either order mean the same: compare each instant as a sorted set
    const instants = (names: string[]) => stepInstants(names).map((x) => x.sort().join('+'));
    let compared = 0;
    for (const [id, w] of written) {
      const ref = worked.get(id)!;
      assert.deepEqual([w.first_at, w.last_at], [ref.first_at, ref.last_at], id);
      if (w.names === null) continue;
      assert.deepEqual(instants(w.names), instants(ref.names!), id);
      compared++;
    }
    assert.ok(compared > 40, `sessions compared: ${compared}`);
  } finally {
    await c.query('ROLLBACK');
    c.release();
  }
});
