// Builds the addon incrementally when node-gyp has configured build/ already (npm ci just did),
// else configures and builds from scratch. Serialized with other builders on this machine.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const verb = existsSync('build/Makefile') && existsSync('build/config.gypi') ? 'build' : 'rebuild';
execFileSync('npx', ['node-gyp', verb, '-j', '2'], { stdio: 'inherit' });
