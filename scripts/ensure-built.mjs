#!/usr/bin/env node
// Compiles the TypeScript (src/ → dist/, tsconfig.build.json) only when dist/ is missing or older
// than a source: `npm start` runs this, then the built CLI. The check is one stat per source file
// (no compiler): dist/cli/main.js against the newest of src/** and the tsconfig files. `npm ci`
// already builds (the `prepare` script), so a start after it compiles nothing.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync, utimesSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The newest modification time (ms) of the files under `dir`, recursively. */
function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    const t = entry.isDirectory() ? newest(p) : statSync(p).mtimeMs;
    if (t > latest) latest = t;
  }
  return latest;
}

/** The modification time (ms) of `file`, or -1 when it does not exist. */
function mtime(file) {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return -1;
  }
}

const main = path.join(root, 'dist', 'cli', 'main.js');
const built = mtime(main);
const sources = Math.max(newest(path.join(root, 'src')), mtime(path.join(root, 'tsconfig.json')), mtime(path.join(root, 'tsconfig.build.json')));
if (built < 0 || built < sources) {
  process.stderr.write(built < 0 ? 'skylark: dist/ is missing: compiling the TypeScript\n' : 'skylark: src/ is newer than dist/: compiling the TypeScript\n');
  const tsc = spawnSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
  // tsc emits even with type errors: a failed build is marked stale, so the next start compiles again.
  if (tsc.status !== 0 && mtime(main) >= 0) utimesSync(main, 0, 0);
  process.exit(tsc.status ?? 1);
}
