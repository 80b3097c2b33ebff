// One tenant's write client floods event times that each land in their own month or hour
// (docs/decisions.md "Ingest", docs/rollups.md "Bounds and fairness"): far-past times are a
// 400 naming the field; in-window ones are stored, each month's partition created under a
// short lock timeout and each late hour refreshed in bounded, fair transactions. Meanwhile
// another tenant's events are stored within 30 s and its reads answer. Every 202 of the
// flooding tenant ends up in PostgreSQL. A scaled-down flood: bench/tenant-flood.ts runs
// the full one (1,200 far-past months and a flood of in-window months and hours).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TestEnv, get, inPool as pool, post, startApp, track, waitFor, type Credentials } from './support/harness';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let env: TestEnv;
let app: Awaited<ReturnType<typeof startApp>>;
let flooder: string;
let other: string;
let floodWriter: Credentials;
let otherWriter: Credentials;
let otherReader: Credentials;

before(async () => {
  env = await new TestEnv('flood').setup();
  flooder = await env.project({ name: 'Flooder', timezone: 'UTC' });
  other = await env.project({ name: 'Other', timezone: 'Europe/Berlin' });
  floodWriter = await env.client(flooder, 'write', 0);
  otherWriter = await env.client(other, 'write', 0);
  otherReader = await env.client(other, 'read', 0);
  app = await startApp(env);
});

after(async () => {
  await app?.drain();
  await env?.teardown();
});

const count = async (sql: string, params: unknown[]): Promise<number> => Number((await env.db.query(sql, params)).rows[0].n);


test('a flood of distinct far-past and in-window months and hours from one tenant: another tenant is stored within 30 s and read; every 202 is stored', { timeout: 300_000 }, async (t) => {
  const now = new Date();
  // 60 far-past months from 1800 (400s), 118 months inside the ~10-year window and 150
  // distinct hours of the last 150 days (202s), shuffled, from one write client.
  const farPast = Array.from({ length: 60 }, (_, i) => new Date(Date.UTC(1800 + Math.floor(i / 12), i % 12, 15, 12)).toISOString());
  const months = Array.from({ length: 118 }, (_, i) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1 - i, 12, i % 24, 30)).toISOString());
  const hours = Array.from({ length: 150 }, (_, i) => new Date(Math.floor(now.getTime() / HOUR) * HOUR - (i + 2) * DAY + (i % 24) * HOUR + 17 * 60_000).toISOString());
  const times = [...farPast, ...months, ...hours];
  for (let i = times.length - 1; i > 0; i--) {
    const j = (i * 7919) % (i + 1);
    [times[i], times[j]] = [times[j]!, times[i]!];
  }
  const inWindow = new Set([...months, ...hours]);

  const started = Date.now();
  const flood = pool(times, 8, async (ts) => ({
    ts,
    res: await post(`${app.url}/track`, track('flood', { __timestamp: ts, __path: 'https://flood.example/x' }), floodWriter, { ip: '203.0.113.9' }),
  }));

  // The other tenant, once the flood is under way: 20 live events from 20 devices.
  await waitFor(async () => (await count(`SELECT count(*) AS n FROM events WHERE project_id = $1`, [flooder])) >= 20, { timeoutMs: 60_000, what: 'the flood under way' });
  const sentAt = Date.now();
  const sent = await Promise.all(Array.from({ length: 20 }, (_, i) =>
    post(`${app.url}/track`, track('screen_view', { __path: `https://other.example/p${i % 4}` }), otherWriter, { ip: `198.51.100.${i + 1}` })));
  assert.deepEqual(sent.map((r) => r.status), Array(20).fill(202));
  await waitFor(async () => (await count('SELECT count(*) AS n FROM events WHERE project_id = $1 AND name = $2', [other, 'screen_view'])) === 20, {
    timeoutMs: 30_000, intervalMs: 200, what: 'the other tenant\'s 20 events stored within 30 s',
  });
  const storedMs = Date.now() - sentAt;
  t.diagnostic(`other tenant: 20 events stored ${storedMs} ms after sending, ${((Date.now() - started) / 1000).toFixed(1)} s into the flood`);

  // Its reads answer (logged hours are read raw; nothing waits on the flood's hours).
  const metrics = await get(`${app.url}/insights/${other}/metrics?range=today`, otherReader);
  assert.equal(metrics.status, 200, JSON.stringify(metrics.body));
  const pages = await get(`${app.url}/insights/${other}/pages?range=today`, otherReader);
  assert.equal(pages.status, 200, JSON.stringify(pages.body));
  assert.equal(pages.body.reduce((n: number, p: { sessions: number }) => n + p.sessions, 0), 20, JSON.stringify(pages.body));
  const exported = await get(`${app.url}/export/events?projectId=${other}&event=screen_view&limit=50`, otherReader);
  assert.equal(exported.status, 200, JSON.stringify(exported.body));
  assert.equal(exported.body.meta.totalCount, 20);

  // Every answer of the flood: a 202 inside the window, a 400 naming the field outside it.
  const answers = await flood;
  t.diagnostic(`flood: ${answers.length} requests answered in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  let accepted = 0;
  for (const { ts, res } of answers) {
    if (inWindow.has(ts)) {
      assert.equal(res.status, 202, `${ts}: ${JSON.stringify(res.body)}`);
      accepted++;
      continue;
    }
    assert.equal(res.status, 400, `${ts}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.error, 'Bad Request');
    assert.equal(res.body.status, 400);
    assert.match(res.body.message, /^payload\.properties\.__timestamp: .* is too far in the past: event times are accepted up to 3660 days before receipt \(INGEST_MAX_PAST_DAYS\)/);
    assert.deepEqual(res.body.details.issues.map((i: { path: string[] }) => i.path), [['payload', 'properties', '__timestamp']]);
  }
  assert.equal(accepted, months.length + hours.length);
  await waitFor(async () => (await count(`SELECT count(*) AS n FROM events WHERE project_id = $1 AND name = 'flood'`, [flooder])) === accepted, {
    timeoutMs: 120_000, intervalMs: 500, what: `all ${accepted} accepted flood events stored`,
  });
  t.diagnostic(`flood: all ${accepted} accepted events stored ${((Date.now() - started) / 1000).toFixed(1)} s after it began`);
  const partitions = await count(`SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'events'::regclass`, []);
  assert.ok(partitions <= 125, `one partition per month of the window at most (${partitions})`);

  // The refresh works through the flood's late hours in bounded rounds (nothing fails for
  // locking too many partitions at once): the log empties.
  await waitFor(async () => (await count('SELECT count(*) AS n FROM rollup_invalidations WHERE project_id = $1', [flooder])) === 0, {
    timeoutMs: 180_000, intervalMs: 1000, what: 'the flood\'s late hours refreshed',
  });
  t.diagnostic(`flood: every late hour refreshed ${((Date.now() - started) / 1000).toFixed(1)} s after it began`);
});
