#!/usr/bin/env node
// The `skylark` command. Runs the compiled CLI in dist/, which `npm ci` builds (the `prepare`
// script; `npm start` and `npm test` rebuild it), and exits with the code the command resolves to.
import v8 from 'node:v8';
import { existsSync, readFileSync } from 'node:fs';
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
const fromConfigFile = async () => {
  const file = flagValue('--config') || process.env.SKYLARK_CONFIG;
  if (!file) return undefined;
  try {
    const { parse } = await import('smol-toml');
    const value = parse(readFileSync(file, 'utf8'))['young-generation'];
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
};
const young = flagValue('--young-generation') ?? process.env.SKYLARK_YOUNG_GENERATION ?? (await fromConfigFile()) ?? 'small';
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
