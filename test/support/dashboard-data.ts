// A week of believable traffic for the dashboard test and for looking at the dashboard by
// hand: visits spread over the last 7 days (event times in the past, as a backfill), from a
// few countries, devices, referrers and campaigns, 1-4 page views each.
import { post, track, type Credentials } from './harness';

const UAS = {
  desktopChrome: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
  macSafari: 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15',
  iphone: 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1',
  androidFirefox: 'Mozilla/5.0 (Android 14; Mobile; rv:125.0) Gecko/125.0 Firefox/125.0',
  linuxFirefox: 'Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0',
};
const IPS = ['8.8.8.8', '81.2.69.142', '1.1.1.1', '5.9.0.1', '2.16.0.1', '103.21.244.1', '185.60.216.35'];
const PAGES = [
  ['/', 'Tidemark — analytics that keep up'], ['/pricing', 'Pricing'], ['/docs', 'Documentation'], ['/docs/quickstart', 'Quickstart'],
  ['/blog/realtime-analytics', 'Real-time analytics without the wait'], ['/about', 'About us'], ['/changelog', 'Changelog'],
] as const;
const SOURCES: { referrer?: string; query?: string }[] = [
  {}, {}, { referrer: 'https://www.google.com/' }, { referrer: 'https://www.google.com/' }, { referrer: 'https://news.ycombinator.com/' },
  { referrer: 'https://twitter.com/someone/status/1' }, { query: '?utm_source=newsletter&utm_medium=email&utm_campaign=launch' },
  { referrer: 'https://github.com/tidemark' }, { query: '?utm_source=twitter&utm_medium=social&utm_campaign=launch' }, { referrer: 'https://duckduckgo.com/' },
];

/** Deterministic pseudo-random numbers (the same data every run). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/**
 * Sends `visits` visits spread over the last 7 days (the newest at least 10 minutes ago, so
 * none of them is live). Returns how many visits (sessions) and page views were sent. The
 * visits are drawn first (the same every run), then sent in parallel, each visit's views in
 * time order.
 */
export async function seedWeek(url: string, writer: Credentials, opts: { visits?: number; seed?: number; origin?: string } = {}): Promise<{ sessions: number; views: number }> {
  const random = rng(opts.seed ?? 7);
  const visits = opts.visits ?? 60;
  const origin = opts.origin ?? 'https://tidemark.example';
  const uas = Object.values(UAS);
  const now = Date.now();
  let views = 0;
  const sends: (() => Promise<void>)[] = [];
  for (let v = 0; v < visits; v++) {
    // More visits on recent days, with a daily rhythm. At most 5 UTC days back (07:00-22:00
    // UTC): always inside a "last 7 days" in any timezone. A 6th day fell out of it in
    // Europe/Berlin from 23:00 UTC, when Berlin's today is the next day.
    const daysAgo = Math.floor(random() ** 1.6 * 6);
    const hour = 7 + Math.floor(random() * 15);
    const start = new Date(now - daysAgo * 86_400_000);
    start.setUTCHours(hour, Math.floor(random() * 60), 0, 0);
    const startMs = Math.min(start.getTime(), now - 10 * 60_000 - 4 * 120_000);
    const ua = uas[Math.floor(random() * uas.length)]!;
    const ip = IPS[Math.floor(random() * IPS.length)]!;
    const source = SOURCES[Math.floor(random() * SOURCES.length)]!;
    const pageCount = 1 + Math.floor(random() ** 2 * 4);
    const profileId = `seed-visitor-${v}`;
    const bodies: unknown[] = [];
    for (let p = 0; p < pageCount; p++) {
      const [path, title] = PAGES[p === 0 ? Math.floor(random() * 3) : Math.floor(random() * PAGES.length)]!;
      const properties: Record<string, unknown> = {
        __path: `${origin}${path}${p === 0 ? (source.query ?? '') : ''}`,
        __title: title,
        __timestamp: new Date(startMs + p * (20_000 + Math.floor(random() * 90_000))).toISOString(),
        // One device per visit: visits from the same browser and address would otherwise be
        // one device, sessionized together, and sent out of time order.
        __deviceId: (v + 1).toString(16).padStart(32, '0'),
      };
      if (p === 0 && source.referrer) properties.__referrer = source.referrer;
      bodies.push(track('screen_view', properties, { profileId }));
      views++;
    }
    sends.push(async () => {
      for (const body of bodies) {
        const res = await post(`${url}/track`, body, writer, { userAgent: ua, ip });
        if (res.status !== 202) throw new Error(`seed: /track answered ${res.status} ${JSON.stringify(res.body)}`);
      }
    });
  }
  await Promise.all(sends.map((send) => send()));
  return { sessions: visits, views };
}

/** The identified people of seedProductAnalytics: id, first and last name, plan. */
const PEOPLE = [
  ['ada', 'Ada', 'Lovelace', 'pro'], ['grace', 'Grace', 'Hopper', 'team'], ['alan', 'Alan', 'Turing', 'free'],
  ['katherine', 'Katherine', 'Johnson', 'pro'], ['linus', 'Linus', 'Torvalds', 'free'], ['margaret', 'Margaret', 'Hamilton', 'team'],
  ['edsger', 'Edsger', 'Dijkstra', 'free'], ['barbara', 'Barbara', 'Liskov', 'pro'], ['donald', 'Donald', 'Knuth', 'free'],
  ['frances', 'Frances', 'Allen', 'team'], ['ken', 'Ken', 'Thompson', 'free'], ['radia', 'Radia', 'Perlman', 'pro'],
  ['dennis', 'Dennis', 'Ritchie', 'free'], ['hedy', 'Hedy', 'Lamarr', 'team'], ['john', 'John', 'Backus', 'free'],
  ['annie', 'Annie', 'Easley', 'pro'], ['tim', 'Tim', 'Berners-Lee', 'free'], ['joan', 'Joan', 'Clarke', 'team'],
  ['claude', 'Claude', 'Shannon', 'free'], ['sophie', 'Sophie', 'Wilson', 'pro'], ['guido', 'Guido', 'van Rossum', 'free'],
  ['mary', 'Mary', 'Jackson', 'team'], ['bjarne', 'Bjarne', 'Stroustrup', 'free'], ['evelyn', 'Evelyn', 'Berezin', 'pro'],
] as const;
/** The sign-up funnel a visit goes down, each step less likely than the one before. */
const FUNNEL = [['signup_started', 0.75], ['signup_completed', 0.7], ['purchase', 0.55]] as const;

/**
 * Product-analytics content beside seedWeek's traffic: 24 identified profiles (identify with
 * names, email and properties), two starting each of the last 12 weeks (their cohort) and
 * coming back for a few weeks (fewer and fewer), and 24 anonymous visits of the last 5 days; every visit views / and /pricing, then goes down the sign-up funnel (signup_started,
 * signup_completed, purchase) as far as chance takes it. Every visit is one session (one device
 * per person, visits days apart), at least 2 hours old. Deterministic; people are sent in
 * parallel, each one's events in time order.
 */
export async function seedProductAnalytics(url: string, writer: Credentials, opts: { seed?: number; origin?: string } = {}): Promise<{ sessions: number; events: number; profiles: string[] }> {
  const random = rng(opts.seed ?? 11);
  const origin = opts.origin ?? 'https://tidemark.example';
  const uas = Object.values(UAS);
  const now = Date.now();
  const day = 86_400_000;
  type Visit = { at: number; profileId?: string };
  const plans: { device: string; ua: string; ip: string; identify?: Record<string, unknown>; visits: Visit[] }[] = [];
  PEOPLE.forEach(([key, firstName, lastName, plan], i) => {
    const profileId = `user-${key}`;
    // Two people a week start (their cohort: 11 weeks back .. this week) and keep coming back
    // for a while (ada for good), on some of the weeks in between.
    const cohort = 11 - Math.floor(i / 2);
    let last = cohort;
    if (i === 0) last = 0;
    else while (last > 0 && random() < 0.72) last--;
    const visits: Visit[] = [];
    for (let w = cohort; w >= last; w--) {
      if (w !== cohort && w !== last && random() > 0.6) continue;
      const daysBack = w * 7 + Math.floor(random() * (w === 0 ? 4 : 7));
      const at = new Date(now - daysBack * day);
      at.setUTCHours(8 + Math.floor(random() * 12), Math.floor(random() * 60), 0, 0);
      visits.push({ at: Math.min(at.getTime(), now - 2 * 3_600_000), profileId });
    }
    plans.push({
      device: (0xa000 + i).toString(16).padStart(32, '0'), ua: uas[i % uas.length]!, ip: IPS[i % IPS.length]!, visits,
      identify: { profileId, firstName, lastName, email: `${key}@example.com`, properties: { plan, company: `${lastName} & Co`, newsletter: i % 3 === 0 } },
    });
  });
  for (let v = 0; v < 24; v++) {
    const at = now - Math.floor(random() * 5) * day - (2 + Math.floor(random() * 10)) * 3_600_000;
    plans.push({ device: (0xb000 + v).toString(16).padStart(32, '0'), ua: uas[v % uas.length]!, ip: IPS[v % IPS.length]!, visits: [{ at }] });
  }
  let sessions = 0;
  let events = 0;
  const send = async (body: unknown, p: (typeof plans)[number]) => {
    const res = await post(`${url}/track`, body, writer, { userAgent: p.ua, ip: p.ip });
    if (res.status !== 202) throw new Error(`seed: /track answered ${res.status} ${JSON.stringify(res.body)}`);
  };
  // The random choices first (in a fixed order), then the sending, in parallel per device.
  const sends = plans.map((p) => {
    const steps: { name: string; properties: Record<string, unknown>; profileId?: string }[] = [];
    for (const visit of p.visits.sort((a, b) => a.at - b.at)) {
      let t = visit.at;
      const next = () => new Date((t += 20_000 + Math.floor(random() * 70_000))).toISOString();
      const base = (extra: Record<string, unknown>) => ({ __deviceId: p.device, __timestamp: next(), ...extra });
      steps.push({ name: 'screen_view', properties: base({ __path: `${origin}/`, __title: 'Tidemark — analytics that keep up' }), profileId: visit.profileId });
      steps.push({ name: 'screen_view', properties: base({ __path: `${origin}/pricing`, __title: 'Pricing' }), profileId: visit.profileId });
      for (const [name, chance] of FUNNEL) {
        if (random() > chance) break;
        steps.push({ name, properties: base({ __path: `${origin}/signup`, plan: name === 'purchase' ? 'pro' : 'free' }), profileId: visit.profileId });
      }
      sessions++;
    }
    events += steps.length;
    return async () => {
      if (p.identify) await send({ type: 'identify', payload: p.identify }, p);
      for (const s of steps) await send(track(s.name, s.properties, s.profileId ? { profileId: s.profileId } : {}), p);
    };
  });
  await Promise.all(sends.map((f) => f()));
  return { sessions, events, profiles: PEOPLE.map(([key]) => `user-${key}`) };
}
