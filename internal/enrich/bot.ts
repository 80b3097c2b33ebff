// Step putBot: flags (never drops) user-agents of crawlers, by isbot's maintained list
// without its patterns for HTTP libraries, browser automation and "generic" user-agents.
import { list as ISBOT_PATTERNS } from 'isbot';
import { LRUCache } from 'lru-cache';
import type { BotReason } from '../model/event';
import { keep, type Step } from './step';

/**
 * isbot patterns we leave out. isbot flags every non-browser client; Tidemark counts what
 * OpenPanel counts: events from server-side SDKs and scripts (HTTP libraries: Java, node-fetch,
 * k6, Faraday, Postman, ...) and from browsers driven by test or automation tools (headless
 * Chrome, Playwright, Cypress, Selenium, PhantomJS), which is how a web SDK integration is
 * tested. The generic patterns (any short "Name 1.0" or "Mozilla/5.0 (compatible; X/1.0)"
 * user-agent, any "http", ".com" or "node" in it) flag made-up client names. Crawlers still
 * announce themselves (bot, crawler, spider, Googlebot, facebookexternalhit, GPTBot, ...).
 * Each entry must be in isbot's list (bot.test.ts checks), so an upgrade that renames one shows.
 */
export const NOT_BOT_PATTERNS: readonly string[] = [
  '(?<!lib)http',
  '\\.com\\b',
  'node\\b',
  'java(?!;)',
  '\\bperl\\b',
  '^php',
  '^python',
  '^postman',
  '^wget',
  'url',
  '^client/',
  '^mozilla/\\d\\.\\d\\s\\((?:compatible;)?(?:\\s?[\\w\\d-.]+[\\s/]\\d+\\.\\d+)?\\)$',
  '^[\\w \\.\\-\\(?:\\):%]+(?:/v?\\d+(?:\\.\\d+)?(?:\\.\\d{1,10})*?)?(?:,|$)',
  '^\\w+/\\d\\.\\d\\s\\([\\w@]+\\)$',
  'headless',
  'phantomjs',
  'playwright',
  'selenium',
  'cypress/',
];

const EXCLUDED = new Set(NOT_BOT_PATTERNS);
/** isbot's patterns that we keep, as one case-insensitive expression (as isbot builds its own). */
const CRAWLER_RE = new RegExp(ISBOT_PATTERNS.filter((p) => !EXCLUDED.has(p)).join('|'), 'i');

interface BotVerdict {
  isBot: boolean;
  /** The user-agent token isbot matched, without its version ("Googlebot", "bingbot", "curl"); null for humans. */
  botReason: BotReason | null;
}

const HUMAN: Readonly<BotVerdict> = Object.freeze({ isBot: false, botReason: null });
const TOKEN_DELIMITER_RE = /[\s;(),+]/;

export function detectBot(userAgent: string | null | undefined): BotVerdict {
  // No user-agent: a server-side call (see SERVER_DEVICE), not a crawler.
  if (!userAgent?.trim()) return HUMAN;
  // A single token ("curl/8.4.0", "python-requests/2.31", "node", "axios/1.6"): an HTTP
  // library behind a server-side SDK or a script: no bot but a server-side event (device
  // 'server'; it opens no session: internal/worker/processor.ts). Crawlers announce
  // themselves in a browser-like UA.
  if (!/\s/.test(userAgent.trim())) return HUMAN;
  const match = CRAWLER_RE.exec(userAgent)?.[0];
  return match === undefined ? HUMAN : { isBot: true, botReason: botName(userAgent, match) };
}

// isbot matches fragments ("bot" in "bingbot/2.0", "Google" in "Googlebot/2.1"): widen to
// the whole token and drop the version, so one crawler is one value in a breakdown.
function botName(userAgent: string, match: string): string {
  const at = userAgent.indexOf(match);
  if (at === -1) return match;
  let start = at;
  while (start > 0 && !TOKEN_DELIMITER_RE.test(userAgent.charAt(start - 1))) start--;
  let end = at + match.length;
  while (end < userAgent.length && !TOKEN_DELIMITER_RE.test(userAgent.charAt(end))) end++;
  const token = userAgent.slice(start, end).replace(/[;,]+$/, '');
  return token.split('/')[0] || match;
}

interface BotOptions {
  cacheSize?: number;
}

export function createPutBot(opts: BotOptions = {}): Step {
  const cache = new LRUCache<string, BotVerdict>({ max: opts.cacheSize ?? 10_000 });
  return {
    name: 'putBot',
    run(event) {
      const key = event.userAgent ?? '';
      let verdict = cache.get(key);
      if (!verdict) {
        verdict = detectBot(event.userAgent);
        cache.set(key, verdict);
      }
      return keep({ ...event, isBot: verdict.isBot, botReason: verdict.botReason });
    },
  };
}
