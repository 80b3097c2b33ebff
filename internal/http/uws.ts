// Loads the native uWebSockets.js binary directly: the package silently falls back to a
// slow pure-JS implementation when no binary matches, and we refuse to run on that.
import { createRequire } from 'node:module';
import type * as UWS from 'uWebSockets.js';

const require = createRequire(import.meta.url);

export type { UWS };

export function loadNativeUws(): typeof UWS {
  const major = Number(process.versions.node.split('.')[0]);
  if (major !== 20) {
    throw new Error(`Tidemark needs Node.js 20 (the uWebSockets.js build has native binaries up to Node 20); this is ${process.version}`);
  }
  const binary = `uWebSockets.js/binaries/uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  try {
    return require(binary) as typeof UWS;
  } catch (err) {
    throw new Error(`no native uWebSockets.js binary for ${process.platform}/${process.arch}/ABI ${process.versions.modules}; refusing the slow JS fallback (${(err as Error).message})`);
  }
}
