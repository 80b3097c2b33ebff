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
 * none of them is live). Returns how many visits (sessions) and page views were sent.
 */
export async function seedWeek(url: string, writer: Credentials, opts: { visits?: number; seed?: number; origin?: string } = {}): Promise<{ sessions: number; views: number }> {
  const random = rng(opts.seed ?? 7);
  const visits = opts.visits ?? 60;
  const origin = opts.origin ?? 'https://tidemark.example';
  const uas = Object.values(UAS);
  const now = Date.now();
  let views = 0;
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
      const res = await post(`${url}/track`, track('screen_view', properties, { profileId }), writer, { userAgent: ua, ip });
      if (res.status !== 202) throw new Error(`seed: /track answered ${res.status} ${JSON.stringify(res.body)}`);
      views++;
    }
  }
  return { sessions: visits, views };
}
