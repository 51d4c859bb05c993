/**
 * `npm run bench`'s part for bench/listener-memory.ts (where a listener's memory goes,
 * docs/benchmarks.md): runs it as a child process, as it is run by hand
 * (`node --import tsx bench/listener-memory.ts <case …>`), and turns the JSON it writes
 * (bench/.out/listener-memory.json) into rows: KB per listener per case after a full GC, the
 * progressive listener beside icecast2's, and what an HLS session keeps. What is measured is the
 * script's own; this file only chooses the cases and reads the result.
 *
 * Environment: BENCH_MEMORY_CASES ("session,progressive,icecast2": the cases the goals block needs;
 * "all" for every case, about 3.5 min), and the script's own BENCH_MEMORY_N (4000),
 * BENCH_MEMORY_WARM, BENCH_MEMORY_SNAPSHOT (1: needed for the per-session JS heap),
 * BENCH_MEMORY_TOP (here 40 unless set: more constructors summed for the per-session JS heap).
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { BenchRow } from './lib/report.js';
import { MEMORY_GROUP, MEMORY_ROWS } from './lib/goals.js';

const root = path.resolve(import.meta.dirname, '..');
const log = (msg: string) => process.stderr.write(`[listener-memory.bench] ${msg}\n`);
const OUT = path.join(root, 'bench', '.out', 'listener-memory.json');

/** bench/run.ts gives this part this long; the child is ended a little before. */
export const timeoutMs = 10 * 60_000;

/** The parts of bench/listener-memory.ts's JSON that the rows read. */
interface Reading {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
}
export interface MemoryCase {
  name: string;
  n: number;
  base: Reading | null;
  loaded: { before: Reading; after: Reading } | null;
  rssBase: number;
  rssLoaded: number;
  aliveAfter: number;
  ready: { opened: number; answered: number };
  top: Array<{ what: string; bytesPer: number; countPer: number }>;
}
export interface MemoryResult {
  n: number;
  results: MemoryCase[];
  failures: string[];
}

const KB = 1024;
/** RSS Δ per listener in KB: after GC for a Skylark case, the plain RSS Δ for icecast2 (C, no GC). */
const rssAfter = (c: MemoryCase) => (c.base && c.loaded ? (c.loaded.after.rss - c.base.rss) / c.n / KB : (c.rssLoaded - c.rssBase) / c.n / KB);
const rssBefore = (c: MemoryCase) => (c.base && c.loaded ? (c.loaded.before.rss - c.base.rss) / c.n / KB : (c.rssLoaded - c.rssBase) / c.n / KB);
const num = (n: number) => n.toLocaleString('en-US');
const counts = (c: MemoryCase) => `N ${num(c.n)}: ${num(c.ready.opened)} opened, ${num(c.ready.answered)} answered, ${num(c.aliveAfter)} alive at the end`;

/** Rows from the script's JSON (exported for the unit test). */
export function memoryRows(j: MemoryResult): BenchRow[] {
  const rows: BenchRow[] = [];
  const ice = j.results.find((c) => c.name === 'icecast2');
  const prog = j.results.find((c) => c.name === 'progressive');
  const sess = j.results.find((c) => c.name === 'session');
  const icePeer = ice ? { peer: { name: 'icecast2', value: rssAfter(ice) } } : {};
  if (prog && prog.base && prog.loaded) {
    rows.push({ group: MEMORY_GROUP, name: MEMORY_ROWS.progressiveAfterGc, value: rssAfter(prog), unit: 'KB', ...icePeer, note: counts(prog) });
    rows.push({ group: MEMORY_GROUP, name: MEMORY_ROWS.progressiveBeforeGc, value: rssBefore(prog), unit: 'KB', ...icePeer, note: 'the last seconds\u2019 garbage included' });
  }
  if (sess && sess.base && sess.loaded) {
    // What a session keeps in the JS heap: the heap snapshot's self sizes by constructor, connected
    // minus after the sessions timed out (the connections' own JS is gone between requests).
    const js = sess.top.filter((t) => t.bytesPer > 0).reduce((a, t) => a + t.bytesPer, 0) / KB;
    const biggest = sess.top
      .filter((t) => t.bytesPer > 0)
      .slice(0, 4)
      .map((t) => `${t.what} ${t.bytesPer.toFixed(0)} B`)
      .join(', ');
    if (sess.top.length) rows.push({ group: MEMORY_GROUP, name: MEMORY_ROWS.sessionJs, value: js, unit: 'KB', note: `${counts(sess)}; ${biggest}` });
    rows.push({ group: MEMORY_GROUP, name: MEMORY_ROWS.sessionHeapUsed, value: (sess.loaded.after.heapUsed - sess.base.heapUsed) / sess.n / KB, unit: 'KB', note: 'approximate: V8 sweeps concurrently' });
  }
  for (const c of j.results) {
    if (c.name === 'icecast2' || c.name === 'progressive') continue;
    rows.push({
      group: MEMORY_GROUP,
      name: `case ${c.name}: RSS Δ per ${c.name === 'll' ? 'listener (2 connections)' : 'connection'} after GC`,
      value: rssAfter(c),
      unit: 'KB',
      note: counts(c),
    });
  }
  if (ice) rows.push({ group: MEMORY_GROUP, name: 'case icecast2: RSS Δ per listener', value: rssAfter(ice), unit: 'KB', note: counts(ice) });
  for (const f of j.failures) rows.push({ group: MEMORY_GROUP, name: 'case failed', value: NaN, unit: '', note: f });
  return rows;
}

export async function run(): Promise<BenchRow[]> {
  const want = process.env.BENCH_MEMORY_CASES || 'session,progressive,icecast2';
  const cases = want === 'all' ? [] : want.split(',').map((s) => s.trim()).filter(Boolean);
  const t0 = Date.now();
  const env = { ...process.env, BENCH_MEMORY_TOP: process.env.BENCH_MEMORY_TOP || '40' };
  const code = await new Promise<number | null>((resolve, reject) => {
    // Its own process group, so that a run that overruns is ended with its servers and clients;
    // its printed table goes to stderr with the other parts' logs (stdout is the report).
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'bench', 'listener-memory.ts'), ...cases], { cwd: root, env, detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout!.pipe(process.stderr, { end: false });
    const timer = setTimeout(() => {
      log(`ending the run after ${(timeoutMs - 30_000) / 1000} s`);
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        child.kill('SIGTERM');
      }
    }, timeoutMs - 30_000);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  if (!existsSync(OUT) || statSync(OUT).mtimeMs < t0) throw new Error(`bench/listener-memory.ts wrote no result (exit ${code})`);
  return memoryRows(JSON.parse(readFileSync(OUT, 'utf8')) as MemoryResult);
}

// `node --import tsx bench/listener-memory.bench.ts` prints this part's rows alone.
if (import.meta.url === `file://${process.argv[1]}`) await (await import('./lib/format.js')).printPartAlone(run);
