/**
 * What players cost (docs/benchmarks.md "Players"), loopback only, bounded in time:
 * listeners that behave like real players, one mode per player behaviour, against Skylark (the CLI
 * process) and Debian Icecast in the same run, driven by the same light load client
 * (bench/lib/player-client.ts, 1–2 client processes).
 *
 * - `hlsjs-ll` against Skylark serving an AAC 128 kbps stream with LL-HLS on (0.5 s parts): chained
 *   blocking reloads and the parts they list, as hls.js does.
 * - `classic` against Skylark serving an MP3 128 kbps stream (MPEG-TS, 2 s segments, no parts):
 *   one playlist GET per target duration and each new segment.
 * - `icecast` against Icecast 2 (bench/peers/icecast.xml.tmpl) with one MP3 128 kbps mount fed
 *   by FFmpeg; and against Skylark's `/listen/<id>.mp3` on the MP3 stream when that endpoint answers.
 *
 * Per mode, listener counts step up (doubling) until one is not held or the mode's share of the
 * time budget would be overrun. A step: arrivals spread evenly over a ramp (1,000/s; Icecast 300/s), a
 * settling time, then a measuring window in which the bench reads the server's CPU
 * (/proc/PID/stat utime+stime of the process and its children), its VmRSS, and the whole box's
 * busy time, while every client process reads its own CPU and event-loop delay. HELD means: every
 * listener arrived and stayed connected, and
 * - hlsjs-ll: every listener completed every part first listed inside the window no later than one
 *   part target + 0.5 s after it was first listed (by the bench's probe or any listener);
 * - classic: every listener completed every segment first listed inside the window, no later than
 *   2 target durations after it was first listed (nothing missed: a player starting 3 segments
 *   back keeps a positive buffer);
 * - icecast: every listener received ≥ 95 % of 16,000 B/s over whole arrivals of the window, and
 *   never fell more than 1 s behind real time (no stall of a player with a 1 s start-up buffer);
 *   both from 5 s after its first byte (the burst-on-connect is not the steady rate). An arrival is
 *   a read and the reads within 250 ms of it, so a server's 2 s burst that the kernel hands over
 *   in several reads is one; see bench/lib/listener-rate.ts for why this is fair to a server that
 *   writes 2 s at a time and to one that writes every frame.
 *
 * A step not held while a client's event-loop delay p99 exceeded half the delivery allowance is marked
 * "load client behind": the client (or the shared box) failed first, not the server; one not held
 * while the whole box was ≥ 190 % of 200 busy is marked "box saturated".
 *
 * CPU per listener-second and per request are the server's CPU over the window minus its idle CPU
 * (publisher running, no listeners, measured before the first step), divided by listener-seconds or
 * by the responses completed in the window. RSS per 1,000 listeners is VmRSS at the window's end
 * minus VmRSS before the mode's first step.
 *
 * Environment: BENCH_PLAYERS_MODES ("hlsjs-ll,classic,icecast"), BENCH_PLAYERS_STEPS_LL
 * ("500,1000,2000,4000,8000"), BENCH_PLAYERS_STEPS_CLASSIC and BENCH_PLAYERS_STEPS_ICECAST
 * ("1000,2000,4000,8000,16000"), BENCH_PLAYERS_WINDOW_S (10), BENCH_PLAYERS_BUDGET_S (420: the
 * steps of all modes together, shared evenly by the modes still to run), BENCH_PLAYERS_HINTS (1: hlsjs-ll listeners also request preload-hinted parts),
 * BENCH_PLAYERS_DELTA (0: hlsjs-ll listeners never send `_HLS_skip=YES`; by default they do, as hls.js does),
 * BENCH_PLAYERS_LL_VARIANTS ("raw:one": the hlsjs-ll variants to run in turn, `<raw|raw-noskip|node>:<one|own>`,
 * see LL_VARIANTS and docs/bench/ll-hls-listeners.md), BENCH_PLAYERS_SESSION_RATE (60: the LL server's
 * SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE, the product default),
 * BENCH_PLAYERS_DEBUG (1: log the first objects a listener missed), BENCH_SKYLARK_THREADS (Skylark's
 * SKYLARK_HTTP_THREADS, default 1), BENCH_PLAYERS_PROGRESSIVE_READ_MS (0: an icecast-mode
 * listener reads on every arrival; N: about once per N ms, what arrived meanwhile waiting in the
 * kernel's receive buffer — half the client's CPU per Icecast listener; an arrival then spans N +
 * 100 ms, and the lag is pessimistic by up to N ms, see docs/benchmarks.md).
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { boxTicks, CLK_TCK, freePort, have, sleep, spawnWithFds, stop, treeTicks } from './lib/proc.js';
import { createAccount, SKYLARK_THREADS, startSkylark } from './http-segments.js';
import { PlayerRun, type PlayerConfig, type PlayerMode, type PlayerReport } from './lib/player-client.js';
import { MAX_LAG_MS, MIN_RATE_SHARE, summarizeListeners } from './lib/listener-rate.js';

const root = path.resolve(import.meta.dirname, '..');
const log = (msg: string) => process.stderr.write(`[players] ${msg}\n`);
const steps = (name: string, dflt: string) => (process.env[name] || dflt).split(',').map(Number).filter((n) => n > 0);
const WINDOW_S = Number(process.env.BENCH_PLAYERS_WINDOW_S || 10);
/** Time the steps of all modes may take together, shared evenly by the modes still to run (what one leaves over goes to the next). */
const budget = { leftMs: Number(process.env.BENCH_PLAYERS_BUDGET_S || 420) * 1000, modesLeft: 1 };
const MODES = (process.env.BENCH_PLAYERS_MODES || 'hlsjs-ll,classic,icecast').split(',').map((s) => s.trim());
const HINTS = process.env.BENCH_PLAYERS_HINTS === '1';
/** hlsjs-ll listeners ask for full playlists only (no `_HLS_skip`), unlike hls.js against a server that offers delta updates. */
const NO_DELTA = process.env.BENCH_PLAYERS_DELTA === '0';
/**
 * The hlsjs-ll variants to run, each against the same server in turn: `<client>:<addresses>`, with
 * client `raw` (the light client: two connections, reloads with `_HLS_skip` once offered),
 * `raw-noskip` (the same without `_HLS_skip`) or `node` (one `node:http` keep-alive connection,
 * reload then part, no `_HLS_skip`; bench/lib/player-client.ts `llClient`), and addresses `one`
 * (every listener from 127.0.0.1, a crowd behind one NAT) or `own` (each from its own loopback address).
 */
const LL_VARIANTS = (process.env.BENCH_PLAYERS_LL_VARIANTS || 'raw:one')
  .split(',')
  .map((v) => v.trim())
  .filter(Boolean)
  .map((v) => {
    const [client = 'raw', addresses = 'one'] = v.split(':');
    if (!['raw', 'raw-noskip', 'node'].includes(client) || !['one', 'own'].includes(addresses)) throw new Error(`BENCH_PLAYERS_LL_VARIANTS: '${v}' is not <raw|raw-noskip|node>:<one|own>`);
    return { client, addresses };
  });
/**
 * Skylark's `SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE` for the LL server: by default the product's
 * default, 60, so a crowd behind one address is counted as the product counts it (60 new sessions
 * a minute, the rest served and not counted until the address is under the rate).
 */
const SESSION_RATE = process.env.BENCH_PLAYERS_SESSION_RATE || '60';
/** icecast mode: each listener reads its stream about once per this many ms (0: on every arrival). */
const PROGRESSIVE_READ_MS = Number(process.env.BENCH_PLAYERS_PROGRESSIVE_READ_MS || 0) || 0;
/**
 * Arrivals per second, all client processes together: 1,000/s for Skylark; 300/s for Icecast,
 * whose listen backlog of 5 lets only ~130–290 connects/s through a burst (docs/bench/method.md "The peers measured alone"):
 * faster arrivals would measure its accept queue, not what it costs to serve a listener.
 */
const ARRIVALS_PER_S = { skylark: 1000, icecast2: 300 } as const;
/** 128 kbit/s. */
const STREAM_BYTES_PER_S = 16_000;
const GROUP = `Players: what a listener costs, by player behaviour (Skylark on ${SKYLARK_THREADS} HTTP thread(s) vs Icecast 2, loopback)`;
const GROUP_STEPS = 'Players: every step (detail)';

/** One measured step of one mode. */
interface Step {
  n: number;
  held: boolean;
  /** Why it was not held (empty when held). */
  why: string[];
  /** The load client ran behind by more than half the delivery allowance: the step measured the client (or the box), not the server. */
  clientLimited: boolean;
  /** Not held while the whole box was ≥ 190 % of 200 busy. */
  boxLimited: boolean;
  windowS: number;
  serverUs: number;
  idleUs: number;
  usPerListenerS: number;
  usPerRequest: number;
  reqPerListenerS: number;
  rssPer1000Mb: number;
  rssMb: number;
  clientUs: number;
  clientUsPerListenerS: number;
  clientPct: number;
  clientLagP99Ms: number;
  clientLagMaxMs: number;
  boxPct: number;
  /** hls modes: delay of objects after first listed (ms); icecast: per-listener rate (B/s). */
  p50: number;
  p99: number;
  worst: number;
  detail: string;
}

/** A mode's run: which server, its steps. */
interface ModeResult {
  key: 'hlsjs-ll' | 'classic' | 'icecast' | 'listen';
  label: string;
  server: string;
  steps: Step[];
  idlePct: number;
  failed?: string;
}

const pct = (xs: number[], p: number) => {
  if (!xs.length) return NaN;
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const rssMb = (pid: number) => {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
};
const mergeErrors = (outs: PlayerReport[]) => {
  const e: Record<string, number> = {};
  for (const o of outs) for (const [k, v] of Object.entries(o.errors)) e[k] = (e[k] ?? 0) + v;
  return Object.entries(e).map(([k, v]) => `${k}×${v}`).join(', ') || 'none';
};
const failedReport = (mode: PlayerMode, count: number, why: string): PlayerReport => ({
  mode,
  count,
  started: 0,
  alive: 0,
  dropped: 0,
  retries: 0,
  errors: { [why]: 1 },
  requests: 0,
  bytes: 0,
  cpuUs: 0,
  lagP99Ms: NaN,
  lagMaxMs: NaN,
  targetMs: 0,
  seen: [],
  done: [],
  rates: [],
  spans: [],
  lags: [],
  arrivals: [],
  late: [],
});

/** Runs `cfgs` as client processes; resolves with their reports (a crashed one reports its stderr). */
function runClients(cfgs: PlayerConfig[]): Promise<PlayerReport[]> {
  return Promise.all(
    cfgs.map((cfg) => {
      const child = spawnWithFds([process.execPath, '--import', 'tsx', path.join(root, 'bench', 'lib', 'player-client-child.ts'), JSON.stringify(cfg)], { cwd: root });
      let out = '';
      let errText = '';
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (errText += d));
      return new Promise<PlayerReport>((resolve) => {
        child.once('close', () => {
          try {
            resolve(JSON.parse(out.trim().split('\n').pop()!) as PlayerReport);
          } catch {
            resolve(failedReport(cfg.mode, cfg.count, `client crashed: ${errText.trim().slice(-300)}`));
          }
        });
      });
    }),
  );
}

async function api(base: string, key: string, method: string, p: string, body?: unknown) {
  const r = await fetch(`${base}${p}`, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return r.json() as Promise<any>;
}

/** FFmpeg publishing a 440 Hz sine in real time to `url` with `args` (codec, format). */
function ffmpegPublish(url: string, args: string[]): ChildProcess {
  return spawn('ffmpeg', ['-hide_banner', '-nostdin', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '3600', ...args, url], { stdio: 'ignore' });
}

/** Status of a GET (the body is not read; the request is aborted after the head), or 0. */
async function headStatus(url: string): Promise<number> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 3000);
  try {
    const r = await fetch(url, { signal: ac.signal });
    ac.abort();
    return r.status;
  } catch {
    return 0;
  } finally {
    clearTimeout(timer);
  }
}

/** Waits until the stream's first media playlist lists `segments` segments (and a part, for LL). */
async function waitPlayable(hlsUrl: string, segments: number, parts: boolean): Promise<void> {
  const deadline = Date.now() + 30_000 + segments * 3000;
  while (Date.now() < deadline) {
    try {
      const mv = await fetch(hlsUrl);
      if (mv.status === 200) {
        const uri = (await mv.text()).split('\n').map((l) => l.trim()).find((l) => l && !l.startsWith('#'));
        if (uri) {
          const text = await (await fetch(new URL(uri, hlsUrl))).text();
          if ((text.match(/#EXTINF:/g) ?? []).length >= segments && (!parts || text.includes('#EXT-X-PART:'))) return;
        }
      }
    } catch {
      /* not up yet */
    }
    await sleep(250);
  }
  throw new Error(`${hlsUrl} did not list ${segments} segments in time`);
}

/**
 * Server CPU (% of a core, process and children) and RSS of `pid` with no listeners, over `ms`.
 * It first waits for the server to settle: after an earlier mode on the same server, its
 * listeners' sessions expire and their `listener.left` events are written for several seconds
 * (16,000 at once after the classic mode), which is not the idle cost. Two-second slices are read
 * until one is within 0.6 points of a core (about one 10 ms tick per slice) of the one before (at most
 * 30 s).
 */
async function idle(pid: number, ms: number): Promise<{ pct: number; rssMb: number }> {
  const slicePct = async () => {
    const a = performance.now();
    const c = treeTicks(pid);
    await sleep(2000);
    return ((treeTicks(pid) - c) / CLK_TCK / ((performance.now() - a) / 1000)) * 100;
  };
  // Sessions expire 3 target durations (6 s) after their last request: wait that out first.
  await sleep(7000);
  let prev = await slicePct();
  for (let waited = 2000; waited < 30_000; waited += 2000) {
    const cur = await slicePct();
    if (Math.abs(cur - prev) <= 0.6) break;
    prev = cur;
  }
  const t0 = performance.now();
  const c0 = treeTicks(pid);
  await sleep(ms);
  const secs = (performance.now() - t0) / 1000;
  return { pct: ((treeTicks(pid) - c0) / CLK_TCK / secs) * 100, rssMb: rssMb(pid) };
}

interface Target {
  mode: PlayerMode;
  server: keyof typeof ARRIVALS_PER_S;
  url: string;
  pid: number;
  /** Records when each object was first listed (hls modes). */
  probe: PlayerRun | null;
  stepsFrom: number[];
  /** ms after the ramp before the window opens. */
  settleMs: number;
  /** Client settings of this mode's variant (hlsjs-ll: which client, which addresses). */
  client?: Pick<PlayerConfig, 'llClient' | 'ownAddresses' | 'noDelta'>;
}

/** Runs the steps of one mode against one server; stops at the first step not held or over budget. */
async function runMode(t: Target, label: string): Promise<{ steps: Step[]; idlePct: number }> {
  const base = await idle(t.pid, 8000);
  log(`${label}: idle ${base.pct.toFixed(2)} % of a core, RSS ${base.rssMb.toFixed(0)} MB`);
  const t0 = Date.now();
  const shareMs = budget.leftMs / Math.max(1, budget.modesLeft);
  const out: Step[] = [];
  for (const n of t.stepsFrom) {
    const procs = n > 2000 ? 2 : 1;
    const startAt = Date.now() + 2500; // the client processes start (node + tsx) before arrivals begin
    const rampMs = Math.max(2000, (n / ARRIVALS_PER_S[t.server]) * 1000);
    const from = startAt + rampMs + t.settleMs;
    const to = from + WINDOW_S * 1000;
    const exitAt = to + 1000;
    if (exitAt + 4000 - t0 > shareMs) {
      log(`${label}: ${n} listeners would overrun the mode's ${(shareMs / 1000).toFixed(0)} s share of the time budget; stopping here`);
      break;
    }
    log(`${label}: ${n} listeners in ${procs} client process(es), ramp ${(rampMs / 1000).toFixed(1)} s, window ${WINDOW_S} s`);
    const cfgs: PlayerConfig[] = Array.from({ length: procs }, (_, i) => ({
      mode: t.mode,
      url: t.url,
      count: Math.floor(n / procs) + (i < n % procs ? 1 : 0),
      index: i,
      stride: procs,
      total: n,
      startAt,
      rampMs,
      from,
      to,
      exitAt,
      hints: HINTS,
      noDelta: NO_DELTA,
      ...t.client,
      readMs: PROGRESSIVE_READ_MS,
      streamBytesPerS: STREAM_BYTES_PER_S,
    }));
    const clients = runClients(cfgs);
    while (Date.now() < from) await sleep(20);
    const w0 = performance.now();
    const s0 = treeTicks(t.pid);
    const b0 = boxTicks();
    while (Date.now() < to) await sleep(20);
    const s1 = treeTicks(t.pid);
    const b1 = boxTicks();
    const windowS = (performance.now() - w0) / 1000;
    const rss = rssMb(t.pid);
    const outs = await clients;
    const step = evaluate(t, n, outs, { from, to, windowS, serverUs: ((s1 - s0) / CLK_TCK) * 1e6, idlePct: base.pct, rss, rssIdle: base.rssMb, boxPct: b1.total > b0.total ? ((b1.busy - b0.busy) / (b1.total - b0.total)) * 200 : NaN });
    log(`${label} ${n}: ${step.held ? 'HELD' : `not held (${step.why.join('; ')})`}; ${step.detail}`);
    out.push(step);
    await sleep(3000);
    if (!step.held) break;
  }
  budget.leftMs = Math.max(0, budget.leftMs - (Date.now() - t0));
  budget.modesLeft--;
  return { steps: out, idlePct: base.pct };
}

/** Turns the client reports of a step into a Step (see the module comment for HELD). */
function evaluate(
  t: Target,
  n: number,
  outs: PlayerReport[],
  m: { from: number; to: number; windowS: number; serverUs: number; idlePct: number; rss: number; rssIdle: number; boxPct: number },
): Step {
  const why: string[] = [];
  const started = outs.reduce((a, o) => a + o.started, 0);
  const alive = outs.reduce((a, o) => a + o.alive, 0);
  const dropped = outs.reduce((a, o) => a + o.dropped, 0);
  const retries = outs.reduce((a, o) => a + o.retries, 0);
  if (started < n) why.push(`${n - started} of ${n} never started`);
  if (dropped > 0 || alive < started) why.push(`${Math.max(dropped, started - alive)} dropped`);
  let p50 = NaN;
  let p99 = NaN;
  let worst = NaN;
  let quality = '';
  if (t.mode === 'icecast') {
    // Every listener judged by bench/lib/listener-rate.ts: rate over whole arrivals ≥ 95 %, lag ≤ 1 s.
    const minSpanS = WINDOW_S / 2;
    const all = (k: 'rates' | 'spans' | 'arrivals' | 'late') => outs.flatMap((o) => (o[k].length === o.rates.length ? o[k] : o.rates.map(() => NaN)));
    const figures = { rates: all('rates'), spans: all('spans'), lags: outs.flatMap((o) => (o.lags.length === o.rates.length ? o.lags : o.rates.map(() => null))), arrivals: all('arrivals'), late: all('late') };
    const l = summarizeListeners(figures, STREAM_BYTES_PER_S, minSpanS);
    worst = l.rateMin;
    p50 = l.rateP50;
    p99 = l.rateP1; // the slow end
    if (l.unmeasured) why.push(`${l.unmeasured} listeners measured for < ${minSpanS} s (${l.unmeasuredLate} of them without a first byte 5 s before the window opened)`);
    if (l.slow) why.push(`${l.slow} listeners below ${MIN_RATE_SHARE * 100} % of ${STREAM_BYTES_PER_S} B/s (slowest ${worst.toFixed(0)})`);
    if (l.stalled) why.push(`${l.stalled} listeners fell more than ${MAX_LAG_MS} ms behind real time (largest lag ${l.lagMax.toFixed(0)} ms)`);
    quality =
      `per-listener rate over whole arrivals min/p1/p50 ${worst.toFixed(0)}/${p99.toFixed(0)}/${p50.toFixed(0)} B/s of ${STREAM_BYTES_PER_S}; ` +
      `lag behind real time p50/p99/max ${l.lagP50.toFixed(0)}/${l.lagP99.toFixed(0)}/${l.lagMax.toFixed(0)} ms; arrivals per listener p50/max ${l.arrivalsP50}/${l.arrivalsMax}; ${l.held}/${n} listeners at ≥ ${MIN_RATE_SHARE * 100} % with lag ≤ ${MAX_LAG_MS} ms`;
  } else {
    // When each object was first listed: the probe, or any listener, whichever saw it first.
    const ref = new Map<number, number>();
    for (const [k, at] of t.probe?.seen ?? []) ref.set(k, at);
    for (const o of outs)
      for (let i = 0; i < o.seen.length; i += 2) {
        const k = o.seen[i]!;
        const at = m.from + o.seen[i + 1]!;
        const r = ref.get(k);
        if (r === undefined || at < r) ref.set(k, at);
      }
    const targetMs = Math.max(...outs.map((o) => o.targetMs), 0) || (t.mode === 'classic' ? 2000 : 525);
    const allowance = t.mode === 'hlsjs-ll' ? targetMs + 500 : 2 * targetMs;
    const due = [...ref].filter(([, at]) => at >= m.from && at <= m.to - allowance);
    const delays: number[] = [];
    let missing = 0;
    let late = 0;
    for (const o of outs)
      for (const d of o.done) {
        const got = new Map<number, number>();
        for (let i = 0; i < d.length; i += 2) got.set(d[i]!, m.from + d[i + 1]!);
        for (const [k, at] of due) {
          const done = got.get(k);
          if (done === undefined) {
            missing++;
            if (process.env.BENCH_PLAYERS_DEBUG && missing < 5) log(`missing ${k} (first listed ${at - m.from} ms): listener has ${[...got.keys()].join(',')}; due ${due.map(([x, y]) => `${x}@${y - m.from}`).join(',')}`);
            continue;
          }
          delays.push(done - at);
          if (done - at > allowance) late++;
        }
      }
    p50 = pct(delays, 50);
    p99 = pct(delays, 99);
    worst = delays.length ? delays.reduce((a, b) => Math.max(a, b), -Infinity) : NaN;
    const what = t.mode === 'classic' ? 'segments' : 'parts';
    if (due.length === 0) why.push(`no ${what} listed in the window`);
    if (missing) why.push(`${missing} (listener, ${what.slice(0, -1)}) missing`);
    if (late) why.push(`${late} later than ${allowance} ms`);
    quality = `${due.length} ${what} in the window, ${delays.length - late}/${due.length * n} in time (≤ ${allowance} ms after first listed), delay p50/p99/max ${p50.toFixed(0)}/${p99.toFixed(0)}/${worst.toFixed(0)} ms`;
  }
  // A client whose event loop ran later than half the delivery allowance cannot tell a late server from its own lag.
  const lagP99 = Math.max(...outs.map((o) => o.lagP99Ms));
  const allowanceMs = t.mode === 'icecast' ? 1000 : t.mode === 'hlsjs-ll' ? Math.max(...outs.map((o) => o.targetMs), 525) + 500 : 2 * Math.max(...outs.map((o) => o.targetMs), 2000);
  const clientLimited = why.length > 0 && !(lagP99 <= allowanceMs / 2);
  if (clientLimited) why.push(`the load client ran behind (event-loop delay p99 ${lagP99.toFixed(0)} ms > ${allowanceMs / 2} ms): this step measured the client and the box, not the server`);
  // The whole box busy: the server, the clients and the neighbours shared too little CPU.
  const boxLimited = why.length > 0 && m.boxPct >= 190;
  if (boxLimited) why.push(`the box was saturated (${m.boxPct.toFixed(0)} % of 200 busy): the server got what the neighbours left`);
  const idleUs = (m.idlePct / 100) * m.windowS * 1e6;
  const above = Math.max(0, m.serverUs - idleUs);
  const requests = outs.reduce((a, o) => a + o.requests, 0);
  const clientUs = outs.reduce((a, o) => a + o.cpuUs, 0);
  const ls = n * m.windowS;
  const step: Step = {
    n,
    held: why.length === 0,
    why,
    clientLimited,
    boxLimited,
    windowS: m.windowS,
    serverUs: m.serverUs,
    idleUs,
    usPerListenerS: above / ls,
    usPerRequest: t.mode === 'icecast' ? NaN : requests ? above / requests : NaN,
    reqPerListenerS: requests / ls,
    rssMb: m.rss,
    rssPer1000Mb: ((m.rss - m.rssIdle) / n) * 1000,
    clientUs,
    clientUsPerListenerS: clientUs / ls,
    clientPct: (clientUs / 1e6 / m.windowS) * 100,
    clientLagP99Ms: Math.max(...outs.map((o) => o.lagP99Ms)),
    clientLagMaxMs: Math.max(...outs.map((o) => o.lagMaxMs)),
    boxPct: m.boxPct,
    p50,
    p99,
    worst,
    detail: '',
  };
  step.detail =
    `${alive}/${n} alive (${retries} early reconnects); server ${((m.serverUs / 1e6 / m.windowS) * 100).toFixed(1)} % of a core (idle ${m.idlePct.toFixed(1)} %), ` +
    `${step.usPerListenerS.toFixed(1)} µs/listener-s, ${Number.isFinite(step.usPerRequest) ? `${step.usPerRequest.toFixed(1)} µs/request, ` : ''}${step.reqPerListenerS.toFixed(2)} req/listener-s, ` +
    `RSS ${m.rss.toFixed(0)} MB (+${(m.rss - m.rssIdle).toFixed(0)}); client ${step.clientPct.toFixed(1)} % of a core (${step.clientUsPerListenerS.toFixed(1)} µs/listener-s, ` +
    `loop delay p99/max ${step.clientLagP99Ms.toFixed(0)}/${step.clientLagMaxMs.toFixed(0)} ms); box ${m.boxPct.toFixed(0)} % of 200; ${quality}; errors: ${mergeErrors(outs)}`;
  return step;
}

/** Skylark with one stream of `codec` published at 128 kbps; runs `body`; stops everything. */
async function withSkylark<T>(work: string, codec: 'aac' | 'mp3', env: Record<string, string>, body: (s: { pid: number; http: string; stream: { id: string; hlsUrl: string } }) => Promise<T>): Promise<T> {
  const dataDir = path.join(work, `sky-${codec}`);
  // One layer (no ladder codec process), and every listener comes from 127.0.0.1: lift the held-request caps.
  const sky = await startSkylark(dataDir, { SKYLARK_ABR_LADDER: '0', SKYLARK_HTTP_MAX_HELD: '100000', SKYLARK_HTTP_MAX_HELD_PER_IP: '100000', ...env });
  const children: ChildProcess[] = [sky.child];
  try {
    const key = await createAccount(dataDir, sky.defaultSecretKey);
    // AAC: a `low` latency stream (LL-HLS parts) for the hls.js LL client; MP3: `standard` (classic HLS).
    const latencyMode = codec === 'aac' ? 'low' : 'standard';
    const s = await api(sky.http, key, 'POST', '/v2/streams', { title: `Bench players ${codec}`, codec, reconnectWindow: 300, latencyMode });
    if (!s.id) throw new Error(`POST /v2/streams failed: ${JSON.stringify(s)}`);
    const args = codec === 'aac' ? ['-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv'] : ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k', '-f', 'flv'];
    children.push(ffmpegPublish(`${s.rtmpUrl}/${s.streamKey}`, args));
    await waitPlayable(s.hlsUrl, 3, codec === 'aac');
    return await body({ pid: sky.child.pid!, http: sky.http, stream: s });
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 3000);
  }
}

/** A probe (one listener in this process) recording when objects are first listed. */
function startProbe(mode: 'classic' | 'hlsjs-ll', url: string): PlayerRun {
  const now = Date.now();
  const p = new PlayerRun({ mode, url, count: 1, index: 0, stride: 1, total: 1, startAt: now, rampMs: 0, from: 0, to: 0, exitAt: Number.MAX_SAFE_INTEGER, probe: true });
  p.start();
  return p;
}

const VARIANT_LABEL: Record<string, string> = { raw: 'light client', 'raw-noskip': 'light client, no _HLS_skip', node: 'node:http, one connection, no _HLS_skip' };

/** The LL variants in turn against one Skylark (a failed variant is reported and the next runs). */
async function skylarkLl(work: string): Promise<ModeResult[]> {
  return withSkylark(work, 'aac', { SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE: SESSION_RATE }, async (sky) => {
    const probe = startProbe('hlsjs-ll', sky.stream.hlsUrl);
    const out: ModeResult[] = [];
    try {
      for (const v of LL_VARIANTS) {
        const one = LL_VARIANTS.length === 1 && v.client === 'raw' && v.addresses === 'one';
        const label = `hls.js LL-HLS${HINTS ? ' + preload hints' : ''}${NO_DELTA ? ', no delta updates' : ''}${one ? '' : ` [${VARIANT_LABEL[v.client]}; ${v.addresses === 'own' ? 'own addresses' : 'one address'}]`} (AAC 128k, 0.5 s parts)`;
        const client = { llClient: v.client === 'node' ? ('node' as const) : ('raw' as const), ownAddresses: v.addresses === 'own', noDelta: NO_DELTA || v.client !== 'raw' };
        try {
          const r = await runMode({ mode: 'hlsjs-ll', server: 'skylark', url: sky.stream.hlsUrl, pid: sky.pid, probe, stepsFrom: steps('BENCH_PLAYERS_STEPS_LL', '500,1000,2000,4000,8000'), settleMs: 3000, client }, `hlsjs-ll ${v.client}:${v.addresses}`);
          out.push({ key: 'hlsjs-ll', label, server: 'skylark', ...r });
        } catch (e) {
          out.push({ key: 'hlsjs-ll', label, server: 'skylark', steps: [], idlePct: NaN, failed: (e as Error).message });
          budget.modesLeft = Math.max(1, budget.modesLeft - 1);
        }
      }
      return out;
    } finally {
      probe.stop();
    }
  });
}

async function skylarkMp3(work: string, wantClassic: boolean, wantListen: boolean): Promise<ModeResult[]> {
  return withSkylark(work, 'mp3', {}, async (sky) => {
    const results: ModeResult[] = [];
    if (wantClassic) {
      const probe = startProbe('classic', sky.stream.hlsUrl);
      try {
        const r = await runMode({ mode: 'classic', server: 'skylark', url: sky.stream.hlsUrl, pid: sky.pid, probe, stepsFrom: steps('BENCH_PLAYERS_STEPS_CLASSIC', '1000,2000,4000,8000,16000'), settleMs: 4000 }, 'classic');
        results.push({ key: 'classic', label: 'classic HLS (MP3 128k in TS, 2 s segments)', server: 'skylark', ...r });
      } finally {
        probe.stop();
      }
    }
    if (wantListen) {
      // Progressive MP3 from Skylark (the radio endpoint), when this build serves it.
      const url = `${sky.http}/listen/${sky.stream.id}.mp3`;
      const st = await headStatus(url);
      if (st !== 200) log(`progressive: ${url} answered ${st || 'nothing'}; no Skylark progressive rows`);
      else {
        budget.modesLeft++;
        const r = await runMode({ mode: 'icecast', server: 'skylark', url, pid: sky.pid, probe: null, stepsFrom: steps('BENCH_PLAYERS_STEPS_ICECAST', '1000,2000,4000,8000,16000'), settleMs: 6000 }, 'skylark /listen');
        results.push({ key: 'listen', label: 'progressive MP3 128k (Skylark /listen)', server: 'skylark', ...r });
      }
    }
    return results;
  });
}

async function icecast(work: string): Promise<ModeResult> {
  if (!have('icecast2')) throw new Error('icecast2 is not installed: apt-get install -y icecast2');
  const dir = path.join(work, 'icecast');
  mkdirSync(path.join(dir, 'log'), { recursive: true });
  chmodSync(dir, 0o777);
  chmodSync(path.join(dir, 'log'), 0o777);
  const port = await freePort();
  const stepList = steps('BENCH_PLAYERS_STEPS_ICECAST', '1000,2000,4000,8000,16000');
  const conf = readFileSync(path.join(import.meta.dirname, 'peers', 'icecast.xml.tmpl'), 'utf8')
    .replaceAll('@MAX_CLIENTS@', String(Math.max(...stepList) + 100))
    .replaceAll('@PORT@', String(port))
    .replaceAll('@DIR@', dir);
  writeFileSync(path.join(dir, 'icecast.xml'), conf);
  chmodSync(path.join(dir, 'icecast.xml'), 0o644);
  const ice = spawnWithFds(['icecast2', '-c', path.join(dir, 'icecast.xml')]);
  const children: ChildProcess[] = [ice];
  const url = `http://127.0.0.1:${port}/live.mp3`;
  try {
    await sleep(1500);
    children.push(ffmpegPublish(`icecast://source:anchors@127.0.0.1:${port}/live.mp3`, ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k', '-content_type', 'audio/mpeg', '-f', 'mp3']));
    for (let i = 0; i < 40 && (await headStatus(url)) !== 200; i++) await sleep(250);
    if ((await headStatus(url)) !== 200) throw new Error(`the Icecast mount ${url} did not come up`);
    const r = await runMode({ mode: 'icecast', server: 'icecast2', url, pid: ice.pid!, probe: null, stepsFrom: stepList, settleMs: 6000 }, 'icecast');
    return { key: 'icecast', label: 'Icecast mount (MP3 128k)', server: 'icecast2', ...r };
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 3000);
  }
}

/** The step a mode's numbers are quoted at: the largest held, else the first measured. */
const quoted = (m: ModeResult | undefined) => (m ? (m.steps.filter((s) => s.held).pop() ?? m.steps[0]) : undefined);
const heldN = (m: ModeResult) => m.steps.filter((s) => s.held).pop()?.n ?? 0;
const stepsNote = (m: ModeResult) =>
  m.steps.map((s) => `${s.n}${s.held ? '✓' : `✗${s.clientLimited ? ' (load client behind)' : ''}${s.boxLimited ? ' (box saturated)' : ''}`}`).join(' ') || 'no step ran';

function rows(results: ModeResult[]): BenchRow[] {
  const out: BenchRow[] = [];
  const ice = results.find((r) => r.key === 'icecast');
  const iceStep = quoted(ice);
  const peer = (v: number | undefined) => (ice && v !== undefined && iceStep ? { peer: { name: 'icecast2', value: v } } : {});
  const sky = results.filter((r) => r.server === 'skylark');
  // Without a Skylark mode, Icecast's own rows stand alone.
  const lead = sky.length ? sky : ice ? [ice] : [];
  for (const m of lead) {
    const s = quoted(m);
    const isPeer = m === ice;
    const p = (v: number | undefined) => (isPeer ? {} : peer(v));
    out.push({
      group: GROUP,
      headline: true,
      name: `${m.label}: listeners held`,
      value: heldN(m),
      unit: 'listeners',
      ...p(ice ? heldN(ice) : undefined),
      note: `steps ${stepsNote(m)}${ice && !isPeer ? `; icecast2 ${stepsNote(ice)}` : ''}${m.failed ? `; FAILED: ${m.failed}` : ''}`,
    });
    if (!s) continue;
    const at = `at ${s.n.toLocaleString('en-US')}${s.held ? '' : ' (not held)'}`;
    const iceAt = iceStep && !isPeer ? `; icecast2 at ${iceStep.n.toLocaleString('en-US')}` : '';
    out.push({ group: GROUP, headline: true, name: `${m.label}: server CPU per listener-second`, value: s.usPerListenerS, unit: 'µs', ...p(iceStep?.usPerListenerS), note: `${at}${iceAt}; above idle (${m.idlePct.toFixed(1)} % of a core)` });
    if (m.key !== 'icecast' && m.key !== 'listen') {
      out.push({ group: GROUP, headline: true, name: `${m.label}: server CPU per request`, value: s.usPerRequest, unit: 'µs', note: at });
      out.push({ group: GROUP, headline: true, name: `${m.label}: requests per listener-second`, value: s.reqPerListenerS, unit: 'req/s', note: at });
    }
    out.push({ group: GROUP, headline: true, name: `${m.label}: server RSS per 1,000 listeners`, value: s.rssPer1000Mb, unit: 'MB', ...p(iceStep?.rssPer1000Mb), note: `${at}${iceAt}; RSS ${s.rssMb.toFixed(0)} MB` });
    out.push({
      group: GROUP,
      headline: true,
      name: `${m.label}: load client CPU per listener-second`,
      value: s.clientUsPerListenerS,
      unit: 'µs',
      ...p(iceStep?.clientUsPerListenerS),
      note: `${at}: ${s.clientPct.toFixed(0)} % of a core, loop delay p99 ${s.clientLagP99Ms.toFixed(0)} ms; client/server CPU ×${(s.clientUs / Math.max(1, s.serverUs)).toFixed(2)}`,
    });
    if (m.key === 'hlsjs-ll' || m.key === 'classic') {
      out.push({ group: GROUP, headline: true, name: `${m.label}: delay after first listed, p99`, value: s.p99, unit: 'ms', note: `${at}; p50 ${s.p50.toFixed(0)} ms, max ${s.worst.toFixed(0)} ms` });
    }
  }
  for (const m of results) {
    if (m.failed && !m.steps.length) out.push({ group: GROUP_STEPS, name: `${m.label}: failed`, value: NaN, unit: '', note: m.failed });
    for (const s of m.steps) out.push({ group: GROUP_STEPS, name: `${m.label} [${m.server}] ${s.n.toLocaleString('en-US')} listeners: ${s.held ? 'held' : 'NOT held'}`, value: s.usPerListenerS, unit: 'µs/listener-s', note: `${s.held ? '' : `${s.why.join('; ')}; `}${s.detail}` });
  }
  return out;
}

/** bench/run.ts gives this part this long (the steps' budget plus each server's start and idle measurement). */
export const timeoutMs = 15 * 60_000;

export async function run(): Promise<BenchRow[]> {
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-players-'));
  chmodSync(work, 0o755);
  const results: ModeResult[] = [];
  const attempt = async (key: ModeResult['key'], label: string, server: string, f: () => Promise<ModeResult | ModeResult[]>) => {
    try {
      const r = await f();
      results.push(...(Array.isArray(r) ? r : [r]));
    } catch (e) {
      log(`${label} failed: ${(e as Error).message}`);
      results.push({ key, label, server, steps: [], idlePct: NaN, failed: (e as Error).message });
    }
  };
  budget.modesLeft = ['hlsjs-ll', 'classic', 'icecast'].filter((m) => MODES.includes(m)).length + (MODES.includes('hlsjs-ll') ? LL_VARIANTS.length - 1 : 0);
  try {
    if (MODES.includes('hlsjs-ll')) await attempt('hlsjs-ll', 'hls.js LL-HLS', 'skylark', () => skylarkLl(work));
    if (MODES.includes('classic') || MODES.includes('listen')) await attempt('classic', 'classic HLS', 'skylark', () => skylarkMp3(work, MODES.includes('classic'), MODES.includes('listen') || MODES.includes('icecast')));
    if (MODES.includes('icecast')) await attempt('icecast', 'Icecast mount (MP3 128k)', 'icecast2', () => icecast(work));
    return rows(results);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

// `npx tsx bench/players.bench.ts` prints this part's rows alone.
if (import.meta.url === `file://${process.argv[1]}`) await (await import('./lib/format.js')).printPartAlone(run);
