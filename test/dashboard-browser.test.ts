// The dashboard in a real browser (Debian's chromium, driven by playwright-core): sign in with a
// read client, see the API's numbers, change the period, click a breakdown row and see the
// filter applied everywhere (numbers equal the API's for the same query), remove it, see the
// live count change after a /track, and read it at phone width. Screenshots are written to
// test/artifacts/dashboard/ (git-ignored; CI keeps them as artifacts).
//
// CI (.ci/run) installs chromium; on a machine without it this file is skipped, saying how to
// install it (apt-get install chromium), except under CI=true, where it fails.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { ROOT, TestEnv, get, post, startApp, track, waitFor, type Credentials } from './support/harness';
import { seedWeek } from './support/dashboard-data';
import type { Running } from '../internal/app/runtime';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = path.join(ROOT, 'test/artifacts/dashboard');
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run installs it (apt-get install chromium)`);
const skip = haveChromium ? false : `${CHROMIUM} is not installed (apt-get update && apt-get install chromium)`;

let env: TestEnv;
let app: Running & { url: string };
let projectId: string;
let reader: Credentials;
let writer: Credentials;
/** The test's own read client, so its API calls do not use up the browser's rate limit (100 / 10 s per client). */
let checker: Credentials;
let context: BrowserContext;
let page: Page;
let profileDir: string;
const browserErrors: string[] = [];

before(async () => {
  if (skip) return;
  mkdirSync(ARTIFACTS, { recursive: true });
  env = await new TestEnv('dashboard').setup();
  app = await startApp(env, { api: true, worker: true });
  projectId = await env.project({ name: 'tidemark.example', timezone: 'Europe/Berlin' });
  [reader, writer, checker] = await Promise.all([env.client(projectId, 'read'), env.client(projectId, 'write'), env.client(projectId, 'read')]);
  const seeded = await seedWeek(app.url, writer, { visits: 60 });
  await waitFor(async () => (await api('metrics', { range: '7d' })).metrics.total_sessions === seeded.sessions, { timeoutMs: 60_000, intervalMs: 250, what: 'the seeded week in insights' });
  const { chromium } = await import('playwright-core');
  profileDir = mkdtempSync(path.join(os.tmpdir(), 'tidemark-chromium-'));
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (e) => browserErrors.push(e.message));
});

after(async () => {
  await context?.close().catch(() => {});
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
  await app?.drain();
  await env?.teardown();
});

/** The API's answer for the same query the dashboard makes. */
async function api(endpoint: string, params: Record<string, string>): Promise<any> {
  const q = new URLSearchParams(params).toString();
  const res = await get(`${app.url}/insights/${projectId}/${endpoint}?${q}`, checker);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

const METRIC_KEYS = ['unique_visitors', 'total_sessions', 'total_screen_views', 'views_per_session', 'bounce_rate', 'avg_session_duration'];

/** The six cards' exact values (data-value) once loaded. */
async function cardValues(): Promise<Record<string, number>> {
  return page.$$eval('.card', (cards: any[]) => Object.fromEntries(cards.map((c) => [c.dataset.metric as string, Number(c.dataset.value)])));
}

/** Waits until the cards show exactly the API's metrics for `params`. */
async function cardsEqualApi(params: Record<string, string>): Promise<void> {
  const expected = (await api('metrics', params)).metrics as Record<string, number>;
  await waitFor(async () => {
    const shown = await cardValues();
    return METRIC_KEYS.every((k) => shown[k] === expected[k]);
  }, { timeoutMs: 15_000, what: `cards equal to the API's metrics for ${JSON.stringify(params)}: ${JSON.stringify(expected)}` });
}

/** The rows of a panel as [name, sessions], once loaded. */
async function panelRows(panel: string): Promise<[string, number][]> {
  await page.waitForSelector(`#panel-${panel} .rows[aria-busy="false"]`);
  return page.$$eval(`#panel-${panel} .rows [data-name]`, (rows: any[]) => rows.map((r) => [r.dataset.name as string, Number(r.dataset.sessions)] as [string, number]));
}

const shot = (name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

test('sign in with a read client: the credentials stay out of the URL', { skip }, async () => {
  await page.goto(`${app.url}/dashboard`);
  await page.waitForSelector('#client-id');
  await shot('01-sign-in');
  // A wrong secret is refused with a message a person can act on.
  await page.fill('#client-id', reader.clientId);
  await page.fill('#client-secret', 'sec_not-the-secret');
  await page.click('button[type=submit]');
  await page.waitForSelector('#signin-error:not(:empty)');
  assert.match(await page.textContent('#signin-error') ?? '', /not accepted/);
  await page.fill('#client-secret', reader.clientSecret);
  await page.click('button[type=submit]');
  await page.waitForSelector('.card[data-value]');
  assert.ok(!page.url().includes(reader.clientSecret) && !page.url().includes(reader.clientId), page.url());
  assert.match(page.url(), new RegExp(`project=${projectId}`));
  const stored = await page.evaluate<string | null>("sessionStorage.getItem('tidemark.credentials')");
  assert.deepEqual(JSON.parse(stored ?? 'null'), reader);
  assert.equal(await page.evaluate<number>('localStorage.length'), 0, 'nothing kept beyond the tab');
});

test('the default view (last 7 days) shows the API\'s numbers, a chart and every breakdown', { skip }, async () => {
  await cardsEqualApi({ range: '7d' });
  const series = (await api('metrics', { range: '7d' })).series as unknown[];
  assert.equal(await page.$$eval('#chart-table tr', (rows) => rows.length), series.length + 1, 'one chart row per bucket (+ header)');
  assert.ok(await page.$('#chart canvas'), 'the chart is drawn');
  assert.deepEqual(await panelRows('pages'), (await api('pages', { range: '7d', limit: '8' })).map((r: any) => [r.path, r.sessions]));
  assert.deepEqual(await panelRows('sources'), (await api('referrer_name', { range: '7d', limit: '8' })).map((r: any) => [r.name, r.sessions]));
  assert.deepEqual(await panelRows('geo'), (await api('country', { range: '7d', limit: '8' })).map((r: any) => [r.name, r.sessions]));
  assert.deepEqual(await panelRows('devices'), (await api('device', { range: '7d', limit: '8' })).map((r: any) => [r.name, r.sessions]));
  // Hover on the chart shows the values of a bucket.
  const box = (await page.$('#chart .u-over'))!;
  const b = (await box.boundingBox())!;
  await page.mouse.move(b.x + b.width - 4, b.y + b.height / 2);
  await page.waitForSelector('.chart-tip', { state: 'visible' });
  assert.match(await page.textContent('.chart-tip') ?? '', /Unique visitors: \d+/);
  await shot('02-overview');
});

test('changing the period and the charted metric: the URL keeps the view, the numbers follow', { skip }, async () => {
  await page.selectOption('#range', '30d');
  await cardsEqualApi({ range: '30d' });
  assert.match(page.url(), /range=30d/);
  await page.click('.card[data-metric="total_sessions"]');
  await page.waitForSelector('#chart-title:text("Sessions")');
  assert.match(page.url(), /metric=total_sessions/);
  // Custom dates, in the project's timezone.
  await page.selectOption('#range', 'custom');
  const today = new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Berlin' }).format(new Date());
  const start = new Date(Date.parse(`${today}T00:00:00Z`) - 3 * 86_400_000).toISOString().slice(0, 10);
  await page.fill('#from', start);
  await page.fill('#to', today);
  await page.click('.custom button[type=submit]');
  await cardsEqualApi({ startDate: start, endDate: today });
  assert.match(page.url(), new RegExp(`from=${start}&to=${today}`));
  // A shared link opens the same view.
  const shared = page.url();
  await page.goto(shared);
  await cardsEqualApi({ startDate: start, endDate: today });
  await page.selectOption('#range', '7d');
  await cardsEqualApi({ range: '7d' });
});

test('clicking a breakdown row filters the cards, the chart and every panel; the chip removes it', { skip }, async () => {
  await page.click('#panel-devices [role=tab][data-dimension="browser"]');
  const browsers = await panelRows('devices');
  const [browser] = browsers[0]!;
  await page.click(`#panel-devices .rows button[data-name="${browser}"]`);
  await page.waitForSelector('.chip');
  assert.match(await page.textContent('.chip') ?? '', new RegExp(`Browser is ${browser}`));
  const filters = JSON.stringify([{ name: 'browser', operator: 'is', value: [browser] }]);
  assert.equal(new URL(page.url()).searchParams.get('filters'), filters);
  await cardsEqualApi({ range: '7d', filters });
  const filtered = await api('metrics', { range: '7d', filters });
  assert.equal(await page.$$eval('#chart-table tr', (rows) => rows.length), filtered.series.length + 1);
  assert.deepEqual(await panelRows('pages'), (await api('pages', { range: '7d', filters, limit: '8' })).map((r: any) => [r.path, r.sessions]));
  assert.deepEqual(await panelRows('geo'), (await api('country', { range: '7d', filters, limit: '8' })).map((r: any) => [r.name, r.sessions]));
  // A second filter from another panel: both hold.
  const [country] = (await panelRows('geo'))[0]!;
  await page.click(`#panel-geo .rows button[data-name="${country}"]`);
  const both = JSON.stringify([{ name: 'browser', operator: 'is', value: [browser] }, { name: 'country', operator: 'is', value: [country] }]);
  await cardsEqualApi({ range: '7d', filters: both });
  assert.deepEqual(await panelRows('sources'), (await api('referrer_name', { range: '7d', filters: both, limit: '8' })).map((r: any) => [r.name, r.sessions]));
  await shot('03-filtered');
  // Remove the browser chip (keyboard: focus and Enter).
  await page.focus(`.chip-x[aria-label*="Browser is ${browser}"]`);
  await page.keyboard.press('Enter');
  const onlyCountry = JSON.stringify([{ name: 'country', operator: 'is', value: [country] }]);
  await cardsEqualApi({ range: '7d', filters: onlyCountry });
  await page.click('.chip-x');
  await cardsEqualApi({ range: '7d' });
  assert.equal(await page.$('.chip'), null);
});

test('the live count comes over the WebSocket and changes after a /track', { skip }, async () => {
  await page.waitForSelector('#live[data-state="live"]');
  const before = Number(await page.getAttribute('#live', 'data-visitors'));
  assert.equal(before, (await get(`${app.url}/insights/${projectId}/live`, checker)).body.visitors);
  const res = await post(`${app.url}/track`, track('screen_view', { __path: 'https://tidemark.example/pricing' }, { profileId: 'live-visitor-in-browser' }), writer);
  assert.equal(res.status, 202);
  await page.waitForSelector(`#live[data-visitors="${before + 1}"]`, { timeout: 10_000 });
  assert.match(await page.textContent('#live') ?? '', new RegExp(`${before + 1} current visitor`));
  await shot('04-live');
});

test('past the rate limit the page says when it retries (Retry-After), then recovers by itself', { skip }, async () => {
  // Use up the browser's client's 100 requests / 10 s, then reload. The window slides: requests
  // the earlier tests made leave it one by one, each freeing a slot the reloading page could take
  // (CI saw the page load unrefused). So wait until the window holds none of them, then fill it
  // in one burst: nothing leaves it for ~10 s, far longer than a reload.
  await new Promise((r) => setTimeout(r, 10_500));
  let refused = false;
  for (let round = 0; round < 6 && !refused; round++) {
    const answers = await Promise.all(Array.from({ length: 25 }, () => get(`${app.url}/insights/${projectId}/live`, reader)));
    refused = answers.some((r) => r.status === 429);
  }
  assert.ok(refused, 'the burst reached the read limit');
  await page.reload();
  await page.waitForSelector('text=/Too many requests for this client\\. Trying again in \\d+ s/');
  await shot('06-rate-limited');
  await cardsEqualApi({ range: '7d' });
});

test('readable at phone width', { skip }, async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(300);
  const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
  assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px`);
  await shot('05-phone');
  await page.setViewportSize({ width: 1280, height: 900 });
  assert.deepEqual(browserErrors, [], 'no script errors in the page');
});
