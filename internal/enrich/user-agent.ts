// Step putUserAgent: device, brand, model, browser, browser_version, os, os_version
// from the user-agent with ua-parser-js 1.x (MIT; 2.x is AGPL, do not upgrade), then the
// client's `__os` ... `__model` overrides; and whether the event is server-side. The
// rules follow OpenPanel's packages/common/server/parser-user-agent.ts.
import { LRUCache } from 'lru-cache';
import UAParser from 'ua-parser-js';
import type { DeviceFields, DeviceOverrides } from '../model/event';
import { keep, type Step } from './step';

/** What OpenPanel records for a request with no browser behind it: device 'server', rest empty. */
export const SERVER_DEVICE: Readonly<DeviceFields> = Object.freeze({
  device: 'server',
  browser: '',
  browser_version: '',
  os: '',
  os_version: '',
  brand: '',
  model: '',
});

// "name/1.2.3" and nothing else (curl/8.4.0, Go-http-client/1.1): an HTTP library.
const SINGLE_NAME_VERSION_RE = /^[^/]+\/[\d.]+$/;
// iPadOS 18 UAs that ua-parser reads as "Mac OS" without a version.
const IPADOS_VERSION_RE = /iPadOS\s*([\d_]+)/i;
// Fallback when ua-parser has no device type (OpenPanel's getDevice, condensed).
const TABLET_RE = /tablet|ipad|playbook|silk|kindle|SM-T\d+/i;
const MOBILE_RE = /mobi|iphone|ipod|android.+mobile|blackberry|opera mini|iemobile|windows phone|SM-[ABDEFGJMNRWZ]\d+|LG-[A-Z0-9]+/i;
const ANDROID_RE = /android/i;

export function parseUserAgent(userAgent: string | null | undefined): DeviceFields {
  return parseUserAgentInfo(userAgent).fields;
}

/** What a user-agent tells: its device fields, and whether it is a server (no browser, no OS). */
interface UserAgentInfo {
  fields: DeviceFields;
  /** No browser and no OS behind it: absent, `node`, `okhttp/4.12.0`, `python-requests/2.31`, `curl/8.4.0`, ... */
  isServer: boolean;
}

export function parseUserAgentInfo(userAgent: string | null | undefined): UserAgentInfo {
  const ua = userAgent?.trim() ?? '';
  // OpenPanel: no user-agent at all is a server-side call.
  if (!ua) return { fields: { ...SERVER_DEVICE }, isServer: true };
  const res = new UAParser(ua).getResult();
  // OpenPanel's isServer: a bare library token, or nothing recognisable at all.
  if (SINGLE_NAME_VERSION_RE.test(ua) || (!res.os.name && !res.browser.name && !res.device.vendor && !res.device.model)) {
    return { fields: { ...SERVER_DEVICE }, isServer: true };
  }
  let os = res.os.name ?? '';
  let osVersion = res.os.version ?? '';
  const ipadOs = res.device.model === 'iPad' && !osVersion ? IPADOS_VERSION_RE.exec(ua) : null;
  if (ipadOs?.[1]) {
    // ua-parser names iPad systems "iOS" elsewhere; keep that name rather than "Mac OS".
    os = 'iOS';
    osVersion = ipadOs[1].replace(/_/g, '.');
  }
  const fields: DeviceFields = {
    // ua-parser leaves desktops without a type; OpenPanel then falls back to its own regexes.
    device: res.device.type || fallbackDeviceType(ua),
    brand: res.device.vendor ?? '',
    model: res.device.model ?? '',
    browser: res.browser.name ?? '',
    // Full version string ("124.0.6367.82"), as OpenPanel stores it, not the major.
    browser_version: res.browser.version ?? '',
    os,
    os_version: osVersion,
  };
  return { fields, isServer: false };
}

/**
 * The device fields after the client's own overrides (`__os` ... `__model`): each one sent
 * replaces the user-agent's value. When the user-agent showed no device at all (a mobile
 * app behind an HTTP library), its `device: 'server'` is not kept: the fields not
 * overridden are '' (unknown). `serverSide`: a server user-agent and no override.
 */
function withDeviceOverrides(info: UserAgentInfo, overrides: DeviceOverrides | null | undefined): { fields: DeviceFields; serverSide: boolean } {
  if (!hasDeviceOverride(overrides)) return { fields: info.fields, serverSide: info.isServer };
  const base = info.isServer ? NO_DEVICE : info.fields;
  return { fields: { ...base, ...definedOnly(overrides!) }, serverSide: false };
}

/** Whether the client sent any of `__os` ... `__model` (non-empty): then the event is not server-side. */
export function hasDeviceOverride(overrides: DeviceOverrides | null | undefined): boolean {
  if (overrides) for (const k in overrides) if (overrides[k as keyof DeviceFields]) return true;
  return false;
}

const NO_DEVICE: Readonly<DeviceFields> = Object.freeze({ device: '', browser: '', browser_version: '', os: '', os_version: '', brand: '', model: '' });

function definedOnly(o: DeviceOverrides): DeviceOverrides {
  const out: DeviceOverrides = {};
  for (const k in o) {
    const v = o[k as keyof DeviceFields];
    if (typeof v === 'string' && v !== '') out[k as keyof DeviceFields] = v;
  }
  return out;
}

function fallbackDeviceType(ua: string): string {
  if (TABLET_RE.test(ua)) return 'tablet';
  if (MOBILE_RE.test(ua)) return 'mobile';
  // Android without "Mobile" is a tablet by Google's own UA convention.
  if (ANDROID_RE.test(ua)) return 'tablet';
  return 'desktop';
}

interface UserAgentOptions {
  /** Distinct user-agent strings whose parse is kept (LRU). */
  cacheSize?: number;
}

export function createUserAgentParser(opts: UserAgentOptions = {}): (userAgent: string | null | undefined) => DeviceFields {
  const parse = createUserAgentInfoParser(opts);
  return (userAgent) => parse(userAgent).fields;
}

function createUserAgentInfoParser(opts: UserAgentOptions = {}): (userAgent: string | null | undefined) => UserAgentInfo {
  const cache = new LRUCache<string, UserAgentInfo>({ max: opts.cacheSize ?? 10_000 });
  return (userAgent) => {
    const key = userAgent ?? '';
    const hit = cache.get(key);
    if (hit) return hit;
    const info = parseUserAgentInfo(userAgent);
    const parsed = Object.freeze({ fields: Object.freeze(info.fields), isServer: info.isServer });
    cache.set(key, parsed);
    return parsed;
  };
}

/** Step putUserAgent: device fields from the user-agent and the client's overrides; the server-side flag. */
export function createPutUserAgent(opts: UserAgentOptions = {}): Step {
  const parse = createUserAgentInfoParser(opts);
  return {
    name: 'putUserAgent',
    run(event) {
      const { fields, serverSide } = withDeviceOverrides(parse(event.userAgent), event.deviceOverrides);
      return keep({ ...event, ...fields, serverSide });
    },
  };
}
