/**
 * Now playing everywhere (docs/behaviour.md §11) against a real server with real clients:
 * - `POST /v2/streams/{id}/now_playing`: 409 `stream_not_live` before live, 400s for bad bodies,
 *   403 for a publishable key, 200 with the stream's `nowPlaying` while live;
 *   `stream.now_playing` delivered to a loopback webhook receiver and listed by
 *   `/events?type=stream.now_playing`.
 * - RTMP: FFmpeg publishing with `-metadata title=… -metadata artist=…` (its FLV muxer's
 *   `onMetaData`) sets `nowPlaying`.
 * - ICY: mpv reads the title set by the API from `/listen/…`, then a changed one in the same session.
 * - The play log: two changes with `/listen` listeners behind a trusted proxy (countries from
 *   X-Forwarded-For) → two tracks, `listenersAtStart`, `peakListeners`, `countries` right, the first
 *   ended when the second started; list paging.
 * - Chapters: a recording stream with two changes ends → its draft episode has `chaptersUrl`
 *   (404 until published); published, the JSON chapters have the tracks' `startTime`s, and
 *   podcast-partytime reads `podcast:chapters` from the feed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { parseFeed } from 'podcast-partytime';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;
const children: ChildProcess[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_WEBHOOKS_ALLOW_PRIVATE: '1', SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32', SKYLARK_ABR_LADDER: '0' });
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await t?.close();
});

const v2 = (method: string, p: string, body?: unknown, key: string = t.secretKey) => api(t.http, key, method, `/v2${p}`, body);

interface Stream {
  id: string;
  rtmpUrl: string;
  streamKey: string;
  listenUrl: string;
  startedAt: string | null;
}

async function createStream(extra: Record<string, unknown> = {}): Promise<Stream> {
  const r = await v2('POST', '/streams', { title: 'Late show', reconnectWindow: 0, ...extra });
  expect(r.status, r.text).toBe(201);
  return r.json as Stream;
}

/** Publishes a sine tone with FFmpeg (AAC unless `codecArgs`) and waits until the stream is live. */
async function goLive(s: Stream, seconds: number, codecArgs?: string[]): Promise<ChildProcess> {
  const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds, ...(codecArgs ? { codecArgs } : {}) });
  children.push(p);
  await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.status === 'live', 20_000, 100, 'live');
  return p;
}

function expectError(r: Awaited<ReturnType<typeof api>>, status: number, code: string, param?: string) {
  expect(r.status, r.text).toBe(status);
  expect(r.json.error.code, r.text).toBe(code);
  if (param !== undefined) expect(r.json.error.param).toBe(param);
}

/** A loopback webhook receiver: every POST body, parsed. */
async function receiver() {
  const got: Array<{ type: string; data: { object: any } }> = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      got.push(JSON.parse(body));
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    got,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('POST /v2/streams/{id}/now_playing', () => {
  it('answers 409 before live, 400 for bad bodies, 403 for a publishable key, 404 for another stream', async () => {
    const s = await createStream();
    expectError(await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Too early' }), 409, 'stream_not_live');
    expectError(await v2('POST', `/streams/${s.id}/now_playing`, {}), 400, 'param_required', 'title');
    expectError(await v2('POST', `/streams/${s.id}/now_playing`, { title: '  ' }), 400, 'parameter_invalid', 'title');
    expectError(await v2('POST', `/streams/${s.id}/now_playing`, { title: 'x'.repeat(257) }), 400, 'parameter_invalid', 'title');
    expectError(await v2('POST', `/streams/${s.id}/now_playing`, { title: 'x', artist: 'y'.repeat(257) }), 400, 'parameter_invalid', 'artist');
    expectError(await v2('POST', `/streams/${s.id}/now_playing`, { title: 'x', url: 'ftp://example.com/a' }), 400, 'parameter_invalid', 'url');
    expectError(await v2('POST', `/streams/${s.id}/now_playing`, { title: 'x', genre: 'jazz' }), 400, 'parameter_unknown', 'genre');
    expectError(await v2('POST', `/streams/${s.id}/now_playing`, { title: 'x' }, t.publishableKey), 403, 'insufficient_scope');
    expectError(await v2('POST', '/streams/stm_nope/now_playing', { title: 'x' }), 404, 'resource_missing');
    expect((await v2('GET', `/streams/${s.id}`)).json.nowPlaying).toBeNull();
  });

  it('sets nowPlaying while live; stream.now_playing reaches a webhook and /events?type=', async () => {
    const rx = await receiver();
    try {
      const hook = await v2('POST', '/webhooks', { url: rx.url, events: ['stream.now_playing'] });
      expect(hook.status, hook.text).toBe(201);
      const s = await createStream();
      const pub = await goLive(s, 30);
      const before = Date.now();
      const r = await v2('POST', `/streams/${s.id}/now_playing`, {
        title: 'So What',
        artist: 'Miles Davis',
        album: 'Kind of Blue',
        url: 'https://example.com/so-what',
        artworkUrl: 'https://example.com/kind-of-blue.jpg',
      });
      expect(r.status, r.text).toBe(200);
      expect(r.json).toMatchObject({ id: s.id, object: 'stream', status: 'live' });
      expect(r.json.streamKey).toMatch(/^sk_/); // a secret key's answer, like GET
      expect(r.json.nowPlaying).toEqual({
        title: 'So What',
        artist: 'Miles Davis',
        album: 'Kind of Blue',
        url: 'https://example.com/so-what',
        artworkUrl: 'https://example.com/kind-of-blue.jpg',
        startedAt: expect.any(String),
      });
      expect(Date.parse(r.json.nowPlaying.startedAt)).toBeGreaterThanOrEqual(before - 1000);
      expect((await v2('GET', `/streams/${s.id}`)).json.nowPlaying).toEqual(r.json.nowPlaying);

      // Only the title: the others become null.
      const second = await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Freddie Freeloader' });
      expect(second.json.nowPlaying).toMatchObject({ title: 'Freddie Freeloader', artist: null, album: null, url: null, artworkUrl: null });

      const delivered = await waitFor(() => (rx.got.filter((e) => e.data.object.id === s.id).length >= 2 ? rx.got : null), 15_000, 100, 'two webhook deliveries');
      const mine = delivered.filter((e) => e.data.object.id === s.id);
      expect(mine.map((e) => e.type)).toEqual(['stream.now_playing', 'stream.now_playing']);
      expect(mine.map((e) => e.data.object.nowPlaying.title)).toEqual(['So What', 'Freddie Freeloader']);
      expect(mine[0]!.data.object).toMatchObject({ object: 'stream', status: 'live' });
      expect(mine[0]!.data.object.streamKey).toBeUndefined();

      const listed = await v2('GET', '/events?type=stream.now_playing&limit=100');
      expect(listed.status, listed.text).toBe(200);
      const ofStream = listed.json.data.filter((e: any) => e.data.object.id === s.id);
      expect(ofStream.map((e: any) => e.data.object.nowPlaying.title)).toEqual(['Freddie Freeloader', 'So What']);
      expect(listed.json.data.every((e: any) => e.type === 'stream.now_playing')).toBe(true);
      expectError(await v2('GET', '/events?type=stream.now_playing_typo'), 400, 'parameter_invalid', 'type');

      // The same values again are no change: no event, startedAt kept.
      const again = await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Freddie Freeloader' });
      expect(again.json.nowPlaying).toEqual(second.json.nowPlaying);
      const tracks = await v2('GET', `/streams/${s.id}/tracks`);
      expect(tracks.json.data.map((x: any) => x.title)).toEqual(['Freddie Freeloader', 'So What']);
      pub.kill('SIGKILL');
      await exited(pub);
      await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.status === 'idle', 10_000, 100, 'ended');
      expectError(await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Too late' }), 409, 'stream_not_live');
    } finally {
      await rx.close();
    }
  }, 60_000);
});

describe('RTMP onMetaData', () => {
  it('FFmpeg -metadata title/artist sets nowPlaying and starts a track', async () => {
    const s = await createStream();
    const pub = await goLive(s, 20, ['-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-metadata', 'title=Blue in Green', '-metadata', 'artist=Miles Davis', '-metadata', 'comment=ignored']);
    const np = await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.nowPlaying, 10_000, 100, 'nowPlaying');
    expect(np).toMatchObject({ title: 'Blue in Green', artist: 'Miles Davis', album: null, url: null, artworkUrl: null });
    const tracks = await v2('GET', `/streams/${s.id}/tracks`);
    expect(tracks.json.data).toHaveLength(1);
    expect(tracks.json.data[0]).toMatchObject({ object: 'track', title: 'Blue in Green', artist: 'Miles Davis', endedAt: null });
    pub.kill('SIGKILL');
  }, 60_000);
});

describe('ICY StreamTitle', () => {
  it('mpv reads the title set by the API, then the changed one in the same session', async () => {
    const s = await createStream({ codec: 'mp3' });
    const pub = await goLive(s, 60, ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k']);
    await waitFor(async () => (await fetch(s.listenUrl, { method: 'HEAD' })).status === 200, 20_000, 200, 'listening');
    expect((await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Naima', artist: 'John Coltrane' })).status).toBe(200);
    const mpv = spawn('mpv', ['--no-config', '--no-video', '--ao=null', '--length=40', '--msg-level=all=v', s.listenUrl], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(mpv);
    let out = '';
    mpv.stdout!.on('data', (d) => (out += d));
    mpv.stderr!.on('data', (d) => (out += d));
    await waitFor(() => /icy-title: John Coltrane - Naima/.test(out), 20_000, 100, `first icy-title (${out.slice(-400)})`);
    expect((await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Giant Steps', artist: 'John Coltrane' })).status).toBe(200);
    await waitFor(() => /icy-title: John Coltrane - Giant Steps/.test(out), 20_000, 100, `changed icy-title (${out.slice(-400)})`);
    mpv.kill('SIGKILL');
    pub.kill('SIGKILL');
  }, 90_000);
});

/** A `/listen` connection from `ip` (behind the trusted proxy 127.0.0.1), reading until closed. */
function listener(url: string, ip: string): Promise<{ close(): void }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { 'X-Forwarded-For': ip, 'User-Agent': `Radio/1.0 (${ip})` }, agent: false }, (res) => {
      expect(res.statusCode).toBe(200);
      res.on('data', () => {});
      res.on('error', () => {});
      resolve({ close: () => req.destroy() });
    });
    req.on('error', reject);
  });
}

describe('the play log', () => {
  it('two changes with listeners: listenersAtStart, peakListeners and countries per track, the first ended by the second', async () => {
    const s = await createStream();
    const pub = await goLive(s, 60);
    await waitFor(async () => (await fetch(s.listenUrl, { method: 'HEAD' })).status === 200, 20_000, 200, 'listening');
    const count = async () => (await v2('GET', `/streams/${s.id}`)).json.listenerCount as number;
    const tracks = async () => (await v2('GET', `/streams/${s.id}/tracks`)).json.data as any[];

    const us1 = await listener(s.listenUrl, '8.8.8.8');
    await waitFor(async () => (await count()) === 1, 10_000, 50, 'one listener');
    const first = await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Take Five', artist: 'The Dave Brubeck Quartet' });
    expect(first.status, first.text).toBe(200);
    let [t1] = await tracks();
    expect(t1).toMatchObject({ object: 'track', title: 'Take Five', artist: 'The Dave Brubeck Quartet', album: null, endedAt: null, listenersAtStart: 1, peakListeners: 1, countries: [{ country: 'US', listeners: 1 }] });
    expect(t1.id).toMatch(/^trk_[A-Za-z0-9]+$/);
    expect(t1.startedAt).toBe(first.json.nowPlaying.startedAt);

    // A German listener joins and leaves; another US one joins: peak 2, three distinct listeners.
    const de = await listener(s.listenUrl, '2a00:1450:4001:80b::200e');
    await waitFor(async () => (await tracks())[0].peakListeners === 2, 10_000, 50, 'peak 2');
    de.close();
    await waitFor(async () => (await count()) === 1, 10_000, 50, 'the German listener left');
    const us2 = await listener(s.listenUrl, '8.8.4.4');
    t1 = await waitFor(async () => {
      const [x] = await tracks();
      return x.countries.length === 2 && x.countries[0].listeners === 2 ? x : null;
    }, 10_000, 50, 'two US listeners heard');
    expect(t1).toMatchObject({ listenersAtStart: 1, peakListeners: 2, endedAt: null, countries: [{ country: 'US', listeners: 2 }, { country: 'DE', listeners: 1 }] });

    const second = await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Blue Rondo à la Turk', artist: 'The Dave Brubeck Quartet', album: 'Time Out' });
    expect(second.status, second.text).toBe(200);
    // Title changes are capped per stream (docs/listeners.md "Title changes"): the second may wait for the interval.
    const [t2, t1Ended] = await waitFor(async () => {
      const x = await tracks();
      return x.length === 2 ? x : null;
    }, 10_000, 50, 'the second track');
    expect(t2).toMatchObject({ title: 'Blue Rondo à la Turk', album: 'Time Out', endedAt: null, listenersAtStart: 2, peakListeners: 2, countries: [{ country: 'US', listeners: 2 }] });
    expect(t2.startedAt).toBe(second.json.nowPlaying.startedAt);
    expect(t1Ended).toMatchObject({ id: t1.id, title: 'Take Five', endedAt: t2.startedAt, listenersAtStart: 1, peakListeners: 2, countries: [{ country: 'US', listeners: 2 }, { country: 'DE', listeners: 1 }] });

    // Paging like every list.
    const p1 = await v2('GET', `/streams/${s.id}/tracks?limit=1`);
    expect(p1.json).toMatchObject({ object: 'list', url: `/v2/streams/${s.id}/tracks`, hasMore: true, nextCursor: t2.id });
    expect(p1.json.data.map((x: any) => x.id)).toEqual([t2.id]);
    const p2 = await v2('GET', `/streams/${s.id}/tracks?limit=1&after=${t2.id}`);
    expect(p2.json).toMatchObject({ hasMore: false, nextCursor: null });
    expect(p2.json.data.map((x: any) => x.id)).toEqual([t1.id]);
    const back = await v2('GET', `/streams/${s.id}/tracks?before=${t1.id}`);
    expect(back.json.data.map((x: any) => x.id)).toEqual([t2.id]);
    expectError(await v2('GET', `/streams/${s.id}/tracks?after=trk_nope`), 400, 'parameter_invalid', 'after');
    expectError(await v2('GET', '/streams/stm_nope/tracks'), 404, 'resource_missing');
    expect((await v2('GET', `/streams/${s.id}/tracks`, undefined, t.publishableKey)).status).toBe(200); // streams:read

    // The stream's end ends the running track.
    us1.close();
    us2.close();
    pub.kill('SIGKILL');
    await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.status === 'idle', 10_000, 100, 'ended');
    const ended = await v2('GET', `/streams/${s.id}`);
    const [last] = await tracks();
    expect(last.endedAt).toBe(ended.json.endedAt);
  }, 90_000);
});

describe('chapters of a recorded stream', () => {
  it('the draft episode gets chaptersUrl; published, its JSON chapters and the feed’s podcast:chapters', async () => {
    const pod = await v2('POST', '/podcasts', { title: 'Jazz hour', ownerEmail: 'dj@example.com' });
    expect(pod.status, pod.text).toBe(201);
    const s = await createStream({ recording: { podcastId: pod.json.id } });
    const pub = await goLive(s, 60);
    const live = (await v2('GET', `/streams/${s.id}`)).json;
    // Fixed waits on purpose: the chapters' start times are these seconds of the recording.
    await sleep(1500);
    const a = (await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Autumn Leaves', artist: 'Cannonball Adderley', url: 'https://example.com/autumn', artworkUrl: 'https://example.com/somethin-else.jpg' })).json;
    await sleep(2000);
    const b = (await v2('POST', `/streams/${s.id}/now_playing`, { title: 'Love for Sale' })).json;
    await sleep(1500);
    pub.kill('SIGKILL');
    await waitFor(async () => (await v2('GET', `/streams/${s.id}`)).json.status === 'idle', 10_000, 100, 'ended');

    // The draft exists first; its audio is attached once probed.
    const ep = await waitFor(async () => (await v2('GET', `/podcasts/${pod.json.id}/episodes`)).json.data.find((e: any) => e.sourceStreamId === s.id && e.audio !== null), 30_000, 200, 'the recorded episode');
    expect(ep.status).toBe('draft');
    expect(ep.chaptersUrl).toBe(`${t.http}/media/${pod.json.id}/${ep.id}.chapters.json`);
    expect((await fetch(ep.chaptersUrl)).status).toBe(404); // a draft's chapters are not public

    const published = await v2('POST', `/podcasts/${pod.json.id}/publish`, { episodeId: ep.id });
    expect(published.status, published.text).toBe(200);
    const res = await fetch(ep.chaptersUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json+chapters');
    const seconds = (iso: string) => (Date.parse(iso) - Date.parse(live.startedAt)) / 1000;
    expect(await res.json()).toEqual({
      version: '1.2.0',
      chapters: [
        { startTime: seconds(a.nowPlaying.startedAt), title: 'Cannonball Adderley - Autumn Leaves', url: 'https://example.com/autumn', img: 'https://example.com/somethin-else.jpg' },
        { startTime: seconds(b.nowPlaying.startedAt), title: 'Love for Sale' },
      ],
    });
    expect(seconds(a.nowPlaying.startedAt)).toBeGreaterThan(1);
    expect(seconds(b.nowPlaying.startedAt)).toBeGreaterThan(seconds(a.nowPlaying.startedAt));
    expect((await fetch(ep.chaptersUrl, { method: 'HEAD' })).status).toBe(200);

    const feedXml = await (await fetch(`${t.http}/feed/${pod.json.id}.xml`)).text();
    const feed = parseFeed(feedXml);
    const item = feed?.items.find((i) => i.guid === published.json.guid);
    expect(item?.podcastChapters).toEqual({ url: ep.chaptersUrl, type: 'application/json+chapters' });
  }, 90_000);
});
