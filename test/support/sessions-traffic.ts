// A generated day of traffic for the session tests (test/sessions-*.test.ts) and an
// independent reference of semantics.md "Page views and sessions" / "Insights numbers"
// to check the pipeline's `sessions` and `events` rows against. Deliberately does not
// import internal/sessionize or internal/enrich: the expected enrichment values are
// written down here (looked up once from DB-IP, ua-parser-js and the referrer database).
import assert from 'node:assert/strict';
import type { Pool } from '../../internal/store/db';
import { post, track, type Credentials } from './harness';
import { mulberry32 as prng } from './random';

const MIN = 60_000;
const HOUR = 60 * MIN;
export const TIMEOUT_MS = 30 * MIN;

// ---------------------------------------------------------------- known inputs
interface UaInfo { ua: string; device: string; browser: string; os: string; brand: string; model: string }
export const UAS: Record<'chrome' | 'iphone' | 'android' | 'ipad' | 'firefox' | 'googlebot', UaInfo> = {
  chrome: {
    ua: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Safari/537.36',
    device: 'desktop', browser: 'Chrome', os: 'Windows', brand: '', model: '',
  },
  iphone: {
    ua: 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1',
    device: 'mobile', browser: 'Mobile Safari', os: 'iOS', brand: 'Apple', model: 'iPhone',
  },
  android: {
    ua: 'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36',
    device: 'mobile', browser: 'Chrome', os: 'Android', brand: 'Google', model: 'Pixel 8',
  },
  ipad: {
    ua: 'Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1',
    device: 'tablet', browser: 'Mobile Safari', os: 'iOS', brand: 'Apple', model: 'iPad',
  },
  firefox: {
    ua: 'Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0',
    device: 'desktop', browser: 'Firefox', os: 'Ubuntu', brand: '', model: '',
  },
  googlebot: {
    ua: 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
    device: 'server', browser: '', os: '', brand: '', model: '',
  },
};
const HUMAN_UAS = ['chrome', 'iphone', 'android', 'ipad', 'firefox'] as const;

/** Public IPs and their DB-IP City Lite country (looked up in the bundled database). */
export const IPS: [string, string][] = [
  ['8.8.8.8', 'US'], ['1.1.1.1', 'AU'], ['81.2.69.160', 'GB'], ['2.16.0.1', 'BR'], ['5.9.0.1', 'DE'],
  ['31.13.64.1', 'IN'], ['46.101.0.1', 'GB'], ['77.88.8.8', 'RU'], ['133.11.0.1', 'JP'], ['200.160.0.8', 'BR'],
  ['41.0.0.1', 'ZA'], ['203.2.218.1', 'AU'], ['2a00:1450:4001::1', 'DE'],
];

export const SITE = 'https://shop.example';
/** `__referrer` as sent -> what the session stores (own host and none are "no referrer"). */
const REFERRERS: { sent: string | null; referrer: string; name: string; type: string }[] = [
  { sent: 'https://www.google.com/', referrer: 'https://www.google.com', name: 'Google', type: 'search' },
  { sent: 'https://www.facebook.com/', referrer: 'https://www.facebook.com', name: 'Facebook', type: 'social' },
  { sent: 'https://t.co/abc', referrer: 'https://t.co/abc', name: 'Twitter', type: 'social' },
  { sent: 'https://some-blog.example.org/post/1', referrer: 'https://some-blog.example.org/post/1', name: 'some-blog.example.org', type: 'unknown' },
  { sent: `${SITE}/from-inside`, referrer: '', name: '', type: '' },
  { sent: null, referrer: '', name: '', type: '' },
];
/**
 * With no external referrer, the page URL's utm_source names the source (semantics.md
 * "OpenPanel fidelity"): the name and type the referrer list gives, by hand. Neither
 * `newsletter` nor `fb` is listed (fb.me is, fb.com is not): the value itself, unknown.
 */
const URL_SOURCES: Record<string, { name: string; type: string }> = {
  newsletter: { name: 'newsletter', type: 'unknown' },
  fb: { name: 'fb', type: 'unknown' },
};
const UTM_QUERIES = [
  '',
  '',
  '?utm_source=newsletter&utm_medium=email&utm_campaign=spring&utm_term=shoes&utm_content=hero',
  '?utm_source=fb&utm_campaign=retargeting',
];
const PAGES = ['/', '/pricing', '/docs', '/docs/api', '/blog/post-1', '/blog/post-2', '/checkout', '/about'];
const CUSTOM = ['click', 'signup', 'scroll', 'add_to_cart'];

// ---------------------------------------------------------------- generation
export interface GenDevice {
  index: number;
  ua: keyof typeof UAS;
  ip: string;
  country: string;
  /** Explicit profileId (two devices share one), else the device id is the profile. */
  profileId: string | null;
}

export interface GenEvent {
  device: number;
  at: number;
  name: string;
  url: string | null;
  title: string | null;
  referrer: string | null;
  props: Record<string, unknown>;
}

export interface Traffic {
  day: string;
  dayStart: number;
  devices: GenDevice[];
  /** All events in time order (devices interleaved); per device in time order. */
  events: GenEvent[];
}


/** The UTC day before `now` (YYYY-MM-DD). */
export function yesterday(now = Date.now()): string {
  return new Date(now - 86_400_000).toISOString().slice(0, 10);
}

/**
 * ~20 human devices and one Googlebot, several sessions each on `day` (UTC), separated by
 * gaps of 30 min or more (some exactly 30:00), with gaps of exactly 29:59.999 inside
 * sessions; one device's session starts the evening before and crosses midnight.
 */
export function generateTraffic(seed: number, day = yesterday(), humans = 20): Traffic {
  const rnd = prng(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const dayStart = Date.parse(`${day}T00:00:00.000Z`);
  const devices: GenDevice[] = [];
  for (let i = 0; i < humans; i++) {
    // (i mod 5, i mod 13) are distinct pairs for i < 65: every device has its own UA + IP.
    const [ip, country] = IPS[i % IPS.length]!;
    devices.push({ index: i, ua: HUMAN_UAS[i % HUMAN_UAS.length]!, ip, country, profileId: i === 3 || i === 8 ? 'user-shared' : i === 5 ? 'user-5' : null });
  }
  devices.push({ index: humans, ua: 'googlebot', ip: '66.249.66.1', country: 'US', profileId: null });

  const events: GenEvent[] = [];
  for (const d of devices) {
    // Device 0 starts at 23:50 the evening before (the session crosses midnight).
    let t = d.index === 0 ? dayStart - 10 * MIN : dayStart + int(30, 300) * MIN + int(0, 59_999);
    const sessions = d.ua === 'googlebot' ? 3 : int(2, 4);
    for (let s = 0; s < sessions; s++) {
      if (s > 0) {
        // Gap to the next session: exactly 30:00 for some, else 30:00.001 .. 3 h.
        t += s === 1 && d.index % 4 === 1 ? TIMEOUT_MS : TIMEOUT_MS + 1 + int(0, 150) * MIN + int(0, 59_999);
      }
      const utm = pick(UTM_QUERIES);
      const ref = pick(REFERRERS);
      const crossing = d.index === 0 && s === 0; // 23:50, 23:58, 00:05
      const n = crossing ? 3 : d.index === 2 && s === 0 ? 1 : int(1, 8); // some single-event bounces
      const startsWithCustom = rnd() < 0.15;
      let page = pick(PAGES);
      for (let k = 0; k < n; k++) {
        if (k > 0) {
          // Inside a session: 0 .. 10 min apart; now and then exactly 29:59.999.
          t += crossing ? (k === 1 ? 8 * MIN : 7 * MIN) : rnd() < 0.08 ? TIMEOUT_MS - 1 : int(0, 10 * MIN);
        }
        const first = k === 0;
        const isView = first ? !startsWithCustom : rnd() < 0.6;
        if (isView) {
          const prev = page;
          page = first ? page : pick(PAGES);
          events.push({
            device: d.index, at: t, name: 'screen_view',
            url: `${SITE}${page}${first ? utm : ''}`, title: `Title of ${page}`,
            referrer: first ? ref.sent : `${SITE}${prev}`, props: {},
          });
        } else {
          events.push({
            device: d.index, at: t, name: pick(CUSTOM),
            // Custom events usually carry the current page (OpenPanel SDKs do), not always.
            url: rnd() < 0.7 ? `${SITE}${page}${first ? utm : ''}` : null, title: null,
            referrer: first ? ref.sent : null, props: { button: pick(['buy', 'more', 'close']), n: int(1, 5) },
          });
        }
      }
    }
  }
  const last = Math.max(...events.map((e) => e.at));
  assert.ok(last < dayStart + 86_400_000, `generated traffic must stay within ${day} (last ${new Date(last).toISOString()})`);
  assert.ok(last < Date.now() - 60_000, 'generated traffic must be in the past');
  // Global time order, devices interleaved; stable for equal times (per-device order kept).
  events.sort((a, b) => a.at - b.at);
  return { day, dayStart, devices, events };
}

// ---------------------------------------------------------------- sending
/**
 * Sends one event through POST /track as its device (user agent, IP, maybe a profile id), with
 * its time and, where it has them, its page, title and referrer; asserts the 202 and returns
 * the device id it was given.
 */
export async function postEvent(
  url: string, writer: Credentials, e: GenEvent, as: { userAgent: string; ip: string; profileId?: string | null },
): Promise<string> {
  const props: Record<string, unknown> = { ...e.props, __timestamp: new Date(e.at).toISOString() };
  if (e.url !== null) props.__path = e.url;
  if (e.title !== null) props.__title = e.title;
  if (e.referrer !== null) props.__referrer = e.referrer;
  const res = await post(`${url}/track`, track(e.name, props, as.profileId ? { profileId: as.profileId } : {}), writer, { userAgent: as.userAgent, ip: as.ip });
  assert.equal(res.status, 202, `POST /track: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.deviceId;
}

/** Sends every event through POST /track; per device in order (each waits for the previous 202). */
export async function sendTraffic(
  url: string,
  writer: Credentials,
  traffic: Traffic,
  opts: { concurrency?: number; onSent?: (sent: number) => void } = {},
): Promise<Map<number, string>> {
  const deviceIds = new Map<number, string>();
  const chains = new Map<number, Promise<void>>();
  const limit = opts.concurrency ?? 16;
  let active = 0;
  let sent = 0;
  const waiters: (() => void)[] = [];
  const acquire = async () => {
    while (active >= limit) await new Promise<void>((r) => waiters.push(r));
    active++;
  };
  const release = () => {
    active--;
    waiters.shift()?.();
  };
  const sendOne = async (e: GenEvent) => {
    const d = traffic.devices[e.device]!;
    const deviceId = await postEvent(url, writer, e, { userAgent: UAS[d.ua].ua, ip: d.ip, profileId: d.profileId });
    const known = deviceIds.get(e.device);
    if (known) assert.equal(deviceId, known, `device ${e.device} keeps its device id`);
    else deviceIds.set(e.device, deviceId);
    opts.onSent?.(++sent);
  };
  for (const e of traffic.events) {
    await acquire();
    const prev = chains.get(e.device) ?? Promise.resolve();
    const next = prev.then(() => sendOne(e)).finally(release);
    chains.set(e.device, next);
  }
  await Promise.all(chains.values());
  assert.equal(new Set(deviceIds.values()).size, new Set(traffic.events.map((e) => e.device)).size, 'every device has its own device id');
  return deviceIds;
}

// ---------------------------------------------------------------- reference
export interface ExpectedSession {
  device: number;
  device_id: string;
  profile_id: string;
  started_at: number;
  last_event_at: number;
  duration_ms: number;
  screen_view_count: number;
  event_count: number;
  is_bounce: boolean;
  is_bot: boolean;
  entry_origin: string;
  entry_path: string;
  exit_origin: string;
  exit_path: string;
  referrer: string;
  referrer_name: string;
  referrer_type: string;
  utm_source: string;
  utm_medium: string;
  utm_campaign: string;
  utm_term: string;
  utm_content: string;
  country: string;
  device_type: string;
  browser: string;
  os: string;
  /** Followed by another session of the device: ended, with a session_end row. */
  ended_by_next: boolean;
}

export interface ExpectedView {
  device_id: string;
  at: number;
  path: string;
  duration_ms: number | null;
}

export interface Expected {
  sessions: ExpectedSession[];
  views: ExpectedView[];
  realEvents: number;
}

function urlParts(url: string | null): { origin: string; path: string; query: URLSearchParams } {
  if (!url) return { origin: '', path: '', query: new URLSearchParams() };
  const u = new URL(url);
  return { origin: u.origin, path: u.pathname, query: u.searchParams };
}

/** The sessions semantics.md gives for the traffic, computed from the generated events. */
export function expectedSessions(traffic: Traffic, deviceIds: Map<number, string>): Expected {
  const sessions: ExpectedSession[] = [];
  const views: ExpectedView[] = [];
  for (const d of traffic.devices) {
    const mine = traffic.events.filter((e) => e.device === d.index);
    const runs: GenEvent[][] = [];
    for (const e of mine) {
      const cur = runs[runs.length - 1];
      if (cur && e.at - cur[cur.length - 1]!.at < TIMEOUT_MS) cur.push(e);
      else runs.push([e]);
    }
    const deviceId = deviceIds.get(d.index)!;
    const ua = UAS[d.ua];
    runs.forEach((run, i) => {
      const first = run[0]!;
      const last = run[run.length - 1]!;
      const sv = run.filter((e) => e.name === 'screen_view');
      const entry = urlParts(sv[0]?.url ?? null);
      const exit = urlParts(sv[sv.length - 1]?.url ?? null);
      const firstUrl = urlParts(first.url);
      const sent = REFERRERS.find((r) => r.sent === first.referrer) ?? REFERRERS[REFERRERS.length - 1]!;
      const urlSource = sent.referrer === '' ? URL_SOURCES[firstUrl.query.get('utm_source') ?? ''] : undefined;
      const ref = urlSource ? { ...sent, ...urlSource } : sent;
      sessions.push({
        device: d.index, device_id: deviceId, profile_id: d.profileId ?? deviceId,
        started_at: first.at, last_event_at: last.at, duration_ms: last.at - first.at,
        screen_view_count: sv.length, event_count: run.length, is_bounce: sv.length <= 1, is_bot: d.ua === 'googlebot',
        entry_origin: entry.origin, entry_path: entry.path, exit_origin: exit.origin, exit_path: exit.path,
        referrer: ref.referrer, referrer_name: ref.name, referrer_type: ref.type,
        utm_source: firstUrl.query.get('utm_source') ?? '', utm_medium: firstUrl.query.get('utm_medium') ?? '',
        utm_campaign: firstUrl.query.get('utm_campaign') ?? '', utm_term: firstUrl.query.get('utm_term') ?? '',
        utm_content: firstUrl.query.get('utm_content') ?? '',
        country: d.country, device_type: ua.device, browser: ua.browser, os: ua.os,
        ended_by_next: i < runs.length - 1,
      });
      run.forEach((e, k) => {
        if (e.name !== 'screen_view') return;
        const next = run[k + 1];
        views.push({ device_id: deviceId, at: e.at, path: urlParts(e.url).path, duration_ms: next ? next.at - e.at : null });
      });
    });
  }
  sessions.sort(bySessionOrder);
  views.sort(byViewOrder);
  return { sessions, views, realEvents: traffic.events.length };
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
export const bySessionOrder = (a: ExpectedSession, b: ExpectedSession) => cmp(a.device_id, b.device_id) || a.started_at - b.started_at;
export const byViewOrder = (a: ExpectedView, b: ExpectedView) => cmp(a.device_id, b.device_id) || a.at - b.at || cmp(a.path, b.path);

const round2 = (x: number) => Math.round(x * 100) / 100;

/** /insights metrics for sessions starting in [from, to), bots left out (computed here). */
export function expectedMetrics(sessions: ExpectedSession[], from: number, to: number) {
  const s = sessions.filter((x) => !x.is_bot && x.started_at >= from && x.started_at < to);
  const timed = s.filter((x) => x.duration_ms > 0);
  const views = s.reduce((n, x) => n + x.screen_view_count, 0);
  return {
    bounce_rate: s.length ? round2((s.filter((x) => x.is_bounce).length / s.length) * 100) : 0,
    unique_visitors: new Set(s.map((x) => x.profile_id)).size,
    total_sessions: s.length,
    avg_session_duration: timed.length ? round2(timed.reduce((n, x) => n + x.duration_ms, 0) / timed.length / 1000) : 0,
    total_screen_views: views,
    views_per_session: s.length ? round2(views / s.length) : 0,
  };
}

// ---------------------------------------------------------------- reading the store
export const REAL_EVENTS_SQL = "SELECT count(*)::int AS n FROM events WHERE name NOT IN ('session_start', 'session_end')";

export async function realEventCount(db: Pool): Promise<number> {
  return (await db.query<{ n: number }>(REAL_EVENTS_SQL)).rows[0]!.n;
}

/** The `sessions` rows shaped like ExpectedSession (ids left out), same order. */
export async function storedSessions(db: Pool, deviceIds: Map<number, string>): Promise<ExpectedSession[]> {
  const byId = new Map([...deviceIds].map(([i, id]) => [id, i]));
  const r = await db.query(`SELECT * FROM sessions`);
  const ends = await db.query<{ session_id: string; n: number }>(
    "SELECT session_id, count(*)::int AS n FROM events WHERE name = 'session_end' GROUP BY session_id",
  );
  const endCount = new Map(ends.rows.map((x) => [x.session_id, x.n]));
  return r.rows.map((row) => ({
    device: byId.get(row.device_id) ?? -1, device_id: row.device_id, profile_id: row.profile_id,
    started_at: row.started_at.getTime(), last_event_at: row.last_event_at.getTime(), duration_ms: Number(row.duration_ms),
    screen_view_count: row.screen_view_count, event_count: row.event_count, is_bounce: row.is_bounce, is_bot: row.is_bot,
    entry_origin: row.entry_origin, entry_path: row.entry_path, exit_origin: row.exit_origin, exit_path: row.exit_path,
    referrer: row.referrer, referrer_name: row.referrer_name, referrer_type: row.referrer_type,
    utm_source: row.utm_source, utm_medium: row.utm_medium, utm_campaign: row.utm_campaign, utm_term: row.utm_term,
    utm_content: row.utm_content, country: row.country, device_type: row.device, browser: row.browser, os: row.os,
    // A session ended by the next one is ended and has exactly one session_end row; the
    // last session of a device is still open (its idle check is 30 min of wall time away).
    ended_by_next: row.ended === true && endCount.get(row.id) === 1,
  })).sort(bySessionOrder);
}

export async function storedViews(db: Pool): Promise<ExpectedView[]> {
  const r = await db.query(
    "SELECT device_id, created_at, path, duration_ms FROM events WHERE name = 'screen_view'",
  );
  return r.rows.map((row) => ({
    device_id: row.device_id, at: row.created_at.getTime(), path: row.path,
    duration_ms: row.duration_ms === null ? null : Number(row.duration_ms),
  })).sort(byViewOrder);
}

/** Asserts the session_start / session_end rows: one start per session at its start, ends only for ended sessions. */
export async function assertSessionEvents(db: Pool): Promise<void> {
  const bad = await db.query(`
    SELECT s.id, s.started_at, s.last_event_at, s.ended,
           (SELECT count(*) FROM events e WHERE e.session_id = s.id AND e.name = 'session_start')::int AS starts,
           (SELECT count(*) FROM events e WHERE e.session_id = s.id AND e.name = 'session_start' AND e.created_at = s.started_at)::int AS starts_at_start,
           (SELECT count(*) FROM events e WHERE e.session_id = s.id AND e.name = 'session_end')::int AS ends,
           (SELECT count(*) FROM events e WHERE e.session_id = s.id AND e.name = 'session_end' AND e.created_at = s.last_event_at)::int AS ends_at_last,
           (SELECT count(*) FROM events e WHERE e.session_id = s.id AND e.name NOT IN ('session_start', 'session_end'))::int AS real,
           s.event_count
    FROM sessions s`);
  for (const row of bad.rows) {
    assert.equal(row.starts, 1, `session ${row.id}: one session_start`);
    assert.equal(row.starts_at_start, 1, `session ${row.id}: session_start at started_at`);
    assert.equal(row.ends, row.ended ? 1 : 0, `session ${row.id}: session_end rows (ended=${row.ended})`);
    assert.equal(row.ends_at_last, row.ends, `session ${row.id}: session_end at last_event_at`);
    assert.equal(row.real, row.event_count, `session ${row.id}: event_count equals its event rows`);
  }
  const orphans = await db.query('SELECT count(*)::int AS n FROM events e WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = e.session_id)');
  assert.equal(orphans.rows[0].n, 0, 'every event belongs to a stored session');
}

/** Drops fields that differ between equal runs (nothing, today) and compares. */
export function assertSameSessions(actual: ExpectedSession[], expected: ExpectedSession[], what: string): void {
  assert.equal(actual.length, expected.length, `${what}: number of sessions`);
  for (let i = 0; i < expected.length; i++) {
    assert.deepEqual(actual[i], expected[i], `${what}: session #${i} (device ${expected[i]!.device}, ${new Date(expected[i]!.started_at).toISOString()})`);
  }
}
