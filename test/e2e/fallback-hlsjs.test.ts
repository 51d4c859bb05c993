/**
 * The stream fallback (docs/streams.md "Fallback") played by hls.js in headless Chromium, a player
 * written elsewhere, across fallback → live → fallback → live:
 * - an idle AAC `medium` stream with a fallback of two episodes is on air; hls.js starts on it;
 * - an FFmpeg RTMP publisher goes live, is killed (the fallback again, reconnect window 0), then
 *   publishes again;
 * - at each switch the playlist carries an EXT-X-DISCONTINUITY (docs/streams.md "What listeners
 *   get"), and hls.js plays the segment after it (FRAG_CHANGED with its media sequence number);
 * - all along hls.js reports no fatal error and `currentTime`, sampled in the page every 250 ms,
 *   never stands still longer than the playlist's target duration (+ 0.5 s): the longest stall is
 *   printed.
 * Once with the default configuration on a `standard` stream, once with `lowLatencyMode: true` on
 * a `low` one (LL-HLS parts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../helpers/server.js';
import { exited, publish } from '../helpers/publish.js';
import { openHlsPage, type HlsPage, type HlsState } from '../helpers/hls-page.js';
import { episodeWithAudio as createEpisode, toneMp3 } from '../helpers/episodes.js';

let t: TestServer;
let p: HlsPage;
const tmp = tempDir('skylark-fallback-hlsjs-');
const children: ChildProcess[] = [];

const v2 = (method: string, q: string, body?: unknown) => api(t.http, t.secretKey, method, `/v2${q}`, body);

const tone = (file: string, seconds: number, hz: number) => toneMp3(tmp.dir, file, seconds, hz);
const episodeWithAudio = (pid: string, title: string, audio: Buffer | null) => createEpisode(t.http, t.secretKey, pid, title, audio);

/** A media playlist read: its target duration (s) and the media sequence numbers of the segments that follow an EXT-X-DISCONTINUITY. */
async function mediaPlaylist(url: string): Promise<{ targetDuration: number; segments: number; discontinuities: number[] }> {
  const r = await fetch(url);
  if (r.status !== 200) return { targetDuration: 0, segments: 0, discontinuities: [] };
  const lines = (await r.text()).split('\n');
  let sn = Number(/^#EXT-X-MEDIA-SEQUENCE:(\d+)/m.exec(lines.join('\n'))?.[1] ?? 0);
  const targetDuration = Number(/^#EXT-X-TARGETDURATION:(\d+)/m.exec(lines.join('\n'))?.[1] ?? 0);
  const discontinuities: number[] = [];
  let segments = 0;
  let after = false;
  for (const l of lines) {
    if (l === '#EXT-X-DISCONTINUITY') after = true;
    else if (l && !l.startsWith('#')) {
      if (after) discontinuities.push(sn);
      after = false;
      sn++;
      segments++;
    }
  }
  return { targetDuration, segments, discontinuities };
}

beforeAll(async () => {
  [t, p] = await Promise.all([startInProcess(), openHlsPage()]);
}, 60_000);

afterAll(async () => {
  for (const c of children) {
    c.kill('SIGKILL');
    await exited(c);
  }
  await p?.close();
  await t?.close();
  tmp.cleanup();
});

const fatal = (s: HlsState) => s.errors.filter((e) => e.fatal);
const summary = (s: HlsState | null): string =>
  s === null ? 'no state yet' : JSON.stringify({ currentTime: s.currentTime, paused: s.paused, readyState: s.readyState, bufferAhead: s.bufferAhead, errors: s.errors, played: s.played.slice(-8) });

/** The scenario for a stream of `latencyMode`, hls.js started with `config`. */
async function acrossSwitches(latencyMode: 'standard' | 'low', config: Record<string, unknown>): Promise<void> {
  {
    const pod = await v2('POST', '/podcasts', { title: 'Station archive' });
    expect(pod.status, pod.text).toBe(201);
    const e1 = await episodeWithAudio(pod.json.id, 'Episode one', tone('one.mp3', 10, 440));
    const e2 = await episodeWithAudio(pod.json.id, 'Episode two', tone('two.mp3', 10, 660));
    const created = await v2('POST', '/streams', { title: 'Station', codec: 'aac', quality: 'medium', latencyMode, reconnectWindow: 0, fallback: { episodeIds: [e1, e2] } });
    expect(created.status, created.text).toBe(201);
    const s = created.json;
    expect(s.source).toBe('fallback');
    const layer = await waitFor(async () => {
      const r = await fetch(s.hlsUrl);
      if (r.status !== 200) return null;
      const uri = (await r.text()).split('\n').find((l) => l && !l.startsWith('#'));
      if (!uri) return null;
      const url = new URL(uri, s.hlsUrl).href;
      return (await mediaPlaylist(url)).segments >= 2 ? url : null;
    }, 30_000, 200, 'fallback segments');
    const { targetDuration } = await mediaPlaylist(layer);
    expect(targetDuration).toBeGreaterThan(0);

    let last: HlsState | null = null;
    const state = async () => {
      const st = (last = await p.state());
      expect(fatal(st), summary(st)).toEqual([]);
      return st;
    };
    const explain = async (e: unknown) => {
      throw new Error(`${(e as Error).message}; player: ${summary(last)}; errors: ${JSON.stringify(await errorDetails(), null, 1)}`);
    };

    await p.play(s.hlsUrl, config);
    // What hls.js says about its errors beyond their names: the reason, the playlist or fragment, the playlist text.
    await p.page.evaluate(() => {
      const g = globalThis as any;
      g.errorDetails = [];
      g.hls.on(g.Hls.Events.ERROR, (_: unknown, d: any) =>
        g.errorDetails.push({ details: d.details, fatal: d.fatal, reason: d.reason ?? String(d.error ?? ''), url: d.url ?? d.frag?.url ?? d.context?.url, text: d.response?.data ?? d.networkDetails?.responseText }),
      );
    });
    const errorDetails = () => p.page.evaluate(() => (globalThis as any).errorDetails) as Promise<unknown[]>;
    await waitFor(async () => (await state()).currentTime > 1, 30_000, 200, 'hls.js playing the fallback').catch(explain);
    // currentTime sampled in the page every 250 ms (wall clock ms, media s).
    await p.page.evaluate(() => {
      const g = globalThis as any;
      const audio = g.document.getElementById('a');
      g.samples = [] as Array<[number, number]>;
      g.sampler = setInterval(() => g.samples.push([performance.timeOrigin + performance.now(), audio.currentTime]), 250);
    });

    /** Waits for a new discontinuity in the playlist after `known`, then until hls.js plays the segment after it. */
    const playsAcross = async (known: number, what: string): Promise<number> => {
      const sn = await waitFor(async () => (await mediaPlaylist(layer)).discontinuities.find((x) => x > known) ?? null, 20_000, 200, `${what}: a discontinuity in the playlist`);
      await waitFor(async () => (await state()).played.some((x) => x.sn >= sn), 30_000, 200, `${what}: hls.js plays segment ${sn}`).catch(explain);
      const at = (await state()).currentTime;
      await waitFor(async () => (await state()).currentTime > at + 2, 15_000, 200, `${what}: 2 s more`).catch(explain);
      return sn;
    };
    const switches: Array<[string, number]> = [];
    const sourceIs = async (want: string) => {
      await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.source === want, 20_000, 100, `source ${want}`);
      switches.push([want, Date.now()]);
    };
    const first = Math.max(-1, ...(await mediaPlaylist(layer)).discontinuities);

    const url = `${s.rtmpUrl}/${s.streamKey}`;
    const pub1 = publish(url, { seconds: 60 });
    children.push(pub1);
    await sourceIs('live');
    const toLive = await playsAcross(first, 'fallback → live');

    pub1.kill('SIGKILL');
    await sourceIs('fallback');
    const toFallback = await playsAcross(toLive, 'live → fallback');

    const pub2 = publish(url, { seconds: 60, frequency: 880 });
    children.push(pub2);
    await sourceIs('live');
    await playsAcross(toFallback, 'fallback → live again');

    const samples = (await p.page.evaluate(() => {
      const g = globalThis as any;
      clearInterval(g.sampler);
      return g.samples;
    })) as Array<[number, number]>;
    const end = await state();
    expect(end.paused).toBe(false);
    // The longest stretch of wall-clock time without currentTime going forward.
    let longest = 0;
    let lastProgress = samples[0]!;
    for (const sm of samples.slice(1)) {
      if (sm[1] > lastProgress[1]) {
        longest = Math.max(longest, sm[0] - lastProgress[0]);
        lastProgress = sm;
      }
    }
    longest = Math.max(longest, samples.at(-1)![0] - lastProgress[0]);
    const played = samples.at(-1)![1] - samples[0]![1];
    const wall = (samples.at(-1)![0] - samples[0]![0]) / 1000;
    const stalls = end.errors.filter((e) => e.details === 'bufferStalledError').length;
    console.log(`hls.js (${latencyMode}, ${JSON.stringify(config)}) across 3 switches: ${samples.length} samples over ${wall.toFixed(1)} s, currentTime +${played.toFixed(1)} s; longest stretch without progress ${Math.round(longest)} ms (target duration ${targetDuration} s); ${stalls} bufferStalledError (non-fatal), errors ${JSON.stringify(end.errors.map((e) => `${e.details} at +${((e.at - samples[0]![0]) / 1000).toFixed(1)} s`))}; source switches at ${switches.map(([w, at]) => `${w} +${((at - samples[0]![0]) / 1000).toFixed(1)} s`).join(', ')}`);
    expect(longest, summary(end)).toBeLessThanOrEqual(targetDuration * 1000 + 500);
    await p.stop();
  }
}

describe('hls.js across fallback → live → fallback → live', () => {
  it('keeps playing through every switch, without a fatal error or a stall longer than a segment', () => acrossSwitches('standard', {}), 90_000);

  // On an LL-HLS layer the first segment after a switch is listed with its EXT-X-DISCONTINUITY
  // before its first part (RFC 8216bis §4.4.4.9), from its first part on: its discontinuity
  // sequence never changes between reloads (§6.2.1), which hls.js checks in lowLatencyMode.
  it('does so with lowLatencyMode on an LL-HLS stream', () => acrossSwitches('low', { lowLatencyMode: true }), 90_000);
});
