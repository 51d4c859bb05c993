#!/usr/bin/env node
// `npm run check`: the inner loop. The typecheck (incremental: .cache/typecheck.tsbuildinfo), both
// lints (`lint:imports`, `lint:functions`) and the pure unit tests (the vitest project `unit`,
// test/unit/) run side by side; each one's output is printed when it ends, with its time, and the
// check fails when any of them does. `npm test` remains the whole suite.
import { spawn } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const bin = (name) => path.join(root, 'node_modules', '.bin', name);
const steps = [
  { name: 'typecheck', cmd: bin('tsc'), args: ['--noEmit', '-p', 'tsconfig.json', '--incremental', '--tsBuildInfoFile', '.cache/typecheck.tsbuildinfo'] },
  { name: 'lint:imports', cmd: bin('depcruise'), args: ['src', '--config', '.dependency-cruiser.cjs'] },
  { name: 'lint:functions', cmd: process.execPath, args: ['scripts/function-length.mjs'] },
  { name: 'unit tests', cmd: bin('vitest'), args: ['run', '--project', 'unit', ...process.argv.slice(2)] },
];

/** Runs one step to its end: `{ name, code, ms, output }` (stdout and stderr interleaved). */
function run({ name, cmd, args }) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, env: { ...process.env, FORCE_COLOR: process.stdout.isTTY ? '1' : '0' } });
    const chunks = [];
    child.stdout.on('data', (c) => chunks.push(c));
    child.stderr.on('data', (c) => chunks.push(c));
    child.on('error', (err) => chunks.push(Buffer.from(`${err.message}\n`)));
    child.on('close', (code) => resolve({ name, code: code ?? 1, ms: Date.now() - started, output: Buffer.concat(chunks).toString() }));
  });
}

const started = Date.now();
const results = await Promise.all(
  steps.map((s) =>
    run(s).then((r) => {
      process.stdout.write(`\n── ${r.name}: ${r.code === 0 ? 'ok' : `FAILED (exit ${r.code})`} in ${(r.ms / 1000).toFixed(1)} s\n${r.output}`);
      return r;
    }),
  ),
);
const failed = results.filter((r) => r.code !== 0).map((r) => r.name);
console.log(`\ncheck: ${failed.length ? `failed: ${failed.join(', ')}` : 'all passed'} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(failed.length ? 1 : 0);
