// Tidemark's own configuration schema (internal/config/config.ts, zod), applied to
// the environment each container or compose service gets, so that a value the
// service would refuse at start (LOG_LEVEL=verbose, TIDEMARK_SHARDS=0, ...) fails
// validation instead of a rollout.

import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export type EnvCheck = (env: Record<string, string>) => string | undefined;

const require = createRequire(import.meta.url);
const CONFIG_MODULE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'internal', 'config', 'config.ts');
let cached: EnvCheck | null | undefined;

/** The check, or null when internal/config/config.ts cannot be loaded. */
export function tidemarkConfigCheck(): EnvCheck | null {
  if (cached !== undefined) return cached;
  try {
    const mod = require(CONFIG_MODULE) as { loadConfig?: (env: Record<string, string>) => unknown };
    const load = mod.loadConfig;
    cached =
      typeof load === 'function'
        ? (env) => {
            try {
              load(env);
              return undefined;
            } catch (e) {
              return (e as Error).message;
            }
          }
        : null;
  } catch {
    cached = null;
  }
  return cached;
}
