// A project's allowed origins (browser clients ingest without a secret only from one of
// them). An entry is `*` (any origin), an exact origin `https://shop.example`, a wildcard
// `https://*.example.com` (any subdomain, at any depth, over that scheme; never the apex),
// or a bare host `example.com` (that host over https or http; `*.example.com`: its
// subdomains over either). Matching compares host names by label: `example.com.evil.net`
// and `evilexample.com` never match `example.com`.

/** A stored entry that cannot be read as one of the forms above: the CLI refuses it. */
export class OriginSyntaxError extends Error {}

const SCHEMES = new Set(['http:', 'https:']);

/** `host[:port]` as the URL parser normalises it (lower case, punycode, default port dropped), or null. */
function normalisedHost(hostPort: string, scheme: string): string | null {
  if (!hostPort || /[/?#@\s]/.test(hostPort)) return null;
  try {
    const u = new URL(`${scheme}//${hostPort}`);
    return u.host || null;
  } catch {
    return null;
  }
}

/**
 * Parses an allowed-origin entry as given to `--origins`; returns its stored form or throws
 * OriginSyntaxError saying what is wrong.
 */
export function parseAllowedOrigin(raw: string): string {
  const text = raw.trim();
  if (text === '*') return '*';
  const schemeAt = text.indexOf('://');
  const scheme = schemeAt < 0 ? null : `${text.slice(0, schemeAt).toLowerCase()}:`;
  if (scheme !== null && !SCHEMES.has(scheme)) throw new OriginSyntaxError(`"${text}" must be http or https`);
  // An origin has no path: one trailing slash is forgiven.
  const hostPart = (schemeAt < 0 ? text : text.slice(schemeAt + 3)).replace(/\/$/, '');
  const wildcard = hostPart.startsWith('*.');
  const base = wildcard ? hostPart.slice(2) : hostPart;
  if (base.includes('*')) throw new OriginSyntaxError(`"${text}": a wildcard is allowed only as the first label, as in https://*.example.com`);
  const host = normalisedHost(base, scheme ?? 'https:');
  if (!host) throw new OriginSyntaxError(`"${text}" is not an origin like https://example.com, https://*.example.com or a host like example.com`);
  // *.com or *.localhost would let any site in: a wildcard needs a name with a dot under it.
  if (wildcard && !/\.[^.:]+/.test(host.replace(/^\[.*\]/, ''))) {
    throw new OriginSyntaxError(`"${text}": a wildcard needs a domain with at least two labels (*.example.com)`);
  }
  const stored = `${wildcard ? '*.' : ''}${host}`;
  return scheme ? `${scheme}//${stored}` : stored;
}

/** The parts of a request's Origin header compared against the entries, or null when it is no http(s) origin. */
function requestOrigin(origin: string): { origin: string; scheme: string; host: string } | null {
  try {
    const u = new URL(origin.trim());
    if (!SCHEMES.has(u.protocol) || !u.host) return null;
    return { origin: `${u.protocol}//${u.host}`, scheme: u.protocol, host: u.host };
  } catch {
    return null;
  }
}

/** `host` is a subdomain (any depth) of `base`, same port: `a.b.example.com` of `example.com`, not `example.com` itself. */
const isSubdomainOf = (host: string, base: string) => host.length > base.length + 1 && host.endsWith(`.${base}`);

/** Whether `entry` (a stored allowed origin, any form above) lets `req` in. */
function entryAllows(entry: string, req: { origin: string; scheme: string; host: string }): boolean {
  if (entry === '*') return true;
  const schemeAt = entry.indexOf('://');
  if (schemeAt >= 0) {
    const scheme = `${entry.slice(0, schemeAt).toLowerCase()}:`;
    if (scheme !== req.scheme) return false;
    const host = entry.slice(schemeAt + 3).toLowerCase().replace(/\/$/, '');
    return host.startsWith('*.') ? isSubdomainOf(req.host, host.slice(2)) : host === req.host;
  }
  const host = entry.toLowerCase();
  return host.startsWith('*.') ? isSubdomainOf(req.host, host.slice(2)) : host === req.host;
}

/** Whether a request's `Origin` header is among a project's allowed origins. */
export function originAllowed(origin: string, allowed: readonly string[]): boolean {
  if (allowed.length === 0) return false;
  if (allowed.includes('*')) return true;
  const req = requestOrigin(origin);
  if (!req) return false;
  for (const entry of allowed) if (entryAllows(entry, req)) return true;
  return false;
}
