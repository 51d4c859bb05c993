/**
 * `npm run bench`: runs every `bench/*.bench.ts` (micro benches) and `bench/http-segments.ts`
 * (the HLS serving load run against nginx), then prints the goals block (bench/lib/goals.ts: each
 * listener-side output beside its best peer, the goal and whether it is met, or "not measured in
 * this run" and what measures it) and one table grouped by `group`, with the peer and the ratio
 * where a row has one. Asserts nothing and exits 0 even when a part fails: the
 * failure is printed and the other parts still run. Arguments filter parts by name
 * (`npm run bench -- http`). The goals and the rows are also written to bench/.out/latest.json.
 */
import { readdirSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BenchRow } from './lib/report.js';
import { formatReport, machineInfo } from './lib/format.js';
import { buildGoals } from './lib/goals.js';

const benchDir = import.meta.dirname;
const filters = process.argv.slice(2).filter((a) => !a.startsWith('-'));

interface Part {
  name: string;
  file: string;
  timeoutMs: number;
}

const parts: Part[] = [
  ...readdirSync(benchDir)
    .filter((f) => f.endsWith('.bench.ts'))
    .sort()
    .map((f) => ({ name: f.replace(/\.ts$/, ''), file: path.join(benchDir, f), timeoutMs: 10 * 60_000 })),
  { name: 'http-segments', file: path.join(benchDir, 'http-segments.ts'), timeoutMs: 20 * 60_000 },
].filter((p) => filters.length === 0 || filters.some((f) => p.name.includes(f)));

const rows: BenchRow[] = [];
const failures: Array<{ part: string; error: string }> = [];
const started = new Date();
const machine = machineInfo();
process.stderr.write(`bench: ${parts.map((p) => p.name).join(', ') || '(nothing matches the filter)'}\n`);

for (const part of parts) {
  const t0 = performance.now();
  process.stderr.write(`\n── ${part.name} ──\n`);
  try {
    const mod = (await import(pathToFileURL(part.file).href)) as { run?: () => Promise<BenchRow[]>; timeoutMs?: number };
    if (typeof mod.run !== 'function') throw new Error(`${path.basename(part.file)} exports no run()`);
    if (typeof mod.timeoutMs === 'number' && mod.timeoutMs > 0) part.timeoutMs = mod.timeoutMs; // a part may ask for longer
    let timer: NodeJS.Timeout | undefined;
    const got = await Promise.race([
      mod.run(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`did not finish in ${part.timeoutMs / 1000} s`)), part.timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    if (!Array.isArray(got)) throw new Error('run() did not resolve to an array of rows');
    rows.push(...got);
    process.stderr.write(`── ${part.name}: ${got.length} rows in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  } catch (e) {
    const error = e instanceof Error ? e.message : String(e);
    failures.push({ part: part.name, error });
    process.stderr.write(`── ${part.name} FAILED: ${error}\n`);
  }
}

// The goals block (bench/lib/goals.ts) comes first: each listener-side output beside its best peer.
const goals = buildGoals(rows, failures);
process.stdout.write('\n' + formatReport(rows, failures, machine, started, goals) + '\n');

try {
  const out = path.join(benchDir, '.out');
  mkdirSync(out, { recursive: true });
  writeFileSync(path.join(out, 'latest.json'), JSON.stringify({ started: started.toISOString(), machine, goals, rows, failures }, null, 2) + '\n');
} catch {
  /* printing is what matters */
}
// Some micro benches may leave handles open; the report is out, so leave now, successfully.
process.exit(0);
