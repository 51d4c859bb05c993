/**
 * Loads uWebSockets.js, the HTTP server library (docs/decisions.md "uWebSockets.js builds and
 * Node.js lines"). Upstream ships one native binary per Node.js ABI (`uws_<platform>_<arch>_<ABI>.node`),
 * and its current builds need glibc 2.38 or newer; older hosts get the newest older build
 * that carries their ABI:
 *
 * | package (pinned in package-lock.json)            | upstream   | Node.js ABIs            | glibc  |
 * | ------------------------------------------------ | ---------- | ----------------------- | ------ |
 * | `uWebSockets.js` (`@btc-vision/uwebsockets.js`)  | v20.57.0   | 115, 127, 137 (20/22/24) | ≥ 2.38 |
 * | `uws-pack` (optional, installed on Node ≥ 22)    | v20.4x     | 127 (22)                | ≥ 2.27 |
 * | `@trufflesuite/uws-js-unofficial`                | v20.30.0   | 115 (20)                | ≥ 2.27 |
 *
 * The first that loads is used; every module of the process (each HTTP worker thread too) gets
 * the same one. Only the binary's own exports are used (`App`, `us_listen_socket_close`,
 * `us_socket_local_port`), so each package's binary is loaded directly: its path is then known,
 * and the HTTP front's hooks (src/native/http-front.ts) patch that object's imports.
 * @throws Error at import when no build loads, naming the Node.js and glibc versions found and
 *   the ones supported
 */
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type uWSModule from 'uWebSockets.js';

/** One build of the library that may carry this process's binary. */
interface Build {
  /** The npm package (its folder under node_modules). */
  pkg: string;
  /** The folder inside it that holds the binaries. */
  dir: string;
  /** What it is, for messages: upstream release and the glibc it needs. */
  label: string;
}

const BUILDS: readonly Build[] = [
  { pkg: 'uWebSockets.js', dir: '.', label: 'uWebSockets.js v20.57.0 (Node.js 20, 22, 24; glibc ≥ 2.38)' },
  { pkg: 'uws-pack', dir: 'dist/bin', label: 'uWebSockets.js v20.4x via uws-pack 20.0.8 (Node.js 22; glibc ≥ 2.27)' },
  { pkg: '@trufflesuite/uws-js-unofficial', dir: 'binaries', label: 'uWebSockets.js v20.30.0 via @trufflesuite/uws-js-unofficial (Node.js 20; glibc ≥ 2.27)' },
];

/** The library as loaded: its exports and the real path of its binary. */
export interface LoadedHttpLibrary {
  uws: typeof uWSModule;
  /** Absolute real path of the loaded `.node` object (what the dynamic loader names it). */
  object: string;
  /** Which build it is (docs/decisions.md). */
  build: string;
}

/** The folder of `pkg` as Node's resolution finds it from this file (node_modules up the tree). */
function packageDir(pkg: string): string | null {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', pkg);
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) return null;
  }
}

/** The glibc version this process runs on ('' when not glibc, e.g. musl or not Linux). */
export function glibcVersion(): string {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime ?? '';
}

/**
 * Loads the first build whose binary for this platform, arch and ABI loads.
 * @throws Error naming Node.js, its ABI, the glibc found, what each build needs and why each failed
 */
export function loadHttpLibrary(): LoadedHttpLibrary {
  const require = createRequire(import.meta.url);
  const file = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const failures: string[] = [];
  for (const b of BUILDS) {
    const dir = packageDir(b.pkg);
    const binary = dir ? path.join(dir, b.dir, file) : null;
    if (!binary || !existsSync(binary)) {
      failures.push(`${b.label}: ${dir ? `no ${file}` : 'not installed'}`);
      continue;
    }
    try {
      const object = realpathSync(binary);
      return { uws: require(object) as typeof uWSModule, object, build: b.label };
    } catch (e) {
      failures.push(`${b.label}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  const glibc = glibcVersion();
  throw new Error(
    `the HTTP server library (uWebSockets.js) has no build that loads on Node.js ${process.version} (ABI ${process.versions.modules}, ${process.platform}-${process.arch}${glibc ? `, glibc ${glibc}` : ', not glibc'}). ` +
      'Supported: Node.js 20, 22 or 24 on glibc 2.38 or newer (Debian 13, Ubuntu 24.04), or Node.js 20 or 22 on glibc 2.27 or newer. Tried:\n  ' +
      failures.join('\n  '),
  );
}

const loaded = loadHttpLibrary();

/** uWebSockets.js (its native exports), loaded once per module instance (each worker thread loads its own). */
export const uWS: typeof uWSModule = loaded.uws;

/**
 * The absolute real path of the loaded library binary: the object whose socket calls the HTTP
 * front's hooks patch (src/native/http-front.ts matches it by path suffix).
 */
export const HTTP_LIBRARY_OBJECT: string = loaded.object;

/** Which build was loaded (for logs and `/readyz`). */
export const HTTP_LIBRARY_BUILD: string = loaded.build;
