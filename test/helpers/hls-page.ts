/**
 * hls.js in headless Chromium for the HLS playback tests and the latency bench: Chromium is
 * launched by test/helpers/browser.ts (system /usr/bin/chromium, fresh profile, autoplay allowed),
 * then goes to a tiny player page served from node:http on 127.0.0.1 — another origin than Skylark,
 * so every HLS fetch is cross-origin like a real web player's. The page serves hls.js from
 * node_modules/hls.js/dist/hls.min.js and keeps a log of what hls.js reports (errors, level
 * switches, the fragments that played), read with `state()`. `startBeeps()`/`beeps()` is a WebAudio
 * tone detector (AnalyserNode on a MediaElementSource) for the glass-to-glass latency bench.
 */
import http from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { CDPSession, Page } from 'playwright-core';
import { openPlayer } from './browser.js';

const HLS_JS = path.resolve(import.meta.dirname, '..', '..', 'node_modules', 'hls.js', 'dist', 'hls.min.js');

const PAGE = `<!doctype html><meta charset="utf-8"><title>HLS player</title>
<script src="/hls.min.js"></script>
<body><audio id="a"></audio>
<script>
const audio = document.getElementById('a');
window.startHls = (url, config) => {
  if (window.hls) window.hls.destroy();
  const hls = new Hls(config);
  window.hls = hls;
  const log = (window.hlsLog = { errors: [], switched: [], played: [], loaded: [], metadata: [], playError: null, manifestLevels: 0 });
  const now = () => performance.timeOrigin + performance.now();
  hls.on(Hls.Events.ERROR, (_, d) => log.errors.push({ type: d.type, details: d.details, fatal: d.fatal, at: now() }));
  hls.on(Hls.Events.LEVEL_SWITCHED, (_, d) => log.switched.push({ level: d.level, at: now(), currentTime: audio.currentTime }));
  hls.on(Hls.Events.FRAG_CHANGED, (_, d) => log.played.push({ level: d.frag.level, sn: d.frag.sn, at: now(), currentTime: audio.currentTime }));
  hls.on(Hls.Events.FRAG_LOADED, (_, d) => {
    const st = (d.part || d.frag).stats;
    log.loaded.push({ level: d.frag.level, sn: d.frag.sn, part: d.part ? d.part.index : null, bytes: st.total, ms: Math.round(st.loading.end - st.loading.start), at: now() });
  });
  // Timed ID3 (emsg in fMP4, an ID3 PES in TS) as hls.js hands it over: the raw tags, with when they came.
  hls.on(Hls.Events.FRAG_PARSING_METADATA, (_, d) => {
    for (const s of d.samples) log.metadata.push({ level: d.frag.level, sn: d.frag.sn, pts: s.pts, bytes: Array.from(s.data), at: now() });
  });
  hls.on(Hls.Events.MANIFEST_PARSED, (_, d) => {
    log.manifestLevels = d.levels.length;
    audio.play().catch((e) => (log.playError = String(e)));
  });
  hls.on(Hls.Events.MEDIA_ATTACHED, () => hls.loadSource(url));
  hls.attachMedia(audio);
};
window.hlsState = () => {
  const hls = window.hls;
  const log = window.hlsLog;
  return {
    currentTime: audio.currentTime,
    paused: audio.paused,
    readyState: audio.readyState,
    currentLevel: hls ? hls.currentLevel : -1,
    autoLevel: hls ? hls.autoLevelEnabled : false,
    bufferAhead: (() => {
      const b = audio.buffered;
      for (let i = 0; i < b.length; i++) if (b.start(i) <= audio.currentTime + 0.1 && b.end(i) >= audio.currentTime) return b.end(i) - audio.currentTime;
      return 0;
    })(),
    levels: hls ? hls.levels.map((l) => ({ bitrate: l.bitrate, url: l.url[0], codecs: l.audioCodec || l.codecSet || '' })) : [],
    latency: hls && Number.isFinite(hls.latency) ? hls.latency : null,
    bandwidthEstimate: hls ? hls.bandwidthEstimate : null,
    errors: log.errors,
    switched: log.switched,
    played: log.played,
    loaded: log.loaded.slice(-50),
    metadata: log.metadata,
    playError: log.playError,
  };
};
window.stopHls = () => {
  if (window.hls) window.hls.destroy();
  window.hls = null;
};
// Tone detector: RMS of the analyser's window every 5 ms; a beep starts with a rise above the
// threshold after at least 300 ms below it, and lasts until the RMS falls back under it. Times are
// wall clock (ms since the epoch). The element can feed only one MediaElementSource: a second call
// just clears the list.
window.startBeeps = (threshold) => {
  window.beepTimes = [];
  if (window.beepCtx) return window.beepCtx.state;
  const ctx = (window.beepCtx = new AudioContext());
  const src = ctx.createMediaElementSource(audio);
  const an = ctx.createAnalyser();
  an.fftSize = 512;
  src.connect(an);
  an.connect(ctx.destination);
  const buf = new Float32Array(an.fftSize);
  let quietSince = 0;
  let on = null;
  setInterval(() => {
    an.getFloatTimeDomainData(buf);
    let sum = 0;
    for (const v of buf) sum += v * v;
    const rms = Math.sqrt(sum / buf.length);
    const t = performance.timeOrigin + performance.now();
    if (rms > threshold) {
      if (!on && t - quietSince > 300) {
        on = { at: t, currentTime: audio.currentTime, durationMs: null };
        window.beepTimes.push(on);
      }
    } else {
      if (on) {
        on.durationMs = t - on.at;
        quietSince = t;
      }
      on = null;
    }
  }, 5);
  return ctx.state;
};
</script>`;

export interface HlsLevel {
  bitrate: number;
  url: string;
  codecs: string;
}

/** What the page's hls.js has reported so far. Times (`at`) are wall clock, ms since the epoch. */
export interface HlsState {
  currentTime: number;
  paused: boolean;
  readyState: number;
  currentLevel: number;
  /** hls.js picks levels itself (no level forced). */
  autoLevel: boolean;
  /** Seconds buffered ahead of `currentTime`. */
  bufferAhead: number;
  levels: HlsLevel[];
  latency: number | null;
  bandwidthEstimate: number | null;
  errors: Array<{ type: string; details: string; fatal: boolean; at: number }>;
  switched: Array<{ level: number; at: number; currentTime: number }>;
  played: Array<{ level: number; sn: number; at: number; currentTime: number }>;
  /** The last 50 fragments (or parts) loaded: size and load time. */
  loaded: Array<{ level: number; sn: number; part: number | null; bytes: number; ms: number; at: number }>;
  /** Timed ID3 samples hls.js parsed (`FRAG_PARSING_METADATA`): the raw tag bytes, its pts (s), when. */
  metadata: Array<{ level: number; sn: number; pts: number; bytes: number[]; at: number }>;
  playError: string | null;
}

/** One beep the page's tone detector heard. */
export interface Beep {
  /** Wall clock (ms since the epoch) of its start. */
  at: number;
  /** The audio element's currentTime then. */
  currentTime: number;
  /** How long it lasted (ms), null while it still sounds. */
  durationMs: number | null;
}

export interface HlsPage {
  page: Page;
  /** Starts hls.js (a fresh instance) on `url` with `config` (JSON), attached to the page's <audio>. */
  play(url: string, config?: Record<string, unknown>): Promise<void>;
  state(): Promise<HlsState>;
  /** Forces a level (hls.currentLevel = i: immediate switch, buffer flushed). */
  setLevel(i: number): Promise<void>;
  /** Back to automatic level selection from the next fragment on (hls.loadLevel = -1: nothing flushed). */
  autoLevel(): Promise<void>;
  stop(): Promise<void>;
  /** A CDP session on the page (Network.emulateNetworkConditions and the like). */
  cdp(): Promise<CDPSession>;
  /** Starts the WebAudio tone detector on the page's audio (RMS threshold, 0..1), or clears its list; the AudioContext state. */
  startBeeps(threshold?: number): Promise<string>;
  /** The beeps heard since `startBeeps`: wall-clock start (ms since the epoch), media time, length (null while on). */
  beeps(): Promise<Beep[]>;
  close(): Promise<void>;
}

/** Launches headless Chromium on the hls.js player page. */
export async function openHlsPage(): Promise<HlsPage> {
  const hlsJs = readFileSync(HLS_JS);
  const server = http.createServer((req, res) => {
    if (req.url === '/hls.min.js') {
      res.writeHead(200, { 'Content-Type': 'text/javascript; charset=utf-8' });
      res.end(hlsJs);
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(PAGE);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  let browser: Awaited<ReturnType<typeof openPlayer>> | null = null;
  try {
    browser = await openPlayer();
    const page = browser.page;
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.waitForFunction(() => typeof (globalThis as any).Hls === 'function' && (globalThis as any).Hls.isSupported(), null, { timeout: 10_000 });
    let session: CDPSession | null = null;
    const b = browser;
    return {
      page,
      play: (url, config = {}) => page.evaluate(([u, c]) => (globalThis as any).startHls(u, c), [url, config] as const),
      state: () => page.evaluate(() => (globalThis as any).hlsState()) as Promise<HlsState>,
      setLevel: (i) => page.evaluate((l) => void ((globalThis as any).hls.currentLevel = l), i),
      autoLevel: () => page.evaluate(() => void ((globalThis as any).hls.loadLevel = -1)),
      stop: () => page.evaluate(() => (globalThis as any).stopHls()),
      cdp: async () => (session ??= await page.context().newCDPSession(page)),
      startBeeps: (threshold = 0.05) => page.evaluate((th) => (globalThis as any).startBeeps(th), threshold) as Promise<string>,
      beeps: () => page.evaluate(() => (globalThis as any).beepTimes ?? []) as Promise<Beep[]>,
      async close() {
        await session?.detach().catch(() => {});
        await b.close();
        server.close();
      },
    };
  } catch (e) {
    await browser?.close();
    server.close();
    throw e;
  }
}
