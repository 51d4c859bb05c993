/**
 * The cap on title changes (docs/listeners.md "Title changes") against a real server with a real
 * FFmpeg publisher: 300 `now_playing` calls in a burst each answer 200 with the title asked, but
 * make only a handful of tracks, `stream.now_playing` events and HLS timed-metadata titles, and
 * every output ends on the last title (the stream's `nowPlaying`, the newest track, the newest
 * event, the media playlist's newest EXT-X-DATERANGE).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { publish } from '../../helpers/publish.js';

let t: TestServer;
const children: ChildProcess[] = [];
const INTERVAL_MS = 2000; // the default of SKYLARK_NOW_PLAYING_MIN_INTERVAL_MS

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await t?.close();
});

const v2 = (method: string, p: string, body?: unknown) => api(t.http, t.secretKey, method, `/v2${p}`, body);

describe('title changes per stream', () => {
  it('300 changes in a burst coalesce into a handful; everything ends on the last title', async () => {
    const s = (await v2('POST', '/streams', { title: 'Burst', reconnectWindow: 0 })).json;
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60 });
    children.push(pub);
    await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.status === 'live', 20_000, 100, 'live');

    const started = Date.now();
    for (let i = 1; i <= 300; i++) {
      const r = await v2('POST', `/streams/${s.id}/now_playing`, { title: `Song ${i}`, artist: 'Burst Band' });
      expect(r.status, r.text).toBe(200);
      // The answer shows the title asked, even while the cap holds it back.
      expect(r.json.nowPlaying).toMatchObject({ title: `Song ${i}`, artist: 'Burst Band' });
    }
    const burstMs = Date.now() - started;

    // The last title reaches the stream, its newest track and its newest event once the interval passed.
    const stream = await waitFor(async () => {
      const x = (await v2('GET', `/streams/${s.id}`)).json;
      return x.nowPlaying?.title === 'Song 300' ? x : null;
    }, 20_000, 100, 'the last title applied');
    const tracks = (await v2('GET', `/streams/${s.id}/tracks?limit=100`)).json.data as Array<{ title: string; startedAt: string }>;
    expect(tracks[0]!.title).toBe('Song 300');
    expect(tracks[0]!.startedAt).toBe(stream.nowPlaying.startedAt);
    const events = await waitFor(async () => {
      const list = (await v2('GET', '/events?type=stream.now_playing&limit=100')).json.data.filter((e: any) => e.data.object.id === s.id);
      return list.length > 0 && list[0].data.object.nowPlaying?.title === 'Song 300' ? list : null;
    }, 10_000, 100, 'the last event');

    // At most one change per interval while the burst lasted, plus the first and the last.
    const bound = Math.ceil(burstMs / INTERVAL_MS) + 2;
    expect(tracks.length).toBeLessThanOrEqual(bound);
    expect(events.length).toBeLessThanOrEqual(bound);
    expect(tracks.length).toBeLessThan(20);
    expect(tracks.at(-1)!.title).toBe('Song 1'); // the first change applied at once

    // The HLS layers' timed metadata is capped alike: a handful of EXT-X-DATERANGE titles, the newest last.
    const multivariant = await (await fetch(`${t.http}/hls/${s.id}/index.m3u8`)).text();
    const variant = multivariant.split('\n').find((l) => l && !l.startsWith('#'))!;
    const media = new URL(variant, `${t.http}/hls/${s.id}/index.m3u8`).href;
    const titles = await waitFor(async () => {
      const pl = await (await fetch(media)).text();
      const xs = [...pl.matchAll(/X-TITLE="([^"]*)"/g)].map((m) => m[1]!);
      return xs.at(-1) === 'Song 300' ? xs : null;
    }, 15_000, 200, 'the last title in the media playlist');
    expect(new Set(titles).size).toBeLessThanOrEqual(bound);
    pub.kill('SIGKILL');
  }, 90_000);
});
