/**
 * What a station's fallback looks like from every side (docs/streams.md "Fallback",
 * docs/icecast.md "Listeners", docs/behaviour.md §5 `podcast:liveItem`), against a real server,
 * real FFmpeg publishers at 44.1 kHz, a fallback episode whose file is 48 kHz, and listeners held
 * on `/listen` and on the Icecast port across live → fallback → live → fallback:
 * - what each listener received, decoded by FFmpeg, has ONE sample rate and channel count
 *   throughout (FFmpeg's `ashowinfo`): the fallback is encoded at the format of the stream's last live source;
 * - while the fallback plays after the reconnect window the stream is `idle` with
 *   `source: "fallback"`, and `/status-json.xsl` lists its mount with the episode's title;
 * - the feed's `podcast:liveItem` (parsed by podcast-partytime) is `live` during a broadcast with
 *   that broadcast's id as guid, `ended` while only the fallback plays, and a second broadcast gets
 *   its own guid;
 * - after a restart the fallback still plays in the format of the last live source (mono 44.1 kHz
 *   here), which the stream keeps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { parseFeed } from 'podcast-partytime';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { ffmpegPath, run } from '../../helpers/ffmpeg.js';
import { publish } from '../../helpers/publish.js';
import { episodeWithAudio } from '../../helpers/episodes.js';

let t: TestServer;
const children: ChildProcess[] = [];
const stops: Array<() => void> = [];
const v2 = (method: string, p: string, body?: unknown) => api(t.http, t.secretKey, method, `/v2${p}`, body);
const stream = async (id: string) => (await v2('GET', `/streams/${id}`)).json;

/** The most bytes a test listener keeps (a few minutes of 128 kbit/s). */
const MAX_BYTES = 8 << 20;

/** Holds a `/listen` connection: the body bytes so far. */
function holdListen(url: string) {
  const state = { chunks: [] as Buffer[], bytes: 0, ended: false };
  const ac = new AbortController();
  stops.push(() => ac.abort());
  void (async () => {
    try {
      const res = await fetch(url, { signal: ac.signal });
      const reader = res.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (state.bytes < MAX_BYTES) state.chunks.push(Buffer.from(value));
        state.bytes += value.byteLength;
      }
    } catch {
      /* aborted */
    }
    state.ended = true;
  })();
  return state;
}

/** Holds an Icecast-port listener (`GET /live/<id>`) over a raw socket: the bytes after the head so far. */
function holdIcecast(streamId: string) {
  const state = { chunks: [] as Buffer[], bytes: 0, ended: false };
  let head: Buffer | null = Buffer.alloc(0);
  const sock = net.connect(t.server.icecastPort, '127.0.0.1', () => sock.write(`GET /live/${streamId} HTTP/1.1\r\nHost: x\r\n\r\n`));
  sock.on('data', (d: Buffer) => {
    let body = d;
    if (head) {
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      body = head.subarray(end + 4);
      head = null;
    }
    if (state.bytes < MAX_BYTES) state.chunks.push(body);
    state.bytes += body.length;
  });
  sock.on('error', () => {});
  sock.on('close', () => (state.ended = true));
  stops.push(() => sock.destroy());
  return state;
}

/**
 * `<rate>,<channels>` of every audio frame of `bytes` (ADTS) as FFmpeg decodes them: its
 * `ashowinfo` filter prints each decoded frame (FFmpeg re-opens the filter at a format change).
 */
async function framesOf(bytes: Buffer, name: string, dir = t.dataDir): Promise<string[]> {
  const file = path.join(dir, name);
  writeFileSync(file, bytes);
  const r = await run(ffmpegPath(), ['-hide_banner', '-nostdin', '-f', 'aac', '-i', file, '-af', 'ashowinfo', '-f', 'null', '-'], 120_000);
  expect(r.code, r.stderr.slice(-500)).toBe(0);
  return [...r.stderr.matchAll(/ channels:(\d+) .*? rate:(\d+) /g)].map((m) => `${m[2]},${m[1]}`);
}

/** The `icestats.source` entries of the Icecast port's status document. */
async function statusSources(): Promise<Array<Record<string, unknown>>> {
  const r = await fetch(`http://127.0.0.1:${t.server.icecastPort}/status-json.xsl`);
  const doc = (await r.json()) as { icestats: { source?: unknown } };
  const s = doc.icestats.source;
  return Array.isArray(s) ? s : s ? [s as Record<string, unknown>] : [];
}

/** The feed's live items, as podcast-partytime reads them. */
async function liveItems(podcastId: string) {
  const xml = await (await fetch(`${t.server.urls.cdnUrl}/feed/${podcastId}.xml`)).text();
  const f = parseFeed(xml);
  expect(f, xml).toBeTruthy();
  return f!.podcastLiveItems ?? [];
}

const AT_44K = ['-ac', '2', '-ar', '44100', '-c:a', 'aac', '-b:a', '128k'];

beforeAll(async () => {
  t = await startInProcess({});
}, 60_000);

afterAll(async () => {
  for (const s of stops) s();
  for (const c of children) c.kill('SIGKILL');
  await t?.close();
});

describe('fallback semantics', () => {
  it('keeps one sample rate across switches, lists the audible mount, and gives each broadcast its own liveItem', async () => {
    const pod = (await v2('POST', '/podcasts', { title: 'Station shows' })).json;
    // The fallback's source file: 48 kHz stereo (the live sources are 44.1 kHz).
    const file = path.join(t.dataDir, 'loop48k.mp3');
    execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=550:sample_rate=48000:duration=20', '-ac', '2', '-c:a', 'libmp3lame', '-b:a', '128k', file]);
    const ep = await episodeWithAudio(t.http, t.secretKey, pod.id, 'Night loop', readFileSync(file));
    const pub = await v2('POST', `/podcasts/${pod.id}/publish`, { episodeId: ep });
    expect(pub.status, pub.text).toBe(200);
    const s = (await v2('POST', '/streams', { title: 'Station live', reconnectWindow: 1, recording: { podcastId: pod.id }, fallback: { episodeIds: [ep] } })).json;
    expect(s.source).toBe('fallback');

    // Broadcast 1 at 44.1 kHz; the listeners join while it is live and stay to the end.
    const p1 = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60, codecArgs: AT_44K });
    children.push(p1);
    await waitFor(async () => (await stream(s.id)).status === 'live' && (await stream(s.id)).source === 'live', 30_000, 100, 'broadcast 1 live');
    const b1 = (await v2('GET', `/streams/${s.id}/broadcasts`)).json.data[0].id as string;
    const l = holdListen(s.listenUrl);
    const ice = holdIcecast(s.id);
    await waitFor(() => l.bytes > 48_000 && ice.bytes > 48_000, 20_000, 100, 'listeners receive broadcast 1');
    const during1 = await liveItems(pod.id);
    expect(during1).toHaveLength(1);
    expect(during1[0]!.status).toBe('live');
    expect.soft(during1[0]!.guid).toBe(b1);

    // The publisher leaves: the fallback plays; after the 1 s window the broadcast has ended.
    p1.kill('SIGKILL');
    await waitFor(async () => {
      const o = await stream(s.id);
      return o.status === 'idle' && o.source === 'fallback' && o.nowPlaying?.title === 'Night loop';
    }, 20_000, 100, 'idle with the fallback playing');
    const atFallback = l.bytes;
    await waitFor(() => l.bytes > atFallback + 96_000, 30_000, 100, '/listen receives the fallback');
    // The audible mount is listed, with what it plays.
    const listed = await waitFor(async () => (await statusSources()).find((x) => String(x.listenurl).endsWith(`/live/${s.id}`)) ?? null, 10_000, 200, 'status-json lists the fallback mount').catch(() => null);
    expect.soft(listed?.title, 'status-json lists the fallback mount with what it plays').toBe('Night loop');
    expect.soft(listed?.server_name).toBe('Station live');
    const after1 = await liveItems(pod.id);
    expect(after1).toHaveLength(1);
    expect(['ended', 'pending']).toContain(after1[0]!.status);
    expect(after1[0]!.status).toBe('ended');
    expect.soft(after1[0]!.guid).toBe(b1);

    // Broadcast 2, again 44.1 kHz: its own guid.
    const p2 = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60, codecArgs: AT_44K, frequency: 880 });
    children.push(p2);
    await waitFor(async () => (await stream(s.id)).status === 'live' && (await stream(s.id)).source === 'live', 30_000, 100, 'broadcast 2 live');
    const b2 = (await v2('GET', `/streams/${s.id}/broadcasts`)).json.data[0].id as string;
    expect(b2).not.toBe(b1);
    const atLive2 = l.bytes;
    await waitFor(() => l.bytes > atLive2 + 64_000, 30_000, 100, '/listen receives broadcast 2');
    const during2 = await liveItems(pod.id);
    expect(during2).toHaveLength(1);
    expect(during2[0]!.status).toBe('live');
    expect.soft(during2[0]!.guid).toBe(b2);
    p2.kill('SIGKILL');
    await waitFor(async () => (await stream(s.id)).source === 'fallback', 20_000, 100, 'fallback again');
    const atFallback2 = l.bytes;
    await waitFor(() => l.bytes > atFallback2 + 64_000, 30_000, 100, '/listen receives the fallback again');
    expect(l.ended).toBe(false);
    expect(ice.ended).toBe(false);
    for (const stop of stops) stop();

    // Decoded: one sample rate and channel count from the first frame to the last, on both ports.
    const listenFrames = await framesOf(Buffer.concat(l.chunks), 'listen.aac');
    const iceFrames = await framesOf(Buffer.concat(ice.chunks), 'icecast.aac');
    // 44.1 kHz AAC: 1024 samples a frame, about 43 frames a second; the listeners heard well over 20 s.
    expect(listenFrames.length).toBeGreaterThan(400);
    expect(iceFrames.length).toBeGreaterThan(400);
    console.log(`fallback format: /listen ${listenFrames.length} frames ${[...new Set(listenFrames)].join(' ')}; Icecast port ${iceFrames.length} frames ${[...new Set(iceFrames)].join(' ')}`);
    expect([...new Set(listenFrames)]).toEqual(['44100,2']);
    expect([...new Set(iceFrames)]).toEqual(['44100,2']);
  }, 240_000);

  it('plays the fallback after a restart in the format of the last live source', async () => {
    const data = tempDir();
    let a: TestServer | null = await startInProcess({ SKYLARK_DATA_DIR: data.dir });
    let b: TestServer | null = null;
    try {
      const key = a.secretKey;
      const call = (srv: TestServer, method: string, p: string, body?: unknown) => api(srv.http, key, method, `/v2${p}`, body);
      const pod = (await call(a, 'POST', '/podcasts', { title: 'Archive' })).json;
      const file = path.join(data.dir, 'loop48k.mp3');
      execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=550:sample_rate=48000:duration=10', '-ac', '2', '-c:a', 'libmp3lame', '-b:a', '128k', file]);
      const ep = await episodeWithAudio(a.http, key, pod.id, 'Loop', readFileSync(file));
      const s = (await call(a, 'POST', '/streams', { title: 'Mono station', reconnectWindow: 0, fallback: { episodeIds: [ep] } })).json;
      // One mono 44.1 kHz broadcast, then the node restarts.
      const p = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 30, codecArgs: ['-ac', '1', '-ar', '44100', '-c:a', 'aac', '-b:a', '128k'] });
      children.push(p);
      const srvA = a;
      await waitFor(async () => (await call(srvA, 'GET', `/streams/${s.id}`)).json.source === 'live', 30_000, 100, 'live');
      p.kill('SIGKILL');
      await waitFor(async () => (await call(srvA, 'GET', `/streams/${s.id}`)).json.status === 'idle', 20_000, 100, 'idle');
      await a.server.close();
      a = null;
      b = await startInProcess({ SKYLARK_DATA_DIR: data.dir });
      const srvB = b;
      const again = await waitFor(async () => {
        const o = (await call(srvB, 'GET', `/streams/${s.id}`)).json;
        return o.source === 'fallback' ? o : null;
      }, 20_000, 100, 'fallback after the restart');
      const chunks: Buffer[] = [];
      let bytes = 0;
      const ac = new AbortController();
      stops.push(() => ac.abort());
      // On air again once its passthrough layer has audio (the HLS media playlist lists a segment).
      await waitFor(async () => {
        const r = await fetch(again.hlsUrl.replace('index.m3u8', 'a128/index.m3u8'));
        return r.status === 200 && (await r.text()).includes('#EXTINF');
      }, 30_000, 200, 'fallback segments after the restart');
      const res = await fetch(again.listenUrl, { signal: ac.signal });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      while (bytes < 48_000) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(Buffer.from(value));
        bytes += value.byteLength;
      }
      ac.abort();
      const frames = await framesOf(Buffer.concat(chunks), 'restart.aac', data.dir);
      expect(frames.length).toBeGreaterThan(20);
      expect([...new Set(frames)]).toEqual(['44100,1']);
    } finally {
      await a?.server.close();
      await b?.server.close();
      data.cleanup();
    }
  }, 120_000);
});
