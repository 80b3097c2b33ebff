// Step putBot: flags (never drops) user-agents on isbot's maintained crawler list.
import { isbotMatch } from 'isbot';
import { LRUCache } from 'lru-cache';
import type { BotReason } from '../model/event';
import { keep, type Step } from './step';

export interface BotVerdict {
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
  // library behind a server-side SDK or a script, recorded as device 'server' and counted like
  // OpenPanel counts server events. Crawlers announce themselves in a browser-like UA.
  if (!/\s/.test(userAgent.trim())) return HUMAN;
  const match = isbotMatch(userAgent);
  return match === null ? HUMAN : { isBot: true, botReason: botName(userAgent, match) };
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

export interface BotOptions {
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
