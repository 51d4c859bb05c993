/**
 * One ingest load phase, shared by the RTMP ingest bench (ingest.bench.ts) and the Icecast ingest
 * bench (icecast-ingest.bench.ts): N publishers from the light replayer child, the server's CPU
 * (utime + stime of all its threads plus its child processes, from /proc) over timed windows, and
 * every stream's HLS checked at the end.
 */
import { boxTicks, childPids, CLK_TCK, processTicks, runNsSince, sleep, threadRunNs } from './proc.js';
import { startReplayer } from './ingest-servers.js';
import { mapLimit } from './ingest-hls.js';
import type { PublishTarget } from './rtmp-replayer.js';
import type { IcecastTarget } from './icecast-replayer.js';

export const envNum = (name: string, dflt: number) => {
  const v = process.env[name];
  const n = v === undefined || v === '' ? NaN : Number(v);
  return Number.isFinite(n) && n >= 0 ? n : dflt;
};

export const median = (xs: number[]) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
export const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(x < 1 ? 3 : x < 10 ? 2 : 1) : '–');


/** A server under load: its pid (CPU metered with its children) and how to make N targets on it. */
export interface Server {
  /** Label in the log and the phase ('skylark', 'nginx', …). */
  who: string;
  pid: number;
  /** Builds the replayer targets of N streams; `hls` checks stream i. */
  prepare(n: number, label: string): Promise<{ targets: PublishTarget[] | IcecastTarget[]; protocol?: 'rtmp' | 'icecast'; hls: (i: number) => Promise<{ ok: boolean; why?: string }> }>;
}

/** One window's CPU (% of one core) and the replayer's pool counters at its end. */
export interface Window {
  server: number;
  /** The server process alone (its threads, not its children), from the scheduler's exact run time (schedstat), % of one core. */
  serverRun: number;
  /** Of `server`: the server's child processes (Skylark: ladder FFmpeg; nginx: its worker). */
  children: number;
  replayer: number;
  box: number;
  maxLateMs: number;
  publishing: number;
}

/** One load phase: N publishers on one server, its CPU windows and its HLS check. */
export interface Phase {
  who: string;
  n: number;
  published: number;
  failed: string[];
  windows: Window[];
  hlsOk: number;
  hlsWhy: string[];
  dropped: number;
  dropReasons: string[];
  publishMs: number;
}

/** CPU ticks of a process and (separately) of its direct children. */
export function ticksOf(pid: number): { self: number; children: number } {
  let children = 0;
  for (const c of childPids(pid)) children += processTicks(c) ?? 0;
  return { self: processTicks(pid) ?? 0, children };
}

export async function measureWindow(serverPid: number, replayerPid: number, seconds: number): Promise<Omit<Window, 'maxLateMs' | 'publishing'>> {
  const t0 = performance.now();
  const s0 = ticksOf(serverPid);
  const n0 = threadRunNs(serverPid);
  const r0 = processTicks(replayerPid) ?? 0;
  const b0 = boxTicks();
  await sleep(seconds * 1000);
  const secs = (performance.now() - t0) / 1000;
  const s1 = ticksOf(serverPid);
  const n1 = threadRunNs(serverPid);
  const r1 = processTicks(replayerPid) ?? 0;
  const b1 = boxTicks();
  const pct = (ticks: number) => (ticks / CLK_TCK / secs) * 100;
  const cores = Math.round((b1.total - b0.total) / CLK_TCK / secs);
  return {
    server: pct(s1.self + s1.children - s0.self - s0.children),
    children: pct(s1.children - s0.children),
    serverRun: n1.size ? (runNsSince(n0, n1) / 1e9 / secs) * 100 : NaN,
    replayer: pct(r1 - r0),
    box: b1.total > b0.total ? ((b1.busy - b0.busy) / (b1.total - b0.total)) * 100 * cores : NaN,
  };
}

/**
 * Publishes N streams to `server` from the replayer child, warms up, meters `windows` windows of
 * `windowS` seconds, then checks every stream's HLS. @throws Error when the replayer fails to start
 */
export async function runPhase(server: Server, n: number, o: { workDir: string; flv: string; log: (msg: string) => void; warmup: number; windowS: number; windows: number; tickMs: number }): Promise<Phase> {
  const log = o.log;
  const label = `${server.who}-${n}`;
  const { targets, protocol, hls } = await server.prepare(n, label);
  const rep = await startReplayer(o.workDir, label, o.flv, targets, o.tickMs, protocol ?? 'rtmp');
  const phase: Phase = {
    who: server.who,
    n,
    published: rep.ready.ok,
    failed: rep.ready.failed.map((f) => f.reason),
    windows: [],
    hlsOk: 0,
    hlsWhy: [],
    dropped: 0,
    dropReasons: [],
    publishMs: median(rep.ready.publishMs),
  };
  try {
    log(`${label}: ${rep.ready.ok}/${n} publishing (connect → ${protocol === 'icecast' ? '200 OK' : 'Publish.Start'} median ${f1(phase.publishMs)} ms)${rep.ready.failedCount ? `; FAILED ${rep.ready.failedCount}: ${phase.failed.slice(0, 3).join('; ')}` : ''}`);
    await sleep(o.warmup * 1000);
    await rep.stats(); // resets the lateness maximum: the windows report their own
    for (let w = 0; w < o.windows; w++) {
      const m = await measureWindow(server.pid, rep.pid, o.windowS);
      const st = await rep.stats();
      const win: Window = { ...m, maxLateMs: st.maxLateMs, publishing: st.publishing };
      phase.windows.push(win);
      phase.dropped = st.dropped;
      phase.dropReasons = st.reasons;
      log(
        `${label} window ${w + 1}/${o.windows}: server ${f1(win.server)} % (children ${f1(win.children)}; its threads' run time ${f1(win.serverRun)} %), ` +
          `per stream ${f1(win.server / n)} %, replayer ${f1(win.replayer)} %, box ${f1(win.box)} % of 200, ` +
          `publishing ${win.publishing}, max write lateness ${f1(win.maxLateMs)} ms`,
      );
    }
    const checks = await mapLimit(Array.from({ length: targets.length }), 16, (_, i) => hls(i));
    phase.hlsOk = checks.filter((c) => c.ok).length;
    phase.hlsWhy = [...new Set(checks.filter((c) => !c.ok).map((c) => c.why ?? '?'))].slice(0, 3);
    log(`${label}: HLS OK ${phase.hlsOk}/${n}${phase.hlsWhy.length ? ` (${phase.hlsWhy.join('; ')})` : ''}${phase.dropped ? `; ${phase.dropped} publishers DROPPED: ${phase.dropReasons.join('; ')}` : ''}`);
  } finally {
    await rep.stop();
  }
  return phase;
}

