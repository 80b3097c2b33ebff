// The client's address, as OpenPanel's API reads it: the first of the single-address
// headers a proxy, CDN or server SDK sets, then the first public address in
// x-forwarded-for, else the socket's. TRUSTED_IP_HEADERS narrows which headers are read.
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** Headers that carry one address (the first entry counts when a proxy repeated one). */
const SINGLE_IP_HEADERS = ['x-client-ip', 'openpanel-client-ip', 'cf-connecting-ip', 'true-client-ip', 'x-real-ip'] as const;
const FORWARDED_FOR_HEADER = 'x-forwarded-for';
/** Every header that can name the client, in the order they are read. */
export const IP_HEADERS = [...SINGLE_IP_HEADERS, FORWARDED_FOR_HEADER] as const;
export type IpHeader = (typeof IP_HEADERS)[number];

/** Which headers are read, in the order of IP_HEADERS; made once from the configuration. */
export interface IpHeaderOrder {
  /** Single-address headers, in order. */
  readonly single: readonly string[];
  /** Whether x-forwarded-for is read (after them). */
  readonly forwardedFor: boolean;
}

function buildOrder(trusted: readonly string[]): IpHeaderOrder {
  const allowed = new Set<string>(trusted);
  return Object.freeze({
    single: Object.freeze(SINGLE_IP_HEADERS.filter((h) => allowed.has(h))),
    forwardedFor: allowed.has(FORWARDED_FOR_HEADER),
  });
}

/** Every header, in OpenPanel's order (TRUSTED_IP_HEADERS unset). */
export const DEFAULT_IP_HEADERS: IpHeaderOrder = buildOrder(IP_HEADERS);

/** The headers to read: `trusted` (TRUSTED_IP_HEADERS) narrows the default list; the order stays IP_HEADERS'. */
export function ipHeaderOrder(trusted?: readonly IpHeader[]): IpHeaderOrder {
  return trusted === undefined ? DEFAULT_IP_HEADERS : buildOrder(trusted);
}

/** A single-address header's value as an address, or null (absent, or no address). */
const singleIp = (value: string | undefined): string | null => (value === undefined ? null : asIp(firstEntry(value)));

/**
 * ipFromHeaders for the default list, with each header read by a constant name: on the hot
 * path a request without these headers costs six cheap misses, not six keyed lookups.
 */
function ipFromDefaultHeaders(h: Record<string, string>): string | null {
  const forwarded = h['x-forwarded-for'];
  return singleIp(h['x-client-ip']) ?? singleIp(h['openpanel-client-ip']) ?? singleIp(h['cf-connecting-ip'])
    ?? singleIp(h['true-client-ip']) ?? singleIp(h['x-real-ip']) ?? (forwarded === undefined ? null : firstPublicForwarded(forwarded));
}

/**
 * `text` as an IP address, or null: an IPv4-mapped IPv6 address is its IPv4 address, and a
 * port a proxy appended (`1.2.3.4:5678`, `[2001:db8::1]:443`) is dropped.
 */
export function asIp(text: string | null | undefined): string | null {
  if (!text) return null;
  if (isIP(text)) return text.startsWith('::ffff:') && isIP(text.slice(7)) === 4 ? text.slice(7) : text;
  // Not an address as it stands: maybe one with a port.
  const bracket = /^\[([0-9a-fA-F:.]+)\](?::\d{1,5})?$/.exec(text);
  if (bracket) return asIp(bracket[1]);
  const v4port = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text);
  if (v4port && isIP(v4port[1]!) === 4) return v4port[1]!;
  return null;
}

/** The first comma-separated entry, trimmed (a repeated header arrives joined by commas). */
function firstEntry(value: string): string {
  const comma = value.indexOf(',');
  return (comma < 0 ? value : value.slice(0, comma)).trim();
}

/**
 * Whether an address (as `asIp` returns it) is public: ipaddr.js's range for it is
 * `unicast`, the name it gives every address in none of the special-purpose ranges it
 * knows (IANA's registries). So these are not public: unspecified (0.0.0.0/8, ::),
 * loopback, private (RFC 1918, IPv6 unique local fc00::/7), link-local, carrier-grade NAT
 * (100.64.0.0/10), documentation (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
 * 2001:db8::/32, 3fff::/20), benchmarking (198.18.0.0/15, 2001:2::/48), multicast
 * (224.0.0.0/4, ff00::/8), reserved (240.0.0.0/4, 192.0.0.0/24), broadcast, IPv6
 * site-local (fec0::/10), discard, NAT64 (64:ff9b::/96), the 6to4 and Teredo tunnel
 * prefixes, and the AS112/AMT/ORCHID service ranges. An IPv4-mapped IPv6 address is
 * judged as its IPv4 address. A proxy's own hops in x-forwarded-for, and addresses no
 * client sends from, are such addresses, and skipped. Anything that is no address is
 * not public.
 */
export function isPublicIp(ip: string): boolean {
  // node:net checks the form (strictly: no octal or hex IPv4 parts, which ipaddr.js would
  // read) and names the family, so ipaddr.js parses once, with the family's own parser
  // (its generic parse() validates and then parses again).
  const family = isIP(ip);
  if (family === 4) return ipaddr.IPv4.parse(ip).range() === 'unicast';
  if (family !== 6) return false;
  let v6: ipaddr.IPv6;
  try {
    v6 = ipaddr.IPv6.parse(ip);
  } catch {
    return false; // a zone id ipaddr.js does not take (`%eth0.1`): a scoped address, not a public one
  }
  return (v6.isIPv4MappedAddress() ? v6.toIPv4Address().range() : v6.range()) === 'unicast';
}

/** The first public address among x-forwarded-for's entries (client first, then each proxy). */
function firstPublicForwarded(value: string): string | null {
  let start = 0;
  while (start <= value.length) {
    let end = value.indexOf(',', start);
    if (end < 0) end = value.length;
    const ip = asIp(value.slice(start, end).trim());
    if (ip && isPublicIp(ip)) return ip;
    start = end + 1;
  }
  return null;
}

/** The address the headers name, or null when none does (then the socket's counts). */
export function ipFromHeaders(headers: Record<string, string>, order: IpHeaderOrder = DEFAULT_IP_HEADERS): string | null {
  if (order === DEFAULT_IP_HEADERS) return ipFromDefaultHeaders(headers);
  const single = order.single;
  for (let i = 0; i < single.length; i++) {
    const value = headers[single[i]!];
    if (value === undefined) continue;
    const ip = asIp(firstEntry(value));
    if (ip) return ip;
  }
  if (order.forwardedFor) {
    const forwarded = headers[FORWARDED_FOR_HEADER];
    if (forwarded !== undefined) return firstPublicForwarded(forwarded);
  }
  return null;
}
