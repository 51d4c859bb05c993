/**
 * Now playing in HLS (docs/behaviour.md §11) as a real player reads it: hls.js in headless Chromium plays
 * an AAC stream (fMP4, LL-HLS: the title in an `emsg`) and an MP3 stream (MPEG-TS: an ID3 PES on
 * the PID the PMT declares), the title is set through the API, and hls.js hands the ID3 tag over in
 * `FRAG_PARSING_METADATA` with the title in `TIT2` and the artist in `TPE1`. The media playlist
 * carries the change as an `EXT-X-DATERANGE` (`CLASS="com.skylark.now-playing"`) beside
 * `EXT-X-PROGRAM-DATE-TIME`. The time from the API call to the title in hls.js is printed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../helpers/server.js';
import { exited, publish } from '../helpers/publish.js';
import { openHlsPage, type HlsPage } from '../helpers/hls-page.js';

/** The text frames of an ID3v2.4 tag (`TIT2` → title…): UTF-8 (encoding byte 3) or Latin-1. */
function id3Text(tag: number[]): Record<string, string> {
  const b = Buffer.from(tag);
  const out: Record<string, string> = {};
  if (b.subarray(0, 3).toString('latin1') !== 'ID3') return out;
  const syncsafe = (o: number) => (b[o]! << 21) | (b[o + 1]! << 14) | (b[o + 2]! << 7) | b[o + 3]!;
  const end = 10 + syncsafe(6);
  for (let o = 10; o + 10 <= end; ) {
    const id = b.subarray(o, o + 4).toString('latin1');
    const size = syncsafe(o + 4);
    if (!/^[A-Z0-9]{4}$/.test(id) || size <= 0) break;
    const body = b.subarray(o + 10, o + 10 + size);
    if (id.startsWith('T')) out[id] = body.subarray(1).toString(body[0] === 3 ? 'utf8' : 'latin1').replace(/\0+$/, '');
    o += 10 + size;
  }
  return out;
}

describe('now playing in HLS, read by hls.js', () => {
  let t: TestServer;
  let p: HlsPage;
  const publishers: ChildProcess[] = [];
  beforeAll(async () => {
    [t, p] = await Promise.all([startInProcess({ SKYLARK_ABR_LADDER: '0' }), openHlsPage()]);
  });
  afterAll(async () => {
    for (const x of publishers) {
      x.kill('SIGKILL');
      await exited(x);
    }
    await p?.close();
    await t?.close();
  });

  for (const codec of ['aac', 'mp3'] as const) {
    it(`${codec === 'aac' ? 'AAC in fMP4 (emsg)' : 'MP3 in MPEG-TS (ID3 PES)'}: the title reaches hls.js; the playlist dates it`, async () => {
      const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: `Now playing ${codec}`, codec, reconnectWindow: 0, latencyMode: codec === 'aac' ? 'low' : 'standard' })).json;
      publishers.push(publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60, codecArgs: codec === 'aac' ? ['-ac', '2', '-c:a', 'aac', '-b:a', '128k'] : ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k'] }));
      await waitFor(async () => (await fetch(s.hlsUrl)).status === 200, 20_000, 200, 'HLS');
      await p.play(s.hlsUrl, codec === 'aac' ? { lowLatencyMode: true } : {});
      await waitFor(async () => (await p.state()).currentTime > 1, 20_000, 200, 'playing');

      const title = codec === 'aac' ? 'So What' : 'Freddie Freeloader';
      const setAt = Date.now();
      const r = await api(t.http, t.secretKey, 'POST', `/v2/streams/${s.id}/now_playing`, { title, artist: 'Miles Davis', album: 'Kind of Blue' });
      expect(r.status).toBe(200);
      const got = await waitFor(async () => {
        const st = await p.state();
        return st.metadata.map((m) => ({ ...m, frames: id3Text(m.bytes) })).find((m) => m.frames.TIT2 === title) ?? null;
      }, 30_000, 100, 'the title in hls.js');
      expect(got.frames).toMatchObject({ TIT2: title, TPE1: 'Miles Davis', TALB: 'Kind of Blue' });
      console.log(`now playing → hls.js (${codec}, ${codec === 'aac' ? 'LL-HLS' : 'classic'}): ${got.at - setAt} ms`);
      expect((await p.state()).errors.filter((e) => e.fatal)).toEqual([]);

      // The media playlist dates the change.
      const mv = await (await fetch(s.hlsUrl)).text();
      const variant = mv.split('\n').find((l) => l && !l.startsWith('#'))!;
      const media = await (await fetch(new URL(variant, s.hlsUrl))).text();
      const dr = media.split('\n').find((l) => l.startsWith('#EXT-X-DATERANGE:'));
      expect(dr).toBeDefined();
      expect(dr).toContain('CLASS="com.skylark.now-playing"');
      expect(dr).toContain(`X-TITLE="${title}"`);
      expect(dr).toContain('X-ARTIST="Miles Davis"');
      const start = Date.parse(/START-DATE="([^"]+)"/.exec(dr!)![1]!);
      expect(Math.abs(start - setAt)).toBeLessThan(5000);
      expect(media).toContain('#EXT-X-PROGRAM-DATE-TIME:');
      await p.stop();
    }, 90_000);
  }
});
