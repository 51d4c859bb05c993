/**
 * HLS playback in a real browser: hls.js in headless Chromium plays Skylark's
 * ladder while a real client publishes.
 * - Per codec (AAC and MP3 from FFmpeg, Opus from the E-RTMP test publisher; quality `high`, three
 *   layers): hls.js plays, then every layer is forced in turn (`hls.currentLevel = i`); each plays
 *   (a fragment of that level becomes current and `currentTime` advances past it) and hls.js
 *   reports no fatal error.
 * - ABR: started on the top layer, the page's bandwidth is throttled through CDP below the top
 *   layer's bitrate; hls.js switches down (LEVEL_SWITCHED) and playback goes on without a stall.
 * - LL-HLS: with `lowLatencyMode: true` hls.js loads parts and plays within ~3 s of the live edge.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../helpers/server.js';
import { exited, publish } from '../helpers/publish.js';
import { makeOpusFile, publishOpus, type ErtmpPublisher } from '../helpers/ertmp-publisher.js';
import { openHlsPage, type HlsPage, type HlsState } from '../helpers/hls-page.js';

let t: TestServer;
let p: HlsPage;
const tmp = tempDir('skylark-hlsjs-');
const publishers: Array<ChildProcess | ErtmpPublisher> = [];

/** The live streams by codec (published from the start, for the whole file: their waits overlap). */
const live = new Map<string, Promise<{ hlsUrl: string; layers: string[] }>>();

beforeAll(async () => {
  [t, p] = await Promise.all([startInProcess(), openHlsPage()]);
  for (const codec of ['aac', 'mp3', 'opus'] as const) {
    const ready = liveStream(codec, 90);
    ready.catch(() => {}); // reported by the test that awaits it
    live.set(codec, ready);
  }
});
afterAll(async () => {
  for (const pub of publishers) {
    if ('done' in pub) {
      pub.stop();
      await pub.done;
    } else {
      pub.kill('SIGKILL');
      await exited(pub);
    }
  }
  await p?.close();
  await t?.close();
  tmp.cleanup();
});

/** Creates a `high` stream of `codec`, publishes it for `seconds`, and waits until every layer has `segments` segments. */
async function liveStream(codec: 'aac' | 'mp3' | 'opus', seconds: number, segments = 2): Promise<{ hlsUrl: string; layers: string[] }> {
  const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: `hls.js ${codec}`, codec, quality: 'high', reconnectWindow: 1, latencyMode: 'low' })).json;
  const url = `${s.rtmpUrl}/${s.streamKey}`;
  if (codec === 'aac') publishers.push(publish(url, { seconds, codecArgs: ['-ac', '2', '-c:a', 'aac', '-b:a', '256k'] }));
  else if (codec === 'mp3') publishers.push(publish(url, { seconds, codecArgs: ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '256k'] }));
  else publishers.push(publishOpus(s.rtmpUrl, s.streamKey, makeOpusFile(path.join(tmp.dir, 'sine.ogg'), 4), seconds));
  const layers = await waitFor(async () => {
    const r = await fetch(s.hlsUrl);
    if (r.status !== 200) return null;
    const uris = (await r.text()).split('\n').filter((l) => l && !l.startsWith('#'));
    if (uris.length < 3) return null;
    for (const u of uris) if (((await (await fetch(new URL(u, s.hlsUrl))).text()).match(/#EXTINF/g) ?? []).length < segments) return null;
    return uris.map((u) => u.split('/')[0]!);
  }, 25_000, 250, `${codec}: three layers with ${segments} segments`);
  return { hlsUrl: s.hlsUrl, layers };
}

const fatal = (s: HlsState) => s.errors.filter((e) => e.fatal);
/** The layer name (`a128`) of an hls.js level. */
const layerOf = (s: HlsState, level: number) => /\/(a\d+)\/index\.m3u8/.exec(s.levels[level]!.url)![1]!;

/** Waits until a fragment of `level` is playing and `currentTime` has advanced `seconds` past it. */
async function playsLevel(level: number, seconds: number, what: string): Promise<HlsState> {
  let last: HlsState | null = null;
  try {
    return await waitFor(async () => {
      const s = (last = await p.state());
      expect(fatal(s), what).toEqual([]);
      const since = s.played.findLast((x) => x.level === level);
      return since && s.currentLevel === level && !s.paused && s.currentTime >= since.currentTime + seconds ? s : null;
    }, 20_000, 200, what);
  } catch (e) {
    throw new Error(`${(e as Error).message}; player: ${summary(last)}`);
  }
}

/** The player state in one line, for failure messages. */
const summary = (s: HlsState | null) =>
  s === null
    ? 'no state'
    : JSON.stringify({ currentTime: s.currentTime, paused: s.paused, currentLevel: s.currentLevel, levels: s.levels.map((l) => l.bitrate), switched: s.switched.slice(-6), played: s.played.slice(-6), errors: s.errors.slice(-6), loaded: s.loaded.slice(-12) });

describe.each(['aac', 'mp3', 'opus'] as const)('hls.js in Chromium plays %s', (codec) => {
  it('plays every layer in turn without a fatal error', async () => {
    const { hlsUrl, layers } = await live.get(codec)!;
    await p.play(hlsUrl, {});
    const started = await waitFor(async () => {
      const s = await p.state();
      expect(fatal(s)).toEqual([]);
      return s.currentTime > 1 ? s : null;
    }, 20_000, 200, `${codec} playing`);
    expect(started.playError).toBeNull();
    expect(started.levels.map((_, i) => layerOf(started, i)).sort()).toEqual([...layers].sort());
    for (let i = 0; i < started.levels.length; i++) {
      await p.setLevel(i);
      const s = await playsLevel(i, 1, `${codec}: level ${i} (${layerOf(started, i)}) playing`);
      expect(s.switched.some((x) => x.level === i)).toBe(true);
    }
    const end = await p.state();
    expect(fatal(end)).toEqual([]);
    // Every layer was loaded and played.
    expect(new Set(end.played.map((x) => x.level)).size).toBe(layers.length);
    await p.stop();
  });
});

describe('hls.js ABR and LL-HLS', () => {
  it('switches down when the bandwidth is throttled below the top layer, without stalling', async () => {
    // Live for a while (the top layer lists ≥ 6 segments), so that hls.js can start 4 target
    // durations behind the live edge and hold ~6 s of buffer: a fragment of the top layer loading
    // at the throttled rate (~3 s), abandoned, then the lower layer's (~1–2 s) must fit in it.
    // Run alone, the file's stream is only seconds old here.
    const { hlsUrl, layers } = await live.get('aac')!;
    const topLayer = [...layers].sort((a, b) => Number(b.slice(1)) - Number(a.slice(1)))[0]!;
    const top = new URL(`${topLayer}/index.m3u8`, hlsUrl);
    await waitFor(async () => ((await (await fetch(top)).text()).match(/#EXTINF/g) ?? []).length >= 6 || null, 30_000, 250, 'six segments listed');
    // A realistic network first (1 Mbit/s, 4× the top layer; loopback speed would make hls.js's
    // bandwidth estimate tens of Mbit/s, which takes many fragments to decay), and an ABR that
    // weighs the newest fragment loads (1 s half-life) as a player on a phone network would.
    const cdp = await p.cdp();
    await cdp.send('Network.enable');
    const emulate = (bps: number) => cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 20, downloadThroughput: bps / 8, uploadThroughput: -1 });
    await emulate(1_000_000);
    // hls.js orders levels by bitrate: the top layer (a256) is the last; it starts there.
    await p.play(hlsUrl, { lowLatencyMode: false, startLevel: 2, liveSyncDurationCount: 4, abrEwmaDefaultEstimate: 1_000_000, abrEwmaFastLive: 1, abrEwmaSlowLive: 3 });
    let last: HlsState | null = null;
    const s0 = await waitFor(async () => {
      const s = (last = await p.state());
      expect(fatal(s)).toEqual([]);
      // Playing the top layer with a few seconds buffered (up to the live edge), so that a slower
      // network shows as a lower estimate, not a stall.
      return s.levels.length === 3 && s.currentLevel === 2 && s.currentTime > 2 && s.bufferAhead > 5.5 ? s : null;
    }, 25_000, 200, 'top layer playing').catch((e) => {
      throw new Error(`${(e as Error).message}; player: ${summary(last)}`);
    });
    expect(s0.autoLevel).toBe(true);
    expect(layerOf(s0, 2)).toBe('a256');
    const topBps = s0.levels[2]!.bitrate;
    expect(s0.levels[1]!.bitrate).toBeLessThan(topBps * 0.6);
    // Below the top layer's measured peak (it now loads slower than real time), above the next one's.
    const throttleBps = Math.round(topBps * 0.7);
    const throttledAt = Date.now();
    await emulate(throttleBps);
    try {
      const down = await waitFor(async () => {
        const s = (last = await p.state());
        expect(fatal(s)).toEqual([]);
        return s.switched.find((x) => x.at > throttledAt && s.levels[x.level]!.bitrate < topBps) ?? null;
      }, 30_000, 200, 'switch to a lower level').catch((e) => {
        throw new Error(`${(e as Error).message}; player: ${summary(last)}`);
      });
      // Playback goes on below the top layer: 2 s more, and no stall since the throttle.
      const after = await waitFor(async () => {
        const s = (last = await p.state());
        expect(fatal(s)).toEqual([]);
        // Since the first fragment played after the switch, only lower levels, for 2 s of playback.
        const since = s.played.filter((x) => x.at >= down.at);
        if (since.length === 0 || since.some((x) => s.levels[x.level]!.bitrate >= topBps)) return null;
        return s.currentTime >= since[0]!.currentTime + 2 ? s : null;
      }, 20_000, 200, 'a lower level playing').catch((e) => {
        throw new Error(`${(e as Error).message}; player: ${summary(last)}`);
      });
      expect(after.errors.filter((e) => e.at > throttledAt && e.details === 'bufferStalledError'), summary(after)).toEqual([]);
      expect(after.paused).toBe(false);
    } finally {
      await p.stop();
      await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    }
  });

  it('plays LL-HLS within ~3 s of the live edge with lowLatencyMode', async () => {
    const { hlsUrl } = await live.get('opus')!;
    await p.play(hlsUrl, { lowLatencyMode: true });
    const s = await waitFor(async () => {
      const st = await p.state();
      expect(fatal(st)).toEqual([]);
      // The page's audio element keeps the last test's currentTime until the new source plays: wait
      // for 2 s of playback since this player's first fragment played, on its own timeline.
      const first = st.played[0];
      return first && st.currentTime > 4 && st.currentTime >= first.currentTime + 2 && st.latency !== null ? st : null;
    }, 25_000, 200, 'LL-HLS playing');
    expect(s.loaded.some((x) => x.part !== null)).toBe(true); // it loads parts, not only segments
    expect(s.latency).toBeLessThan(3);
    expect(s.latency).toBeGreaterThan(0);
    await p.stop();
  });
});
