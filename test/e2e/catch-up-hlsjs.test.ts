/**
 * Catch-up rewind in a real player (docs/behaviour.md §17): hls.js in headless Chromium plays
 * `/hls/<id>/rewind.m3u8` of an AAC stream published by FFmpeg (1 s segments, catch-up on), seeks
 * 20 s back into the window, plays on from there with no fatal error, and asks for delta updates
 * (`_HLS_skip=YES`) by itself, which the node answers with `EXT-X-SKIP`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../helpers/server.js';
import { exited, publish } from '../helpers/publish.js';
import { openHlsPage, type HlsPage } from '../helpers/hls-page.js';

let t: TestServer;
let p: HlsPage;
let pub: ChildProcess;
let rewindUrl = '';

beforeAll(async () => {
  [t, p] = await Promise.all([startInProcess({ SKYLARK_SEGMENT_DURATION_MS: '1000' }), openHlsPage()]);
  const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Rewind', reconnectWindow: 1, catchUp: { hours: 1 } })).json;
  rewindUrl = `${t.http}/hls/${s.id}/rewind.m3u8`;
  pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 120 });
  // 30 s kept in the window.
  await waitFor(async () => {
    const r = await fetch(`${t.http}/hls/${s.id}/rewind/a128.m3u8`);
    return r.status === 200 && ((await r.text()).match(/#EXTINF/g) ?? []).length >= 30;
  }, 60_000, 500, 'thirty segments in the rewind window');
}, 90_000);

afterAll(async () => {
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await p?.close();
  await t?.close();
});

describe('hls.js on rewind.m3u8', () => {
  it('plays the window, seeks 20 s back and plays on, with delta updates and no fatal error', async () => {
    const deltas: Array<Promise<number | null>> = [];
    p.page.on('response', (res) => {
      const url = new URL(res.url());
      if (!url.pathname.includes('/rewind/') || url.searchParams.get('_HLS_skip') !== 'YES') return;
      deltas.push(res.text().then((b) => Number(/#EXT-X-SKIP:SKIPPED-SEGMENTS=(\d+)/.exec(b)?.[1] ?? NaN) || null, () => null));
    });
    await p.play(rewindUrl, {});
    const start = await waitFor(async () => {
      const st = await p.state();
      expect(st.errors.filter((e) => e.fatal)).toEqual([]);
      return st.currentTime > 1 && !st.paused ? st : null;
    }, 30_000, 200, 'hls.js playing');
    const target = start.currentTime - 20;
    const listed = await (await fetch(rewindUrl.replace('rewind.m3u8', 'rewind/a128.m3u8'))).text();
    const newest = Math.max(...[...listed.matchAll(/(\d+)\.m4s/g)].map((m) => Number(m[1])));
    expect(target).toBeGreaterThan(0);
    await p.page.evaluate(`document.getElementById('a').currentTime = ${target}`);
    // Plays on from the earlier point: 4 s of media time after the seek.
    const after = await waitFor(async () => {
      const st = await p.state();
      expect(st.errors.filter((e) => e.fatal)).toEqual([]);
      return st.currentTime >= target + 4 && st.currentTime < start.currentTime && !st.paused ? st : null;
    }, 30_000, 250, 'playing 4 s from 20 s back');
    await p.stop();
    expect(after.errors.filter((e) => e.fatal)).toEqual([]);
    // What played after the seek is from well before the live edge at the time of the seek.
    process.stderr.write(`catch-up hls.js: newest segment at the seek ${newest}, fragments played ${after.played.map((f) => f.sn).join(' ')}\n`);
    // It started near the live edge: 1 s segments from 0, so media time ≈ media sequence (the
    // fragment list may not hold that first fragment yet when the seek comes).
    expect(start.currentTime).toBeGreaterThan(newest - 6);
    expect(Number(after.played.at(-1)!.sn)).toBeLessThan(newest - 10); // and plays 20 s back now
    const skipped = (await Promise.all(deltas)).filter((n) => n !== null);
    process.stderr.write(`catch-up hls.js: seeked from ${start.currentTime.toFixed(1)} s to ${target.toFixed(1)} s, played to ${after.currentTime.toFixed(1)} s; ${skipped.length} delta updates (${skipped.slice(0, 3).join(', ')} segments skipped)\n`);
    expect(skipped.length).toBeGreaterThan(0);
  }, 90_000);
});
