// What PostgreSQL can store and index, as one set of pure rules: the API refuses (400) an
// operation that breaks one, so that a 202 is never followed by a lost event, and the
// worker can ask the same question of a queued op or of an enriched record to set aside
// only the one that fails (never its neighbours). With the message's format (./message.ts)
// this is the contract between the two roles.
//
// The limits come from PostgreSQL's rules:
// - A B-tree entry must fit in a third of an 8 KB page: 2704 bytes (btree version 4).
//   Rollups key their rows by (project, time bucket, dimension, event name, up to two
//   values), so an event name is at most 512 bytes of UTF-8 and every other text that may
//   become a key (page origin and path, title, referrer and its name and type, utm_*,
//   device and geo fields, profile, device and group ids, property keys) at most 1024
//   bytes: 512 + 2 x 1024 + the other columns and headers stays under 2704.
// - text and jsonb cannot hold NUL (U+0000) nor lone UTF-16 surrogates; `%00` in the page
//   URL's query is decoded to NUL for utm_* (and the referrer parameters), so it is checked
//   after decoding, as the worker decodes.
// - numeric holds 131,072 digits before the point and 16,383 after; a string property that
//   reads as a number (and so is summed, charted and incremented as numeric) is at most
//   1000 characters (with its exponent of at most 3 digits: under 2000 digits), so sums and
//   increments never overflow.
import { parsePageUrl } from '../enrich/url';
import { DEVICE_OVERRIDE_KEYS, type DeviceOverrides, type EventRecord, type QueuedOp } from '../model/event';

export const NAME_MAX_BYTES = 512;
export const KEY_TEXT_MAX_BYTES = 1024;
export const NUMERIC_TEXT_MAX_CHARS = 1000;

/** Why an operation or record cannot be stored: where (as in a 400's issue path) and what. */
interface StorableProblem {
  path: string[];
  message: string;
}

/** Query parameters of the page URL the worker decodes into stored fields. */
const DECODED_URL_PARAMS = ['utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content', 'ref', 'utm_referrer'] as const;

// The text a number is read from, as charts and rollups read it (internal/export/charts.ts NUMERIC_TEXT).
const NUMERIC_TEXT = /^[ \t\n\r\f\v]*[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]{1,3})?[ \t\n\r\f\v]*$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** UTF-8 bytes of `s`, counted only when it could pass `max` (3 bytes per UTF-16 unit at most). */
function overBytes(s: string, max: number): number | null {
  if (s.length * 3 <= max) return null;
  const n = Buffer.byteLength(s);
  return n > max ? n : null;
}

/**
 * NUL or too many bytes in one text field; `path` is built only when there is a problem
 * (this runs for every ingest request: the common case allocates nothing).
 */
function textProblem(value: string, max: number, what: string, base: readonly string[], ...field: string[]): StorableProblem | null {
  if (value.length * 3 <= max && value.indexOf('\u0000') < 0) return null;
  if (value.includes('\u0000')) return { path: [...base, ...field], message: `${what} must not contain NUL (U+0000)` };
  const n = overBytes(value, max);
  if (n !== null) return { path: [...base, ...field], message: `${what} is ${n} bytes of UTF-8; at most ${max} can be stored and indexed` };
  return null;
}

const ANY_SURROGATE = /[\uD800-\uDFFF]/;
const hasLoneSurrogate = (s: string): boolean => ANY_SURROGATE.test(s) && LONE_SURROGATE.test(s);

/** What is wrong with one string value, or null. */
function stringValueProblem(v: string): string | null {
  if (v.includes('\u0000')) return 'strings must not contain NUL (U+0000)';
  if (v.length > NUMERIC_TEXT_MAX_CHARS && NUMERIC_TEXT.test(v)) {
    return `a number written as text is at most ${NUMERIC_TEXT_MAX_CHARS} characters (PostgreSQL numeric must hold it, its sums and increments); this one has ${v.length}`;
  }
  if (hasLoneSurrogate(v)) return 'strings must be well-formed Unicode (no lone surrogates)';
  return null;
}

function keyProblem(k: string): string | null {
  if (k.includes('\u0000')) return 'keys must not contain NUL (U+0000)';
  if (hasLoneSurrogate(k)) return 'keys must be well-formed Unicode (no lone surrogates)';
  return null;
}

/** Whether anything inside `root` has a problem (no paths built: the common case is clean). */
function anyValueProblem(root: unknown): boolean {
  const stack: unknown[] = [root];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (stringValueProblem(v)) return true;
    } else if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
    } else if (v !== null && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      for (const k in o) {
        if (keyProblem(k)) return true;
        stack.push(o[k]);
      }
    } else if (typeof v === 'number' && !Number.isFinite(v)) return true;
  }
  return false;
}

/**
 * Property values: NUL, lone surrogates, keys longer than KEY_TEXT_MAX_BYTES (top level),
 * numeric strings longer than NUMERIC_TEXT_MAX_CHARS (at any depth: a dotted increment
 * reaches nested values). Iterative: depth never grows the stack.
 */
export function propertiesProblem(properties: Record<string, unknown>, path: readonly string[]): StorableProblem | null {
  for (const key in properties) {
    if (key.length * 3 <= KEY_TEXT_MAX_BYTES) continue; // NUL in keys: below, with the values
    const p = textProblem(key, KEY_TEXT_MAX_BYTES, 'a property key', path, key);
    if (p) return p;
  }
  if (!anyValueProblem(properties)) return null;
  // Found one: walk again, this time keeping the path to name it.
  const stack: [unknown, readonly string[]][] = [[properties, path]];
  while (stack.length) {
    const [v, at] = stack.pop()!;
    if (typeof v === 'string') {
      const message = stringValueProblem(v);
      if (message) return { path: [...at], message };
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], [...at, String(i)]]);
    } else if (v !== null && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      for (const k of Object.keys(o)) {
        const message = keyProblem(k);
        if (message) return { path: [...at, k], message };
        stack.push([o[k], [...at, k]]);
      }
    } else if (typeof v === 'number' && !Number.isFinite(v)) {
      return { path: [...at], message: 'numbers must be finite' };
    }
  }
  return null;
}

/** Origin, path and the decoded query parameters of the page URL, as the worker stores them. */
function pageUrlProblem(url: string, base: readonly string[]): StorableProblem | null {
  // Short and without %00: nothing derived from it can pass the limits (percent-encoding a
  // path grows a UTF-16 unit to at most 9 bytes) nor decode to NUL.
  if (url.length * 9 <= KEY_TEXT_MAX_BYTES && url.indexOf('%00') < 0) return null;
  const page = parsePageUrl(url);
  const origin = textProblem(page.origin, KEY_TEXT_MAX_BYTES, 'the page URL\'s origin', base, '__path');
  if (origin) return origin;
  const p = textProblem(page.path, KEY_TEXT_MAX_BYTES, 'the page URL\'s path (percent-encoded, without query)', base, '__path');
  if (p) return p;
  if (!page.query) return null;
  const params = new URLSearchParams(page.query);
  for (const name of DECODED_URL_PARAMS) {
    for (const value of params.getAll(name)) {
      const q = textProblem(value, KEY_TEXT_MAX_BYTES, `the page URL's ${name} (after URL decoding)`, base, '__path');
      if (q) return q;
    }
  }
  return null;
}

const PAYLOAD: readonly string[] = ['payload'];

/**
 * Whether PostgreSQL can store and index the queued op; null when it can, else where and
 * why. `base` is where the op's fields are in the request body (['payload'] for POST
 * /track, [] for POST /event), for the 400's issue path.
 */
export function queuedOpProblem(op: QueuedOp, base: readonly string[] = PAYLOAD): StorableProblem | null {
  const K = KEY_TEXT_MAX_BYTES;
  switch (op.kind) {
    case 'track': {
      const props = base.length ? [...base, 'properties'] : PROPERTIES;
      return textProblem(op.name, NAME_MAX_BYTES, 'the event name', base, 'name')
        ?? textProblem(op.profileId, K, 'profileId', base, 'profileId')
        ?? textProblem(op.deviceId, K, 'the device id', props, '__deviceId')
        ?? (op.groups.length ? firstOf(op.groups, (g, i) => textProblem(g, K, 'a group id', base, 'groups', String(i))) : null)
        ?? (op.url === null ? null : pageUrlProblem(op.url, props))
        ?? (op.title === null ? null : textProblem(op.title, K, '__title', props, '__title'))
        ?? (op.referrer === null ? null : textProblem(op.referrer, K, '__referrer', props, '__referrer'))
        ?? overridesProblem(op.deviceOverrides, props)
        ?? propertiesProblem(op.properties, props);
    }
    case 'identify':
      return textProblem(op.profileId, K, 'profileId', base, 'profileId')
        ?? propertiesProblem(op.properties, [...base, 'properties']);
    case 'increment':
      if (!Number.isFinite(op.delta)) return { path: [...base, 'value'], message: 'value must be a finite number' };
      return textProblem(op.profileId, K, 'profileId', base, 'profileId')
        ?? textProblem(op.property, K, 'property', base, 'property');
    case 'group':
      return textProblem(op.groupId, K, 'the group id', base, 'id')
        ?? textProblem(op.type, K, 'the group type', base, 'type')
        ?? propertiesProblem(op.properties, [...base, 'properties']);
    case 'assign_group':
      return textProblem(op.profileId, K, 'profileId', base, 'profileId')
        ?? firstOf(op.groupIds, (g, i) => textProblem(g, K, 'a group id', base, 'groupIds', String(i)));
    case 'session_check':
      return null;
  }
}

const PROPERTIES: readonly string[] = ['properties'];

/** The property key a device override came from (`os` -> `__os`), for the issue path. */
const OVERRIDE_KEY_OF: Record<string, string> = Object.fromEntries(Object.entries(DEVICE_OVERRIDE_KEYS).map(([key, field]) => [field, key]));

/** Device overrides (`__os` ... `__model`) become device columns: the same limit as any key text. */
function overridesProblem(overrides: DeviceOverrides | undefined, props: readonly string[]): StorableProblem | null {
  if (!overrides) return null;
  for (const field in overrides) {
    const v = overrides[field as keyof DeviceOverrides];
    if (typeof v !== 'string') continue;
    const key = OVERRIDE_KEY_OF[field] ?? `__${field}`;
    const p = textProblem(v, KEY_TEXT_MAX_BYTES, key, props, key);
    if (p) return p;
  }
  return null;
}

/** The text columns of an enriched event that may become index keys. */
const RECORD_KEY_FIELDS = [
  'origin', 'path', 'title', 'referrer', 'referrer_name', 'referrer_type',
  'utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content',
  'country', 'region', 'city', 'device', 'browser', 'browser_version', 'os', 'os_version', 'brand', 'model',
  'profileId', 'deviceId', 'projectId',
] as const satisfies readonly (keyof EventRecord)[];

/** Whether PostgreSQL can store and index the enriched event; null when it can, else which field and why. */
export function eventRecordProblem(e: EventRecord): StorableProblem | null {
  const name = textProblem(e.name, NAME_MAX_BYTES, 'the event name', [], 'name');
  if (name) return name;
  for (const f of RECORD_KEY_FIELDS) {
    const v = e[f];
    const p = textProblem(v, KEY_TEXT_MAX_BYTES, f, [], f);
    if (p) return p;
    if (hasLoneSurrogate(v)) return { path: [f], message: `${f} must be well-formed Unicode (no lone surrogates)` };
  }
  const groups = firstOf(e.groups, (g, i) => textProblem(g, KEY_TEXT_MAX_BYTES, 'a group id', [], 'groups', String(i)));
  if (groups) return groups;
  if (!(e.createdAt instanceof Date) || Number.isNaN(e.createdAt.getTime())) return { path: ['createdAt'], message: 'invalid event time' };
  for (const f of ['latitude', 'longitude'] as const) {
    const v = e[f];
    if (v !== null && !Number.isFinite(v)) return { path: [f], message: `${f} must be a finite number` };
  }
  return propertiesProblem(e.properties, ['properties']);
}

function firstOf<T>(xs: readonly T[], fn: (x: T, i: number) => StorableProblem | null): StorableProblem | null {
  for (let i = 0; i < xs.length; i++) {
    const p = fn(xs[i]!, i);
    if (p) return p;
  }
  return null;
}
