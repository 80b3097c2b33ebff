// Bench data generator: loads N events (with their sessions) for 30 days ending now straight
// into PostgreSQL, shaped exactly like what the worker writes (sessions rows; events rows for
// screen views, custom events and the service's own session_start/session_end), then logs
// every (project, hour) of sessions and events in rollup_invalidations as the worker's commit does, refreshes the
// rollups with the service's own refreshRollups(), builds the visit days behind unique visitors
// (as the service's fold does: applyVisitorLog) and runs VACUUM ANALYZE. It also writes a
// `profiles` row for every identified profile id it generates ('user-<n>', per project: a
// first/last name and email derived from n, a properties object), as an identify would.
//
//   npx tsx bench/generate.ts --events 1000000 --db postgres://postgres@127.0.0.1:5432/bench_1m [--no-rollups] [--no-hll]
//
// --no-hll: the database is owned and loaded by a role that is not a superuser (bench_nohll,
// created when missing), so the migrations cannot create the hll extension and unique visitors
// are always counted exactly, as on a server without the extension; read it as that role
// (the URL is printed), e.g. `npx tsx bench/queries.ts --db postgres://bench_nohll@…/bench_1m_nohll`,
// which then writes the "Insights queries, without hll" section.
//
// --no-rollups: every hour is still logged in rollup_invalidations, but the refresh is
// skipped (it takes ~10 minutes per 1M events): rollup-reading routes then read those hours
// raw (exact, slower); for benchmarks of routes that read raw rows anyway. Noted in bench_meta.
//
// Bulk path: every row is a pure function of (project, session number, event number), computed
// by INSERT ... SELECT FROM generate_series with hashint8extended() as the random source, so
// sessions and their events agree (entry/exit page, screen-view count, duration, bounce, time
// on page) without reading each other; chunks in time order on two connections. Secondary
// indexes of events and sessions are dropped for the load and rebuilt from their catalogued
// definitions afterwards (a sorted build beats 10M random inserts). The target database is
// dropped and recreated (its name must start with "bench").
//
// Shape: one main project (80% of the sessions, Europe/Berlin) and four noise projects;
// n real events per session (35% one, else 2..6), plus session_start and, for sessions idle
// 30+ minutes, session_end: ~4.95 rows per session; ~0.5 distinct profiles per session;
// Zipf-like pages (500 paths on two origins), 30 countries with regions and cities, search /
// social / email / paid referrers, UTM on ~15% of sessions, ~80 device/browser/OS versions,
// 2% bots, a daily cycle (peak at 14:00 UTC, 4x the trough).
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { EventRecord } from '../internal/model/event';
import { createPool, ensureDatabase, redactUrl, type Pool } from '../internal/store/db';
import { migrate } from '../internal/store/migrate';
import { refreshRollups } from '../internal/store/rollups';
import { applyVisitorLog } from '../internal/store/visitor-days';
import { PartitionKeeper } from '../internal/store/partitions';
import { fillSessionSteps } from '../internal/store/session-steps';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const SPAN_MS = 30 * DAY;
const ROWS_PER_SESSION = 4.95;

export const MAIN_PROJECT = 'bench-main';
export const PROJECTS = [
  { id: MAIN_PROJECT, timezone: 'Europe/Berlin', share: 0.8 },
  { id: 'bench-noise-1', timezone: 'UTC', share: 0.08 },
  { id: 'bench-noise-2', timezone: 'America/New_York', share: 0.06 },
  { id: 'bench-noise-3', timezone: 'Asia/Kolkata', share: 0.04 },
  { id: 'bench-noise-4', timezone: 'Asia/Tokyo', share: 0.02 },
] as const;

// ---------------------------------------------------------------------------------------
// Lookup data: weighted lists turned into slot arrays (value index per slot) for SQL.

type Weighted<T> = [T, number][];

/** Slot array of `size` entries: entry j is the 1-based index of the item covering j/size. */
function slots(weights: number[], size: number): number[] {
  const total = weights.reduce((a, b) => a + b, 0);
  const out: number[] = [];
  let acc = 0;
  let item = 0;
  for (let j = 0; j < size; j++) {
    const x = ((j + 0.5) / size) * total;
    while (item < weights.length - 1 && acc + weights[item]! <= x) acc += weights[item++]!;
    out.push(item + 1);
  }
  return out;
}

const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;
const textArray = (xs: readonly string[]) => `ARRAY[${xs.map(lit).join(',')}]::text[]`;
const intArray = (xs: readonly number[]) => `'{${xs.join(',')}}'::int[]`;

// 30 countries; the first city of each is its capital region. Weight ~ traffic share.
const COUNTRIES: Weighted<[string, [string, string][]]> = [
  [['US', [['California', 'San Francisco'], ['California', 'Los Angeles'], ['New York', 'New York'], ['Texas', 'Austin'], ['Texas', 'Paris'], ['Washington', 'Seattle'], ['Illinois', 'Chicago']]], 25],
  [['DE', [['Berlin', 'Berlin'], ['Bavaria', 'Munich'], ['Hamburg', 'Hamburg'], ['Hesse', 'Frankfurt am Main'], ['North Rhine-Westphalia', 'Cologne']]], 9],
  [['GB', [['England', 'London'], ['England', 'Manchester'], ['Scotland', 'Edinburgh']]], 7],
  [['FR', [['Île-de-France', 'Paris'], ['Auvergne-Rhône-Alpes', 'Lyon'], ['Occitanie', 'Toulouse']]], 6],
  [['IN', [['Karnataka', 'Bengaluru'], ['Maharashtra', 'Mumbai'], ['Delhi', 'New Delhi'], ['Telangana', 'Hyderabad']]], 6],
  [['CA', [['Ontario', 'Toronto'], ['British Columbia', 'Vancouver'], ['Quebec', 'Montreal']]], 4],
  [['NL', [['North Holland', 'Amsterdam'], ['South Holland', 'Rotterdam']]], 3],
  [['BR', [['São Paulo', 'São Paulo'], ['Rio de Janeiro', 'Rio de Janeiro']]], 3],
  [['ES', [['Madrid', 'Madrid'], ['Catalonia', 'Barcelona']]], 3],
  [['IT', [['Lazio', 'Rome'], ['Lombardy', 'Milan']]], 2.5],
  [['SE', [['Stockholm', 'Stockholm'], ['Västra Götaland', 'Gothenburg']]], 2],
  [['PL', [['Masovia', 'Warsaw'], ['Lesser Poland', 'Kraków']]], 2],
  [['AU', [['New South Wales', 'Sydney'], ['Victoria', 'Melbourne']]], 2],
  [['JP', [['Tokyo', 'Tokyo'], ['Osaka', 'Osaka']]], 2],
  [['CH', [['Zurich', 'Zurich'], ['Geneva', 'Geneva']]], 1.5],
  [['AT', [['Vienna', 'Vienna']]], 1.2],
  [['BE', [['Brussels Capital', 'Brussels']]], 1.2],
  [['DK', [['Capital Region', 'Copenhagen']]], 1],
  [['NO', [['Oslo', 'Oslo']]], 1],
  [['FI', [['Uusimaa', 'Helsinki']]], 1],
  [['IE', [['Leinster', 'Dublin']]], 1],
  [['PT', [['Lisbon', 'Lisbon'], ['Porto', 'Porto']]], 1],
  [['CZ', [['Prague', 'Prague']]], 0.8],
  [['UA', [['Kyiv City', 'Kyiv']]], 0.8],
  [['SG', [['', 'Singapore']]], 0.8],
  [['KR', [['Seoul', 'Seoul']]], 0.8],
  [['MX', [['Mexico City', 'Mexico City']]], 0.8],
  [['AR', [['Buenos Aires', 'Buenos Aires']]], 0.6],
  [['ZA', [['Gauteng', 'Johannesburg']]], 0.5],
  [['IL', [['Tel Aviv', 'Tel Aviv']]], 0.5],
];

function geoList(): Weighted<[string, string, string]> {
  const out: Weighted<[string, string, string]> = [];
  for (const [[country, places], w] of COUNTRIES) {
    // Within a country the first place is the biggest (1, 1/2, 1/3, ...).
    const ws = places.map((_, i) => 1 / (i + 1));
    const sum = ws.reduce((a, b) => a + b, 0);
    places.forEach(([region, city], i) => out.push([[country, region, city], (w * ws[i]!) / sum]));
    out.push([[country, '', ''], w * 0.03]); // located to the country only
  }
  out.push([['', '', ''], 1.5]); // not located
  return out;
}

type Tech = [device: string, browser: string, browserVersion: string, os: string, osVersion: string, brand: string, model: string];

function techList(): Weighted<Tech> {
  const out: Weighted<Tech> = [];
  const add = (t: Tech, w: number) => out.push([t, w]);
  for (const [v, w] of [['124', 6], ['123', 5], ['122', 3], ['121', 1.5], ['120', 1]] as const) {
    add(['desktop', 'Chrome', v, 'Windows', '10', '', ''], w * 1.4);
    add(['desktop', 'Chrome', v, 'Windows', '11', '', ''], w * 1.0);
    add(['desktop', 'Chrome', v, 'Mac OS', '10.15.7', 'Apple', 'Macintosh'], w * 0.9);
    add(['desktop', 'Chrome', v, 'Linux', '', '', ''], w * 0.25);
    add(['mobile', 'Mobile Chrome', v, 'Android', '14', 'Samsung', 'SM-S918B'], w * 0.6);
    add(['mobile', 'Mobile Chrome', v, 'Android', '13', 'Google', 'Pixel 7'], w * 0.4);
    add(['mobile', 'Mobile Chrome', v, 'Android', '12', 'Xiaomi', 'Redmi Note 11'], w * 0.3);
  }
  for (const [v, os, w] of [['17.4', '17.4', 6], ['17.3', '17.3', 3], ['17.2', '17.2', 1.5], ['16.6', '16.7.2', 1.5]] as const) {
    add(['mobile', 'Mobile Safari', v, 'iOS', os, 'Apple', 'iPhone'], w);
    add(['tablet', 'Mobile Safari', v, 'iOS', os, 'Apple', 'iPad'], w * 0.15);
    add(['desktop', 'Safari', v, 'Mac OS', '10.15.7', 'Apple', 'Macintosh'], w * 0.4);
  }
  for (const [v, w] of [['125', 1.5], ['124', 1], ['123', 0.5], ['115.9', 0.2]] as const) {
    add(['desktop', 'Firefox', v, 'Windows', '10', '', ''], w);
    add(['desktop', 'Firefox', v, 'Linux', '', '', ''], w * 0.5);
    add(['desktop', 'Firefox', v, 'Mac OS', '10.15', 'Apple', 'Macintosh'], w * 0.3);
  }
  for (const [v, w] of [['124.0.2478.80', 2], ['123.0.2420.97', 1]] as const) {
    add(['desktop', 'Edge', v, 'Windows', '10', '', ''], w);
    add(['desktop', 'Edge', v, 'Windows', '11', '', ''], w);
  }
  add(['mobile', 'Samsung Internet', '24.0', 'Android', '14', 'Samsung', 'SM-A546B'], 1.2);
  add(['mobile', 'Samsung Internet', '23.0', 'Android', '13', 'Samsung', 'SM-A536B'], 0.6);
  add(['desktop', 'Opera', '109.0.0.0', 'Windows', '10', '', ''], 0.5);
  add(['mobile', 'Opera Mobi', '81.0', 'Android', '13', 'Xiaomi', 'M2101K6G'], 0.2);
  add(['tablet', 'Chrome', '124', 'Android', '13', 'Samsung', 'SM-X710'], 0.4);
  add(['desktop', 'Yandex', '24.4.1', 'Windows', '10', '', ''], 0.2);
  add(['', '', '', '', '', '', ''], 0.8); // unparsable user-agent
  return out;
}

type Source = [referrer: string, name: string, type: string, utmSource: string, utmMedium: string, utmCampaign: string, utmTerm: string, utmContent: string];

function sourceList(): Weighted<Source> {
  const out: Weighted<Source> = [];
  const ref = (url: string, name: string, type: string, w: number) => out.push([[url, name, type, '', '', '', '', ''], w]);
  out.push([['', '', '', '', '', '', '', ''], 38]); // direct
  ref('https://www.google.com/', 'Google', 'search', 24);
  ref('https://www.bing.com/', 'Bing', 'search', 3.5);
  ref('https://duckduckgo.com/', 'DuckDuckGo', 'search', 2);
  ref('https://search.yahoo.com/', 'Yahoo!', 'search', 0.6);
  ref('https://www.ecosia.org/', 'Ecosia', 'search', 0.5);
  ref('https://t.co/', 'Twitter', 'social', 3);
  ref('https://www.facebook.com/', 'Facebook', 'social', 2.5);
  ref('https://www.linkedin.com/', 'LinkedIn', 'social', 2);
  ref('https://www.reddit.com/', 'Reddit', 'social', 2);
  ref('https://news.ycombinator.com/', 'Hacker News', 'social', 1.2);
  ref('https://github.com/', 'GitHub', 'unknown', 2);
  ref('https://stackoverflow.com/', 'Stack Overflow', 'unknown', 1);
  for (let i = 1; i <= 60; i++) ref(`https://blog${i}.example.org/posts/${i * 7}`, '', '', 4 / i);
  const utm = (s: Source, w: number) => out.push([s, w]);
  utm(['', '', '', 'newsletter', 'email', 'weekly', '', 'header'], 3);
  utm(['', '', '', 'newsletter', 'email', 'weekly', '', 'footer'], 1);
  utm(['', '', '', 'newsletter', 'email', 'launch', '', 'hero'], 1.5);
  utm(['https://www.google.com/', 'Google', 'search', 'google', 'cpc', 'brand', 'analytics tool', 'ad1'], 2.5);
  utm(['https://www.google.com/', 'Google', 'search', 'google', 'cpc', 'brand', 'web analytics', 'ad2'], 1.5);
  utm(['https://www.google.com/', 'Google', 'search', 'google', 'cpc', 'competitor', 'plausible alternative', 'ad3'], 1);
  utm(['https://www.facebook.com/', 'Facebook', 'social', 'facebook', 'paid_social', 'spring', '', 'video'], 1.2);
  utm(['https://www.linkedin.com/', 'LinkedIn', 'social', 'linkedin', 'paid_social', 'b2b', '', 'carousel'], 0.8);
  utm(['https://t.co/', 'Twitter', 'social', 'twitter', 'social', 'launch', '', ''], 0.6);
  utm(['', '', '', 'partner', 'referral', 'integrations', '', ''], 0.7);
  utm(['', '', '', 'producthunt', 'referral', 'launch', '', ''], 0.5);
  return out;
}

function pageList(): { origin: string[]; path: string[]; title: string[]; weight: number[] } {
  const site = 'https://www.example.com';
  const docs = 'https://docs.example.com';
  const base: [string, string, string][] = [
    [site, '/', 'Example Analytics'], [site, '/pricing', 'Pricing'], [site, '/features', 'Features'],
    [site, '/signup', 'Sign up'], [site, '/login', 'Log in'], [site, '/blog', 'Blog'], [site, '/about', 'About us'],
    [site, '/contact', 'Contact'], [site, '/customers', 'Customers'], [site, '/changelog', 'Changelog'],
    [docs, '/', 'Docs'], [docs, '/getting-started', 'Getting started'], [docs, '/api', 'API reference'],
  ];
  const origin: string[] = [];
  const path: string[] = [];
  const title: string[] = [];
  for (const [o, p, t] of base) origin.push(o), path.push(p), title.push(t);
  for (let i = 1; origin.length < 500; i++) {
    if (i % 3 === 0) origin.push(docs), path.push(`/guides/guide-${i}`), title.push(`Guide ${i}`);
    else origin.push(site), path.push(`/blog/post-${i}`), title.push(`Blog post ${i}`);
  }
  // Zipf, s = 1.1, by rank.
  return { origin, path, title, weight: origin.map((_, i) => 1 / Math.pow(i + 1, 1.1)) };
}

const CUSTOM_EVENTS: Weighted<string> = [['click', 45], ['search', 20], ['add_to_cart', 15], ['signup', 12], ['purchase', 8]];

// ---------------------------------------------------------------------------------------
// SQL of one chunk of sessions [a, b) of a project

interface ProjectPlan {
  id: string;
  sessions: number;
  devicePool: number;
  /** First session number of the project (session numbers are global). */
  firstSeq: number;
}

const SLOT = 10_000;
/** The window ends this long before now, so that no session's events lie in the future. */
const END_LAG_MS = 40 * 60_000;
const MAX_GAP_MS = 5 * 60_000;

/**
 * The two INSERT statements of a chunk. Parameters: $1, $2 = global session numbers [from, to)
 * (the hash input, so projects differ); $3 = the project's first session number; $4 = its
 * session count (a session's place in time is its position within the project).
 *
 * Every per-session and per-event value is computed once in a fenced (MATERIALIZED / OFFSET 0)
 * step: a flattened subquery would re-evaluate its expressions at every reference.
 */
export function chunkSql(project: ProjectPlan, salt: string, nowMs: number): { sessions: string; events: string } {
  const geo = geoList();
  const tech = techList();
  const src = sourceList();
  const pages = pageList();
  const col = <T extends unknown[]>(list: Weighted<T>, i: number) => textArray(list.map((x) => String(x[0][i])));
  const techNames = ['device', 'browser', 'browser_version', 'os', 'os_version', 'brand', 'model'];
  const srcNames = ['referrer', 'referrer_name', 'referrer_type', 'utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content'];
  const geoNames = ['country', 'region', 'city'];
  // One row of constants (slot arrays and value arrays); pulled up into the plan as constants.
  const consts = `(SELECT
      ${intArray(slots(geo.map((g) => g[1]), SLOT))} AS geo_slots,
      ${intArray(slots(tech.map((x) => x[1]), SLOT))} AS tech_slots,
      ${intArray(slots(src.map((x) => x[1]), SLOT))} AS src_slots,
      ${intArray(slots(pages.weight, SLOT))} AS page_slots,
      ${intArray(slots(CUSTOM_EVENTS.map((x) => x[1]), 100))} AS custom_slots,
      ${textArray(CUSTOM_EVENTS.map((x) => x[0]))} AS custom_names,
      ${textArray(pages.origin)} AS page_origin, ${textArray(pages.path)} AS page_path, ${textArray(pages.title)} AS page_title,
      ${geoNames.map((n, i) => `${col(geo, i)} AS g_${n}`).join(', ')},
      ${techNames.map((n, i) => `${col(tech, i)} AS t_${n}`).join(', ')},
      ${srcNames.map((n, i) => `${col(src, i)} AS s_${n}`).join(', ')}) c`;

  // Uniform non-negative ints from (key, salt).
  const h = (key: string, s: number) => `(hashint8extended(${key}, ${s}) & 2147483647)`;
  const k = (i: string) => `(seq * 16 + ${i})`;
  // Event i (1-based): ms since the session start, is it a view, its page pick.
  const off = (i: string) => `(CASE WHEN ${i} <= 1 THEN 0 ELSE (${i} - 1)::bigint * gap + ${h(k(i), 20)} % (gap / 2) END)`;
  const isView = (i: string) => `(${h(k(i), 21)} % 100 < CASE WHEN ${i} = 1 THEN 85 ELSE 65 END)`;
  const pick = (i: string) => `c.page_slots[1 + ${h(k(i), 22)} % ${SLOT}]`;
  const eventId = (i: string) => `md5(${lit(salt)} || ':e:' || seq || ':' || ${i})::uuid`;
  const t0 = nowMs - END_LAG_MS - SPAN_MS;
  const A = 0.6; // daily cycle: density from 1/(1+A) to 1/(1-A) of the mean
  const amp = (A * DAY) / (2 * Math.PI);
  const phase = (14 * HOUR - (t0 % DAY) + DAY) % DAY; // peak near 14:00 UTC
  // x: the session's evenly spread position in [0, span); warped by a whole-day-periodic
  // monotone map that is 0 at both ends, so starts stay in [t0, t0 + span).
  const warp = `(x - ${amp} * (sin(2 * pi() * (x - ${phase}) / ${DAY}) - sin(2 * pi() * (${-phase}) / ${DAY})))`;

  // Per session, in three fenced steps.
  const sessionCtes = `
    WITH s0 AS MATERIALIZED (
      SELECT seq,
        ((seq - $3)::float8 + ${h('seq', 5)}::float8 / 2147483648.0) / $4::float8 * ${SPAN_MS} AS x,
        ${h('seq', 1)} % ${project.devicePool} AS dk,
        CASE WHEN ${h('seq', 3)} % 100 < 35 THEN 1 ELSE 2 + ${h('seq', 4)} % 5 END AS n,
        5000 + ${h('seq', 6)} % ${MAX_GAP_MS - 5000} AS gap,
        c.src_slots[1 + ${h('seq', 7)} % ${SLOT}] AS si
      FROM ${consts} CROSS JOIN generate_series($1::bigint, $2::bigint - 1) AS seq
    ),
    s1 AS MATERIALIZED (
      SELECT seq, dk, n, gap, si,
        to_timestamp((${t0} + ${warp}) / 1000.0) AS started_at,
        md5(${lit(salt)} || ':s:' || seq)::uuid AS sid,
        md5(${lit(salt)} || ':d:' || ${lit(project.id)} || ':' || dk) AS device_id,
        c.geo_slots[1 + ${h('dk', 10)} % ${SLOT}] AS gi,
        c.tech_slots[1 + ${h('dk', 11)} % ${SLOT}] AS ti,
        dk % 50 = 7 AS is_bot,
        ${off('n')} AS last_off,
        ${isView('1')} AS first_view,
        ${pick('1')} AS entry,
        CASE WHEN ${isView('n')} OR n = 1 THEN ${pick('n')} ELSE ${pick('n - 1')} END AS exit,
        ${isView('n')} AS last_view,
        (SELECT count(*) FILTER (WHERE ${isView('i')}) FROM generate_series(1, n) AS i)::int AS views
      FROM ${consts} CROSS JOIN s0
    ),
    s AS MATERIALIZED (
      SELECT s1.*,
        CASE WHEN dk % 10 = 3 THEN 'user-' || dk ELSE device_id END AS profile_id,
        started_at + last_off * interval '1 millisecond' AS last_at,
        started_at + last_off * interval '1 millisecond' < to_timestamp(${nowMs} / 1000.0) - interval '30 minutes' AS ended
      FROM s1
    )`;
  const sessionSource = srcNames.map((n) => `c.s_${n}[s.si]`);
  const placeAndTech = [...geoNames.map((n) => `c.g_${n}[s.gi]`), ...techNames.map((n) => `c.t_${n}[s.ti]`)];
  const dimNames = [...srcNames, ...geoNames, ...techNames].join(', ');

  const sessions = `${sessionCtes}
    INSERT INTO sessions (id, project_id, device_id, profile_id, started_at, last_event_at, duration_ms, ended,
      entry_origin, entry_path, exit_origin, exit_path, screen_view_count, event_count, is_bounce, is_bot,
      last_event_id, last_event_is_view, ${dimNames}, updated_at)
    SELECT s.sid, ${lit(project.id)}, s.device_id, s.profile_id, s.started_at, s.last_at, s.last_off, s.ended,
      c.page_origin[s.entry], c.page_path[s.entry], c.page_origin[s.exit], c.page_path[s.exit],
      s.views, s.n, s.views <= 1, s.is_bot, ${eventId('s.n')}, s.last_view,
      ${[...sessionSource, ...placeAndTech].join(', ')}, s.last_at
    FROM ${consts} CROSS JOIN s`;

  // i = 0: session_start; 1..n: real events; n + 1: session_end (ended sessions only).
  const customProps = `(CASE e.cn
      WHEN 'click' THEN jsonb_build_object('button', (ARRAY['cta','nav','footer','pricing-toggle'])[1 + e.r1 % 4])
      WHEN 'search' THEN jsonb_build_object('query', 'q' || e.r1 % 300)
      WHEN 'add_to_cart' THEN jsonb_build_object('sku', 'sku-' || e.r1 % 120, 'qty', 1 + e.r2 % 3)
      WHEN 'signup' THEN jsonb_build_object('plan', (ARRAY['free','pro','team'])[1 + e.r1 % 3])
      ELSE jsonb_build_object('plan', (ARRAY['pro','team','Enterprise'])[1 + e.r1 % 3], 'amount', (ARRAY[49,99,499])[1 + e.r2 % 3]) END)`;
  const seq = 's.seq';
  const ev = (i: string) => ({
    off: off(i).replace(/\bgap\b/g, 's.gap').replace(/\bseq\b/g, seq),
    isView: isView(i).replace(/\bseq\b/g, seq),
    pick: pick(i).replace(/\bseq\b/g, seq),
  });
  const e0 = ev('g.i');
  const e1 = ev('g.i + 1');
  const eventRows = `
    CROSS JOIN LATERAL (
      SELECT g.i, q.* FROM generate_series(0, s.n + 1) AS g(i)
      CROSS JOIN LATERAL (SELECT
        g.i BETWEEN 1 AND s.n AND ${e0.isView} AS v,
        ${e0.pick} AS pk,
        ${ev('g.i - 1').pick} AS pk_prev,
        ${ev('least(greatest(g.i, 1), s.n)').off} AS o,
        CASE WHEN g.i BETWEEN 1 AND s.n - 1 THEN ${e1.off} END AS o_next,
        c.custom_names[c.custom_slots[1 + ${h(k('g.i'), 23).replace(/\bseq\b/g, seq)} % 100]] AS cn,
        ${h(k('g.i'), 24).replace(/\bseq\b/g, seq)} AS r1,
        ${h(k('g.i'), 25).replace(/\bseq\b/g, seq)} AS r2
        FROM ${consts} OFFSET 0) q
      WHERE g.i <= s.n OR s.ended
    ) e`;
  const page = `(CASE WHEN e.i = 0 THEN s.entry WHEN e.i > s.n THEN s.exit WHEN e.v OR e.i = 1 THEN e.pk ELSE e.pk_prev END)`;
  const events = `${sessionCtes}
    INSERT INTO events (id, project_id, name, device_id, profile_id, session_id, created_at, received_at, properties,
      origin, path, title, ${dimNames}, is_bot, bot_reason, duration_ms)
    SELECT md5(${lit(salt)} || ':e:' || s.seq || ':' || e.i)::uuid, ${lit(project.id)},
      CASE WHEN e.i = 0 THEN 'session_start' WHEN e.i > s.n THEN 'session_end' WHEN e.v THEN 'screen_view' ELSE e.cn END,
      s.device_id, s.profile_id, s.sid,
      s.started_at + e.o * interval '1 millisecond', s.started_at + e.o * interval '1 millisecond',
      CASE WHEN e.i BETWEEN 1 AND s.n AND NOT e.v THEN ${customProps}
           WHEN e.v AND e.pk % 7 = 0 THEN '{"section":"featured"}'::jsonb
           ELSE '{}'::jsonb END,
      c.page_origin[${page}], c.page_path[${page}],
      CASE WHEN e.i = 0 AND s.first_view THEN c.page_title[s.entry] WHEN e.v THEN c.page_title[e.pk] ELSE '' END,
      ${sessionSource.map((x) => `CASE WHEN e.i <= 1 THEN ${x} ELSE '' END`).join(', ')},
      ${placeAndTech.join(', ')},
      s.is_bot, CASE WHEN s.is_bot THEN 'user-agent' END,
      CASE WHEN e.v THEN e.o_next - e.o END
    FROM ${consts} CROSS JOIN s ${eventRows}`;
  return { sessions, events };
}

// ---------------------------------------------------------------------------------------

function parseArgs(argv: string[]): { events: number; db: string; workers: number; noRollups: boolean; noHll: boolean } {
  const get = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const events = Number(get('events') ?? 1_000_000);
  if (!Number.isInteger(events) || events < 10_000) throw new Error('--events must be an integer >= 10000');
  const db = get('db') ?? `postgres://postgres@127.0.0.1:5432/bench_${events >= 1_000_000 ? `${events / 1_000_000}m` : `${events / 1000}k`}`;
  return { events, db, workers: Number(get('workers') ?? 2), noRollups: argv.includes('--no-rollups'), noHll: argv.includes('--no-hll') };
}

/** --no-hll: the role that owns the database and runs everything, not a superuser (so the migrations cannot create hll). */
const NO_HLL_ROLE = 'bench_nohll';

/**
 * Drops and creates the database; with `owner`, owned by that role (created when missing, a
 * login role that is not a superuser). Returns the URL to load it with: as the owner, if any.
 */
async function recreateDatabase(url: string, owner?: string): Promise<string> {
  const u = new URL(url);
  const name = decodeURIComponent(u.pathname.slice(1));
  if (!/^bench/.test(name)) throw new Error(`refusing to recreate ${name}: the bench database name must start with "bench"`);
  u.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: u.toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  if (!owner) {
    await admin.end();
    await ensureDatabase(url);
    return url;
  }
  await admin.query(`DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = ${pg.escapeLiteral(owner)}) THEN CREATE ROLE ${pg.escapeIdentifier(owner)} LOGIN; END IF; END $$`);
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} OWNER ${pg.escapeIdentifier(owner)}`);
  await admin.end();
  const asOwner = new URL(url);
  asOwner.username = owner;
  return asOwner.toString();
}

interface IndexDef {
  name: string;
  def: string;
}

/** Secondary (non-constraint) indexes of the parent tables: dropped for the load, rebuilt after. */
async function secondaryIndexes(db: Pool, tables: string[]): Promise<IndexDef[]> {
  const { rows } = await db.query<IndexDef>(
    `SELECT i.relname AS name, pg_get_indexdef(i.oid) AS def
     FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
     WHERE t.relname = ANY($1) AND t.relnamespace = 'public'::regnamespace
       AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid)`,
    [tables],
  );
  return rows;
}

const fmt = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const t = performance.now();
  const nowMs = Math.floor(Date.now() / 1000) * 1000;
  const log = (msg: string) => console.log(`[${fmt(performance.now() - t).padStart(8)}] ${msg}`);
  log(`target ${args.events.toLocaleString('en')} events into ${redactUrl(args.db)}`);
  args.db = await recreateDatabase(args.db, args.noHll ? NO_HLL_ROLE : undefined);
  if (args.noHll) log(`without hll: the database is owned and loaded by ${NO_HLL_ROLE}, not a superuser; read it with --db ${redactUrl(args.db)}`);
  const pool = createPool(args.db, args.workers + 1);
  // A bulk load: no fsync wait per commit (the refresh commits once per bucket), no JIT
  // (it compiles these wide generated expressions for seconds).
  // The visitor log's triggers (sql/038) off: the visit days are built once from the sessions below.
  pool.on('connect', (c) => void c.query("SET synchronous_commit = off; SET jit = off; SET work_mem = '64MB'; SET tidemark.visitor_log = 'off'").catch(() => {}));
  const { timescale } = await migrate(pool);
  for (const p of PROJECTS) {
    await pool.query('INSERT INTO projects (id, name, timezone) VALUES ($1, $1, $2)', [p.id, p.timezone]);
  }

  // Partitions of `events` for every month of the window, as the worker makes them.
  const months: Date[] = [];
  for (let m = nowMs - SPAN_MS - DAY; m <= nowMs + DAY; m += DAY) months.push(new Date(m));
  await new PartitionKeeper(pool, timescale).ensureFor(months.map((createdAt) => ({ createdAt }) as EventRecord));

  const dropped = await secondaryIndexes(pool, ['events', 'sessions']);
  for (const ix of dropped) await pool.query(`DROP INDEX ${pg.escapeIdentifier(ix.name)}`);
  log(`schema ready (${timescale ? 'TimescaleDB' : 'PostgreSQL'}); ${dropped.length} secondary indexes dropped for the load`);

  const totalSessions = Math.round(args.events / ROWS_PER_SESSION);
  const plans: ProjectPlan[] = [];
  let seq = 0;
  for (const p of PROJECTS) {
    const sessions = Math.round(totalSessions * p.share);
    plans.push({ id: p.id, sessions, devicePool: Math.max(1, Math.round(sessions * 0.63)), firstSeq: seq });
    seq += sessions;
  }
  const salt = `bench-${nowMs}`;
  const CHUNK = 25_000;
  const jobs: { plan: ProjectPlan; from: number; to: number; sql: { sessions: string; events: string } }[] = [];
  for (const plan of plans) {
    const sql = chunkSql(plan, salt, nowMs);
    for (let a = 0; a < plan.sessions; a += CHUNK) jobs.push({ plan, from: a, to: Math.min(plan.sessions, a + CHUNK), sql });
  }
  let done = 0;
  let next = 0;
  const worker = async () => {
    const c = await pool.connect();
    try {
      for (;;) {
        const job = jobs[next++];
        if (!job) return;
        const run = (text: string) => c.query(text, [job.plan.firstSeq + job.from, job.plan.firstSeq + job.to, job.plan.firstSeq, job.plan.sessions]);
        await run(job.sql.sessions);
        await run(job.sql.events);
        done++;
        if (done % 10 === 0 || done === jobs.length) log(`chunks ${done}/${jobs.length}`);
      }
    } finally {
      c.release();
    }
  };
  await Promise.all(Array.from({ length: args.workers }, worker));
  const loadedMs = performance.now() - t;
  const counts = (await pool.query<{ events: number; sessions: number }>(
    'SELECT (SELECT count(*) FROM events)::int AS events, (SELECT count(*) FROM sessions)::int AS sessions',
  )).rows[0]!;
  log(`loaded ${counts.events.toLocaleString('en')} events, ${counts.sessions.toLocaleString('en')} sessions`);

  // Each session's funnel steps, as the sessionizer keeps them (the database was new, so the
  // funnel reads them for any period: sql/036).
  const withSteps = await fillSessionSteps(pool);
  log(`${withSteps.toLocaleString('en')} sessions' funnel steps set`);

  // Identified profiles ('user-<n>'): one stored row each, as an identify call makes, named
  // and addressed after n, created at its first session, updated at its last event.
  const FIRST = ['Anna', 'Ben', 'Clara', 'David', 'Elena', 'Felix', 'Greta', 'Hugo', 'Ida', 'Jonas', 'Karla', 'Leon', 'Mia', 'Noah', 'Olga', 'Paul'];
  const LAST = ['Schmidt', 'Miller', 'Garcia', 'Novak', 'Rossi', 'Dubois', 'Jensen', 'Silva', 'Tanaka', 'Kowalski', 'Smith', 'Weber', 'Martin'];
  const storedProfiles = await pool.query(
    `INSERT INTO profiles (project_id, id, first_name, last_name, email, properties, created_at, updated_at)
     SELECT project_id, profile_id, (${textArray(FIRST)})[1 + n % ${FIRST.length}], (${textArray(LAST)})[1 + (n / ${FIRST.length}) % ${LAST.length}],
       profile_id || '@example.com',
       jsonb_build_object('plan', (ARRAY['free','pro','team','Enterprise'])[1 + n % 4], 'company', 'company-' || n % 500, 'seats', 1 + n % 20),
       first_at, last_at
     FROM (SELECT project_id, profile_id, substr(profile_id, 6)::bigint AS n, min(started_at) AS first_at, max(last_event_at) AS last_at
           FROM sessions WHERE profile_id LIKE 'user-%' GROUP BY project_id, profile_id) x`,
  );
  log(`${(storedProfiles.rowCount ?? 0).toLocaleString('en')} identified profiles stored`);

  const ix0 = performance.now();
  await Promise.all(
    Array.from({ length: args.workers }, async (_, w) => {
      const c = await pool.connect();
      try {
        await c.query(`SET maintenance_work_mem = '512MB'`);
        // pg_get_indexdef() of a partitioned table's index says ON ONLY (the parent alone):
        // the index is wanted on every partition.
        for (let i = w; i < dropped.length; i += args.workers) await c.query(dropped[i]!.def.replace(' ON ONLY ', ' ON '));
      } finally {
        c.release();
      }
    }),
  );
  const invalid = await pool.query<{ name: string }>(
    `SELECT i.indexrelid::regclass::text AS name FROM pg_index i
     WHERE i.indrelid IN ('events'::regclass, 'sessions'::regclass) AND NOT i.indisvalid`,
  );
  if (invalid.rows.length) throw new Error(`indexes not valid after the rebuild: ${invalid.rows.map((r) => r.name).join(', ')}`);
  log(`${dropped.length} indexes rebuilt in ${fmt(performance.now() - ix0)}`);

  // The worker logs the hour of every session and of every event it writes; then the
  // service's refresh. (An hour can hold events of sessions that started earlier.)
  const r0 = performance.now();
  await pool.query('ANALYZE sessions');
  await pool.query('ANALYZE events');
  await pool.query(
    `INSERT INTO rollup_invalidations (project_id, bucket)
     SELECT DISTINCT project_id, date_trunc('hour', started_at, 'UTC') FROM sessions
     UNION
     SELECT DISTINCT project_id, date_trunc('hour', created_at, 'UTC') FROM events
     ON CONFLICT DO NOTHING`,
  );
  let buckets = 0;
  for (; !args.noRollups; ) {
    const r = await refreshRollups(pool, timescale, { before: new Date('9999-01-01T00:00:00Z'), limit: 500 });
    if (r.buckets === 0) break;
    buckets += r.buckets;
  }
  log(args.noRollups ? 'rollups not refreshed (--no-rollups): every hour logged, read raw' : `rollups refreshed: ${buckets} (project, hour) buckets in ${fmt(performance.now() - r0)}`);
  if (!args.noRollups) {
    // What the service's fold does for a project with no visit days yet: build them.
    const b0 = performance.now();
    await applyVisitorLog(pool);
    log(`visit days built in ${fmt(performance.now() - b0)}`);
  }

  const v0 = performance.now();
  await pool.query('VACUUM (ANALYZE)');
  log(`VACUUM ANALYZE in ${fmt(performance.now() - v0)}`);
  const main = (await pool.query<{ sessions: number; visitors: number; events: number }>(
    `SELECT count(*)::int AS sessions, count(DISTINCT profile_id)::int AS visitors,
            (SELECT count(*) FROM events WHERE project_id = $1)::int AS events
     FROM sessions WHERE project_id = $1`,
    [MAIN_PROJECT],
  )).rows[0]!;
  const profiles = (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM (SELECT DISTINCT project_id, profile_id FROM sessions) x')).rows[0]!.n;
  log(`main project: ${main.events.toLocaleString('en')} events, ${main.sessions.toLocaleString('en')} sessions, ${main.visitors.toLocaleString('en')} visitors; ${profiles.toLocaleString('en')} profiles in all`);
  const totalMs = performance.now() - t;
  console.log(`load time: rows ${fmt(loadedMs)}, total ${fmt(totalMs)}`);
  // For bench/queries.ts's report: how and when this database was made.
  await pool.query('CREATE TABLE bench_meta (key text PRIMARY KEY, value text NOT NULL)');
  await pool.query(
    `INSERT INTO bench_meta VALUES ('generated_at', $1), ('events_target', $2), ('rows_s', $3), ('total_s', $4),
       ('load_avg', $5), ('command', $6), ('rollups', $7)`,
    [
      new Date(nowMs).toISOString(), String(args.events), (loadedMs / 1000).toFixed(1), (totalMs / 1000).toFixed(1),
      os.loadavg().map((x) => x.toFixed(2)).join(' / '), `npx tsx bench/generate.ts --events ${args.events} --db ${redactUrl(args.db)}${args.noRollups ? ' --no-rollups' : ''}${args.noHll ? ' --no-hll' : ''}`,
      args.noRollups ? 'not refreshed (--no-rollups): every hour logged in rollup_invalidations, read raw' : 'refreshed',
    ],
  );
  await pool.end();
}

// Run only as a script (queries.ts imports the project names).
if (process.argv[1]?.endsWith('generate.ts')) main().catch((err) => {
  console.error(err);
  process.exit(1);
});
