/**
 * Summarizes a V8 `.cpuprofile` (node --cpu-prof): self time by function (top N) and by file, and
 * the share of idle, GC and "(program)" (native code outside JS: uWS, libuv, syscalls). Used to
 * profile the listener path (docs/benchmarks.md "Players", `SKYLARK_BENCH_CPU_PROF`).
 *
 *   npx tsx bench/lib/profile-summary.ts FILE.cpuprofile [top=30] [from_s] [to_s]
 *
 * `from_s`/`to_s` keep only samples in that time range (seconds from the profile's start), e.g.
 * a bench's measuring window.
 */
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Self time per function and per file of `p` (µs), within [fromUs, toUs] of its start. */
export function summarize(p: Profile, fromUs = 0, toUs = Infinity) {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let t = 0;
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i] ?? 0;
    t += dt;
    if (t < fromUs || t > toUs) continue;
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + dt);
    total += dt;
  }
  const fn = new Map<string, number>();
  const file = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const f = n.callFrame;
    const short = f.url.replace(/^.*\/(src|dist|node_modules)\//, '$1/');
    const key = `${f.functionName || '(anonymous)'} ${short}:${f.lineNumber + 1}`;
    fn.set(key, (fn.get(key) ?? 0) + us);
    file.set(short || f.functionName, (file.get(short || f.functionName) ?? 0) + us);
  }
  const sort = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return { total, fn: sort(fn), file: sort(file) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [file, topS, fromS, toS] = process.argv.slice(2);
  const p = JSON.parse(readFileSync(file!, 'utf8')) as Profile;
  const top = Number(topS ?? 30);
  const s = summarize(p, fromS ? Number(fromS) * 1e6 : 0, toS ? Number(toS) * 1e6 : Infinity);
  const idle = s.fn.filter(([k]) => k.startsWith('(idle)')).reduce((a, [, v]) => a + v, 0);
  const busy = s.total - idle;
  console.log(`profile ${((p.endTime - p.startTime) / 1e6).toFixed(1)} s, sampled ${(s.total / 1e6).toFixed(2)} s, busy ${(busy / 1e6).toFixed(3)} s`);
  console.log('\nself time by function (% of busy):');
  for (const [k, v] of s.fn.filter(([k]) => !k.startsWith('(idle)')).slice(0, top)) console.log(`${((v / busy) * 100).toFixed(1).padStart(5)} %  ${k}`);
  console.log('\nself time by file (% of busy):');
  for (const [k, v] of s.file.filter(([k]) => k !== '(idle)').slice(0, 15)) console.log(`${((v / busy) * 100).toFixed(1).padStart(5)} %  ${k}`);
}
