/**
 * LL-HLS delivery directives (draft-pantos-hls-rfc8216bis §6.2.5; docs/ll-hls.md) with raw HTTP
 * requests against a live AAC stream published by FFmpeg, with 1 s segments and a 10-segment live
 * window (so that a delta update has segments to skip: the skip boundary is 6 target durations):
 * - a blocking reload whose `_HLS_part` is past the last part of its segment is a request for
 *   part 0 of the next segment: held until that part exists, and the answer lists it;
 * - `_HLS_msn` more than two segments past the last segment listed is 400;
 * - the media playlist advertises `CAN-SKIP-UNTIL` (six target durations); `_HLS_skip=YES`
 *   answers the delta update: `EXT-X-SKIP:SKIPPED-SEGMENTS=n` in place of exactly the segments
 *   that end at least the skip boundary before the last one, every other line (date ranges
 *   included) as in the full playlist of the same version; blocking or not; a token stream's
 *   delta carries the token on every URI and stays `private, no-store`;
 * - the directives are read as an nginx edge keys on them: repeated, spelled in another case,
 *   without a value, `_HLS_part` without `_HLS_msn`, a `_HLS_skip` other than YES — all 400.
 * The server runs two HTTP threads whatever the suite's setting, so connections land on both and
 * the worker thread answers some of these from its mirror (the delta updates included).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;
let pub: ChildProcess;
let tokenPub: ChildProcess;
let mediaUrl = '';
/** A `playback: "token"` stream's a128 media playlist URL, with `?token=`. */
let tokenMediaUrl = '';

interface Answer {
  status: number;
  cacheControl: string | null;
  body: string;
}
const get = async (url: string): Promise<Answer> => {
  const r = await fetch(url);
  return { status: r.status, cacheControl: r.headers.get('cache-control'), body: await r.text() };
};
/** The media playlist URL with `query` (raw, as sent) after its own query. */
const withRaw = (query: string) => `${mediaUrl}${mediaUrl.includes('?') ? '&' : '?'}${query}`;

const hintOf = (p: string) => {
  const m = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="(\d+)\.(\d+)\.m4s"/.exec(p)!;
  return { msn: Number(m[1]), part: Number(m[2]) };
};
const partUris = (p: string) => [...p.matchAll(/#EXT-X-PART:DURATION=[\d.]+,URI="([^"]+)"/g)].map((m) => m[1]!);
/** Media sequence numbers of the segments a playlist lists. */
const segmentsOf = (p: string) => p.split('\n').filter((l) => /^\d+\.m4s$/.test(l)).map((l) => Number(l.split('.')[0]));
const lastSegment = (p: string) => segmentsOf(p).at(-1)!;

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_SEGMENT_DURATION_MS: '1000', SKYLARK_LIVE_WINDOW_SEGMENTS: '10', SKYLARK_HTTP_THREADS: '2' });
  const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Directives', reconnectWindow: 1, latencyMode: 'low' })).json;
  pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 90 });
  const gated = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Gated', playback: 'token', reconnectWindow: 1, latencyMode: 'low' })).json;
  tokenPub = publish(`${gated.rtmpUrl}/${gated.streamKey}`, { seconds: 90 });
  const token = (await api(t.http, t.secretKey, 'POST', `/v2/streams/${gated.id}/listener_tokens`)).json.token as string;
  tokenMediaUrl = new URL(`a128/index.m3u8?token=${token}`, gated.hlsUrl).toString();
  const master = await waitFor(async () => {
    const r = await fetch(s.hlsUrl);
    return r.status === 200 ? r.text() : null;
  }, 20_000, 200, 'multivariant playlist');
  mediaUrl = new URL(master.split('\n').find((l) => l.startsWith('a128/'))!, s.hlsUrl).toString();
  // A now-playing change, so the playlists carry an EXT-X-DATERANGE.
  await waitFor(async () => (await get(mediaUrl)).status === 200, 20_000, 200, 'the media playlist');
  expect((await api(t.http, t.secretKey, 'POST', `/v2/streams/${s.id}/now_playing`, { title: 'Delta' })).status).toBe(200);
  // Enough segments that a delta update skips some: more than the skip boundary (6 s) in the window.
  await waitFor(async () => segmentsOf((await get(mediaUrl)).body).length >= 9, 30_000, 250, 'nine segments');
  await waitFor(async () => segmentsOf((await get(tokenMediaUrl)).body.replace(/\?token=\S+/g, '')).length >= 9, 30_000, 250, 'nine segments (token stream)');
}, 90_000);

afterAll(async () => {
  for (const p of [pub, tokenPub]) {
    p?.kill('SIGKILL');
    if (p) await exited(p);
  }
  await t?.close();
});

describe('blocking reload', () => {
  it('treats a part index past the last part of its segment as part 0 of the next segment', async () => {
    for (let i = 0; i < 3; i++) {
      const { msn } = hintOf((await get(mediaUrl)).body); // the segment in progress
      const r = await get(withRaw(`_HLS_msn=${msn}&_HLS_part=40`));
      expect(r.status).toBe(200);
      expect(r.cacheControl).toBe('public, max-age=1'); // answered because it holds what was asked for
      expect(segmentsOf(r.body)).toContain(msn);
      expect(partUris(r.body)).toContain(`${msn + 1}.0.m4s`);
      // Of a finished segment: part 0 of the next exists already, answered at once.
      const last = lastSegment(r.body);
      const now = await get(withRaw(`_HLS_msn=${last}&_HLS_part=40`));
      expect(now.status).toBe(200);
      expect(now.cacheControl).toBe('public, max-age=1');
      expect(partUris(now.body)).toContain(`${last + 1}.0.m4s`);
    }
  });

  it('refuses _HLS_msn more than two segments past the last segment listed with 400', async () => {
    let refused = 0;
    for (let i = 0; i < 5 && refused < 2; i++) {
      const last = lastSegment((await get(mediaUrl)).body);
      const r = await get(withRaw(`_HLS_msn=${last + 3}`));
      // A segment may have closed between the two requests: then the same msn is only two ahead.
      if (r.status !== 400) {
        expect(lastSegment((await get(mediaUrl)).body)).toBeGreaterThan(last);
        continue;
      }
      expect(JSON.parse(r.body).error.code).toBe('parameter_invalid');
      refused++;
    }
    expect(refused).toBe(2);
    // Two past the last segment is held until it exists.
    const last = lastSegment((await get(mediaUrl)).body);
    const held = await get(withRaw(`_HLS_msn=${last + 2}`));
    expect(held.status).toBe(200);
    expect(held.body).toMatch(/^#EXTM3U\n/);
  });
});

describe('delta updates', () => {
  it('advertises CAN-SKIP-UNTIL of six target durations', async () => {
    const p = (await get(mediaUrl)).body;
    const target = Number(/#EXT-X-TARGETDURATION:(\d+)/.exec(p)![1]);
    const until = Number(/#EXT-X-SERVER-CONTROL:[^\n]*CAN-SKIP-UNTIL=([\d.]+)/.exec(p)![1]);
    expect(until).toBeGreaterThanOrEqual(6 * target);
    expect(p).not.toContain('CAN-SKIP-DATERANGES');
  });

  it('answers _HLS_skip=YES with the playlist whose oldest segments are replaced by EXT-X-SKIP', async () => {
    let compared = 0;
    for (let i = 0; i < 6 && compared < 3; i++) {
      const h = hintOf((await get(mediaUrl)).body);
      const q = `_HLS_msn=${h.msn}&_HLS_part=${h.part}`;
      const [full, delta] = await Promise.all([get(withRaw(q)), get(withRaw(`${q}&_HLS_skip=YES`))]);
      expect(full.status).toBe(200);
      expect(delta.status).toBe(200);
      expect(delta.cacheControl).toBe('public, max-age=1');
      // The same version (a part may have come between the two answers: then ask again).
      if (hintOf(full.body).part !== hintOf(delta.body).part || hintOf(full.body).msn !== hintOf(delta.body).msn) continue;
      const skipped = Number(/#EXT-X-SKIP:SKIPPED-SEGMENTS=(\d+)\n/.exec(delta.body)?.[1]);
      expect(skipped).toBeGreaterThan(0);
      expect(full.body).not.toContain('#EXT-X-SKIP');
      const f = full.body.split('\n');
      const d = delta.body.split('\n');
      // Before the skip: the same lines as the full playlist before its first segment (date ranges included).
      const firstMap = f.findIndex((l) => l.startsWith('#EXT-X-MAP:'));
      const skipAt = d.findIndex((l) => l.startsWith('#EXT-X-SKIP:'));
      expect(d.slice(0, skipAt)).toEqual(f.slice(0, firstMap));
      expect(d.slice(0, skipAt).some((l) => l.startsWith('#EXT-X-DATERANGE:') && l.includes('X-TITLE="Delta"'))).toBe(true);
      // After it: the init section again, then the full playlist from segment `skipped` on.
      const dates = f.flatMap((l, j) => (l.startsWith('#EXT-X-PROGRAM-DATE-TIME:') ? [j] : []));
      expect(d[skipAt + 1]).toBe(f[firstMap]);
      expect(d.slice(skipAt + 2)).toEqual(f.slice(dates[skipped]));
      // Exactly the segments that end at least the skip boundary (6 s) before the last one's end.
      const durations = [...full.body.matchAll(/#EXTINF:([\d.]+),/g)].map((m) => Number(m[1]));
      const total = durations.reduce((a, b) => a + b, 0);
      let end = 0;
      const far = durations.map((x) => total - (end += x) >= 6 - 1e-6);
      expect(far.filter(Boolean).length).toBe(skipped);
      expect(far.slice(0, skipped).every(Boolean)).toBe(true);
      compared++;
    }
    expect(compared).toBe(3);
  });

  it('answers a non-blocking _HLS_skip=YES with the delta update, not cached', async () => {
    const r = await get(withRaw('_HLS_skip=YES'));
    expect(r.status).toBe(200);
    expect(r.cacheControl).toBe('no-cache');
    expect(r.body).toMatch(/\n#EXT-X-SKIP:SKIPPED-SEGMENTS=[1-9]\d*\n/);
    const ms = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(r.body)![1]);
    const skipped = Number(/SKIPPED-SEGMENTS=(\d+)/.exec(r.body)![1]);
    expect(segmentsOf(r.body)[0]).toBe(ms + skipped);
  });
});

describe('delta updates of a token stream', () => {
  it('carry the token on every URI and stay private', async () => {
    const token = new URL(tokenMediaUrl).searchParams.get('token')!;
    const r = await get(`${tokenMediaUrl}&_HLS_skip=YES`);
    expect(r.status).toBe(200);
    expect(r.cacheControl).toBe('private, no-store');
    expect(r.body).toMatch(/\n#EXT-X-SKIP:SKIPPED-SEGMENTS=[1-9]\d*\n/);
    const uris = [...r.body.split('\n').filter((l) => l && !l.startsWith('#')), ...[...r.body.matchAll(/URI="([^"]+)"/g)].map((m) => m[1]!)];
    expect(uris.length).toBeGreaterThan(3);
    for (const u of uris) expect(u.endsWith(`?token=${token}`), u).toBe(true);
  });
});

describe('directives read as an edge keys on them', () => {
  it('refuses a repeated, miscased, valueless or unknown-valued directive with 400', async () => {
    const { msn } = hintOf((await get(mediaUrl)).body);
    const last = msn - 1;
    const queries = [
      `_hls_msn=${last}&_hls_part=1&_HLS_msn=${last}&_HLS_part=0`,
      `_HLS_msn=${last}&_HLS_msn=${last}`,
      `_HLS_msn=${last}&_HLS_part=0&_HLS_part=0`,
      `_HLS_msn=${last}&_Hls_Part=0`,
      `_HLS_MSN=${last}`,
      `_hls_msn=${last}`,
      `_HLS_msn`,
      `_HLS_msn=${last}&_HLS_part`,
      `_HLS_part=0`,
      `_hls_skip=YES`,
      `_HLS_skip=YES&_HLS_skip=YES`,
      `_HLS_skip=yes`,
      `_HLS_skip=v2`,
      `_HLS_msn=${last}&_HLS_part=0&_HLS_SKIP=YES`,
    ];
    for (const q of queries) {
      const r = await get(withRaw(q));
      expect(r.status, q).toBe(400);
      expect(JSON.parse(r.body).error.code, q).toBe('parameter_invalid');
    }
    // The same directives, each once and spelled right, are answered.
    for (const q of [`_HLS_msn=${last}&_HLS_part=0`, `_HLS_msn=${last}&_HLS_part=0&_HLS_skip=YES`, `_HLS_skip=YES`, `_HLS_foo=1&x_HLS_msn=2`]) {
      expect((await get(withRaw(q))).status, q).toBe(200);
    }
  });
});

describe('on worker threads', () => {
  it('served some of these from the worker thread mirror', async () => {
    // Concurrent requests open connections of their own, which the kernel spreads over the threads.
    const answers = await Promise.all(Array.from({ length: 8 }, () => get(withRaw('_HLS_skip=YES'))));
    for (const a of answers) expect(a.body).toMatch(/\n#EXT-X-SKIP:SKIPPED-SEGMENTS=[1-9]/);
    expect((await t.server.threadCounts()).get(1)!.hls).toBeGreaterThan(0);
  });
});
