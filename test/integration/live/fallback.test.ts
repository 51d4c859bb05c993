/**
 * The stream fallback (docs/streams.md "Fallback") against a real server, real FFmpeg and real
 * episode audio:
 * - validation of `fallback` on create and PATCH (400 naming the field: shape, bounds, unknown
 *   episode, episode without audio);
 * - an idle stream with a fallback is on air: HLS playlists of every ladder layer with segments,
 *   `/listen` audio, `nowPlaying` = the episode's title, `source: "fallback"`, still `idle`;
 * - an RTMP publisher takes over (`source: "live"`, `stream.source_changed` publisher_connected,
 *   an EXT-X-DISCONTINUITY), a `/listen` connection opened during the fallback keeps receiving
 *   across the switches; the publisher killed → fallback again (publisher_left);
 * - a publisher sending 20 s of digital silence then a tone, with `silenceSeconds` 5 → fallback
 *   (silence) and back (audio_returned).
 * - a restart: the fallback of a stream is on air again (its `source` of the earlier run forgotten);
 * - a recording stream whose hub the fallback made: the broadcast's draft episode holds the live
 *   audio only.
 * Switch times are measured and printed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { publish } from '../../helpers/publish.js';
import { episodeWithAudio as createEpisode, toneMp3 } from '../../helpers/episodes.js';

let t: TestServer;
const children: ChildProcess[] = [];
const readers: Array<{ stop(): void }> = [];
let e1: string;
let e2: string;
let noAudio: string;
let podcastId: string;

const v2 = (method: string, p: string, body?: unknown) => api(t.http, t.secretKey, method, `/v2${p}`, body);

const tone = (file: string, seconds: number, hz: number) => toneMp3(t.dataDir, file, seconds, hz);
const episodeWithAudio = (pid: string, title: string, audio: Buffer | null) => createEpisode(t.http, t.secretKey, pid, title, audio);

function eventsOf(type: string, streamId: string): Array<{ source: string; reason: string; object: { id: string; source: string } }> {
  const rows = t.server.db.prepare('SELECT data FROM events WHERE type = ? ORDER BY seq').all(type) as Array<{ data: string }>;
  return rows.map((r) => JSON.parse(r.data)).filter((d) => d.object.id === streamId);
}

const stream = async (id: string) => (await v2('GET', `/streams/${id}`)).json;
const playlist = async (hlsUrl: string, layer: string) => {
  const r = await fetch(hlsUrl.replace('index.m3u8', `${layer}/index.m3u8`));
  return r.status === 200 ? r.text() : '';
};
const count = (text: string, what: string) => text.split(what).length - 1;

/** Reads `url` in the background: the bytes so far, and whether the body ended. */
function listen(url: string) {
  const state = { bytes: 0, ended: false, stop: () => {} };
  const ac = new AbortController();
  state.stop = () => ac.abort();
  void (async () => {
    try {
      const res = await fetch(url, { signal: ac.signal });
      const reader = res.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        state.bytes += value.byteLength;
      }
    } catch {
      /* aborted */
    }
    state.ended = true;
  })();
  readers.push(state);
  return state;
}

/** Listens on the Icecast port (`GET /live/<id>`, docs/icecast.md) over a raw socket: the bytes after the head so far. */
function listenIcecast(streamId: string) {
  const state = { bytes: 0, ended: false, stop: () => {} };
  const sock = net.connect(t.server.icecastPort, '127.0.0.1', () => sock.write(`GET /live/${streamId} HTTP/1.1\r\nHost: x\r\n\r\n`));
  let head = true;
  sock.on('data', (d: Buffer) => {
    if (!head) return void (state.bytes += d.length);
    const end = d.indexOf('\r\n\r\n');
    if (end < 0) return;
    head = false;
    state.bytes += d.length - end - 4;
  });
  sock.on('error', () => {});
  sock.on('close', () => (state.ended = true));
  state.stop = () => sock.destroy();
  readers.push(state);
  return state;
}

/** Waits until the stream's `source` is `want`; answers the time it took (ms) from `since`. */
async function sourceIs(id: string, want: string | null, since: number, timeoutMs = 20_000): Promise<number> {
  await waitFor(async () => (await stream(id)).source === want, timeoutMs, 100, `source ${want}`);
  return Date.now() - since;
}

beforeAll(async () => {
  t = await startInProcess({});
  const p = await v2('POST', '/podcasts', { title: 'Station archive' });
  expect(p.status, p.text).toBe(201);
  podcastId = p.json.id;
  e1 = await episodeWithAudio(p.json.id, 'Episode one', tone('one.mp3', 8, 440));
  e2 = await episodeWithAudio(p.json.id, 'Episode two', tone('two.mp3', 8, 660));
  noAudio = await episodeWithAudio(p.json.id, 'Silent draft', null);
}, 60_000);

afterAll(async () => {
  for (const r of readers) r.stop();
  for (const c of children) c.kill('SIGKILL');
  await t?.close();
});

describe('fallback validation', () => {
  it.each([
    [{ episodeIds: [] }, 'fallback.episodeIds'],
    [{ episodeIds: 'ep_x' }, 'fallback.episodeIds'],
    [{ episodeIds: Array.from({ length: 101 }, (_, i) => `ep_${i}`) }, 'fallback.episodeIds'],
    [{ episodeIds: ['ep_a'], order: 'random' }, 'fallback.order'],
    [{ episodeIds: ['ep_a'], silenceSeconds: 4 }, 'fallback.silenceSeconds'],
    [{ episodeIds: ['ep_a'], silenceSeconds: 301 }, 'fallback.silenceSeconds'],
    [{ episodeIds: ['ep_a'], silenceSeconds: 5.5 }, 'fallback.silenceSeconds'],
    [{ episodeIds: ['ep_a'], extra: 1 }, 'fallback'],
    ['all', 'fallback'],
  ])('fallback %j → 400 naming %s', async (fallback, param) => {
    const r = await v2('POST', '/streams', { title: 't', fallback });
    expect(r.status, r.text).toBe(400);
    expect(r.json.error.type).toBe('invalid_request_error');
    expect(r.json.error.param === param || r.json.error.param.startsWith(param), r.text).toBe(true);
  });

  it('refuses unknown episodes and episodes without audio, on create and PATCH', async () => {
    let r = await v2('POST', '/streams', { title: 't', fallback: { episodeIds: [e1, 'ep_doesnotexist'] } });
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toMatchObject({ code: 'parameter_invalid', param: 'fallback.episodeIds[1]' });
    const s = await v2('POST', '/streams', { title: 't' });
    r = await v2('PATCH', `/streams/${s.json.id}`, { fallback: { episodeIds: [noAudio] } });
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toMatchObject({ code: 'parameter_invalid', param: 'fallback.episodeIds[0]' });
    expect((await stream(s.json.id)).fallback).toBeNull();
    expect((await stream(s.json.id)).source).toBeNull();
    // Another account's episode (with audio) is unknown here.
    const other = await t.server.accounts.create({ name: 'Other', plan: 'paid', region: 'eu-west-1' });
    const op = await api(t.http, other.secretKey, 'POST', '/v2/podcasts', { title: 'Theirs' });
    const oe = await api(t.http, other.secretKey, 'POST', `/v2/podcasts/${op.json.id}/episodes`, { title: 'Theirs' });
    const put = await fetch(`${t.http}/v2/podcasts/${op.json.id}/episodes/${oe.json.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${other.secretKey}`, 'Content-Type': 'audio/mpeg' }, body: readFileSync(path.join(t.dataDir, 'one.mp3')) });
    expect(put.status).toBe(200);
    r = await v2('PATCH', `/streams/${s.json.id}`, { fallback: { episodeIds: [e1, e2, oe.json.id] } });
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toMatchObject({ code: 'parameter_invalid', param: 'fallback.episodeIds[2]' });
    await v2('DELETE', `/streams/${s.json.id}`);
  });
});

describe('the dead-air-proof station', () => {
  it('plays the fallback on an idle stream, gives way to a publisher and comes back when it leaves', async () => {
    const created = await v2('POST', '/streams', { title: 'Station', reconnectWindow: 0 });
    const s = created.json;
    expect(s.source).toBeNull();
    expect((await fetch(s.hlsUrl)).status).toBe(404);
    const set = Date.now();
    const patched = await v2('PATCH', `/streams/${s.id}`, { fallback: { episodeIds: [e1, e2], order: 'sequential' } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json.fallback).toEqual({ episodeIds: [e1, e2], order: 'sequential', silenceSeconds: null });
    expect(patched.json.source).toBe('fallback');
    expect(patched.json.status).toBe('idle');

    // On air before any broadcast: every ladder layer has segments, /listen sends audio, the title is the episode's.
    await waitFor(async () => count(await playlist(s.hlsUrl, 'a128'), '#EXTINF') >= 2, 30_000, 200, 'fallback segments (a128)');
    const onAirMs = Date.now() - set;
    await waitFor(async () => count(await playlist(s.hlsUrl, 'a64'), '#EXTINF') >= 1, 30_000, 200, 'fallback segments (a64)');
    const master = await (await fetch(s.hlsUrl)).text();
    expect(master).toContain('a128/index.m3u8');
    await waitFor(async () => (await stream(s.id)).nowPlaying?.title === 'Episode one', 10_000, 100, 'episode title');
    const l = listen(s.listenUrl);
    const ice = listenIcecast(s.id);
    await waitFor(() => l.bytes > 16_000, 20_000, 100, '/listen bytes during the fallback');
    await waitFor(() => ice.bytes > 16_000, 20_000, 100, 'Icecast-port bytes during the fallback');
    expect((await stream(s.id)).status).toBe('idle');

    // A publisher connects: live within a segment, a discontinuity, /listen goes on.
    const before = count(await playlist(s.hlsUrl, 'a128'), '#EXT-X-DISCONTINUITY\n');
    const start = Date.now();
    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 30 });
    children.push(p);
    const toLiveMs = await sourceIs(s.id, 'live', start);
    expect(eventsOf('stream.source_changed', s.id).at(-1)).toMatchObject({ source: 'live', reason: 'publisher_connected', object: { source: 'live' } });
    await waitFor(async () => count(await playlist(s.hlsUrl, 'a128'), '#EXT-X-DISCONTINUITY\n') > before, 20_000, 200, 'discontinuity at the switch');
    await waitFor(async () => (await stream(s.id)).status === 'live', 10_000, 100, 'live');
    // The publisher sends no title: the episode's title goes with the fallback.
    await waitFor(async () => (await stream(s.id)).nowPlaying === null, 10_000, 100, 'no title while live');
    const atSwitch = l.bytes;
    const iceAtSwitch = ice.bytes;
    await waitFor(() => l.bytes > atSwitch + 16_000, 20_000, 100, '/listen bytes after the switch to live');
    await waitFor(() => ice.bytes > iceAtSwitch + 16_000, 20_000, 100, 'Icecast-port bytes after the switch to live');
    expect(l.ended).toBe(false);
    expect(ice.ended).toBe(false);

    // The publisher is killed: the fallback plays again at once; the broadcast ends (window 0), the stream stays on air.
    const kill = Date.now();
    p.kill('SIGKILL');
    const toFallbackMs = await sourceIs(s.id, 'fallback', kill);
    expect(eventsOf('stream.source_changed', s.id).at(-1)).toMatchObject({ source: 'fallback', reason: 'publisher_left' });
    await waitFor(async () => (await stream(s.id)).status === 'idle', 10_000, 100, 'idle after the broadcast');
    const atBack = l.bytes;
    await waitFor(() => l.bytes > atBack + 16_000, 20_000, 100, '/listen bytes after the switch back');
    expect(l.ended).toBe(false);
    await waitFor(async () => ['Episode one', 'Episode two'].includes((await stream(s.id)).nowPlaying?.title), 10_000, 100, 'episode title again');
    const broadcasts = (await v2('GET', `/streams/${s.id}/broadcasts`)).json.data;
    expect(broadcasts).toHaveLength(1);
    console.log(`fallback switch times: on air after PATCH ${onAirMs} ms (2 segments listed), fallback→live ${toLiveMs} ms after the publisher started, live→fallback ${toFallbackMs} ms after it was killed`);

    // Removed while idle: off air.
    const off = await v2('PATCH', `/streams/${s.id}`, { fallback: null });
    expect(off.json.source).toBeNull();
    await waitFor(async () => (await fetch(s.hlsUrl)).status === 404, 10_000, 100, 'off air');
    await waitFor(() => l.ended, 10_000, 100, '/listen closed when off air');
  }, 150_000);

  it('switches to the fallback after silenceSeconds of silence and back when sound returns', async () => {
    const s = (await v2('POST', '/streams', { title: 'Quiet show', reconnectWindow: 0, fallback: { episodeIds: [e2, e1], order: 'shuffle', silenceSeconds: 5 } })).json;
    expect(s.source).toBe('fallback');
    // 20 s of digital silence, then a tone, as one real-time RTMP publish.
    const graph = 'anullsrc=r=48000:cl=stereo:d=20[a];sine=frequency=440:sample_rate=48000:duration=15,aformat=channel_layouts=stereo[b];[a][b]concat=n=2:v=0:a=1[out0]';
    const start = Date.now();
    const p = spawn(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', graph, '-c:a', 'aac', '-b:a', '128k', '-metadata', 'title=Quiet live', '-f', 'flv', `${s.rtmpUrl}/${s.streamKey}`], { stdio: 'ignore' });
    children.push(p);
    const toLiveMs = await sourceIs(s.id, 'live', start);
    const silentFrom = Date.now();
    await waitFor(async () => (await stream(s.id)).nowPlaying?.title === 'Quiet live', 5_000, 100, 'the live title');
    const toSilenceMs = await sourceIs(s.id, 'fallback', silentFrom, 20_000);
    expect(eventsOf('stream.source_changed', s.id).at(-1)).toMatchObject({ source: 'fallback', reason: 'silence' });
    expect((await stream(s.id)).status).toBe('live'); // the publisher is still connected: the broadcast goes on
    await waitFor(async () => ['Episode one', 'Episode two'].includes((await stream(s.id)).nowPlaying?.title), 10_000, 100, 'episode title during the silence');
    const toSoundMs = await sourceIs(s.id, 'live', start, 40_000);
    expect(eventsOf('stream.source_changed', s.id).at(-1)).toMatchObject({ source: 'live', reason: 'audio_returned' });
    await waitFor(async () => (await stream(s.id)).nowPlaying?.title === 'Quiet live', 10_000, 100, 'the live title again');
    const reasons = eventsOf('stream.source_changed', s.id).map((e) => e.reason);
    expect(reasons).toEqual(['publisher_connected', 'silence', 'audio_returned']);
    console.log(`silence switch times: live ${toLiveMs} ms after start; fallback ${toSilenceMs} ms after the first live frame (silence 5 s); back to live ${toSoundMs} ms after start (tone from 20 000 ms)`);
    p.kill('SIGKILL');
    await sourceIs(s.id, 'fallback', Date.now());
    await v2('DELETE', `/streams/${s.id}`);
  }, 120_000);

  it('records a broadcast on a stream the fallback keeps on air: the live audio only', async () => {
    const s = (await v2('POST', '/streams', { title: 'Recorded station', reconnectWindow: 0, recording: { podcastId }, fallback: { episodeIds: [e1] } })).json;
    expect(s.source).toBe('fallback');
    await waitFor(async () => count(await playlist(s.hlsUrl, 'a128'), '#EXTINF') >= 1, 30_000, 200, 'fallback segments');
    const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 6 });
    children.push(p);
    await sourceIs(s.id, 'live', Date.now());
    await sourceIs(s.id, 'fallback', Date.now(), 30_000); // the publish ran out: publisher_left
    const b = await waitFor(async () => {
      const list = (await v2('GET', `/streams/${s.id}/broadcasts`)).json.data;
      return list.length === 1 && list[0].episodeId ? list[0] : null;
    }, 30_000, 200, 'the broadcast\'s episode');
    const ep = (await v2('GET', `/podcasts/${podcastId}/episodes/${b.episodeId}`)).json;
    expect(ep.status).toBe('draft');
    expect(ep.audio.durationSeconds).toBeGreaterThan(3);
    expect(ep.audio.durationSeconds).toBeLessThan(8.5);
    expect((await stream(s.id)).source).toBe('fallback');
    await v2('DELETE', `/streams/${s.id}`);
    await waitFor(async () => (await fetch(s.hlsUrl)).status === 404, 10_000, 100, 'off air after DELETE');
  }, 90_000);

  it('puts the fallback on air again after a restart', async () => {
    const data = tempDir();
    let a: TestServer | null = await startInProcess({ SKYLARK_DATA_DIR: data.dir });
    let b: TestServer | null = null;
    try {
      const call = (srv: TestServer, method: string, p: string, body?: unknown) => api(srv.http, a!.secretKey, method, `/v2${p}`, body);
      const pod = (await call(a, 'POST', '/podcasts', { title: 'Archive' })).json;
      const ep = (await call(a, 'POST', `/podcasts/${pod.id}/episodes`, { title: 'Loop' })).json;
      const put = await fetch(`${a.http}/v2/podcasts/${pod.id}/episodes/${ep.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${a.secretKey}`, 'Content-Type': 'audio/mpeg' }, body: readFileSync(path.join(t.dataDir, 'one.mp3')) });
      expect(put.status).toBe(200);
      const s = (await call(a, 'POST', '/streams', { title: 'Night loop', fallback: { episodeIds: [ep.id] } })).json;
      expect(s.source).toBe('fallback');
      const key = a.secretKey;
      await a.server.close();
      a = null;
      b = await startInProcess({ SKYLARK_DATA_DIR: data.dir });
      const srv = b;
      const again = await waitFor(async () => {
        const o = (await api(srv.http, key, 'GET', `/v2/streams/${s.id}`)).json;
        return o.source === 'fallback' && o.nowPlaying?.title === 'Loop' ? o : null;
      }, 20_000, 100, 'fallback after the restart');
      await waitFor(async () => count(await playlist(again.hlsUrl, 'a128'), '#EXTINF') >= 1, 30_000, 200, 'segments after the restart');
    } finally {
      await a?.server.close();
      await b?.server.close();
      data.cleanup();
    }
  }, 90_000);
});
