/**
 * LL-HLS delta updates in a real player (draft-pantos-hls-rfc8216bis §6.2.5.1; docs/ll-hls.md):
 * hls.js in headless Chromium plays a low-latency AAC stream published by FFmpeg, with 1 s
 * segments and a 10-segment live window (so a delta update has segments to skip: the skip
 * boundary is 6 target durations). hls.js asks for `_HLS_skip=YES` by itself once the playlist
 * offers `CAN-SKIP-UNTIL`; over ~10 s of playback the page's own network log shows delta updates
 * served (`EXT-X-SKIP:SKIPPED-SEGMENTS=n`, n > 0), hls.js keeps playing parts near the live edge,
 * and reports no fatal error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../helpers/server.js';
import { heldReloadCounts, httpFrontCounts } from '../../src/native/http-front.js';
import { exited, publish } from '../helpers/publish.js';
import { openHlsPage, type HlsPage } from '../helpers/hls-page.js';

let t: TestServer;
let p: HlsPage;
let pub: ChildProcess;
let hlsUrl = '';

beforeAll(async () => {
  [t, p] = await Promise.all([startInProcess({ SKYLARK_SEGMENT_DURATION_MS: '1000', SKYLARK_LIVE_WINDOW_SEGMENTS: '10' }), openHlsPage()]);
  const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'hls.js delta', reconnectWindow: 1, latencyMode: 'low' })).json;
  hlsUrl = s.hlsUrl;
  pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 90 });
  // Every layer holds more than the skip boundary (6 s) of segments.
  await waitFor(async () => {
    const r = await fetch(hlsUrl);
    if (r.status !== 200) return false;
    const uris = (await r.text()).split('\n').filter((l) => l && !l.startsWith('#'));
    for (const u of uris) if (((await (await fetch(new URL(u, hlsUrl))).text()).match(/#EXTINF/g) ?? []).length < 9) return false;
    return uris.length > 0;
  }, 40_000, 250, 'nine segments in every layer');
}, 60_000);

afterAll(async () => {
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await p?.close();
  await t?.close();
});

describe('hls.js and delta updates', () => {
  it('plays ~10 s of LL-HLS through delta updates with no fatal error', async () => {
    /** Media playlist answers the page received: whether it asked for a skip, what it got. */
    const seen: Array<Promise<{ skipAsked: boolean; status: number; skipped: number | null }>> = [];
    p.page.on('response', (res) => {
      const url = new URL(res.url());
      if (!/\/hls\/[^/]+\/[^/]+\/index\.m3u8$/.test(url.pathname)) return;
      seen.push(
        res.text().then(
          (body) => ({ skipAsked: url.searchParams.get('_HLS_skip') === 'YES', status: res.status(), skipped: Number(/#EXT-X-SKIP:SKIPPED-SEGMENTS=(\d+)/.exec(body)?.[1] ?? NaN) || null }),
          () => ({ skipAsked: false, status: 0, skipped: null }), // a reload hls.js abandoned (level switch)
        ),
      );
    });
    const hits = httpFrontCounts().objectHits;
    const reloads = heldReloadCounts().hits;
    await p.play(hlsUrl, { lowLatencyMode: true });
    const start = await waitFor(async () => {
      const st = await p.state();
      expect(st.errors.filter((e) => e.fatal)).toEqual([]);
      return st.currentTime > 0.5 && !st.paused ? st : null;
    }, 25_000, 200, 'hls.js playing');
    // ~10 s of playback (waits on media time, not on a timer: the test asserts what was played).
    const s = await waitFor(async () => {
      const st = await p.state();
      expect(st.errors.filter((e) => e.fatal)).toEqual([]);
      return st.currentTime - start.currentTime >= 10 ? st : null;
    }, 40_000, 250, 'ten seconds played');
    await p.stop();
    expect(s.errors.filter((e) => e.fatal)).toEqual([]);
    expect(s.errors.filter((e) => e.details === 'levelParsingError')).toEqual([]); // every delta update merged
    expect(s.loaded.some((x) => x.part !== null)).toBe(true); // it played parts
    // Chromium's part GETs were answered by the native HTTP front (docs/http.md "Media objects answered in native code").
    expect(httpFrontCounts().objectHits).toBeGreaterThan(hits);
    // And its blocking reloads (delta updates among them) by the front too (docs/http.md "Blocking reloads held in native code").
    expect(heldReloadCounts().hits).toBeGreaterThan(reloads);
    expect(s.latency).not.toBeNull();
    expect(s.latency!).toBeLessThan(4);
    const answers = await Promise.all(seen);
    const deltas = answers.filter((a) => a.skipAsked && a.status === 200 && a.skipped !== null);
    expect(deltas.length).toBeGreaterThan(0);
    for (const a of answers) if (a.status !== 0) expect(a.status).toBe(200);
  });
});
