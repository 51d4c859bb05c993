/**
 * Glass-to-glass latency WHIP → LL-HLS by tone marker (the method of bench/latency.bench.ts, whose
 * marker track, onset detection and matching are reused): the marker track encoded as Ogg Opus
 * (libopus, 20 ms packets), its beep onsets found by decoding that file, its packets sent over WHIP
 * in real time (one RTP packet per Opus packet) into an `opus` stream; hls.js in headless Chromium
 * (`lowLatencyMode: true`) plays the stream and a WebAudio detector reports each beep heard.
 * Beep k leaves the publisher at (first packet's send time) + its onset + the pre-skip (RFC 7845
 * §4.2: a decoder drops the first 312 samples, 6.5 ms, which the packets' timeline still has).
 * Delay = wall clock heard − wall clock sent (one machine); the first 6 s of playback are not
 * counted. Rows: the median with n and the range, for hls.js's defaults and with its catch-up on.
 */
import path from 'node:path';
import { readFileSync } from 'node:fs';
import type { BenchRow } from './report.js';
import { runToEnd, sleep } from './proc.js';
import { beepOnsets, delays, MARKER_EXPR, median } from '../latency.bench.js';
import { openHlsPage } from '../../test/helpers/hls-page.js';
import { oggPackets } from '../../test/helpers/ogg.js';
import { whipConnect } from '../../test/helpers/whip-client.js';

const SKIP_MS = 6000;
const PRE_SKIP_MS = 312 / 48;

/**
 * Measures WHIP → LL-HLS on the `opus` stream `s` (its WHIP URL, key and HLS URL); `dir` a scratch
 * directory. One row per hls.js mode, or one "not measured" row when Chromium cannot start.
 * @throws Error when FFmpeg cannot render the marker or no beep is heard
 */
export async function whipToLlHls(s: { whipUrl: string; streamKey: string; hlsUrl: string }, dir: string, group: string, log: (m: string) => void): Promise<BenchRow[]> {
  const playS = Number(process.env.BENCH_LATENCY_SECONDS) > 0 ? Number(process.env.BENCH_LATENCY_SECONDS) : 28;
  const modes = [
    { name: 'WHIP → LL-HLS glass-to-glass (hls.js defaults)', config: { lowLatencyMode: true } },
    { name: 'WHIP → LL-HLS glass-to-glass (hls.js catch-up on, maxLiveSyncPlaybackRate 1.5)', config: { lowLatencyMode: true, maxLiveSyncPlaybackRate: 1.5 } },
  ];
  const fileSeconds = 20 + modes.length * (playS + 5);
  const ogg = path.join(dir, 'marker.ogg');
  const r = await runToEnd(['ffmpeg', '-hide_banner', '-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `aevalsrc=exprs='${MARKER_EXPR}|${MARKER_EXPR}':s=48000`, '-t', String(fileSeconds), '-c:a', 'libopus', '-b:a', '96k', '-frame_duration', '20', ogg], 60_000);
  if (r.code !== 0) throw new Error(`ffmpeg could not render the marker track: ${r.stderr.trim().slice(0, 400)}`);
  const onsets = await beepOnsets(ogg);
  const packets = oggPackets(readFileSync(ogg)).slice(2);
  let page: Awaited<ReturnType<typeof openHlsPage>>;
  try {
    page = await openHlsPage();
  } catch (e) {
    log(`WHIP → LL-HLS not measured: Chromium did not start (${(e as Error).message.split('\n')[0]})`);
    return [{ group, name: modes[0]!.name, value: NaN, unit: 's', note: 'not measured: headless Chromium did not start' }];
  }
  const c = await whipConnect(s.whipUrl, s.streamKey);
  try {
    if (c.status !== 201) throw new Error(`WHIP answered ${c.status}: ${c.body}`);
    let first = 0;
    const sending = c.send(packets, null, (_p, at) => void (first ||= at));
    for (let i = 0; ; i++) {
      const res = await fetch(s.hlsUrl).catch(() => null);
      if (res?.status === 200) break;
      if (i > 100) throw new Error('no HLS 10 s after the WHIP publish started');
      await sleep(100);
    }
    await sleep(4500);
    const sent = onsets.map((ms) => performance.timeOrigin + first + ms + PRE_SKIP_MS);
    const rows: BenchRow[] = [];
    for (const mode of modes) {
      await page.startBeeps(0.05);
      const t0 = performance.timeOrigin + performance.now();
      await page.play(s.hlsUrl, mode.config);
      await sleep(playS * 1000);
      const st = await page.state();
      const heard = await page.beeps();
      await page.stop();
      const fatal = st.errors.filter((e) => e.fatal);
      if (fatal.length) throw new Error(`${mode.name}: hls.js fatal error ${fatal[0]!.details}`);
      const d = delays(heard, sent, t0 + SKIP_MS).map((ms) => ms / 1000);
      log(`${mode.name}: heard ${heard.length} beeps, matched ${d.length}: ${d.map((x) => x.toFixed(2)).join(' ')}; hls.js latency ${st.latency?.toFixed(2)} s`);
      if (d.length === 0) throw new Error(`${mode.name}: no beep heard (${heard.length} detections, currentTime ${st.currentTime.toFixed(1)} s)`);
      const m = median(d);
      const note = `target < 2 s${m < 2 ? ' ✓' : ' ✗'}; n=${d.length}, range ${Math.min(...d).toFixed(2)}–${Math.max(...d).toFixed(2)} s; hls.js latency ${st.latency === null ? '–' : st.latency.toFixed(2)} s`;
      rows.push({ group, name: `${mode.name}, median`, value: Number(m.toFixed(2)), unit: 's', note });
    }
    await c.close();
    await sending.catch(() => {});
    return rows;
  } finally {
    await c.close();
    await page.close().catch(() => {});
  }
}
