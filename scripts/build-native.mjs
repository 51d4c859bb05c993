// Builds the addon incrementally when node-gyp has configured build/ already (npm ci just did),
// else configures and builds from scratch. A source file added under native/ since the last
// configure (binding.gyp lists them through native/sources.cjs) means configure again first.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

const configured = existsSync('build/Makefile') && existsSync('build/config.gypi');
const targetMk = 'build/skylark.target.mk';
const sources = execFileSync(process.execPath, ['native/sources.cjs'], { encoding: 'utf8' }).trim().split(/\s+/);
const mk = existsSync(targetMk) ? readFileSync(targetMk, 'utf8') : '';
const stale = sources.some((s) => !mk.includes(`/${s.replace(/\.cc$/, '.o')}`));
if (configured && stale) execFileSync('npx', ['node-gyp', 'configure'], { stdio: 'inherit' });
execFileSync('npx', ['node-gyp', configured ? 'build' : 'rebuild', '-j', '2'], { stdio: 'inherit' });
