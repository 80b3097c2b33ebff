// The dashboard in a real browser (Debian's chromium, driven by playwright-core): sign in with a
// read client, see the API's numbers, change the period, click a breakdown row and see the
// filter applied everywhere (numbers equal the API's for the same query), remove it, see the
// live count change after a /track, open the product-analytics views (a funnel built from the
// event names, the retention cohort grid, a profile, a session's events: each showing the API's
// answer for the same query), and read it at phone width. Screenshots are written to
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
import { seedProductAnalytics, seedWeek } from './support/dashboard-data';
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
/** The identified profiles seedProductAnalytics made. */
let profiles: string[];
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
  const [seeded, analytics] = await Promise.all([seedWeek(app.url, writer, { visits: 60 }), seedProductAnalytics(app.url, writer)]);
  profiles = analytics.profiles;
  await waitFor(async () => (await api('metrics', { range: '12m' })).metrics.total_sessions === seeded.sessions + analytics.sessions
    && (await api('profiles', { limit: '100' })).length === profiles.length, { timeoutMs: 60_000, intervalMs: 250, what: 'the seeded weeks and profiles in insights' });
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

// -- product analytics -----------------------------------------------------------------

/** The funnel on screen, one step per row, in the API's field names. */
async function funnelShown(): Promise<unknown[]> {
  await page.waitForSelector('#funnel-result[aria-busy="false"]');
  return page.$$eval('.funnel-step', (rows: any[]) => rows.map((r) => ({
    step: Number(r.dataset.step), eventName: r.dataset.event, users: Number(r.dataset.users), conversionRateFromStart: Number(r.dataset.conversion),
    dropoffPercent: r.dataset.dropoff === '' ? null : Number(r.dataset.dropoff), isHighestDropoff: r.dataset.highest === 'true',
  })));
}

/** Waits for the funnel of `q` (range 7d, the default period) and checks it is the API's. */
async function funnelEqualsApi(q: { steps: string[]; windowHours: number; groupBy: string }): Promise<any> {
  const expected = await api('funnel', { range: '7d', steps: JSON.stringify(q.steps), windowHours: String(q.windowHours), groupBy: q.groupBy });
  assert.deepEqual(await funnelShown(), expected.steps);
  assert.deepEqual(await page.$$eval('.step-select', (els: any[]) => els.map((e) => e.value)), q.steps);
  assert.equal(Number(await page.getAttribute('#funnel-overall', 'data-value')), expected.overallConversionRate);
  assert.equal(await page.textContent('#funnel-overall'), `${expected.overallConversionRate}%`);
  const highest = expected.steps.find((x: any) => x.isHighestDropoff);
  assert.deepEqual(await page.$$eval('.funnel-step.highest', (els: any[]) => els.map((e) => Number(e.dataset.step))), highest ? [highest.step] : []);
  if (highest) assert.equal(await page.textContent('.funnel-step.highest .badge'), 'Highest drop-off');
  return expected;
}

/** Step n of the funnel becomes `name` (nothing to do when it is). */
async function pickStep(n: number, name: string): Promise<void> {
  if ((await page.$eval(`.step-select[data-step="${n}"]`, (e: any) => e.value)) === name) return;
  await page.selectOption(`.step-select[data-step="${n}"]`, name);
  await page.waitForSelector('#funnel-result[aria-busy="false"]');
}

test('the funnel: events picked from the catalogue, each step with the API\'s users, conversion and drop-off', { skip }, async () => {
  const names: string[] = await api('events/names', {});
  const steps = ['screen_view', 'signup_started', 'signup_completed', 'purchase'];
  for (const n of steps) assert.ok(names.includes(n), `${n} is among ${names.join(', ')}`);
  await page.click('.view-tab[data-view="funnel"]');
  // A new funnel starts with the two most frequent events.
  await funnelEqualsApi({ steps: names.slice(0, 2), windowHours: 24, groupBy: 'session_id' });
  await pickStep(1, steps[0]!);
  await pickStep(2, steps[1]!);
  await page.click('#add-step');
  await page.waitForSelector('.step-select[data-step="3"]');
  await pickStep(3, steps[2]!);
  await page.click('#add-step');
  await page.waitForSelector('.step-select[data-step="4"]');
  await pickStep(4, steps[3]!);
  await funnelEqualsApi({ steps, windowHours: 24, groupBy: 'session_id' });
  await page.selectOption('#funnel-window', '48');
  await funnelEqualsApi({ steps, windowHours: 48, groupBy: 'session_id' });
  await page.click('.seg-btn[data-group="profile_id"]');
  await funnelEqualsApi({ steps, windowHours: 48, groupBy: 'profile_id' });
  // The URL keeps the funnel (a reload of a view from its URL: the session test).
  const url = new URL(page.url());
  assert.deepEqual([url.searchParams.get('view'), url.searchParams.getAll('step'), url.searchParams.get('window'), url.searchParams.get('groupBy')], ['funnel', steps, '48', 'profile_id']);
  await page.click('.seg-btn[data-group="session_id"]');
  const shown = await funnelEqualsApi({ steps, windowHours: 48, groupBy: 'session_id' });
  assert.ok(shown.steps[0].users > shown.steps[3].users && shown.steps[3].users > 0, `the seeded funnel narrows: ${JSON.stringify(shown.steps)}`);
  await shot('funnel');
});

test('retention: the API\'s cohort grid, weighted average first, 13 weeks, fractions shown as percentages', { skip }, async () => {
  await page.click('.view-tab[data-view="retention"]');
  await page.waitForSelector('#cohort-grid');
  const cohorts: any[] = await api('retention/cohort', {});
  assert.ok(cohorts.length > 4 && cohorts[0].cohort_interval === 'Weighted Average', JSON.stringify(cohorts.map((c) => c.cohort_interval)));
  assert.deepEqual(await page.$$eval('#cohort-grid thead th', (ths: any[]) => ths.slice(2).map((t) => t.textContent)), Array.from({ length: 13 }, (_, k) => `Week ${k}`));
  const rows = await page.$$eval('#cohort-grid tbody tr', (trs: any[]) => trs.map((tr) => ({
    cohort: tr.dataset.cohort as string, sum: Number(tr.dataset.sum),
    cells: [...tr.querySelectorAll('td[data-week]')].map((td: any) => ({ week: Number(td.dataset.week), value: td.dataset.value ?? null, fraction: td.dataset.percentage ?? null, text: td.textContent, shaded: td.style.background })),
  })));
  assert.deepEqual(rows.map((r) => r.cohort), cohorts.map((c) => c.cohort_interval));
  let shown = 0;
  rows.forEach((row, i) => {
    const c = cohorts[i];
    assert.equal(row.sum, c.sum, `${row.cohort}: profiles`);
    assert.deepEqual(row.cells.map((x) => x.week), Array.from({ length: 13 }, (_, k) => k));
    for (const cell of row.cells) {
      if (cell.value === null) {
        assert.equal(c.values[cell.week], 0, `${row.cohort} week ${cell.week}: blank only when nobody can be counted yet`);
        continue;
      }
      shown++;
      assert.equal(Number(cell.value), c.values[cell.week], `${row.cohort} week ${cell.week}: value`);
      assert.equal(Number(cell.fraction), c.percentages[cell.week], `${row.cohort} week ${cell.week}: fraction`);
      assert.equal(cell.text, `${Math.round(c.percentages[cell.week] * 100)}%`, `${row.cohort} week ${cell.week}: shown as a percentage`);
      if (c.percentages[cell.week] > 0) assert.match(cell.shaded, /rgba\(79, 70, 229/, 'a share above 0 is shaded');
    }
  });
  assert.ok(shown > 13, `cells with a number: ${shown}`);
  await shot('retention');
});

test('profiles: the list and its search, then a profile with its properties, recent events and sessions as the API has them', { skip }, async () => {
  await page.click('.view-tab[data-view="profiles"]');
  await page.waitForSelector('#profile-list[aria-busy="false"]');
  const ids = (rows: any[]) => rows.map((r) => r.id);
  const listed = () => page.$$eval('#profile-list [data-id]', (els: any[]) => els.map((e) => e.dataset.id));
  const all = await api('profiles', { limit: '100' });
  assert.deepEqual(await listed(), ids(all));
  assert.deepEqual([...ids(all)].sort(), [...profiles].sort());
  await page.fill('#profile-search', 'lovel');
  await page.waitForSelector('#profile-list[data-query="lovel"][aria-busy="false"]');
  assert.deepEqual(await listed(), ids(await api('profiles', { name: 'lovel', limit: '100' })));
  assert.deepEqual(await listed(), ['user-ada']);
  assert.equal(new URL(page.url()).searchParams.get('q'), 'lovel');
  await page.click('#profile-list [data-id="user-ada"]');
  await page.waitForSelector('#profile[data-id="user-ada"]');
  const [one, sessions, metrics] = await Promise.all([api('profiles/user-ada', { eventLimit: '100' }), api('profiles/user-ada/sessions', { limit: '100' }), api('profiles/user-ada/metrics', {})]);
  assert.equal(await page.textContent('#profile-name'), `${one.profile.first_name} ${one.profile.last_name}`);
  const props = await page.$$eval('#profile-properties dd', (dds: any[]) => dds.map((d) => [d.dataset.key, d.textContent]));
  assert.deepEqual(props, Object.entries(one.profile.properties).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]));
  // Recent events: the API's, newest first (a timeline of page views and the funnel's events).
  const events = await page.$$eval('#profile-events [data-id]', (els: any[]) => els.map((e) => [e.dataset.id, e.dataset.name]));
  assert.deepEqual(events, one.recentEvents.map((e: any) => [e.id, e.name]));
  assert.ok(events.length >= 2 && one.recentEvents[0].created_at >= one.recentEvents.at(-1).created_at);
  assert.deepEqual(await page.$$eval('#profile-sessions [data-id]', (els: any[]) => els.map((e) => [e.dataset.id, Number(e.dataset.events)])), sessions.map((x: any) => [x.id, x.event_count]));
  const stat = (key: string) => page.textContent(`#profile-metrics [data-metric="${key}"] .stat-value`);
  assert.deepEqual([await stat('sessions'), await stat('totalEvents'), await stat('screenViews'), await stat('uniqueDaysActive')],
    [metrics.sessions, metrics.totalEvents, metrics.screenViews, metrics.uniqueDaysActive].map(String));
  assert.equal(metrics.sessions, sessions.length);
  await shot('profile');
});

test("a session's events in order, from the profile's sessions and from the sessions list", { skip }, async () => {
  const sessions = await api('profiles/user-ada/sessions', { limit: '100' });
  const session = sessions.find((x: any) => x.event_count > 2) ?? sessions[0];
  await page.click(`#profile-sessions [data-id="${session.id}"]`);
  await page.waitForSelector(`.session[data-session="${session.id}"]`);
  // The API's events of the profile, those of this session, oldest first.
  const own = (await api('events', { profileId: 'user-ada', range: '12m', limit: '100' })).filter((e: any) => e.session_id === session.id).reverse();
  const shown = () => page.$$eval('#session-events [data-id]', (els: any[]) => els.map((e) => [e.dataset.id, e.dataset.name]));
  assert.deepEqual(await shown(), own.map((e: any) => [e.id, e.name]));
  assert.equal(own.length, session.event_count, "every event the session counts is listed");
  assert.equal(await page.textContent('#session-events .event-path'), session.entry_path, 'it starts on its entry page');
  assert.equal(await page.textContent('#session-events .event-time'), '+0:00');
  await shot('session');
  // The URL names the session: a reload (or a shared link) opens it again.
  await page.reload();
  await page.waitForSelector(`.session[data-session="${session.id}"] #session-events`);
  assert.deepEqual(await shown(), own.map((e: any) => [e.id, e.name]));
  // The same from the Sessions tab (the period's latest sessions).
  await page.click('.view-tab[data-view="sessions"]');
  await page.waitForSelector('#session-list[aria-busy="false"]');
  const latest = await api('sessions', { range: '7d', limit: '100' });
  assert.deepEqual(await page.$$eval('#session-list [data-id]', (els: any[]) => els.map((e) => e.dataset.id)), latest.map((x: any) => x.id));
  const anonymous = latest.find((x: any) => x.profile_id === x.device_id && x.event_count > 2);
  await page.click(`#session-list [data-id="${anonymous.id}"]`);
  await page.waitForSelector(`.session[data-session="${anonymous.id}"] #session-events`);
  const theirs = (await api('events', { profileId: anonymous.profile_id, range: '7d', limit: '100' })).filter((e: any) => e.session_id === anonymous.id).reverse();
  assert.deepEqual(await shown(), theirs.map((e: any) => [e.id, e.name]));
  assert.equal(theirs.length, anonymous.event_count);
  await page.click('.view-tab[data-view="overview"]');
  await cardsEqualApi({ range: '7d' });
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
