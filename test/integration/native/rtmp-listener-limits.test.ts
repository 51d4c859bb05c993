// RtmpListener caps (native/binding/rtmp_addon.cc, docs/behaviour.md §13) with real TCP sockets on
// 127.0.0.x: connections per IP and in total (refused at accept), the absolute publish deadline
// (a slow drip of bytes does not extend it), the pre-publish byte cap (with the process's RSS and
// fds from /proc while 200 such clients come and go), the audio message cap, and the per-message
// audio kind for AAC (recorded FFmpeg publish), MP3 and Opus (FFmpeg-made fixtures).
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { AUDIO_FRAME, AUDIO_OTHER, AUDIO_SEQUENCE_HEADER, RtmpListener, type AudioKind, type RtmpConnection, type RtmpConnectionHandler, type RtmpControlEvent, type RtmpLimitCause, type RtmpListenerOptions } from '../../../src/native/rtmp-listener.js';
import { Segmenter, type SegmenterEvent } from '../../../src/native/segmenter.js';
import { until } from '../../helpers/listener-harness.js';
import { AUDIO_CSID, CHUNK_SIZE, HANDSHAKE, audioMessages, exAudio, flvAudioTags, header, message, opusTags, publishPrefix } from '../../helpers/rtmp-client-bytes.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const FFMPEG_48K = readFileSync(path.join(here, '../../fixtures/rtmp/ffmpeg-aac-48k.bin'));

interface Heard {
  conn: RtmpConnection;
  audio: Array<{ ts: number; bytes: number; kind: AudioKind; segmented: boolean }>;
  events: RtmpControlEvent[];
  segmenterEvents: SegmenterEvent[];
  closed: Array<{ reason: string; error: { code: string; message: string } | null }>;
}

const listeners: RtmpListener[] = [];
const sockets: net.Socket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const l of listeners.splice(0)) l.close();
});

/** A listener on 127.0.0.1:0 that accepts every publish (and closes on a session error, as ingest does). */
function start(options: Omit<RtmpListenerOptions, 'onLimit'> = {}, onPublish?: (h: Heard) => void) {
  const heard: Heard[] = [];
  const limits: Array<{ cause: RtmpLimitCause; remote: string }> = [];
  const listener = new RtmpListener({ ...options, onLimit: (cause, remote) => limits.push({ cause, remote }) }, (conn) => {
    const h: Heard = { conn, audio: [], events: [], segmenterEvents: [], closed: [] };
    heard.push(h);
    const handler: RtmpConnectionHandler = {
      audio: (ts, data, segmented, kind) => h.audio.push({ ts, bytes: data.length, kind, segmented }),
      event: (e) => {
        h.events.push(e);
        if (e.type === 'publish') {
          conn.acceptPublish();
          onPublish?.(h);
        }
        if (e.type === 'error') conn.close();
      },
      timeout: () => {},
      closed: (reason, error) => h.closed.push({ reason, error }),
    };
    return handler;
  });
  listeners.push(listener);
  const port = listener.listen('127.0.0.1', 0);
  return { listener, port, heard, limits };
}

/** A client socket (from `localAddress`, a 127.0.0.x) that records whether the server closed it. */
function connect(port: number, localAddress = '127.0.0.1') {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress });
  sockets.push(socket);
  socket.on('error', () => {});
  socket.resume(); // read (and drop) the replies, so the server's FIN is seen
  let closed = false;
  const connected = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.once('close', () => (closed = true));
  return { socket, connected, isClosed: () => closed };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Open fds of this process and its resident set (bytes), from /proc. */
function fds(): number {
  return readdirSync('/proc/self/fd').length;
}
function rss(): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return Number(m![1]) * 1024;
}

/**
 * ~100 KiB of chunk data that never completes a message, before any publish: a 60000-byte command
 * on chunk stream 3 sent up to 40 KiB, then another on chunk stream 4 sent up to 56 KiB.
 */
function partialChunks(): Buffer {
  const setChunk = Buffer.alloc(4);
  setChunk.writeUInt32BE(CHUNK_SIZE);
  const body = Buffer.alloc(60000, 0x41);
  const partial = (csid: number, chunks: number) => message(csid, 20, 0, 0, body, CHUNK_SIZE).subarray(0, 12 + chunks * (CHUNK_SIZE + 1) - 1);
  return Buffer.concat([HANDSHAKE, message(2, 1, 0, 0, setChunk, 128), partial(3, 10), partial(4, 14)]);
}

describe('RtmpListener caps', () => {
  it('refuses a connection over the per-IP cap at accept; other IPs still get in; a close frees the slot', async () => {
    const { port, heard, limits } = start({ maxConnectionsPerIp: 2, maxConnections: 100 });
    const a = connect(port);
    connect(port);
    await until(() => heard.length === 2);
    const c = connect(port);
    await c.connected;
    const local = c.socket.localPort;
    await until(() => c.isClosed());
    expect(limits).toEqual([{ cause: 'rtmp_connections_per_ip', remote: `127.0.0.1:${local}` }]);
    expect(heard).toHaveLength(2); // no connection (and no session) for the refused one
    connect(port, '127.0.0.2');
    await until(() => heard.length === 3);
    a.socket.destroy();
    await until(() => heard[0]!.closed.length === 1);
    connect(port);
    await until(() => heard.length === 4);
    expect(limits).toHaveLength(1);
  });

  it('refuses a connection over the total cap at accept, whatever its IP', async () => {
    const { port, heard, limits, listener } = start({ maxConnections: 2, maxConnectionsPerIp: 10 });
    connect(port);
    connect(port, '127.0.0.2');
    await until(() => heard.length === 2);
    const c = connect(port, '127.0.0.3');
    await until(() => c.isClosed());
    expect(limits.map((l) => l.cause)).toEqual(['rtmp_connections']);
    expect(limits[0]!.remote).toMatch(/^127\.0\.0\.3:\d+$/);
    expect(listener.size).toBe(2);
    // A connection closed from JS gives its slot (and its id) back.
    heard[0]!.conn.close();
    expect(listener.size).toBe(1);
    await sleep(50);
    connect(port, '127.0.0.3');
    await until(() => heard.length === 3);
    expect(new Set(heard.map((h) => h.conn.id)).size).toBe(3);
  });

  it('closes a slow-drip client at the absolute publish deadline; an accepted publisher stays', async () => {
    const { port, heard, limits } = start({ publishTimeoutMs: 2000 });
    const publisher = connect(port);
    publisher.socket.write(Buffer.concat([publishPrefix(), audioMessages(flvAudioTags('aac/sine48k_stereo_128k.flv').slice(0, 5))]));
    await until(() => heard[0]?.audio.length === 5);
    const drip = connect(port);
    await until(() => heard.length === 2);
    let sent = 0;
    let last = Date.now();
    let longestSilence = 0;
    const timer = setInterval(() => {
      if (drip.isClosed()) return;
      drip.socket.write(HANDSHAKE.subarray(sent, sent + 1));
      sent++;
      longestSilence = Math.max(longestSilence, Date.now() - last);
      last = Date.now();
    }, 300);
    try {
      await until(() => drip.isClosed(), 10_000);
    } finally {
      clearInterval(timer);
    }
    // It never went silent for the deadline: bytes do not extend it (an idle timer would never fire).
    expect(sent).toBeGreaterThanOrEqual(2);
    expect(longestSilence).toBeLessThan(2000);
    expect(limits).toEqual([{ cause: 'rtmp_publish_timeout', remote: heard[1]!.conn.remote }]);
    expect(heard[1]!.closed).toEqual([{ reason: 'limit: rtmp_publish_timeout', error: null }]);
    // The publisher connected before the drip client: its publish was accepted, so the deadline
    // does not apply to it.
    expect(heard[0]!.closed).toEqual([]);
    expect(publisher.isClosed()).toBe(false);
  });

  it('closes a client that sends 100 KiB of partial chunk data before publishing', async () => {
    const { port, heard, limits } = start();
    const c = connect(port);
    c.socket.write(partialChunks());
    await until(() => c.isClosed());
    expect(limits.map((l) => l.cause)).toEqual(['rtmp_prepublish_bytes']);
    expect(heard[0]!.closed).toEqual([{ reason: 'limit: rtmp_prepublish_bytes', error: null }]);
  });

  it('200 such clients: every one is closed, RSS and fds of the process stay under a ceiling and come back', async () => {
    const { port, limits, listener } = start({ maxConnections: 1000, maxConnectionsPerIp: 1000 });
    const bytes = partialChunks(); // one Buffer shared by every client: the clients hold no copies
    const fdsBefore = fds();
    const rssBefore = rss();
    let rssPeak = rssBefore;
    let fdsPeak = fdsBefore;
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, rss());
      fdsPeak = Math.max(fdsPeak, fds());
    }, 5);
    const clients: Array<ReturnType<typeof connect>> = [];
    try {
      for (let i = 0; i < 200; i++) {
        const c = connect(port, `127.0.0.${10 + (i % 40)}`);
        c.socket.write(bytes);
        clients.push(c);
      }
      await until(() => clients.every((c) => c.isClosed()), 30_000);
      await until(() => listener.size === 0);
    } finally {
      clearInterval(sampler);
    }
    await until(() => limits.length >= 200);
    expect(limits).toHaveLength(200);
    expect(limits.every((l) => l.cause === 'rtmp_prepublish_bytes')).toBe(true);
    // 200 clients × (their socket + the server's) at most, and all of them given back.
    expect(fdsPeak - fdsBefore).toBeLessThanOrEqual(400 + 20);
    expect(fds() - fdsBefore).toBeLessThanOrEqual(10);
    // Each is closed at its first header past 64 KiB, so the server never holds much of it: under
    // 16 MiB in all (without the cap the 200 would pin 200 × 100 KiB ≈ 20 MiB, and more as they
    // kept sending).
    expect(rssPeak - rssBefore).toBeLessThan(16 * 1024 * 1024);
  });

  it('an audio message over maxAudioMessageBytes is a message_too_large session error, reported as audio_frame_bytes', async () => {
    const { port, heard, limits } = start({ maxAudioMessageBytes: 1024 });
    const tags = flvAudioTags('aac/sine48k_stereo_128k.flv');
    const c = connect(port);
    c.socket.write(Buffer.concat([publishPrefix(), audioMessages(tags.slice(0, 3))]));
    const h = await until(() => heard[0]?.audio.length === 3 && heard[0]);
    // Only the header of a 2000-byte audio message: refused from the declared length alone.
    c.socket.write(header(AUDIO_CSID, 8, 1, 100, 2000));
    await until(() => c.isClosed());
    expect(h.events.at(-1)).toMatchObject({ type: 'error', code: 'message_too_large' });
    expect(limits).toEqual([{ cause: 'audio_frame_bytes', remote: h.conn.remote }]);
  });
});

describe('RtmpListener audio kind (4th argument of audio())', () => {
  it('kinds are 0 sequence header, 1 coded frame, 2 other', () => {
    expect([AUDIO_SEQUENCE_HEADER, AUDIO_FRAME, AUDIO_OTHER]).toEqual([0, 1, 2]);
  });

  it('AAC, recorded FFmpeg publish: the sequence header is kind 0, every frame kind 1', async () => {
    const { port, heard } = start();
    connect(port).socket.write(FFMPEG_48K);
    const h = await until(() => heard[0]?.events.some((e) => e.type === 'unpublish') && heard[0]);
    expect(h.audio.length).toBeGreaterThan(100);
    expect(h.audio[0]!.kind).toBe(0);
    expect(h.audio.slice(1).every((a) => a.kind === 1)).toBe(true);
    // Timestamps are not disturbed by the kind in the same slot.
    expect(h.audio.slice(1).every((a, i) => a.ts >= h.audio[i]!.ts && a.ts < 10_000)).toBe(true);
  });

  it('MP3 (classic FLV SoundFormat 2): every message is a coded frame', async () => {
    const { port, heard } = start();
    const tags = flvAudioTags('mp3/sine44k1_stereo_128k.flv');
    connect(port).socket.write(Buffer.concat([publishPrefix(), audioMessages(tags)]));
    const h = await until(() => heard[0]?.audio.length === tags.length && heard[0]);
    expect(h.audio.every((a) => a.kind === 1)).toBe(true);
    expect(h.audio.map((a) => a.ts)).toEqual(tags.map((t) => t.ts));
  });

  it('Opus (E-RTMP): SequenceStart 0, CodedFrames 1, MultichannelConfig and SequenceEnd 2 — never an error', async () => {
    const tags = opusTags('opus/sine48k_stereo_128k.ogg').slice(0, 60);
    const last = tags.at(-1)!.ts;
    const extra = [
      { ts: last, body: exAudio(4, 'Opus', Buffer.from([0, 2])) }, // MultichannelConfig: unspecified order, 2 channels
      { ts: last + 20, body: exAudio(1, 'Opus', tags[1]!.body.subarray(5)) },
      { ts: last + 40, body: exAudio(2, 'Opus', Buffer.alloc(0)) }, // SequenceEnd
    ];
    const { port, heard } = start();
    connect(port).socket.write(Buffer.concat([publishPrefix(), audioMessages([...tags, ...extra])]));
    const h = await until(() => heard[0]?.audio.length === tags.length + 3 && heard[0]);
    const kinds = h.audio.map((a) => a.kind);
    expect(kinds[0]).toBe(0);
    expect(kinds.slice(1, tags.length).every((k) => k === 1)).toBe(true);
    expect(kinds.slice(tags.length)).toEqual([2, 1, 2]);
    expect(h.events.some((e) => e.type === 'error')).toBe(false);
  });

  it('routed without frames: JS hears only the kind-0 messages; the segmenter takes the rest without errors', async () => {
    const seg = new Segmenter({ container: 'fmp4', targetDurationMs: 1000, partTargetMs: 500, expectCodec: 'opus' });
    const tags = opusTags('opus/sine48k_stereo_128k.ogg').slice(0, 120);
    const mid = tags[60]!.ts;
    const withConfig = [...tags.slice(0, 60), { ts: mid, body: exAudio(4, 'Opus', Buffer.from([0, 2])) }, ...tags.slice(60)];
    const { port, heard } = start({}, (h) => h.conn.route({ segmenter: seg, onEvents: (events) => h.segmenterEvents.push(...events) }, false));
    const c = connect(port);
    c.socket.write(publishPrefix());
    const h = await until(() => heard[0]?.events.some((e) => e.type === 'publish') && heard[0]);
    c.socket.write(audioMessages(withConfig));
    await until(() => h.segmenterEvents.filter((e) => e.type === 'segment').length >= 2);
    expect(h.audio.map((a) => [a.kind, a.segmented])).toEqual([[0, true]]);
    expect(h.segmenterEvents.filter((e) => e.type === 'error')).toEqual([]);
  });
});
