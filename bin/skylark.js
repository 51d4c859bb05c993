#!/usr/bin/env node
// The `skylark` command. Runs the compiled CLI in dist/, which `npm ci` builds (the `prepare`
// script; `npm start` and `npm test` rebuild it), and exits with the code the command resolves to.
import v8 from 'node:v8';
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';

// V8's young generation (docs/configuration.md `SKYLARK_YOUNG_GENERATION`), first, before the CLI
// loads: `small` (the default) sets the semi-spaces' growth factor to 1, so that V8's doubling
// does not take them from their initial 1 MB towards 16 MB each under many long-lived connections.
// V8 reads the factor each time it grows them but their maximum only at start, so the factor is
// what can be set from here; it holds in most runs, not all (docs/benchmarks.md "Where a
// listener's memory goes"): the hard maximum is node's own `--max-semi-space-size`. The choice is
// left in the environment for the HTTP worker threads (src/delivery/threads/threads.ts, a hard
// maximum there); src/base/config.ts validates it.
// Flag, then environment, then the configuration file (`--config` / SKYLARK_CONFIG, docs/configuration.md
// "Configuration file"; a file the CLI will refuse is passed over here).
const flagValue = (name) => {
  const at = process.argv.findIndex((a) => a === name || a.startsWith(`${name}=`));
  if (at < 0) return undefined;
  return process.argv[at].includes('=') ? process.argv[at].slice(process.argv[at].indexOf('=') + 1) : (process.argv[at + 1] ?? '');
};
let configFile;
const fromConfigFile = async (key) => {
  const file = flagValue('--config') || process.env.SKYLARK_CONFIG;
  if (!file) return undefined;
  try {
    const { parse } = await import('smol-toml');
    configFile ??= parse(readFileSync(file, 'utf8'));
    const value = configFile[key];
    return typeof value === 'string' || typeof value === 'number' ? String(value) : undefined;
  } catch {
    return undefined;
  }
};
const young = flagValue('--young-generation') ?? process.env.SKYLARK_YOUNG_GENERATION ?? (await fromConfigFile('young-generation')) ?? 'small';
process.env.SKYLARK_YOUNG_GENERATION = young;
// A maximum given to node itself (`node --max-semi-space-size=N`, NODE_OPTIONS) is kept as it is.
const explicit = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].some((a) => /^--max[-_]semi[-_]space[-_]size/.test(a));
if (young === 'small' && !explicit) v8.setFlagsFromString('--semi-space-growth-factor=1');

const compiled = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(compiled)) {
  const root = fileURLToPath(new URL('..', import.meta.url));
  process.stderr.write(`skylark: ${fileURLToPath(compiled)} is missing: run \`npm ci\` (or \`npm run build:ts\`) in ${root}\n`);
  process.exit(1);
}
// glibc's malloc arenas (docs/decisions.md "Giving freed memory back"), before the CLI loads: V8's
// helper threads that compile and collect take an arena each on their first allocation, and what
// they free there in pieces stays resident. With one HTTP thread (`SKYLARK_HTTP_THREADS`: flag,
// environment, configuration file; the number of cores by default) the cap is two: the main
// thread's and one the others share. With more, glibc's default stays: it fixes the cap the first
// time it needs it, so HTTP worker threads, started later, would share the helpers' arena. A value
// the CLI will refuse counts as the default here; glibc's own MALLOC_ARENA_MAX (or GLIBC_TUNABLES) wins.
const threadsValue = flagValue('--http-threads') ?? process.env.SKYLARK_HTTP_THREADS ?? (await fromConfigFile('http-threads')) ?? '';
const httpThreads = /^[1-9]\d{0,2}$/.test(threadsValue) ? Number(threadsValue) : availableParallelism();
if (httpThreads === 1) {
  try {
    const { limitMallocArenas } = await import(new URL('../dist/native/memory.js', import.meta.url).href);
    limitMallocArenas(2);
  } catch {
    // No addon (not built): the commands that need it say so; the others run with glibc's arenas.
  }
}
const { main } = await import(compiled.href);

// Exit explicitly: `serve` resolves once its graceful stop is over (or cut short at its deadline),
// and the process must end then whatever a library still holds.
main(process.argv.slice(2)).then(
  (code) => process.exit(typeof code === 'number' ? code : 0),
  (err) => {
    process.stderr.write(`skylark: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
