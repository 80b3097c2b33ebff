// Bounded work per export request: a minute chart broken down by 100 values
// over a day answers (it was a 500, "Maximum call stack size exceeded"); a chart that could
// hold more points than the budget, or whose breakdown values would make a response of
// hundreds of MB, is a 400 naming the budget before the memory is spent; a page of
// /export/events whose events are huge is a 400 too. Expectations computed here.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MAX_CHART_POINTS, MAX_RESPONSE_BYTES } from '../internal/export/budget';
import { TestEnv, type Credentials } from './support/harness';
import { eventRow, insertEvents, startExportServer, type ExportServer } from './support/export-server';
import { assertBadRequestShape } from './support/fuzz-kit';

const DAY_START = Date.UTC(2026, 2, 10); // 2026-03-10, a UTC project
let env: TestEnv;
let server: ExportServer;
let project: string;
let readers: Credentials[] = [];
let turn = 0;
const reader = () => readers[turn++ % readers.length]!;

before(async () => {
  env = await new TestEnv('expbudget').setup();
  project = await env.project({ name: 'Budget', timezone: 'UTC' });
  readers = await Promise.all([1, 2, 3].map(() => env.client(project, 'read', 0)));
  const rows = [];
  // 100 plan values, value i on i + 1 events at minute i * 7 of the day.
  for (let i = 0; i < 100; i++) {
    for (let k = 0; k <= i; k++) rows.push(eventRow(project, { name: 'click', created_at: new Date(DAY_START + i * 7 * 60_000 + k * 500).toISOString(), properties: { plan: `plan-${String(i).padStart(3, '0')}` } }));
  }
  // 250 distinct long values (32 KB each) of `blob`, the day after.
  for (let i = 0; i < 250; i++) {
    rows.push(eventRow(project, { name: 'upload', created_at: new Date(DAY_START + 86_400_000 + i * 1000).toISOString(), properties: { blob: `${String(i).padStart(4, '0')}${'b'.repeat(32 * 1024 - 4)}` } }));
  }
  // Six events of ~6 MB of properties each.
  for (let i = 0; i < 6; i++) {
    rows.push(eventRow(project, { name: 'huge', created_at: new Date(DAY_START + 2 * 86_400_000 + i * 1000).toISOString(), properties: { big: 'h'.repeat(6 * 1024 * 1024) } }));
  }
  await insertEvents(env.db, rows);
  server = await startExportServer(env, { streaming: true, queryTimeoutMs: 30_000 });
});

after(async () => {
  await server?.close();
  await env?.teardown();
});

async function chart(params: Record<string, unknown>): Promise<{ status: number; body: any; bytes: number }> {
  const q = new URLSearchParams({ projectId: project });
  for (const [k, v] of Object.entries(params)) q.set(k, typeof v === 'string' ? v : JSON.stringify(v));
  const c = reader();
  const res = await fetch(`${server.url}/export/charts?${q}`, { headers: { 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret } });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text), bytes: text.length };
}

describe('/export/charts budget', () => {
  it('interval=minute over a day broken down by 100 values answers, with exact metrics', async () => {
    const r = await chart({ startDate: '2026-03-10', endDate: '2026-03-10', interval: 'minute', series: [{ name: 'click' }], breakdowns: [{ name: 'properties.plan' }] });
    assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 300));
    assert.equal(r.body.series.length, 100);
    for (const s of r.body.series) assert.equal(s.data.length, 1440);
    // Value i has i + 1 events, all in minute i * 7: series by count desc.
    const top = r.body.series[0];
    assert.deepEqual(top.names, ['click', 'plan-099']);
    assert.equal(top.metrics.count, 100);
    assert.equal(top.metrics.max, 100);
    assert.equal(top.metrics.min, 0);
    assert.equal(top.metrics.sum, 100);
    assert.equal(top.data[99 * 7].count, 100);
    assert.deepEqual(r.body.metrics, { sum: 5050, average: round2(5050 / 100), min: 0, max: 100 });
  });

  it('a request that could hold more points than the budget is a 400 naming it, before any query', async () => {
    // 2 days of minutes (2880 buckets) x limit 100 = 288,000 > the budget.
    const r = await chart({ startDate: '2026-03-10', endDate: '2026-03-11', interval: 'minute', series: [{ name: 'click' }], breakdowns: [{ name: 'properties.plan' }], limit: 100 });
    assert.equal(r.status, 400, JSON.stringify(r.body).slice(0, 300));
    assertBadRequestShape(r.body, 'read');
    assert.deepEqual(r.body.details.issues[0].path, ['limit']);
    assert.match(r.body.message, new RegExp(`budget of ${MAX_CHART_POINTS}`));
    assert.match(r.body.message, /288000 data points/);
    // The same chart with a limit that fits answers.
    const fits = Math.floor(MAX_CHART_POINTS / 2880);
    assert.equal((await chart({ startDate: '2026-03-10', endDate: '2026-03-11', interval: 'minute', series: [{ name: 'click' }], breakdowns: [{ name: 'properties.plan' }], limit: fits })).status, 200);
  });

  it('26 series broken down by 250 long values: a 400 naming the byte budget, not a response of ~600 MB', async () => {
    const series = Array.from({ length: 26 }, () => ({ name: 'upload' }));
    const r = await chart({ startDate: '2026-03-11', endDate: '2026-03-11', interval: 'day', series, breakdowns: [{ name: 'properties.blob' }], limit: 1000 });
    assert.equal(r.status, 400, `status ${r.status}, ${r.bytes} bytes`);
    assertBadRequestShape(r.body, 'read');
    assert.match(r.body.message, new RegExp(`larger than ${MAX_RESPONSE_BYTES} bytes`));
    // One item of it fits: 250 series named by 32 KB values.
    const one = await chart({ startDate: '2026-03-11', endDate: '2026-03-11', interval: 'day', series: [{ name: 'upload' }], breakdowns: [{ name: 'properties.blob' }], limit: 1000 });
    assert.equal(one.status, 200);
    assert.equal(one.body.series.length, 250);
  });
});

describe('/export/events page budget', () => {
  it('a page of huge events is a 400 naming the byte budget; a smaller page answers', async () => {
    const c = reader();
    const h = { 'service-client-id': c.clientId, 'service-client-secret': c.clientSecret };
    const url = (limit: number) => `${server.url}/export/events?projectId=${project}&event=huge&includes=properties&limit=${limit}`;
    const big = await fetch(url(6), { headers: h });
    const body = await big.json() as any;
    assert.equal(big.status, 400, JSON.stringify(body).slice(0, 200));
    assertBadRequestShape(body, 'read');
    assert.match(body.message, new RegExp(`larger than ${MAX_RESPONSE_BYTES} bytes`));
    const small = await fetch(url(2), { headers: h });
    assert.equal(small.status, 200);
    const page = await small.json() as any;
    assert.equal(page.data.length, 2);
    assert.equal(page.data[0].properties.big.length, 6 * 1024 * 1024);
  });
});

function round2(n: number): number {
  return Math.round((n + Number.EPSILON) * 100) / 100;
}
