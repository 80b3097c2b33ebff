// Device overrides: `__os`, `__osVersion`, `__browser`, `__browserVersion`, `__device`,
// `__brand`, `__model` properties replace what the user-agent gives (OpenPanel's
// parseUserAgent overrides; its mobile SDKs send them behind an HTTP library's user-agent).
// Like every `__` key they are consumed, never kept as custom properties.
import { z } from 'zod';
import { DEVICE_OVERRIDE_KEYS, type DeviceOverrides } from '../model/event';

type DeviceOverrideKey = keyof typeof DEVICE_OVERRIDE_KEYS;
export const DEVICE_OVERRIDE_KEY_LIST = Object.keys(DEVICE_OVERRIDE_KEYS) as DeviceOverrideKey[];

const MAX_DEVICE_OVERRIDE_LENGTH = 256;

/**
 * One override value: a string (or a number, as text), trimmed. Like OpenPanel, an empty
 * one or one of another type (null, an object) is ignored and the user-agent's value kept;
 * a text longer than 256 characters is a 400.
 */
const OverrideValue = z
  .unknown()
  .transform((v, ctx): string | undefined => {
    const text = typeof v === 'string' ? v.trim() : typeof v === 'number' && Number.isFinite(v) ? String(v) : '';
    if (text.length > MAX_DEVICE_OVERRIDE_LENGTH) {
      ctx.addIssue({ code: 'custom', message: `at most ${MAX_DEVICE_OVERRIDE_LENGTH} characters` });
      return z.NEVER;
    }
    return text === '' ? undefined : text;
  })
  .describe('string; replaces the user-agent value (empty or non-string values are ignored)');

export const DeviceOverrideProps = z.object(
  Object.fromEntries(DEVICE_OVERRIDE_KEY_LIST.map((k) => [k, OverrideValue.optional()])) as Record<DeviceOverrideKey, z.ZodOptional<typeof OverrideValue>>,
);

/**
 * The overrides among `raw` (which holds only override keys, or none), as DeviceOverrides
 * or null when none applies; without zod for the common case. Undefined when a value needs
 * zod to word a refusal.
 */
export function deviceOverridesFast(raw: Record<string, unknown>, keys: readonly string[]): DeviceOverrides | null | undefined {
  let out: DeviceOverrides | null = null;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as DeviceOverrideKey;
    const v = raw[key];
    let text: string;
    if (typeof v === 'string') text = v.trim();
    else if (typeof v === 'number' && Number.isFinite(v)) text = String(v);
    else continue;
    if (text.length > MAX_DEVICE_OVERRIDE_LENGTH) return undefined;
    if (text === '') continue;
    (out ??= {})[DEVICE_OVERRIDE_KEYS[key]] = text;
  }
  return out;
}

/** DeviceOverrideProps' output as DeviceOverrides, or null when none applies. */
export function deviceOverridesOf(parsed: z.infer<typeof DeviceOverrideProps>): DeviceOverrides | null {
  let out: DeviceOverrides | null = null;
  for (const key of DEVICE_OVERRIDE_KEY_LIST) {
    const v = parsed[key];
    if (v !== undefined) (out ??= {})[DEVICE_OVERRIDE_KEYS[key]] = v;
  }
  return out;
}
