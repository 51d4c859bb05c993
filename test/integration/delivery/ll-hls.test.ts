/**
 * Low-Latency HLS delivery (draft-pantos-hls-rfc8216bis §6.2.5.2, §6.2.6) against a live
 * AAC stream published by FFmpeg (ladder a128 passthrough + a64 encoded, both fMP4 with parts):
 * - a blocking playlist reload for the preload-hinted part is answered when that part appears, and
 *   the answer lists it (and nothing newer: its preload hint is the part right after);
 * - a request for the hinted part's URI waits for it, then answers 200 with the part's bytes;
 * - `_HLS_msn` more than two segments ahead, or not a number, is 400;
 * - a classic player (FFmpeg) reads the same LL-HLS playlist and decodes it;
 * - a finished segment's parts, concatenated, are the segment's bytes over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

let t: TestServer;
let pub: ChildProcess;
let stream: any;
/** Media playlist URLs by layer (with the session query the multivariant playlist handed out). */
const layers = new Map<string, string>();

const text = async (url: string) => {
  const r = await fetch(url);
  return { status: r.status, headers: r.headers, body: await r.text() };
};
const bytes = async (url: string) => {
  const r = await fetch(url);
  return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) };
};
/** `url` with `params` added to its query. */
const withQuery = (url: string, params: Record<string, string | number>) => {
  const u = new URL(url);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, String(v));
  return u.toString();
};

interface PartRef {
  msn: number;
  part: number;
  uri: string;
}
const partRef = (uri: string): PartRef => {
  const m = /^(\d+)\.(\d+)\.m4s/.exec(uri)!;
  return { msn: Number(m[1]), part: Number(m[2]), uri };
};
const hintOf = (playlist: string): PartRef => partRef(/#EXT-X-PRELOAD-HINT:TYPE=PART,URI="([^"]+)"/.exec(playlist)![1]!);
const partsOf = (playlist: string): PartRef[] => [...playlist.matchAll(/#EXT-X-PART:DURATION=[\d.]+,URI="([^"]+)"/g)].map((m) => partRef(m[1]!));

beforeAll(async () => {
  t = await startInProcess();
  stream = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'LL-HLS', reconnectWindow: 1, latencyMode: 'low' })).json;
  pub = publish(`${stream.rtmpUrl}/${stream.streamKey}`, { seconds: 40 });
  const master = await waitFor(async () => {
    const r = await text(stream.hlsUrl);
    return r.status === 200 && r.body.includes('a64/') ? r.body : null;
  }, 20_000, 200, 'multivariant playlist');
  for (const uri of master.split('\n').filter((l) => l && !l.startsWith('#'))) layers.set(uri.split('/')[0]!, new URL(uri, stream.hlsUrl).toString());
  expect([...layers.keys()]).toEqual(['a128', 'a64']);
  // Two finished segments in every layer.
  for (const url of layers.values()) await waitFor(async () => ((await text(url)).body.match(/#EXTINF/g) ?? []).length >= 2, 20_000, 200, 'two segments');
}, 60_000);

afterAll(async () => {
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
});

describe.each(['a128', 'a64'])('LL-HLS on %s', (name) => {
  it('answers a blocking reload for the hinted part once it exists, listing it', async () => {
    const url = layers.get(name)!;
    const before = await text(url);
    expect(before.status).toBe(200);
    expect(before.headers.get('cache-control')).toBe('no-cache');
    expect(before.body).toMatch(/#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=[\d.]+/);
    for (let i = 0; i < 3; i++) {
      const hint = hintOf((await text(url)).body);
      const r = await text(withQuery(url, { _HLS_msn: hint.msn, _HLS_part: hint.part }));
      expect(r.status).toBe(200);
      const parts = partsOf(r.body);
      // The requested part is listed, and nothing after it: the answer came when it appeared.
      expect(parts[parts.length - 1]!.uri).toBe(hint.uri);
      const next = hintOf(r.body);
      if (r.body.includes(`\n${hint.msn}.m4s`)) expect(next).toMatchObject({ msn: hint.msn + 1, part: 0 }); // it closed its segment
      else expect(next).toMatchObject({ msn: hint.msn, part: hint.part + 1 });
    }
  });

  it('answers a blocking reload for the next segment once it exists', async () => {
    const url = layers.get(name)!;
    const p = (await text(url)).body;
    const msn = hintOf(p).msn; // the segment in progress
    const r = await text(withQuery(url, { _HLS_msn: msn }));
    expect(r.status).toBe(200);
    // docs/behaviour.md §12: the segment's URI is the same for every listener (no session id on it).
    expect(r.body.split('\n')).toContain(`${msn}.m4s`);
  });

  it('holds a request for the preload-hinted part, then answers 200 with its bytes', async () => {
    const url = layers.get(name)!;
    for (let i = 0; i < 3; i++) {
      // Fresh from a blocking reload: the hinted part does not exist yet.
      const h = hintOf((await text(url)).body);
      const p = await text(withQuery(url, { _HLS_msn: h.msn, _HLS_part: h.part }));
      const hint = hintOf(p.body);
      const part = await bytes(new URL(hint.uri, url).toString());
      expect(part.status).toBe(200);
      expect(part.headers.get('content-type')).toBe('video/iso.segment');
      expect(part.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(part.body.subarray(4, 8).toString('latin1')).toBe('moof');
      // A part further ahead is not waited for.
      expect((await bytes(new URL(`${hint.msn}.${hint.part + 5}.m4s`, url).toString())).status).toBe(404);
      // The same bytes as the part the playlist then lists.
      const listed = await text(url);
      expect(partsOf(listed.body).some((x) => x.uri === hint.uri)).toBe(true);
      expect((await bytes(new URL(hint.uri, url).toString())).body.equals(part.body)).toBe(true);
    }
  });

  it('refuses _HLS_msn more than two segments ahead, or malformed, with 400', async () => {
    const url = layers.get(name)!;
    const msn = hintOf((await text(url)).body).msn;
    const queries: Array<Record<string, string | number>> = [{ _HLS_msn: msn + 3 }, { _HLS_msn: msn + 1000 }, { _HLS_msn: 'x' }, { _HLS_msn: msn, _HLS_part: '-1' }];
    for (const q of queries) {
      const r = await text(withQuery(url, q));
      expect(r.status, JSON.stringify(q)).toBe(400);
      expect(JSON.parse(r.body).error.code).toBe('parameter_invalid');
    }
  });

  it('serves each finished segment as its parts concatenated', async () => {
    const url = layers.get(name)!;
    const p = (await text(url)).body;
    const first = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(p)![1]);
    const segUris = p.split('\n').filter((l) => /^\d+\.m4s/.test(l));
    const parts = partsOf(p);
    let checked = 0;
    for (const segUri of segUris) {
      const msn = Number(/^(\d+)/.exec(segUri)![1]);
      expect(msn).toBeGreaterThanOrEqual(first);
      const mine = parts.filter((x) => x.msn === msn);
      if (mine.length === 0 || mine[0]!.part !== 0) continue; // parts no longer listed
      expect(mine.map((x) => x.part)).toEqual(mine.map((_, i) => i));
      const [seg, ...bodies] = await Promise.all([bytes(new URL(segUri, url).toString()), ...mine.map((x) => bytes(new URL(x.uri, url).toString()))]);
      expect(seg.status).toBe(200);
      expect(Buffer.concat(bodies.map((b) => b.body)).equals(seg.body)).toBe(true);
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(1);
  });

  it('is read by a classic player (FFmpeg) as an ordinary live playlist', async () => {
    const url = layers.get(name)!;
    const ff = spawn(ffmpegPath(), ['-hide_banner', '-v', 'error', '-i', url, '-t', '3', '-vn', '-f', 's16le', '-ac', '1', '-ar', '48000', 'pipe:1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let pcm = 0;
    let err = '';
    ff.stdout!.on('data', (d: Buffer) => (pcm += d.length));
    ff.stderr!.on('data', (d) => (err += d));
    const timer = setTimeout(() => ff.kill('SIGKILL'), 20_000);
    const code = await exited(ff);
    clearTimeout(timer);
    expect(code, err).toBe(0);
    expect(err.trim()).toBe('');
    expect(pcm / 2 / 48_000).toBeGreaterThanOrEqual(2.9);
  });
});
