/**
 * Listeners held, loopback only, bounded:
 *
 * (a) HLS listeners: Skylark (the CLI process, a real FFmpeg AAC 128 kbps publisher, 2 s segments)
 *     with simulated players in several client processes (bench/lib/listener-client.ts, ≤ 5,000
 *     each: the hard fd limit is 20,000 per process). Each player enters through the multivariant
 *     playlist (its own `?sid=`), then polls its media playlist every target duration and fetches
 *     every new segment on one keep-alive connection. A count is HELD when, over the measuring
 *     window, every player stays connected and completes every segment published in the window
 *     no later than 2 target durations after the segment appeared (the coordinator polls the
 *     playlist every 100 ms to time that): a player polling once per target duration has then
 *     fetched segment N before segment N+1 is due. Steps go up until one fails.
 *     Side by side, Icecast (Debian icecast2, bench/peers/icecast.xml.tmpl, one 128 kbps MP3
 *     mount fed by FFmpeg/libmp3lame) with the same client processes in `icecast` mode: HELD when
 *     every listener stays connected and the slowest 1 % still receive ≥ 95 % of 16,000 B/s.
 * (b) WebRTC listeners per Skylark process: werift peers in client processes doing WHEP against an
 *     Opus stream fed by FFmpeg over the Icecast source port (20 ms packets, forwarded as they are;
 *     `BENCH_LISTENERS_WEBRTC_SOURCE=aac`: an AAC stream over RTMP, one shared codec process, 60 ms
 *     packets); HELD while packet loss stays < 1 %; server CPU per listener and per packet a peer
 *     received (docs/benchmarks.md "WebRTC fan-out"). Side by side, step by step in the same run:
 *     Janus (Debian `janus`, bench/lib/janus-peer.ts: its streaming plugin fanning one Opus RTP
 *     source out, signalled over its HTTP API's "watch" flow) with the same load clients; skipped
 *     with a line when janus is not installed (docs/bench/webrtc-listeners.md).
 *
 * Part (a) is superseded by bench/players.bench.ts (a load client per player behaviour, with
 * CPU per listener-second and per request) and runs only when asked for
 * (`BENCH_LISTENERS_PARTS=hls,icecast,webrtc`); by default this file measures (b).
 *
 * Environment: BENCH_LISTENERS_HLS_STEPS ("5000,10000,15000,18000"), BENCH_LISTENERS_ICECAST_STEPS
 * ("5000,10000,15000"), BENCH_LISTENERS_WEBRTC_STEPS ("100,250,500"; two held steps give the
 * marginal cost per peer-packet, bench/lib/goals.ts), BENCH_LISTENERS_WINDOW_S (16),
 * BENCH_LISTENERS_PARTS ("fanout,webrtc"; any of hls, icecast, webrtc, fanout = the one-process
 * micro-bench of the per-peer send path, BENCH_FANOUT_PEERS peers, send = the send path alone
 * without werift, JS vs native, BENCH_SEND_PEERS peers), BENCH_LISTENERS_WEBRTC_SOURCE
 * ("opus" or "aac"), BENCH_LISTENERS_WEBRTC_RAMP (15 peers/s), BENCH_LISTENERS_JANUS_STEPS (which
 * of the WebRTC steps Janus runs, each right after Skylark's; all by default; it stops at its
 * first step not held), BENCH_JANUS_EVENT_LOOPS (2: Janus's media
 * threads), SKYLARK_BENCH_CPU_PROF (a directory: Skylark runs with `node --cpu-prof`).
 * The WebRTC load clients (bench/lib/listener-client-webrtc.ts) read: BENCH_WEBRTC_CLIENT_READ_MS
 * (100: sockets read in bursts; 0: per datagram), BENCH_WEBRTC_CLIENT_FULL=1 (werift's receiver).
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { RTC_STEPS_GROUP } from './lib/goals.js';
import { cpuMeter, freePort, have, sleep, spawnWithFds, stop } from './lib/proc.js';
import { janusInstalled, startJanus, type JanusPeer } from './lib/janus-peer.js';
import { createAccount, startSkylark } from './http-segments.js';
import { StreamHub } from '../src/live/media/hub.js';
import type { SegmenterEvent } from '../src/native/segmenter.js';
import { fill, mediaTemplate } from '../src/delivery/hls/playlists.js';
import { RTCPeerConnection, RTCRtpCodecParameters, RtpHeader, RtpPacket, type RTCRtpTransceiver } from 'werift';
import { peerConfiguration } from '../src/delivery/webrtc/whep-peer.js';
import { RtpSender, weriftMediaState } from '../src/delivery/webrtc/rtp-sender.js';
import { socketFd, udpPath } from '../src/delivery/webrtc/fanout.js';
import { RtpFanout } from '../src/native/rtp-fanout.js';
import { PROFILE_AEAD_AES_128_GCM, PROFILE_AES128_CM_HMAC_SHA1_80, SrtpProtector } from '../src/delivery/webrtc/srtp.js';
import { randomBytes } from 'node:crypto';

const root = path.resolve(import.meta.dirname, '..');
const log = (msg: string) => process.stderr.write(`[listeners] ${msg}\n`);
const steps = (name: string, dflt: string) => (process.env[name] || dflt).split(',').map(Number).filter((n) => n > 0);
const WINDOW_S = Number(process.env.BENCH_LISTENERS_WINDOW_S || 16);
const PARTS = (process.env.BENCH_LISTENERS_PARTS || 'fanout,webrtc').split(',');
/** WebRTC source: `opus` (default: an Opus stream, 20 ms packets forwarded) or `aac` (transcoded, 60 ms packets). */
const RTC_OPUS = (process.env.BENCH_LISTENERS_WEBRTC_SOURCE || 'opus') !== 'aac';
/** Ogg page duration of the Opus publisher (µs): 20,000 = one packet per page (BENCH_LISTENERS_WEBRTC_PAGE_US). */
const PAGE_US = Number(process.env.BENCH_LISTENERS_WEBRTC_PAGE_US || 20_000);
const PER_PROCESS = 5000;
const TARGET_S = 2;
const GROUP_HLS = 'Listeners held: HLS (Skylark) vs Icecast 128 kbps, loopback';
const GROUP_RTC = 'Listeners held: WebRTC (werift, WHEP) per Skylark process, loopback';

interface ClientOut {
  mode: string;
  started: number;
  alive: number;
  errors: Record<string, number>;
  done?: number[][];
  bytes?: number[];
  seconds?: number[];
  retries?: number;
}

/** Runs client processes with `total` listeners split ≤ PER_PROCESS each; resolves with their outputs. */
async function runClients(script: string, total: number, perProcess: number, cfg: Record<string, unknown>, rampPerSec: number): Promise<ClientOut[]> {
  const n = Math.ceil(total / perProcess);
  const outs = await Promise.all(
    Array.from({ length: n }, (_, i) => {
      const count = Math.floor(total / n) + (i < total % n ? 1 : 0);
      const child = spawnWithFds([process.execPath, '--import', 'tsx', path.join(root, 'bench', 'lib', script), JSON.stringify({ ...cfg, count, rampPerSec: rampPerSec / n })], { cwd: root });
      let out = '';
      let errText = '';
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (errText += d));
      return new Promise<ClientOut>((resolve) => {
        child.once('close', () => {
          try {
            resolve(JSON.parse(out.trim().split('\n').pop()!) as ClientOut);
          } catch {
            resolve({ mode: 'failed', started: 0, alive: 0, errors: { [`client crashed: ${errText.trim().slice(-300)}`]: 1 } });
          }
        });
      });
    }),
  );
  return outs;
}

const rssMb = (pid: number) => {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
};
const mergeErrors = (outs: ClientOut[]) => {
  const e: Record<string, number> = {};
  for (const o of outs) for (const [k, v] of Object.entries(o.errors)) e[k] = (e[k] ?? 0) + v;
  return Object.entries(e).map(([k, v]) => `${k}×${v}`).join(', ') || 'none';
};
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};

interface StepResult {
  n: number;
  held: boolean;
  cpu: number;
  box: number;
  rssMb: number;
  detail: string;
  quality: number; // HLS: % of (listener, segment) in time; Icecast: p1 % of nominal rate
}

async function api(base: string, key: string, method: string, p: string, body?: unknown) {
  const r = await fetch(`${base}${p}`, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return r.json() as Promise<any>;
}

function ffmpegPublish(url: string, args: string[]): ChildProcess {
  return spawn('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '3600', ...args, url], { stdio: 'ignore' });
}

// ── (a) Skylark HLS ────────────────────────────────────────────────────────────────────────────
async function skylarkHls(work: string, rows: BenchRow[]): Promise<StepResult[]> {
  const dataDir = path.join(work, 'sky-hls');
  // Every listener comes from 127.0.0.1: lift the sessions-per-address rate, or most would not be counted.
  const sky = await startSkylark(dataDir, { SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE: '1000000' });
  const children: ChildProcess[] = [sky.child];
  try {
    const key = await createAccount(dataDir, sky.defaultSecretKey);
    const s = await api(sky.http, key, 'POST', '/v2/streams', { title: 'Bench listeners', reconnectWindow: 300 });
    const pub = ffmpegPublish(`${s.rtmpUrl}/${s.streamKey}`, ['-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv']);
    children.push(pub);
    const mediaUrl = s.hlsUrl.replace('index.m3u8', 'a128/index.m3u8');
    // Segment appearance times, polled every 100 ms on the plain (untracked) media playlist.
    const appeared = new Map<number, number>();
    let polling = true;
    const poller = (async () => {
      while (polling) {
        try {
          const text = await (await fetch(mediaUrl)).text();
          for (const m of text.matchAll(/^(\d+)\.(?:ts|m4s)$/gm)) if (!appeared.has(Number(m[1]))) appeared.set(Number(m[1]), Date.now());
        } catch {
          /* not yet */
        }
        await sleep(100);
      }
    })();
    for (let i = 0; i < 200 && appeared.size < 3; i++) await sleep(100);
    if (appeared.size < 3) throw new Error('no HLS segments from the publisher');
    const results: StepResult[] = [];
    for (const n of steps('BENCH_LISTENERS_HLS_STEPS', '5000,10000,15000,18000')) {
      const ramp = 1500;
      const rampS = n / ramp;
      const from = Date.now() + (rampS + 8) * 1000;
      const to = from + WINDOW_S * 1000;
      const exitAt = to + 2 * TARGET_S * 1000 + 1000;
      log(`HLS ${n} listeners: ramp ${rampS.toFixed(0)} s, window ${WINDOW_S} s`);
      const clients = runClients('listener-client.ts', n, PER_PROCESS, { mode: 'hls', url: s.hlsUrl, pollMs: TARGET_S * 1000, from, to, exitAt }, ramp);
      while (Date.now() < from) await sleep(100);
      const meter = cpuMeter(sky.child.pid!);
      while (Date.now() < to) await sleep(100);
      const cpu = meter();
      const rss = rssMb(sky.child.pid!);
      const outs = await clients;
      // Segments that appeared inside the window (with time to be fetched before the window's end).
      const due = [...appeared].filter(([, at]) => at >= from && at <= to - 2 * TARGET_S * 1000);
      let ok = 0;
      let total = 0;
      const late: number[] = [];
      let alive = 0;
      let started = 0;
      for (const o of outs) {
        alive += o.alive;
        started += o.started;
        for (const d of o.done ?? []) {
          const got = new Map<number, number>();
          for (let i = 0; i < d.length; i += 2) got.set(d[i]!, d[i + 1]!);
          for (const [seq, at] of due) {
            total++;
            const t = got.get(seq);
            if (t === undefined) continue;
            late.push(t - at);
            if (t - at <= 2 * TARGET_S * 1000) ok++;
          }
        }
      }
      const held = started === n && alive === n && due.length > 0 && ok === total;
      const r: StepResult = {
        n,
        held,
        cpu: cpu.serverPercent,
        box: cpu.boxPercent,
        rssMb: rss,
        quality: total ? (ok / total) * 100 : 0,
        detail: `${alive}/${n} alive, ${due.length} segments in window, ${ok}/${total} in time, p50/p99 segment delay ${pct(late, 50).toFixed(0)}/${pct(late, 99).toFixed(0)} ms, errors: ${mergeErrors(outs)}`,
      };
      log(`HLS ${n}: ${held ? 'HELD' : 'not held'}; server CPU ${r.cpu.toFixed(0)} %, box ${r.box.toFixed(0)} %, RSS ${rss.toFixed(0)} MB; ${r.detail}`);
      results.push(r);
      await sleep(8000); // sessions expire (3 target durations) before the next step
      if (!held) break;
    }
    polling = false;
    await poller;
    return results;
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 3000);
  }
}

// ── (a) Icecast ────────────────────────────────────────────────────────────────────────────────
async function icecast(work: string): Promise<StepResult[]> {
  if (!have('icecast2')) throw new Error('icecast2 is not installed: apt-get install -y icecast2');
  const dir = path.join(work, 'icecast');
  mkdirSync(path.join(dir, 'log'), { recursive: true });
  chmodSync(dir, 0o777);
  chmodSync(path.join(dir, 'log'), 0o777);
  const port = await freePort();
  const maxSteps = steps('BENCH_LISTENERS_ICECAST_STEPS', '5000,10000,15000');
  const conf = readFileSync(path.join(import.meta.dirname, 'peers', 'icecast.xml.tmpl'), 'utf8')
    .replaceAll('@MAX_CLIENTS@', String(Math.max(...maxSteps) + 100))
    .replaceAll('@PORT@', String(port))
    .replaceAll('@DIR@', dir);
  writeFileSync(path.join(dir, 'icecast.xml'), conf);
  chmodSync(path.join(dir, 'icecast.xml'), 0o644);
  const ice = spawnWithFds(['icecast2', '-c', path.join(dir, 'icecast.xml')]);
  const children: ChildProcess[] = [ice];
  try {
    await sleep(1500);
    const src = ffmpegPublish(`icecast://source:anchors@127.0.0.1:${port}/live.mp3`, ['-ac', '2', '-c:a', 'libmp3lame', '-b:a', '128k', '-content_type', 'audio/mpeg', '-f', 'mp3']);
    children.push(src);
    await sleep(3000);
    const results: StepResult[] = [];
    for (const n of maxSteps) {
      const ramp = 1000;
      const rampS = n / ramp;
      // Icecast's listen backlog of 5 lets only ~130–290 connects/s through under a burst
      // (docs/bench/method.md "The peers measured alone"): give every listener time to connect before the window.
      const from = Date.now() + (Math.max(rampS * 2, n / 130) + 15) * 1000;
      const to = from + WINDOW_S * 1000;
      const exitAt = to + 1000;
      log(`Icecast ${n} listeners`);
      const clients = runClients('listener-client.ts', n, PER_PROCESS, { mode: 'icecast', url: `http://127.0.0.1:${port}/live.mp3`, pollMs: 0, from, to, exitAt }, ramp);
      while (Date.now() < from) await sleep(100);
      const meter = cpuMeter(ice.pid!);
      while (Date.now() < to) await sleep(100);
      const cpu = meter();
      const rss = rssMb(ice.pid!);
      const outs = await clients;
      const secs = outs.flatMap((o) => o.seconds ?? []);
      // A listener measured for under half the window (it connected late) counts as not served.
      const rates = outs.flatMap((o) => o.bytes ?? []).map((b, i) => (secs[i]! >= WINDOW_S / 2 ? b / secs[i]! : 0));
      const alive = outs.reduce((a, o) => a + o.alive, 0);
      const p1 = (pct(rates, 1) / 16000) * 100;
      const held = alive === n && rates.length === n && p1 >= 95;
      const r: StepResult = {
        n,
        held,
        cpu: cpu.serverPercent,
        box: cpu.boxPercent,
        rssMb: rss,
        quality: p1,
        detail: `${alive}/${n} alive, per-listener rate p1/p50 ${pct(rates, 1).toFixed(0)}/${pct(rates, 50).toFixed(0)} B/s of 16,000, errors: ${mergeErrors(outs)}`,
      };
      log(`Icecast ${n}: ${held ? 'HELD' : 'not held'}; CPU ${r.cpu.toFixed(0)} %, box ${r.box.toFixed(0)} %; ${r.detail}`);
      results.push(r);
      await sleep(3000);
      if (!held) break;
    }
    return results;
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 3000);
  }
}

// ── (b) WebRTC ─────────────────────────────────────────────────────────────────────────────────
async function webrtc(work: string): Promise<BenchRow[]> {
  const dataDir = path.join(work, 'sky-rtc');
  // Every peer comes from 127.0.0.1: lift the per-address cap on unconnected offers (default 8).
  const sky = await startSkylark(dataDir, { SKYLARK_WHEP_MAX_PENDING_PER_IP: '1000', SKYLARK_WHEP_MAX_PENDING: '1000' });
  const children: ChildProcess[] = [sky.child];
  const rows: BenchRow[] = [];
  try {
    const key = await createAccount(dataDir, sky.defaultSecretKey);
    const s = await api(sky.http, key, 'POST', '/v2/streams', { title: 'Bench WebRTC', reconnectWindow: 300, codec: RTC_OPUS ? 'opus' : 'aac' });
    if (RTC_OPUS) {
      // Ogg Opus, 20 ms packets, over the Icecast source port: forwarded to the peers as they are.
      // One Ogg page per packet, like an RTMP publisher's one frame per message: FFmpeg's default
      // 1 s pages would hand the source 50 packets at once, and each peer gets them in a burst.
      const ice = new URL(s.icecastUrl as string);
      const target = `icecast://source:${s.streamKey}@${ice.host}${ice.pathname}`;
      children.push(ffmpegPublish(target, ['-ac', '2', '-c:a', 'libopus', '-b:a', '96k', '-frame_duration', '20', '-application', 'audio', '-content_type', 'audio/ogg', '-f', 'ogg', '-page_duration', String(PAGE_US), '-flush_packets', '1']));
    } else children.push(ffmpegPublish(`${s.rtmpUrl}/${s.streamKey}`, ['-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv']));
    for (let i = 0; i < 100; i++) {
      if ((await api(sky.http, key, 'GET', `/v2/streams/${s.id}`)).status === 'live') break;
      await sleep(100);
    }
    let best: RtcStep | null = null;
    const stepRows: BenchRow[] = [];
    // The peer in the same run, step by step after Skylark's: Janus's streaming plugin, same clients.
    const janus = RTC_OPUS ? await janusPeer(work, children) : null;
    if (janus?.skipped) rows.push(janus.skipped);
    let janusHolds = true;
    const janusSteps = steps('BENCH_LISTENERS_JANUS_STEPS', rtcSteps().join(','));
    for (const n of rtcSteps()) {
      const r = await rtcStep('WebRTC', n, { url: `${sky.http}/whep/${s.id}` }, sky.child.pid!);
      // Every step, for the marginal cost per peer-packet (a line through the held steps, bench/lib/goals.ts).
      const st = `${n} peers (${r.held ? 'held' : 'not held'})`;
      stepRows.push({ group: RTC_STEPS_GROUP, name: `${st}: server CPU`, value: r.cpu, unit: '% core', note: r.detail });
      stepRows.push({ group: RTC_STEPS_GROUP, name: `${st}: peer-packets received per second`, value: r.received / WINDOW_S, unit: 'packets/s', note: `${r.usPerPacket.toFixed(1)} µs per peer-packet all-in` });
      if (r.held) best = r;
      if (janus?.peer && janusHolds && janusSteps.includes(n)) {
        const jr = await rtcStep('Janus', n, { url: janus.peer.api, janus: { mountpoint: janus.peer.mountpoint } }, janus.peer.child.pid!);
        rows.push(...janusRows(r, jr));
        janusHolds = jr.held;
      }
      if (!r.held) break;
    }
    const what = RTC_OPUS ? 'Opus stream (Icecast source), 20 ms packets forwarded' : 'AAC stream, one shared codec process, 60 ms Opus packets';
    rows.push({ group: GROUP_RTC, name: 'peers held with packet loss < 1 %', value: best?.n ?? 0, unit: 'peers', note: `${what}${best ? `; ${best.connected}/${best.n} connected` : ''}` });
    if (best) {
      rows.push({ group: GROUP_RTC, name: `server CPU at ${best.n} peers`, value: best.cpu, unit: '% core' });
      rows.push({ group: GROUP_RTC, name: 'server CPU per peer', value: best.cpu / best.n, unit: '% core' });
      rows.push({ group: GROUP_RTC, name: 'server CPU per peer-packet', value: best.usPerPacket, unit: 'µs', note: `${best.pps.toFixed(1)} packets/s per peer` });
      rows.push({ group: GROUP_RTC, name: 'peers per core at 20 ms packets (from the CPU per peer-packet)', value: 1e6 / (50 * best.usPerPacket), unit: 'peers' });
      rows.push({ group: GROUP_RTC, name: `packet loss at ${best.n} peers`, value: best.loss, unit: '%' });
    }
    rows.push(...stepRows);
    return rows;
  } finally {
    for (const c of children.reverse()) await stop(c, 'SIGTERM', 3000);
  }
}

/** The WebRTC steps (BENCH_LISTENERS_WEBRTC_STEPS). */
const rtcSteps = () => steps('BENCH_LISTENERS_WEBRTC_STEPS', '100,250,500');

/** One WebRTC step as measured (docs/benchmarks.md "WebRTC fan-out"). */
interface RtcStep {
  n: number;
  held: boolean;
  connected: number;
  loss: number;
  /** Server CPU in the window, % of one core. */
  cpu: number;
  received: number;
  usPerPacket: number;
  pps: number;
  detail: string;
}

/**
 * `n` load-client peers against one server (`target`: the WHEP URL, or Janus's API with its
 * mountpoint), ramped, then a WINDOW_S measuring window: CPU of the server process tree `pid`,
 * peer-packets received, loss by sequence numbers. HELD: ≥ 99 % connected and loss < 1 %.
 */
async function rtcStep(label: string, n: number, target: { url: string; janus?: { mountpoint: number } }, pid: number): Promise<RtcStep> {
  const ramp = Number(process.env.BENCH_LISTENERS_WEBRTC_RAMP || 15);
  // Room after the ramp for setups retried once (a peer not connected 10 s after its offer).
  const from = Date.now() + (n / ramp + 14 + Math.ceil(n / 100)) * 1000;
  const to = from + WINDOW_S * 1000;
  log(`${label} ${n} peers`);
  const clients = runClients('listener-client-webrtc.ts', n, 100, { ...target, from, to, exitAt: to + 500 }, ramp);
  while (Date.now() < from) await sleep(100);
  const meter = cpuMeter(pid);
  const load0 = loadavg()[0]!;
  while (Date.now() < to) await sleep(100);
  const cpu = meter();
  const outs = (await clients) as unknown as Array<{ started: number; cpuMs?: number; retries: number; closedBeforeAnswer?: number; connected: number; errors: Record<string, number>; peers: Array<{ received: number; expected: number }> }>;
  const retried = outs.reduce((a, o) => a + (o.retries ?? 0), 0);
  const resent = outs.reduce((a, o) => a + (o.closedBeforeAnswer ?? 0), 0);
  const peers = outs.flatMap((o) => o.peers ?? []);
  const received = peers.reduce((a, p) => a + p.received, 0);
  const expected = peers.reduce((a, p) => a + p.expected, 0);
  const connected = outs.reduce((a, o) => a + (o.connected ?? 0), 0);
  const silent = peers.filter((p) => p.received === 0).length;
  // Loss over the peers that connected (a peer's window runs from its first to its last packet);
  // peers that never connected are setup failures, reported apart (≤ 1 % allowed).
  const loss = expected ? (1 - received / expected) * 100 : 100;
  const held = connected >= n * 0.99 && loss < 1;
  // The server's CPU time in the window per RTP packet a peer received (all of it, fixed costs included).
  const usPerPacket = received ? ((cpu.serverPercent / 100) * WINDOW_S * 1e6) / received : NaN;
  const pps = received / WINDOW_S / Math.max(1, connected);
  // The load clients' CPU time in the window per packet they received (what limits the step size on one box).
  const clientUs = received ? (outs.reduce((a, o) => a + (o.cpuMs ?? NaN), 0) * 1000) / received : NaN;
  const load = `load average ${load0.toFixed(2)} → ${loadavg()[0]!.toFixed(2)}`;
  log(`${label} ${n}: ${held ? 'HELD' : 'not held'}; ${connected}/${n} connected (${silent} silent), loss ${loss.toFixed(3)} %, ${retried} setups retried, ${resent} offers sent again (keep-alive closed), server CPU ${cpu.serverPercent.toFixed(0)} % (box ${cpu.boxPercent.toFixed(0)} %), ${usPerPacket.toFixed(1)} µs per peer-packet at ${pps.toFixed(1)} packets/s per peer, clients ${clientUs.toFixed(1)} µs per peer-packet, ${load}, errors: ${mergeErrors(outs as unknown as ClientOut[])}`);
  const detail = `${connected}/${n} connected, loss ${loss.toFixed(3)} %, box ${cpu.boxPercent.toFixed(0)} % of 200, load clients ${clientUs.toFixed(1)} µs per peer-packet, ${load}`;
  await sleep(3000);
  return { n, held, connected, loss, cpu: cpu.serverPercent, received, usPerPacket, pps, detail };
}

/** The rows of the Janus peer. */
const JANUS_GROUP = 'WebRTC listeners: Skylark (WHEP) vs Janus streaming plugin, same run, loopback';

/**
 * The peer of the WebRTC part, in the same run: Janus (Debian `janus`, bench/lib/janus-peer.ts),
 * its streaming plugin fanning one Opus RTP source (FFmpeg, 20 ms packets, 96 kbps, like Skylark's
 * publisher) out to the same load clients, signalled over Janus's HTTP API; measured at each step
 * right after Skylark, up to its first step not held. Started here (its processes join
 * `children`); `skipped` is the row saying so when janus is not installed.
 */
async function janusPeer(work: string, children: ChildProcess[]): Promise<{ peer?: JanusPeer; skipped?: BenchRow }> {
  if (!janusInstalled()) {
    log('Janus peer skipped: janus is not installed (apt-get install -y janus)');
    return { skipped: { group: JANUS_GROUP, name: 'Janus peer', value: NaN, unit: '', note: 'skipped: janus is not installed (apt-get install -y janus)' } };
  }
  // Two media threads (Janus's `event_loops`): one per core of the box the figures come from.
  const peer = await startJanus(path.join(work, 'janus'), Number(process.env.BENCH_JANUS_EVENT_LOOPS || 2));
  children.push(peer.child);
  children.push(ffmpegPublish(`rtp://127.0.0.1:${peer.rtpPort}`, ['-ac', '2', '-c:a', 'libopus', '-b:a', '96k', '-frame_duration', '20', '-application', 'audio', '-payload_type', '111', '-f', 'rtp']));
  await sleep(2000);
  return { peer };
}

/** Skylark's step `sky` beside Janus's step `janus` of the same size: peers per core all in, server CPU. */
function janusRows(sky: RtcStep, janus: RtcStep): BenchRow[] {
  const perCore = (x: RtcStep) => 1e6 / (50 * x.usPerPacket);
  const mark = (x: RtcStep) => (x.held ? 'held' : 'not held');
  return [
    {
      group: JANUS_GROUP,
      name: `${sky.n} peers: peers per core all in (1 s ÷ 50 × CPU per peer-packet; Skylark ${mark(sky)}, Janus ${mark(janus)})`,
      value: perCore(sky),
      unit: 'peers',
      peer: { name: 'janus', value: perCore(janus) },
      note: `Skylark ${sky.usPerPacket.toFixed(1)} µs, ${sky.detail}; Janus ${janus.usPerPacket.toFixed(1)} µs, ${janus.detail}`,
    },
    { group: JANUS_GROUP, name: `${sky.n} peers: server CPU`, value: sky.cpu, unit: '% core', peer: { name: 'janus', value: janus.cpu } },
  ];
}

/** One werift server/client pair connected over loopback; the client's socket no longer reads into werift. */
async function loopbackPeer(): Promise<{ server: RTCPeerConnection; client: RTCPeerConnection; transceiver: RTCRtpTransceiver }> {
  const opus = () => new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111 });
  const client = new RTCPeerConnection({ codecs: { audio: [opus()], video: [] }, headerExtensions: { audio: [], video: [] }, iceUseIpv6: false, iceAdditionalHostAddresses: ['127.0.0.1'], iceServers: [] });
  const server = new RTCPeerConnection(peerConfiguration({ iceServers: [], allInterfaces: false, hosts: ['127.0.0.1'] }));
  const until = async (ok: () => boolean) => {
    for (const end = Date.now() + 15_000; !ok(); await sleep(20)) if (Date.now() > end) throw new Error('loopback peer did not connect');
  };
  client.addTransceiver('audio', { direction: 'recvonly' });
  await client.setLocalDescription(await client.createOffer());
  await until(() => client.iceGatheringState === 'complete');
  await server.setRemoteDescription(client.localDescription!);
  const transceiver = server.getTransceivers().find((t) => t.kind === 'audio')!;
  transceiver.setDirection('sendonly');
  await server.setLocalDescription(await server.createAnswer());
  await until(() => server.iceGatheringState === 'complete');
  await client.setRemoteDescription(server.localDescription!);
  await until(() => server.connectionState === 'connected' && client.connectionState === 'connected');
  // The kernel still delivers every datagram to the client's socket; werift no longer parses it.
  const conn = (client.getTransceivers()[0]!.receiver.dtlsTransport as unknown as { iceTransport: { connection: { nominated?: { protocol: { transport?: { socket?: import('node:dgram').Socket } } } } } }).iceTransport.connection;
  conn.nominated?.protocol.transport?.socket?.removeAllListeners('message');
  return { server, client, transceiver };
}

/**
 * The per-peer send path alone, in one process (docs/benchmarks.md "WebRTC fan-out"): `PEERS`
 * werift connections on loopback, the same 240-byte Opus payload (20 ms at 96 kbit/s) sent to each
 * peer in rounds, CPU time of the process (user + system, so the loopback delivery too) per
 * peer-packet for: werift's `sendRtp` (an `RtpPacket` per peer, as before), Skylark's JS `RtpSender`,
 * the native fan-out (`RtpFanout.send`: one call for all peers, header + SRTP + `sendto` each), and
 * the RTP header + SRTP of `RtpSender` without the UDP write (the negotiated profile, and
 * AES_CM_128_HMAC_SHA1_80). The client sockets stay open but unread by werift (the kernel still
 * delivers to them, inside the sender's system call on loopback). Variants alternate, 3 times each;
 * the median is reported.
 */
async function fanoutMicro(): Promise<BenchRow[]> {
  const PEERS = Number(process.env.BENCH_FANOUT_PEERS || 50);
  const ROUNDS = 200;
  const pairs: Array<Awaited<ReturnType<typeof loopbackPeer>>> = [];
  for (let i = 0; i < PEERS; i++) pairs.push(await loopbackPeer());
  const payload = Buffer.alloc(240, 0x5a);
  let seq = 1000;
  let ts = 0;
  const senders = pairs.map((p) => RtpSender.attach(p.transceiver)!);
  if (senders.some((x) => !x)) throw new Error('RtpSender did not attach');
  const protectors = pairs.map((p) => {
    const ctx = (p.transceiver.sender.dtlsTransport as unknown as { srtp: { localContext: { profile: number; srtpSessionKey: Buffer; srtpSessionSalt: Buffer; srtpSessionAuthTag: Buffer } } }).srtp.localContext;
    return new SrtpProtector({ profile: ctx.profile, key: ctx.srtpSessionKey, salt: ctx.srtpSessionSalt, auth: ctx.srtpSessionAuthTag }, p.transceiver.sender.ssrc);
  });
  const fan = new RtpFanout();
  for (const p of pairs) {
    const w = weriftMediaState(p.transceiver)!;
    const u = udpPath(w.ice)!;
    fan.add({ fd: u.fd, host: u.host, port: u.port, ssrc: w.ssrc, payloadType: w.payloadType, profile: w.ctx.profile, key: w.ctx.srtpSessionKey, salt: w.ctx.srtpSessionSalt, auth: w.ctx.srtpSessionAuthTag ?? null });
  }
  const cm = pairs.map((p) => new SrtpProtector({ profile: PROFILE_AES128_CM_HMAC_SHA1_80, key: randomBytes(16), salt: randomBytes(14), auth: randomBytes(20) }, p.transceiver.sender.ssrc));
  const protectOnly = (list: SrtpProtector[]) => {
    for (let i = 0; i < list.length; i++) {
      const pr = list[i]!;
      const b = Buffer.allocUnsafe(12 + payload.length + pr.tagLength);
      b[0] = 0x80;
      b[1] = 111;
      b.writeUInt16BE(seq, 2);
      b.writeUInt32BE(ts, 4);
      b.writeUInt32BE(senders[i]!.ssrc, 8);
      payload.copy(b, 12);
      pr.protect(b, 12, 12 + payload.length, seq, 0);
    }
  };
  const variants: Record<string, () => Promise<void>> = {
    'werift sendRtp': async () => {
      const all: Promise<void>[] = [];
      for (const p of pairs) all.push(p.transceiver.sender.sendRtp(new RtpPacket(new RtpHeader({ sequenceNumber: seq, timestamp: ts, marker: false, payloadType: 111 }), payload)));
      await Promise.all(all);
    },
    'RtpSender (header + SRTP + UDP write)': async () => {
      for (const x of senders) x.send(seq, ts, payload, false);
    },
    'native RtpFanout (one call: header + SRTP + sendto per peer)': async () => {
      fan.send(seq, ts, payload, false);
    },
    'header + SRTP only (no UDP write)': async () => protectOnly(protectors),
    'header + SRTP only, AES_CM_128_HMAC_SHA1_80': async () => protectOnly(cm),
  };
  const results: Record<string, number[]> = {};
  try {
    for (let k = 0; k < 3; k++) {
      for (const [name, fn] of Object.entries(variants)) {
        await sleep(200);
        const c0 = process.cpuUsage();
        for (let r = 0; r < ROUNDS; r++) {
          seq = (seq + 1) & 0xffff;
          ts = (ts + 960) >>> 0;
          await fn();
          await new Promise((res) => setImmediate(res)); // the sends' callbacks and ticks run
        }
        const c = process.cpuUsage(c0);
        (results[name] ??= []).push((c.user + c.system) / (ROUNDS * PEERS));
      }
    }
  } finally {
    await Promise.allSettled(pairs.flatMap((p) => [p.client.close(), p.server.close()]));
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  const group = 'WebRTC fan-out: CPU per peer-packet, one process (micro)';
  const profile = protectors[0]!.tagLength === 16 ? 'AEAD_AES_128_GCM' : 'AES_CM_128_HMAC_SHA1_80';
  return Object.entries(results).map(([name, v]) => {
    log(`fan-out micro: ${name}: ${v.map((x) => x.toFixed(1)).join(', ')} µs per peer-packet`);
    return { group, name, value: median(v), unit: 'µs', note: `${PEERS} peers, 240 B payload, ${profile}; runs ${v.map((x) => x.toFixed(1)).join(', ')}` };
  });
}

/**
 * The send path alone, without werift (docs/benchmarks.md "WebRTC fan-out"): `BENCH_SEND_PEERS`
 * (300) peers, each with its own UDP socket in this process as werift gives each peer, sending to
 * sockets of a child process that never reads them (python3: the kernel still delivers into their
 * buffers, inside the sender's system call on loopback). CPU time of this process (user + system)
 * per peer-packet, 240-byte payload, for the JS path of `RtpSender` (header, `SrtpProtector`,
 * `dgram` send) and the native fan-out (`RtpFanout.send`, one call per packet for all peers), in
 * both SRTP profiles; variants alternate 3 times, the median is reported.
 */
async function sendPath(): Promise<BenchRow[]> {
  if (!have('python3')) throw new Error('the send part needs python3 (the non-reading receivers)');
  const N = Number(process.env.BENCH_SEND_PEERS || 300);
  const ROUNDS = 400;
  const sink = spawn('python3', ['-c', 'import socket,sys,time\nss=[socket.socket(socket.AF_INET,socket.SOCK_DGRAM) for _ in range(int(sys.argv[1]))]\nfor s in ss: s.bind(("127.0.0.1",0))\nprint(" ".join(str(s.getsockname()[1]) for s in ss),flush=True)\ntime.sleep(600)', String(N)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const socks: import('node:dgram').Socket[] = [];
  try {
    const ports = await new Promise<number[]>((res) => sink.stdout!.once('data', (d) => res(String(d).trim().split(' ').map(Number))));
    const dgram = await import('node:dgram');
    for (let i = 0; i < N; i++) {
      const s = dgram.createSocket('udp4');
      await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
      socks.push(s);
    }
    const payload = Buffer.alloc(240, 0x5a);
    const results: Record<string, number[]> = {};
    for (const profile of [PROFILE_AES128_CM_HMAC_SHA1_80, PROFILE_AEAD_AES_128_GCM]) {
      const name = profile === PROFILE_AES128_CM_HMAC_SHA1_80 ? 'AES_CM_128_HMAC_SHA1_80' : 'AEAD_AES_128_GCM';
      const keys = socks.map(() => ({ profile, key: randomBytes(16), salt: randomBytes(14), auth: profile === PROFILE_AES128_CM_HMAC_SHA1_80 ? randomBytes(20) : undefined }));
      const fan = new RtpFanout();
      socks.forEach((s, i) => fan.add({ fd: socketFd(s)!, host: '127.0.0.1', port: ports[i]!, ssrc: i, payloadType: 111, profile, key: keys[i]!.key, salt: keys[i]!.salt, auth: keys[i]!.auth ?? null }));
      const prot = keys.map((k, i) => new SrtpProtector(k, i));
      const variants: Record<string, (seq: number, ts: number) => void> = {
        [`JS: header + SrtpProtector + dgram send, ${name}`]: (seq, ts) => {
          for (let i = 0; i < N; i++) {
            const pr = prot[i]!;
            const len = 12 + payload.length;
            const b = Buffer.allocUnsafe(len + pr.tagLength);
            b[0] = 0x80;
            b[1] = 111;
            b.writeUInt16BE(seq, 2);
            b.writeUInt32BE(ts, 4);
            b.writeUInt32BE(i, 8);
            payload.copy(b, 12);
            pr.protect(b, 12, len, seq, 0);
            socks[i]!.send(b, ports[i]!, '127.0.0.1');
          }
        },
        [`native: RtpFanout.send, ${name}`]: (seq, ts) => void fan.send(seq, ts, payload, false),
      };
      for (let k = 0; k < 3; k++) {
        for (const [v, fn] of Object.entries(variants)) {
          await sleep(200);
          const c0 = process.cpuUsage();
          for (let r = 0; r < ROUNDS; r++) {
            fn(r & 0xffff, (r * 960) >>> 0);
            await new Promise((res) => setImmediate(res)); // the sends' callbacks run
          }
          const c = process.cpuUsage(c0);
          (results[v] ??= []).push((c.user + c.system) / (ROUNDS * N));
        }
      }
      if (fan.totals().drops) log(`send path: ${fan.totals().drops} native drops (${name})`);
    }
    const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
    const group = 'WebRTC fan-out: send path alone, CPU per peer-packet (one process, non-reading receivers)';
    return Object.entries(results).map(([name, v]) => {
      log(`send path: ${name}: ${v.map((x) => x.toFixed(2)).join(', ')} µs per peer-packet`);
      return { group, name, value: median(v), unit: 'µs', note: `${N} peers, 240 B payload; runs ${v.map((x) => x.toFixed(2)).join(', ')}; ≈ ${Math.round(1e6 / (50 * median(v)))} peers per core at 50 packets/s` };
    });
  } finally {
    for (const s of socks) s.close();
    sink.kill();
  }
}

/** The per-session media playlist: template fill (one allocation + copies) vs the shared cached bytes. */
function playlistMicro(): BenchRow[] {
  let seq = 0;
  const hub = new StreamHub('stm_bench', {
    codec: 'mp3', // classic (TS) layer: no parts
    targetDurationMs: 2000,
    partTargetMs: 0,
    windowSegments: 6,
    ladder: [128],
    createSegmenter: () => ({
      pushAudio: (): SegmenterEvent[] => [
        ...(seq === 0 ? [{ type: 'config' as const, codec: 'mp3' as const, codecs: 'mp4a.40.34', sampleRate: 44100, channels: 2 }] : []),
        { type: 'segment', sequence: seq++, data: Buffer.alloc(35720), durationMs: 2000, discontinuity: false, pts90k: 0, frames: 0, independent: true },
      ],
      pushMetadata: () => {},
      flush: () => [],
      discontinuity: () => {},
    }),
  });
  for (let i = 0; i < 12; i++) hub.pushAudio(i * 2000, new Uint8Array([0xaf, 1, 0]));
  const t = mediaTemplate(hub.top);
  const q = 'sid=AbCdEfGhIjKlMnOp12345678';
  const N = 500_000;
  let bytes = 0;
  for (let i = 0; i < 20_000; i++) bytes += fill(t, q).byteLength; // warm up
  let t0 = performance.now();
  for (let i = 0; i < N; i++) bytes += fill(t, q).byteLength;
  const fillNs = ((performance.now() - t0) * 1e6) / N;
  t0 = performance.now();
  for (let i = 0; i < N; i++) bytes += mediaTemplate(hub.top).plain.byteLength;
  const renderNs = ((performance.now() - t0) * 1e6) / N;
  return [
    { group: 'HLS playlists: per-session template fill (micro)', name: 'per-session media playlist: template fill (6 segments, sid)', value: fillNs, unit: 'ns/op', note: `${fill(t, q).byteLength} B; rendering the playlist from the hub instead: ${renderNs.toFixed(0)} ns/op${bytes < 0 ? '' : ''}` },
  ];
}

export async function run(): Promise<BenchRow[]> {
  const work = mkdtempSync(path.join(tmpdir(), 'skylark-bench-listeners-'));
  chmodSync(work, 0o755);
  const rows: BenchRow[] = playlistMicro();
  try {
    if (PARTS.includes('fanout')) {
      try {
        rows.push(...(await fanoutMicro()));
      } catch (e) {
        log(`fan-out micro failed: ${(e as Error).message}`);
      }
    }
    if (PARTS.includes('send')) {
      try {
        rows.push(...(await sendPath()));
      } catch (e) {
        log(`send path failed: ${(e as Error).message}`);
      }
    }
    let sky: StepResult[] = [];
    let ice: StepResult[] = [];
    if (PARTS.includes('hls')) sky = await skylarkHls(work, rows);
    if (PARTS.includes('icecast')) {
      try {
        ice = await icecast(work);
      } catch (e) {
        log(`icecast failed: ${(e as Error).message}`);
      }
    }
    const heldSky = sky.filter((r) => r.held).pop();
    const heldIce = ice.filter((r) => r.held).pop();
    if (sky.length) {
      rows.push({
        group: GROUP_HLS,
        name: 'listeners held (every segment in time)',
        value: heldSky?.n ?? 0,
        unit: 'listeners',
        ...(ice.length ? { peer: { name: 'icecast2', value: heldIce?.n ?? 0 } } : {}),
        note: `target ≥ 15,000 and > 1.5 × Icecast; steps ${sky.map((r) => `${r.n}${r.held ? '✓' : '✗'}`).join(' ')}${ice.length ? ` / icecast ${ice.map((r) => `${r.n}${r.held ? '✓' : '✗'}`).join(' ')}` : ''}`,
      });
      for (const r of sky) {
        const peer = ice.find((x) => x.n === r.n);
        rows.push({ group: GROUP_HLS, name: `${r.n} listeners: server CPU`, value: r.cpu, unit: '% core', ...(peer ? { peer: { name: 'icecast2', value: peer.cpu } } : {}), note: r.detail });
        rows.push({ group: GROUP_HLS, name: `${r.n} listeners: server RSS`, value: r.rssMb, unit: 'MB', ...(peer ? { peer: { name: 'icecast2', value: peer.rssMb } } : {}) });
        rows.push({ group: GROUP_HLS, name: `${r.n} listeners: whole box busy`, value: r.box, unit: '% (of 200)', ...(peer ? { peer: { name: 'icecast2', value: peer.box } } : {}) });
        rows.push({
          group: GROUP_HLS,
          name: `${r.n} listeners: delivery (HLS: % segments in time; Icecast: p1 % of 128 kbps)`,
          value: r.quality,
          unit: '%',
          ...(peer ? { peer: { name: 'icecast2', value: peer.quality } } : {}),
          ...(peer ? { note: `icecast: ${peer.detail}` } : {}),
        });
      }
      for (const r of ice.filter((x) => !sky.some((y) => y.n === x.n))) rows.push({ group: GROUP_HLS, name: `icecast ${r.n} listeners: CPU`, value: r.cpu, unit: '% core', note: r.detail });
    }
    if (PARTS.includes('webrtc')) {
      try {
        rows.push(...(await webrtc(work)));
      } catch (e) {
        log(`webrtc failed: ${(e as Error).message}`);
        rows.push({ group: GROUP_RTC, name: 'failed', value: NaN, unit: '', note: (e as Error).message });
      }
    }
    return rows;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
