/**
 * Catch-up radio on against off under ingest load (docs/behaviour.md §17, docs/bench/catch-up.md):
 * one Skylark process (`node bin/skylark.js serve`, ABR ladder off: one layer per stream), N AAC
 * 128 kbit/s publishers from the light RTMP replayer child (bench/lib/rtmp-replayer.ts), first to N
 * streams with `catchUp.hours` 0, then to N other streams with `catchUp.hours` 1 (the order
 * alternates per round). Per phase: the server's CPU over timed windows (bench/lib/ingest-phase.ts:
 * the run time of all its threads as the scheduler counts it, schedstat), and what it wrote to disk meanwhile — `write_bytes` of
 * /proc/<pid>/io (bytes sent to the block layer: the kept segments, their index and the WAL) per
 * second, beside the bytes per second of audio the streams received (what the layer's segments
 * hold). Asserts nothing.
 *
 * With BENCH_CATCHUP_PAIRED=1 the two modes run at once instead, on two Skylark processes: each
 * round one has N streams with catch-up on and the other N with it off (the roles swap every
 * round), both measured over the same windows, so what moves the whole box moves both; the rows
 * are then the medians of the windows' on/off ratios and differences. BENCH_CATCHUP_AA=1 (with
 * BENCH_CATCHUP_PAIRED) keeps catch-up off on both servers: the control, what the pairing itself
 * shows between two servers that do the same work.
 *
 * Settings (environment): BENCH_CATCHUP_N (100), BENCH_CATCHUP_ROUNDS (2), BENCH_CATCHUP_LATENCY
 * (`standard`; `low`: LL-HLS layers, whose segments are held as their parts), BENCH_INGEST_WARMUP_SECONDS
 * (8), BENCH_INGEST_WINDOW_SECONDS (10), BENCH_INGEST_WINDOWS (3), BENCH_INGEST_TICK_MS (10).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { runNsSince, sleep, stop, threadRunNs } from './lib/proc.js';
import { createAccount, startSkylark } from './http-segments.js';
import { readFlvAudio } from './lib/rtmp-replayer.js';
import { skylarkTarget, startReplayer, type SkylarkStream } from './lib/ingest-servers.js';
import { envNum, f1, median, runPhase, type Phase, type Server } from './lib/ingest-phase.js';
import { mapLimit, skylarkHlsOk } from './lib/ingest-hls.js';

const root = path.resolve(import.meta.dirname, '..');
const FLV = path.join(root, 'test', 'fixtures', 'aac', 'sine48k_stereo_128k.flv');
const GROUP = 'Catch-up on vs off (RTMP ingest, one layer per stream)';
const log = (msg: string) => process.stderr.write(`[catch-up-ingest] ${msg}\n`);

/** Bytes the process (all its threads) has had written to the block layer so far (/proc/<pid>/io `write_bytes`). */
function writeBytes(pid: number): number {
  const m = /^write_bytes:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

/** The streams' `latencyMode` (BENCH_CATCHUP_LATENCY). */
const LATENCY = process.env.BENCH_CATCHUP_LATENCY === 'low' ? 'low' : 'standard';

/** Creates an AAC 128 kbit/s stream with `catchUp.hours` = `hours`. @throws Error on a non-201 */
async function createStream(http: string, key: string, title: string, hours: number): Promise<SkylarkStream> {
  const res = await fetch(`${http}/v2/streams`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ title, codec: 'aac', quality: 'medium', reconnectWindow: 5, latencyMode: LATENCY, catchUp: { hours } }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await res.json()) as SkylarkStream;
  if (res.status !== 201) throw new Error(`POST /v2/streams answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
  return body;
}

interface Measured {
  phase: Phase;
  /** Bytes per second written to disk over the phase (publish start to stop). */
  diskBps: number;
}

/** One phase's settings (bench/lib/ingest-phase.ts). */
interface PhaseSettings {
  warmup: number;
  windowS: number;
  windows: number;
  tickMs: number;
}

/**
 * The paired run (BENCH_CATCHUP_PAIRED): two servers loaded at once, one with catch-up on and one
 * off, the run time of each server's threads over the same windows. @throws Error when a server
 * or a replayer does not start
 */
async function runPaired(n: number, rounds: number, o: PhaseSettings): Promise<BenchRow[]> {
  const control = process.env.BENCH_CATCHUP_AA === '1'; // both servers off (see the module comment)
  const onHours = control ? 0 : 1;
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-catchup-'));
  const children: ChildProcess[] = [];
  const on: number[] = [];
  const off: number[] = [];
  const ratio: number[] = [];
  const diff: number[] = [];
  const held: string[] = [];
  try {
    const servers: Array<{ http: string; key: string; pid: number }> = [];
    for (const name of ['a', 'b']) {
      const dataDir = path.join(work, name);
      const sky = await startSkylark(dataDir, { SKYLARK_ABR_LADDER: '0' });
      children.push(sky.child);
      servers.push({ http: sky.http, key: await createAccount(dataDir, sky.defaultSecretKey), pid: sky.child.pid! });
    }
    for (let r = 0; r < rounds; r++) {
      const onAt = r % 2; // the server whose streams have catch-up on this round
      const reps: Array<Awaited<ReturnType<typeof startReplayer>>> = [];
      try {
        for (const [i, s] of servers.entries()) {
          const label = `round${r + 1}-${i === onAt ? (control ? 'a' : 'on') : 'off'}`;
          const streams = await mapLimit(Array.from({ length: n }), 8, (_, k) => createStream(s.http, s.key, `${label} #${k + 1}`, i === onAt ? onHours : 0));
          const rep = await startReplayer(work, label, FLV, streams.map(skylarkTarget), o.tickMs);
          reps.push(rep);
          log(`${label}: ${rep.ready.ok}/${n} publishing`);
        }
        await sleep(o.warmup * 1000);
        for (let w = 0; w < o.windows; w++) {
          const before = servers.map((s) => threadRunNs(s.pid));
          const t0 = performance.now();
          await sleep(o.windowS * 1000);
          const secs = (performance.now() - t0) / 1000;
          const pct = servers.map((s, i) => (runNsSince(before[i]!, threadRunNs(s.pid)) / 1e9 / secs) * 100);
          const a = pct[onAt]!;
          const b = pct[1 - onAt]!;
          on.push(a);
          off.push(b);
          ratio.push(a / b);
          diff.push(a - b);
          log(`round ${r + 1} window ${w + 1}/${o.windows}: ${control ? 'a' : 'on'} ${f1(a)} %, off ${f1(b)} %, ×${f1(a / b)}`);
        }
        for (const rep of reps) held.push(`${(await rep.stats()).publishing}/${n}`);
      } finally {
        for (const rep of reps) await rep.stop();
      }
    }
  } finally {
    for (const c of children) await stop(c);
    rmSync(work, { recursive: true, force: true });
  }
  const note = `two servers at once, the same windows, roles swapped each round; ${rounds} rounds × ${o.windows} windows of ${o.windowS} s; publishing at the end ${held.join(', ')}`;
  if (control) {
    return [
      { group: GROUP, name: `${n} streams, both servers off: server CPU (paired control)`, value: median(off), unit: '% core', note },
      { group: GROUP, name: `${n} streams, both off, a / b (paired control)`, value: median(ratio), unit: '×', note: `a − b ${f1(median(diff))} % of a core; the windows ${f1(Math.min(...ratio))}–${f1(Math.max(...ratio))}` },
    ];
  }
  return [
    { group: GROUP, name: `${n} streams, catch-up off: server CPU (paired)`, value: median(off), unit: '% core', note },
    { group: GROUP, name: `${n} streams, catch-up on (1 h): server CPU (paired)`, value: median(on), unit: '% core', note: `on − off ${f1(median(diff))} % of a core (median of the windows' differences)` },
    { group: GROUP, name: `${n} streams, catch-up on / off (paired)`, value: median(ratio), unit: '×', note: `median of the windows' ratios; the windows ${f1(Math.min(...ratio))}–${f1(Math.max(...ratio))}` },
  ];
}

export async function run(): Promise<BenchRow[]> {
  const n = Math.round(envNum('BENCH_CATCHUP_N', 100));
  const rounds = Math.max(1, Math.round(envNum('BENCH_CATCHUP_ROUNDS', 2)));
  const o = {
    warmup: envNum('BENCH_INGEST_WARMUP_SECONDS', 8),
    windowS: envNum('BENCH_INGEST_WINDOW_SECONDS', 10) || 10,
    windows: Math.max(1, Math.round(envNum('BENCH_INGEST_WINDOWS', 3))),
    tickMs: envNum('BENCH_INGEST_TICK_MS', 10) || 10,
  };
  if (process.env.BENCH_CATCHUP_PAIRED === '1') return runPaired(n, rounds, o);
  const audioBps = (readFlvAudio(FLV).kbps * 1000) / 8; // bytes per second of one stream's audio
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-catchup-'));
  const children: ChildProcess[] = [];
  const got: Record<'off' | 'on', Measured[]> = { off: [], on: [] };
  try {
    const dataDir = path.join(work, 'data');
    const sky = await startSkylark(dataDir, { SKYLARK_ABR_LADDER: '0' });
    children.push(sky.child);
    const key = await createAccount(dataDir, sky.defaultSecretKey);
    const pid = sky.child.pid!;
    const server = (hours: number): Server => ({
      who: hours > 0 ? 'catch-up on' : 'catch-up off',
      pid,
      async prepare(count, label) {
        const streams = await mapLimit(Array.from({ length: count }), 8, (_, i) => createStream(sky.http, key, `${label} #${i + 1}`, hours));
        return { targets: streams.map(skylarkTarget), hls: (i) => skylarkHlsOk(streams[i]!.hlsUrl) };
      },
    });
    for (let r = 0; r < rounds; r++) {
      for (const mode of r % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        const w0 = writeBytes(pid);
        const t0 = performance.now();
        const phase = await runPhase(server(mode === 'on' ? 1 : 0), n, { workDir: work, flv: FLV, log, ...o });
        const diskBps = ((writeBytes(pid) - w0) / (performance.now() - t0)) * 1000;
        log(`round ${r + 1} ${mode}: disk ${f1(diskBps / 1024)} KiB/s (the streams receive ${f1((audioBps * n) / 1024)} KiB/s of audio)`);
        got[mode].push({ phase, diskBps });
      }
    }
  } finally {
    for (const c of children) await stop(c);
    rmSync(work, { recursive: true, force: true });
  }
  return rows(got, n, audioBps, rounds);
}

/** The rows: CPU of each mode (median of every window), the ratio, and the disk writes beside the audio received. */
function rows(got: Record<'off' | 'on', Measured[]>, n: number, audioBps: number, rounds: number): BenchRow[] {
  // The scheduler's exact run time of the server's threads: utime + stime, sampled at the clock tick, spread a 10 s window by ±0.3 % of a core, as much as catch-up's whole cost.
  const cpu = (m: Measured[]) => median(m.flatMap((x) => x.phase.windows.map((w) => w.serverRun)));
  const disk = (m: Measured[]) => median(m.map((x) => x.diskBps));
  const held = (m: Measured[]) => m.map((x) => `${x.phase.published}/${n} publishing, HLS ${x.phase.hlsOk}/${n}`).join('; ');
  const off = cpu(got.off);
  const on = cpu(got.on);
  return [
    { group: GROUP, name: `${n} streams, catch-up off: server CPU`, value: off, unit: '% core', note: `its threads' run time (schedstat), median of every window, ${rounds} rounds; ${held(got.off)}` },
    { group: GROUP, name: `${n} streams, catch-up on (1 h): server CPU`, value: on, unit: '% core', note: `${held(got.on)}; on/off ×${f1(on / off)}` },
    { group: GROUP, name: `${n} streams, catch-up off: disk writes`, value: disk(got.off) / 1024, unit: 'KiB/s', note: 'write_bytes of the server process (SQLite and its WAL)' },
    {
      group: GROUP,
      name: `${n} streams, catch-up on: disk writes`,
      value: disk(got.on) / 1024,
      unit: 'KiB/s',
      note: `the streams receive ${f1((audioBps * n) / 1024)} KiB/s of audio (what the kept segments hold, before the container)`,
    },
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const r of await run()) process.stdout.write(`${r.name}: ${f1(r.value)} ${r.unit}${r.note ? ` (${r.note})` : ''}\n`);
}
