#!/usr/bin/env node
// The `skylark` command. Runs the compiled CLI (dist/, built by `npm run build:ts`, which `npm start` runs).
import { main } from '../dist/cli/main.js';

main(process.argv.slice(2)).then(
  (code) => { if (typeof code === 'number') process.exitCode = code; },
  (err) => { process.stderr.write(`skylark: ${err instanceof Error ? err.message : String(err)}\n`); process.exitCode = 1; },
);
