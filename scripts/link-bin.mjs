#!/usr/bin/env node
// Links the `skylark` command into node_modules/.bin (run by `npm ci` / `npm install`, the
// `postinstall` script), so that `npx skylark …` in the checkout runs bin/skylark.js at once.
//
// npm does not link a root package's own `bin` into node_modules/.bin, and `npm exec` (npm 10 and
// 11, libnpmexec) treats a root package.json whose `bin` names the command as a package to
// install: it copies the checkout into its npx cache and installs it there (rebuilding the
// addon; with --offline it fails). So package.json has no `bin`, and this link is what npm exec
// finds: a command in the local node_modules/.bin is run as it is (docs/decisions.md "npx skylark").
import { chmodSync, mkdirSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const binDir = path.join(root, 'node_modules', '.bin');
const link = path.join(binDir, 'skylark');
const target = path.relative(binDir, path.join(root, 'bin', 'skylark.js'));

mkdirSync(binDir, { recursive: true });
chmodSync(path.join(root, 'bin', 'skylark.js'), 0o755);
let current = null;
try {
  current = readlinkSync(link);
} catch {
  // absent (or not a link: replaced below)
}
if (current !== target) {
  rmSync(link, { force: true });
  symlinkSync(target, link);
}
