#!/usr/bin/env node
// The `skylark` command. Runs the compiled CLI in dist/, which `npm ci` builds (the `prepare`
// script; `npm start` and `npm test` rebuild it), and exits with the code the command resolves to.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

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
