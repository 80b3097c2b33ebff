// Step putUrl: origin and path from the page URL (`__path`), which is an absolute URL
// or a bare path. Never throws: a malformed URL keeps whatever parts can be read.
import { keep, type Step } from './step';

interface PageUrl {
  /** scheme://host[:port]; '' for a bare path. */
  origin: string;
  /** Lower-case host name without port; '' when unknown. */
  hostname: string;
  /** Path only: no query, no fragment. */
  path: string;
  /** The raw query string without '?' ('' when none). */
  query: string;
}

const EMPTY: PageUrl = { origin: '', hostname: '', path: '', query: '' };
// "scheme://": the only form we treat as absolute; anything else is a path as sent.
const ABSOLUTE_RE = /^[a-z][a-z0-9+.-]*:\/\//i;
const LOOSE_ABSOLUTE_RE = /^([a-z][a-z0-9+.-]*:)\/\/([^/?#]*)(.*)$/is;

/** Splits off the fragment and the query without any URL parsing (cannot fail). */
export function splitUrl(raw: string): { beforeQuery: string; query: string } {
  const hash = raw.indexOf('#');
  const noFragment = hash === -1 ? raw : raw.slice(0, hash);
  const q = noFragment.indexOf('?');
  return q === -1
    ? { beforeQuery: noFragment, query: '' }
    : { beforeQuery: noFragment.slice(0, q), query: noFragment.slice(q + 1) };
}

export function parsePageUrl(raw: string | null | undefined): PageUrl {
  const text = raw?.trim() ?? '';
  if (!text) return EMPTY;
  const { beforeQuery, query } = splitUrl(text);

  // Bare path (OpenPanel's parsePath keeps it as sent): only query/fragment are cut.
  if (!ABSOLUTE_RE.test(text)) return { origin: '', hostname: '', path: beforeQuery, query };

  try {
    const url = new URL(text);
    // Non-special schemes (app://, android-app://) report origin "null": rebuild it.
    const origin = url.origin !== 'null' ? url.origin : url.host ? `${url.protocol}//${url.host}` : '';
    // WHATWG pathname, as OpenPanel stores it; an empty path on an http(s) URL is '/'.
    return { origin, hostname: url.hostname.toLowerCase(), path: url.pathname, query };
  } catch {
    return looseAbsolute(beforeQuery, query);
  }
}

// new URL() refused it (a space in the host, a bad port...): cut it by hand.
function looseAbsolute(beforeQuery: string, query: string): PageUrl {
  const m = LOOSE_ABSOLUTE_RE.exec(beforeQuery);
  if (!m) return { ...EMPTY, query };
  const scheme = (m[1] ?? '').toLowerCase();
  const authority = (m[2] ?? '').replace(/^.*@/, '').toLowerCase(); // userinfo never belongs in an origin
  const hostname = authority.startsWith('[') ? authority.slice(0, authority.indexOf(']') + 1) : authority.replace(/:\d*$/, '');
  return {
    origin: authority ? `${scheme}//${authority}` : '',
    hostname,
    path: m[3] || '/',
    query,
  };
}

export const putUrl: Step = {
  name: 'putUrl',
  run(event) {
    const { origin, path } = parsePageUrl(event.url);
    // title was set from __title by the API: kept as is.
    return keep({ ...event, origin, path });
  },
};
