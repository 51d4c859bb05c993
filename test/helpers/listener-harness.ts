/**
 * An RtmpListener on 127.0.0.1:0 that records everything each connection tells its handler, and
 * client sockets that record what the server writes back: what the listener tests share. Call
 * `closeAll()` after each test (afterEach).
 */
import net from 'node:net';
import { RtmpListener, type AudioKind, type RtmpConnection, type RtmpConnectionHandler, type RtmpControlEvent, type RtmpListenerOptions } from '../../src/native/rtmp-listener.js';
import { type SegmenterEvent } from '../../src/native/segmenter.js';

/** One audio message as the handler heard it. */
export interface HeardAudio {
  ts: number;
  bytes: number;
  segmented: boolean;
  kind: AudioKind;
  /** AAC sequence header (SoundFormat 10, AACPacketType 0). */
  header: boolean;
  /** The body itself (the view the handler got). */
  data: Buffer;
}

/** Everything one connection told its handler. */
export interface Heard {
  conn: RtmpConnection;
  audio: HeardAudio[];
  events: RtmpControlEvent[];
  /** Audio and events in the order they came: 'audio' or the event type. */
  order: string[];
  segmenterEvents: SegmenterEvent[];
  timeouts: number;
  closed: Array<{ reason: string; error: { code: string; message: string } | null }>;
}

const listeners: RtmpListener[] = [];
const sockets: net.Socket[] = [];

/** Destroys every client socket and closes every listener started since the last call. */
export function closeAll(): void {
  for (const s of sockets.splice(0)) s.destroy();
  for (const l of listeners.splice(0)) l.close();
}

/** A listener on 127.0.0.1:0; `react` may act on each control event (accept, reject, route...). */
export function startListener(react: (h: Heard, e: RtmpControlEvent) => void = () => {}, options: RtmpListenerOptions = {}) {
  const heard: Heard[] = [];
  const listener = new RtmpListener(options, (conn) => {
    const h: Heard = { conn, audio: [], events: [], order: [], segmenterEvents: [], timeouts: 0, closed: [] };
    heard.push(h);
    const handler: RtmpConnectionHandler = {
      audio: (ts, data, segmented, kind) => {
        h.audio.push({ ts, bytes: data.length, segmented, kind, header: data[0]! >> 4 === 10 && data[1] === 0, data });
        h.order.push('audio');
      },
      event: (e) => {
        h.events.push(e);
        h.order.push(e.type);
        react(h, e);
      },
      timeout: () => h.timeouts++,
      closed: (reason, error) => h.closed.push({ reason, error }),
    };
    return handler;
  });
  listeners.push(listener);
  const port = listener.listen('127.0.0.1', 0);
  return { listener, port, heard };
}

/** Connects and collects what the server writes back. */
export function connect(port: number) {
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.setNoDelay(true);
  sockets.push(socket);
  const received: Buffer[] = [];
  socket.on('data', (d) => received.push(d));
  socket.on('error', () => {});
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, received: () => Buffer.concat(received), ended };
}

/** Polls `fn` every 10 ms until it returns something truthy; throws after `ms`. */
export async function until<T>(fn: () => T | undefined | null | false, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Writes `bytes` in pieces of `step`, each after the previous one was handed to the kernel and a
 *  turn of the event loop passed (so the server mostly reads them apart). */
export async function writeInPieces(socket: net.Socket, bytes: Buffer, step: number): Promise<void> {
  for (let i = 0; i < bytes.length; i += step) {
    await new Promise<void>((resolve, reject) => socket.write(bytes.subarray(i, i + step), (e) => (e ? reject(e) : resolve())));
    await new Promise((r) => setImmediate(r));
  }
}
