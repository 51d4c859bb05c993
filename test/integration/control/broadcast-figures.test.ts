/**
 * Broadcast figures and the play log at the edges of a broadcast (docs/behaviour.md §2
 * "Broadcasts", §11), with real sources, a fallback and real listeners held across every switch:
 * - RTMP (FFmpeg): a `/listen` connection and an HLS client polling its playlist, both connected
 *   while the fallback plays before the first broadcast, stay through fallback → live, a publisher
 *   taken over by another, live → fallback (the reconnect window), the end of the broadcast and a
 *   second broadcast. Each broadcast counts both: peak and total 2, `listenerSeconds` = 2 × its
 *   duration. The title each publisher sends at publish (`@setDataFrame` `onMetaData`) is a track of
 *   its broadcast (the first one, in `trackCount`), every track carries its broadcast's id, the
 *   fallback episode's title is in no broadcast's tracks, and the recording's chapters hold no
 *   fallback title.
 * - Icecast (ezstream, MP3 with an ID3 title: its metadata call comes just before its first audio):
 *   a listener on the Icecast port connected during the fallback counts in the broadcast, and the
 *   file's title is the broadcast's first track.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { episodeWithAudio, toneMp3 } from '../../helpers/episodes.js';

let t: TestServer;
let podcastId: string;
let fallbackEpisode: string;
const FALLBACK_TITLE = 'Overnight loop';
const children: ChildProcess[] = [];
const stops: Array<() => void> = [];

const v2 = (method: string, p: string, body?: unknown) => api(t.http, t.secretKey, method, `/v2${p}`, body);
const stream = async (id: string) => (await v2('GET', `/streams/${id}`)).json;

beforeAll(async () => {
  t = await startInProcess();
  const p = await v2('POST', '/podcasts', { title: 'Station archive' });
  expect(p.status, p.text).toBe(201);
  podcastId = p.json.id;
  fallbackEpisode = await episodeWithAudio(t.http, t.secretKey, podcastId, FALLBACK_TITLE, toneMp3(t.dataDir, 'loop.mp3', 8, 330));
}, 60_000);

afterAll(async () => {
  for (const s of stops) s();
  for (const c of children) c.kill('SIGKILL');
  await t?.close();
});

/** Reads `url` (progressive audio) in the background: bytes so far, and whether the body ended. */
function listen(url: string) {
  const state = { bytes: 0, ended: false };
  const ac = new AbortController();
  stops.push(() => ac.abort());
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
  return state;
}

/** Listens on the Icecast port (`GET /live/<id>`) over a raw socket: bytes after the head, and whether it closed. */
function listenIcecast(streamId: string) {
  const state = { bytes: 0, ended: false };
  const sock = net.connect(t.server.icecastPort, '127.0.0.1', () => sock.write(`GET /live/${streamId} HTTP/1.1\r\nHost: x\r\n\r\n`));
  sock.on('data', (d: Buffer) => (state.bytes += d.length));
  sock.on('error', () => {});
  sock.on('close', () => (state.ended = true));
  stops.push(() => sock.destroy());
  return state;
}

/**
 * An HLS player: the master playlist once, then its first media playlist every second, fetching
 * each new segment (RFC 8216 §6.3.4). `failures` counts answers other than 200.
 */
function hlsPlayer(masterUrl: string) {
  const state = { segments: 0, failures: 0 };
  let stopped = false;
  stops.push(() => (stopped = true));
  void (async () => {
    const master = await (await fetch(masterUrl)).text();
    const uri = master.split('\n').find((l) => l.trim() !== '' && !l.startsWith('#'))!;
    const mediaUrl = new URL(uri.trim(), masterUrl);
    const seen = new Set<string>();
    while (!stopped) {
      try {
        const r = await fetch(mediaUrl);
        if (r.status !== 200) state.failures++;
        const text = await r.text();
        for (const line of text.split('\n')) {
          if (line === '' || line.startsWith('#') || seen.has(line)) continue;
          seen.add(line);
          const seg = await fetch(new URL(line, mediaUrl));
          await seg.arrayBuffer();
          if (seg.status === 200) state.segments++;
          else state.failures++;
        }
      } catch {
        state.failures++;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  })();
  return state;
}

/** FFmpeg publishing `seconds` of a tone over RTMP in real time, with `title` in its `onMetaData`. */
function rtmpPublisher(url: string, seconds: number, title: string, hz: number): ChildProcess {
  const args = ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', `sine=frequency=${hz}:sample_rate=48000`, '-t', String(seconds),
    '-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-metadata', `title=${title}`, '-f', 'flv', url];
  const p = spawn(ffmpegPath(), args, { stdio: 'ignore' });
  children.push(p);
  return p;
}

/** Waits until the stream's fallback is on air: its top layer lists `n` segments. */
const onAir = (hlsUrl: string, n = 2) =>
  waitFor(async () => {
    const r = await fetch(hlsUrl.replace('index.m3u8', 'a128/index.m3u8'));
    return r.status === 200 && (await r.text()).split('#EXTINF').length - 1 >= n;
  }, 30_000, 200, 'fallback segments');

const statusIs = (id: string, want: string, timeoutMs = 20_000) => waitFor(async () => (await stream(id)).status === want, timeoutMs, 100, `status ${want}`);
const sourceIs = (id: string, want: string, timeoutMs = 20_000) => waitFor(async () => (await stream(id)).source === want, timeoutMs, 100, `source ${want}`);

interface Broadcast {
  id: string;
  durationSeconds: number;
  peakListeners: number;
  totalListeners: number;
  listenerSeconds: number;
  trackCount: number;
  episodeId: string | null;
  endedAt: string | null;
}
interface Track {
  title: string;
  broadcastId: string | null;
  startedAt: string;
}

const broadcastsOf = async (id: string): Promise<Broadcast[]> => (await v2('GET', `/streams/${id}/broadcasts`)).json.data.reverse();
const tracksOf = async (id: string, broadcast?: string): Promise<Track[]> =>
  (await v2('GET', `/streams/${id}/tracks?limit=100${broadcast ? `&broadcast=${broadcast}` : ''}`)).json.data.reverse();

/** Every one of `n` listeners held through broadcast `b` counts in it: peak and total `n`, their seconds `n` × its duration. */
function expectHeardBy(b: Broadcast, n: number): void {
  expect(b.peakListeners, JSON.stringify(b)).toBe(n);
  expect(b.totalListeners, JSON.stringify(b)).toBe(n);
  const want = n * b.durationSeconds;
  expect(Math.abs(b.listenerSeconds - want), JSON.stringify(b)).toBeLessThanOrEqual(0.5 + 0.02 * want);
}

describe('RTMP (FFmpeg): fallback → live → takeover → fallback → idle → live, listeners held throughout', () => {
  let s: { id: string };
  let b1: Broadcast;
  let b2: Broadcast;

  it('runs two broadcasts and a takeover while a /listen connection and an HLS player stay connected', async () => {
    const created = await v2('POST', '/streams', { title: 'Morning show', reconnectWindow: 3, recording: { podcastId }, fallback: { episodeIds: [fallbackEpisode] } });
    expect(created.status, created.text).toBe(201);
    s = created.json;
    await waitFor(async () => (await stream(s.id)).nowPlaying?.title === FALLBACK_TITLE, 30_000, 100, 'the fallback title');
    await onAir(created.json.hlsUrl);

    // Two listeners join while only the fallback plays (no broadcast yet).
    const l = listen(created.json.listenUrl);
    const hls = hlsPlayer(created.json.hlsUrl);
    await waitFor(() => l.bytes > 16_000 && hls.segments >= 1, 30_000, 100, 'both listeners receiving the fallback');
    await waitFor(async () => (await stream(s.id)).listenerCount === 2, 10_000, 100, 'two listeners');

    // Broadcast 1: a DJ publishes with a title, a second DJ takes over with another, then leaves;
    // the fallback plays through the reconnect window, and the broadcast ends.
    const a = rtmpPublisher(`${created.json.rtmpUrl}/${created.json.streamKey}`, 30, 'Opening Theme', 440);
    await statusIs(s.id, 'live');
    await waitFor(async () => (await stream(s.id)).nowPlaying?.title === 'Opening Theme', 10_000, 100, 'the first DJ title');
    await new Promise((r) => setTimeout(r, 4000));
    const b = rtmpPublisher(`${created.json.rtmpUrl}/${created.json.streamKey}`, 6, 'Guest Set', 660);
    await waitFor(async () => (await stream(s.id)).nowPlaying?.title === 'Guest Set', 10_000, 100, 'the second DJ title');
    await exited(a);
    await exited(b);
    await sourceIs(s.id, 'fallback');
    await statusIs(s.id, 'idle', 15_000);

    // Between broadcasts the fallback plays on; broadcast 2 follows with the same listeners.
    await waitFor(async () => (await stream(s.id)).nowPlaying?.title === FALLBACK_TITLE, 10_000, 100, 'the fallback title between broadcasts');
    await new Promise((r) => setTimeout(r, 2000));
    const c = rtmpPublisher(`${created.json.rtmpUrl}/${created.json.streamKey}`, 6, 'Second Hour', 550);
    await statusIs(s.id, 'live');
    await exited(c);
    await statusIs(s.id, 'idle', 15_000);
    expect(l.ended).toBe(false);
    expect(hls.failures).toBe(0);
    expect((await stream(s.id)).listenerCount).toBe(2);

    const list = await broadcastsOf(s.id);
    expect(list).toHaveLength(2);
    [b1, b2] = list as [Broadcast, Broadcast];
    expect(b1.endedAt).not.toBeNull();
    expect(b2.endedAt).not.toBeNull();
    console.log(`broadcast figures: ${JSON.stringify([b1, b2].map((x) => ({ d: x.durationSeconds, peak: x.peakListeners, total: x.totalListeners, ls: x.listenerSeconds })))}`);
  }, 150_000);

  it('each broadcast counts both listeners: peak and total 2, listenerSeconds 2 × its duration', () => {
    expectHeardBy(b1, 2);
    expectHeardBy(b2, 2);
  });

  it("each broadcast's tracks are its publish titles, first one first, with its id; fallback titles belong to none", async () => {
    const t1 = await tracksOf(s.id, b1.id);
    const t2 = await tracksOf(s.id, b2.id);
    expect(t1.map((x) => x.title)).toEqual(['Opening Theme', 'Guest Set']);
    expect(t2.map((x) => x.title)).toEqual(['Second Hour']);
    expect([b1.trackCount, b2.trackCount]).toEqual([2, 1]);
    for (const x of t1) expect(x.broadcastId).toBe(b1.id);
    for (const x of t2) expect(x.broadcastId).toBe(b2.id);
    const all = await tracksOf(s.id);
    const fallbackTracks = all.filter((x) => x.title === FALLBACK_TITLE);
    expect(fallbackTracks.length).toBeGreaterThanOrEqual(2);
    for (const x of fallbackTracks) expect(x.broadcastId).toBeNull();
  });

  it("the recording's chapters hold no fallback title", async () => {
    // The recording of broadcast 1 holds live audio only: its chapters are the publish titles.
    const withEpisode = await waitFor(async () => (await broadcastsOf(s.id)).find((x) => x.id === b1.id && x.episodeId), 30_000, 200, 'the recording of broadcast 1');
    const row = t.server.db.prepare('SELECT chapters FROM episodes WHERE id = ?').get(withEpisode.episodeId) as { chapters: string | null };
    const chapters = JSON.parse(row.chapters!).chapters as Array<{ startTime: number; title: string }>;
    expect(chapters.map((x) => x.title)).toEqual(['Opening Theme', 'Guest Set']);
    expect(chapters[0]!.startTime).toBe(0);
    await v2('DELETE', `/streams/${s.id}`);
  }, 40_000);
});

describe('Icecast (ezstream, MP3 with an ID3 title): fallback → live → fallback, a listener on the Icecast port', () => {
  let s: { id: string };
  let b: Broadcast;

  it('publishes once while the listener stays connected', async () => {
    const created = await v2('POST', '/streams', { title: 'Station', codec: 'mp3', reconnectWindow: 0, fallback: { episodeIds: [fallbackEpisode] } });
    expect(created.status, created.text).toBe(201);
    s = created.json;
    await waitFor(async () => (await stream(s.id)).nowPlaying?.title === FALLBACK_TITLE, 30_000, 100, 'the fallback title');
    await onAir(created.json.hlsUrl);
    const ice = listenIcecast(s.id);
    await waitFor(() => ice.bytes > 16_000, 30_000, 100, 'Icecast-port bytes during the fallback');
    await waitFor(async () => (await stream(s.id)).listenerCount === 1, 10_000, 100, 'one listener');

    const mp3 = path.join(t.dataDir, 'ez-tagged.mp3');
    spawnSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=8', '-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k',
      '-metadata', 'title=Station ID', '-metadata', 'artist=The Jingles', mp3]);
    const conf = path.join(t.dataDir, 'ezstream-figures.xml');
    writeFileSync(
      conf,
      `<ezstream>
  <servers><server><protocol>HTTP</protocol><hostname>127.0.0.1</hostname><port>${t.server.icecastPort}</port><user>source</user><password>${created.json.streamKey}</password></server></servers>
  <streams><stream><mountpoint>/live/${s.id}</mountpoint><format>MP3</format></stream></streams>
  <intakes><intake><type>file</type><filename>${mp3}</filename><stream_once>yes</stream_once></intake></intakes>
</ezstream>
`,
      { mode: 0o600 },
    );
    const ez = spawn('ezstream', ['-c', conf], { stdio: 'ignore' });
    children.push(ez);
    await statusIs(s.id, 'live');
    await exited(ez);
    await statusIs(s.id, 'idle', 15_000);
    expect(ice.ended).toBe(false);

    const list = await broadcastsOf(s.id);
    expect(list).toHaveLength(1);
    b = list[0]!;
  }, 90_000);

  it('the broadcast counts the listener for its whole duration', () => {
    expectHeardBy(b, 1);
  });

  it("the title ezstream sent on connect is the broadcast's first track, in trackCount, with its id", async () => {
    const tracks = await tracksOf(s.id, b.id);
    expect(tracks.map((x) => x.title)).toEqual(['Station ID']);
    expect(tracks[0]!.broadcastId).toBe(b.id);
    expect(b.trackCount).toBe(1);
    await v2('DELETE', `/streams/${s.id}`);
  });
});
