/**
 * The only module that loads the C++ addon (`build/Release/skylark.node`, or `build/Debug/` when
 * only that is built, or the file `SKYLARK_ADDON` names: resolveAddonPath). See docs/native-api.md.
 * Each native class has its own wrapper beside this file (segmenter.ts, rtmp-listener.ts,
 * icecast-source.ts, rtp-fanout.ts, http-front.ts); they take the loaded object from here.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** The addon file could not be found (`code` 'addon_not_found'); the message names every path tried. */
export class AddonNotFoundError extends Error {
  readonly code = 'addon_not_found';
  constructor(
    message: string,
    /** The paths looked for, in order. */
    readonly tried: string[],
  ) {
    super(message);
    this.name = 'AddonNotFoundError';
  }
}

/**
 * The addon file to load: the file `env.SKYLARK_ADDON` names when set (relative to the current
 * directory), else `<root>/build/Release/skylark.node`, else `<root>/build/Debug/skylark.node`
 * (`node-gyp rebuild --debug`). `exists` is injectable for tests.
 * @throws AddonNotFoundError naming what it looked for when that file (or neither build) exists
 */
export function resolveAddonPath(root: string, env: NodeJS.ProcessEnv = process.env, exists: (p: string) => boolean = existsSync): string {
  const named = env.SKYLARK_ADDON;
  if (named) {
    const file = path.resolve(named);
    if (exists(file)) return file;
    throw new AddonNotFoundError(`SKYLARK_ADDON names ${file}, which does not exist`, [file]);
  }
  const tried = ['Release', 'Debug'].map((type) => path.join(root, 'build', type, 'skylark.node'));
  const found = tried.find((file) => exists(file));
  if (found) return found;
  throw new AddonNotFoundError(
    `the native addon is not built: looked for ${tried.join(' and ')} (npm run build:native builds it; SKYLARK_ADDON may name another skylark.node)`,
    tried,
  );
}

// src/native or dist/native → the repository root is two levels up.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The addon file this process loaded (see resolveAddonPath). */
export const addonPath = resolveAddonPath(root);
/** The loaded addon object, for the wrappers beside this file (each types its own class). */
export const loadedAddon: object = createRequire(import.meta.url)(addonPath) as object;
