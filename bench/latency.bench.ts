/**
 * Glass-to-glass latency by tone marker (targets under 6 s classic HLS, under 2 s
 * LL-HLS, hls.js in Chromium).
 *
 * 1. FFmpeg renders the marker track: silence with a 1 kHz beep every 2 s, beep k lasting
 *    60 × (1 + k mod 6) ms, so that a beep heard is matched to the one sent even when the latency
 *    is longer than the 2 s period (the lengths repeat every 12 s). AAC 128 kbit/s in FLV. The
 *    beeps' start times in the file are found by decoding it again (priming included: what the
 *    wire carries).
 * 2. Skylark as its own process (as the other benches), a stream (AAC, medium: a128 passthrough +
 *    a64), published by the light replayer of bench/lib/rtmp-replayer.ts in this process: frame
 *    0 goes out at `publishAt` and each frame at publishAt + its file time, so beep k leaves the
 *    publisher at a known wall-clock time.
 * 3. hls.js in headless Chromium (test/helpers/hls-page.ts) plays the multivariant playlist with
 *    `lowLatencyMode: false` (classic), `true` (LL-HLS, hls.js defaults otherwise), and `true` with
 *    `maxLiveSyncPlaybackRate: 1.5` (hls.js plays faster until it reaches its target latency,
 *    PART-HOLD-BACK, instead of keeping what its start-up cost); a WebAudio AnalyserNode
 *    on the <audio> element detects each beep's start and length. Delay = wall clock heard − wall
 *    clock sent (both clocks of this machine); the first 6 s of each playback are not counted
 *    (start-up and catch-up). The row is the median; the note gives n, range and hls.js's own
 *    `latency` estimate at the end.
 *
 * Bounded to about 2 minutes (BENCH_LATENCY_SECONDS of playback per mode, default 28).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BenchRow } from './lib/report.js';
import { runToEnd, sleep, stop } from './lib/proc.js';
import { createAccount, startSkylark } from './http-segments.js';
import { ReplayPool, readFlvAudio } from './lib/rtmp-replayer.js';
import { createStream, skylarkTarget } from './lib/ingest-servers.js';
import { openHlsPage, type Beep } from '../test/helpers/hls-page.js';

const GROUP = 'Glass-to-glass latency (tone marker, hls.js in Chromium)';
const log = (msg: string) => process.stderr.write(`[latency] ${msg}\n`);
const SAMPLE_RATE = 48_000;
const PERIOD_MS = 2000;
const CLASS_MS = 60;
const CLASSES = 6;
const FILE_SECONDS = 180; // longer than the run: the replayer never loops
const SKIP_MS = 6000;
const PLAY_MS = (() => {
  const v = Number(process.env.BENCH_LATENCY_SECONDS);
  return (Number.isFinite(v) && v > 0 ? v : 28) * 1000;
})();

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** The marker track as an FFmpeg `aevalsrc` expression (a beep every 2 s, beep k 60 × (1 + k mod 6) ms long). */
export const MARKER_EXPR = `if(lt(mod(t,2),${CLASS_MS / 1000}*(1+mod(floor(t/2),${CLASSES}))),0.5*sin(2*PI*1000*t),0)`;

/** Renders the marker track to `flv`. */
async function makeMarkerFlv(flv: string): Promise<void> {
  const expr = MARKER_EXPR;
  const r = await runToEnd(
    ['ffmpeg', '-hide_banner', '-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `aevalsrc=exprs='${expr}|${expr}':s=${SAMPLE_RATE}`, '-t', String(FILE_SECONDS),
      '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', flv],
    60_000,
  );
  if (r.code !== 0) throw new Error(`ffmpeg could not render the marker track: ${r.stderr.trim().slice(0, 400)}`);
}

/** Start of each beep in the file (ms from its first audio frame), by decoding it as a player would. */
export async function beepOnsets(flv: string): Promise<number[]> {
  const pcm = await new Promise<Buffer>((resolve, reject) => {
    const p = spawn('ffmpeg', ['-hide_banner', '-nostdin', '-loglevel', 'error', '-i', flv, '-ac', '1', '-f', 's16le', 'pipe:1'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const chunks: Buffer[] = [];
    p.stdout!.on('data', (d: Buffer) => chunks.push(d));
    p.once('error', reject);
    p.once('exit', (code) => (code === 0 ? resolve(Buffer.concat(chunks)) : reject(new Error(`ffmpeg decode exited with ${code}`))));
  });
  const onsets: number[] = [];
  let quiet = SAMPLE_RATE; // samples below the threshold so far
  for (let i = 0; i + 1 < pcm.length; i += 2) {
    const v = Math.abs(pcm.readInt16LE(i)) / 32768;
    if (v > 0.1) {
      if (quiet > 0.3 * SAMPLE_RATE) onsets.push(((i / 2) * 1000) / SAMPLE_RATE);
      quiet = 0;
    } else quiet++;
  }
  return onsets;
}

/** Delays (ms) of the beeps heard, matched by their length class to the ones sent (wall clock). */
export function delays(heard: Beep[], sent: number[], from: number): number[] {
  const out: number[] = [];
  for (const b of heard) {
    if (b.at < from || b.durationMs === null) continue;
    const cls = Math.min(CLASSES - 1, Math.max(0, Math.round(b.durationMs / CLASS_MS) - 1));
    let best = NaN;
    for (let k = 0; k < sent.length; k++) {
      if (k % CLASSES !== cls) continue;
      const d = b.at - sent[k]!;
      if (d >= 0 && d < CLASSES * PERIOD_MS) best = d;
    }
    if (Number.isFinite(best)) out.push(best);
  }
  return out;
}

export async function run(): Promise<BenchRow[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-latency-'));
  const flv = path.join(dir, 'marker.flv');
  let server: Awaited<ReturnType<typeof startSkylark>> | null = null;
  let pool: ReplayPool | null = null;
  let page: Awaited<ReturnType<typeof openHlsPage>> | null = null;
  try {
    await makeMarkerFlv(flv);
    const onsets = await beepOnsets(flv);
    if (onsets.length < 10) throw new Error(`the marker track has ${onsets.length} beeps`);
    log(`marker track: ${onsets.length} beeps, first at ${onsets[0]!.toFixed(1)} ms`);

    server = await startSkylark(path.join(dir, 'data'));
    const key = await createAccount(path.join(dir, 'data'), server.defaultSecretKey);
    const stream = await createStream(server.http, key, 'Latency marker', 5);
    page = await openHlsPage();

    pool = new ReplayPool(readFlvAudio(flv), 5);
    const { started } = pool.publish(skylarkTarget(stream));
    const { publishAt } = await started;
    const sent = onsets.map((ms) => performance.timeOrigin + publishAt + ms);
    // Playable: the passthrough layer has two segments.
    for (let i = 0; ; i++) {
      const r = await fetch(stream.hlsUrl).catch(() => null);
      if (r?.status === 200) break;
      if (i > 100) throw new Error('no HLS 10 s after publishing');
      await sleep(100);
    }
    await sleep(4500);

    const rows: BenchRow[] = [];
    const state = await page.startBeeps(0.05);
    if (state !== 'running') log(`AudioContext is ${state}`);
    for (const mode of [
      { name: 'classic HLS', config: { lowLatencyMode: false }, target: 6 },
      { name: 'LL-HLS', config: { lowLatencyMode: true }, target: 2 },
      // hls.js by default never speeds up to reach its target latency: what start-up cost stays.
      { name: 'LL-HLS, hls.js catch-up on (maxLiveSyncPlaybackRate 1.5)', config: { lowLatencyMode: true, maxLiveSyncPlaybackRate: 1.5 }, target: 2 },
    ]) {
      await page.startBeeps(0.05);
      const t0 = performance.timeOrigin + performance.now();
      await page.play(stream.hlsUrl, mode.config);
      await sleep(PLAY_MS);
      const st = await page.state();
      const heard = await page.beeps();
      await page.stop();
      const fatal = st.errors.filter((e) => e.fatal);
      if (fatal.length) throw new Error(`${mode.name}: hls.js fatal error ${fatal[0]!.details}`);
      const d = delays(heard, sent, t0 + SKIP_MS).map((ms) => ms / 1000);
      log(`${mode.name}: heard ${heard.length} beeps, matched ${d.length}: ${d.map((x) => x.toFixed(2)).join(' ')}; hls.js latency ${st.latency?.toFixed(2)} s`);
      if (d.length === 0) throw new Error(`${mode.name}: no beep heard (${heard.length} detections, currentTime ${st.currentTime.toFixed(1)} s)`);
      const m = median(d);
      rows.push({
        group: GROUP,
        name: `${mode.name}, median`,
        value: Number(m.toFixed(2)),
        unit: 's',
        note: `target < ${mode.target} s${m < mode.target ? ' ✓' : ' ✗'}; n=${d.length}, range ${Math.min(...d).toFixed(2)}–${Math.max(...d).toFixed(2)} s; hls.js latency ${st.latency === null ? '–' : st.latency.toFixed(2)} s`,
      });
    }
    return rows;
  } finally {
    pool?.close();
    await page?.close().catch(() => {});
    if (server) await stop(server.child, 'SIGTERM', 3000);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run().then(
    (rows) => {
      for (const r of rows) process.stdout.write(`${r.name}: ${r.value} ${r.unit} (${r.note})\n`);
    },
    (e) => {
      process.stderr.write(`${(e as Error).stack}\n`);
      process.exitCode = 1;
    },
  );
}
