/**
 * The RTMP ingest listener (native/binding/rtmp_addon.cc, docs/native-api.md "RtmpServer"): the
 * sockets, the RTMP session per connection and the caps in C++; `RtmpListener` and `RtmpConnection`
 * are its JS face. Protocol problems come back as `error` events, never as throws.
 */
import { loadedAddon } from './addon.js';
import type { Segmenter, SegmenterEvent } from './segmenter.js';

/** Events of one RTMP connection (see docs/native-api.md). */
export type RtmpEvent =
  | { type: 'connect'; app: string; tcUrl: string; flashVer: string; fourCcList: string[] }
  | { type: 'publish'; streamName: string; publishType: string; streamId: number }
  | { type: 'unpublish'; streamId: number }
  | { type: 'metadata'; values: Record<string, number | string | boolean> }
  | { type: 'audio'; timestamp: number; data: Buffer }
  | { type: 'error'; code: string; message: string };

/** Every RtmpEvent but audio (a handful per connection). */
export type RtmpControlEvent = Exclude<RtmpEvent, { type: 'audio' }>;

/** Caps of each connection's RTMP session (bytes; see docs/native-api.md "RTMP session"). */
export interface RtmpSessionOptions {
  /** Any one RTMP message, integer 1024..16777215 (default 1 MiB). */
  maxMessageBytes?: number;
  /** An audio message, integer 16..16777215 (default: maxMessageBytes); longer: error `message_too_large`. */
  maxAudioMessageBytes?: number;
  /** Bytes held (partial messages, replies not written yet) until the publish is accepted, integer
   *  4096..2^30 (default 65536); over: the connection is closed (`rtmp_prepublish_bytes`). */
  prePublishBytes?: number;
}

/** The addon's listener class (native/binding/rtmp_addon.cc); only RtmpListener below uses it. */
interface RawRtmpAddon {
  listen(host: string, port: number, backlog: number): number;
  close(): void;
  buffers(): [ArrayBuffer, ArrayBuffer];
  acceptPublish(id: number): void;
  rejectPublish(id: number, code: string, description: string): void;
  setTimeout(id: number, ms: number): void;
  route(id: number, segmenter: Segmenter | null, frames: boolean, merge: boolean): void;
  audioBytes(id: number): number;
  closeConnection(id: number): void;
}
type RawDispatch = (kind: number, id: number, a?: unknown, b?: unknown, c?: unknown, d?: unknown) => void;
const K_CONNECTION = 0;
const K_READ = 1;
const K_CLOSED = 2;
const K_TIMEOUT = 3;
const K_LIMIT = 4;
const READ_BUFFERS_CHANGED = 1;
const READ_SEGMENTED = 2;
/** 2^32: a READ audio slot holds timestamp + kind * 2^32. */
const KIND_UNIT = 4294967296;

/** The addon's listener constructor (native/binding/rtmp_addon.cc). */
const RtmpAddon = (loadedAddon as { RtmpAddon: new (options: Omit<RtmpListenerOptions, 'onLimit'>, dispatch: RawDispatch) => RawRtmpAddon }).RtmpAddon;

/** Audio message kind: an AAC AudioSpecificConfig or E-RTMP SequenceStart (e.g. OpusHead). */
export const AUDIO_SEQUENCE_HEADER = 0;
/** Audio message kind: coded audio (AAC raw_data_block, MP3 bytes, an Opus packet, ...). */
export const AUDIO_FRAME = 1;
/** Audio message kind: anything else — E-RTMP SequenceEnd, MultichannelConfig, an unknown
 *  AACPacketType, a truncated or multitrack header. Never a reason to fail a publish by itself. */
export const AUDIO_OTHER = 2;
/** What an audio message carries, read by the native FLV / E-RTMP audio tag parser. */
export type AudioKind = typeof AUDIO_SEQUENCE_HEADER | typeof AUDIO_FRAME | typeof AUDIO_OTHER;

/** Longest FLV / E-RTMP audio tag header in front of the codec payload (E-RTMP: 1 byte + FourCC):
 *  an audio message may be this much longer than the largest audio frame. */
export const AUDIO_TAG_HEADER_MAX_BYTES = 5;

/** Caps an RtmpListener enforces (the `limit` names of src/limits). */
export type RtmpLimitCause = 'rtmp_connections' | 'rtmp_connections_per_ip' | 'rtmp_publish_timeout' | 'rtmp_prepublish_bytes' | 'audio_frame_bytes';

/** Options of `new RtmpListener(...)`: RtmpSessionOptions per connection, connection caps and
 *  the publish deadline (docs/native-api.md "RtmpServer"). */
export interface RtmpListenerOptions extends RtmpSessionOptions {
  /** Connections open at once (accept to socket close), integer 1..1000000 (default 1000). */
  maxConnections?: number;
  /** Connections open at once from one IP, integer 1..1000000 (default 10). */
  maxConnectionsPerIp?: number;
  /** A connection whose publish is not accepted this long after accept is closed (ms, absolute,
   *  not reset by bytes), integer 100..3600000 (default 15000). */
  publishTimeoutMs?: number;
  /** Merged reads of routed connections, ms, integer 0..1000 (default 0 = off). */
  mergeReadsMs?: number;
  /** A cap was hit: refused at accept, closed (then `closed()` follows), or an oversized audio
   *  message (then an `error` event follows). `remote` is `ip:port`. Must not throw. */
  onLimit?: (cause: RtmpLimitCause, remote: string) => void;
  /**
   * An exception thrown by a handler, `onConnection` or `onLimit` (it never reaches native code,
   * where it would end the process): default, rethrown on a later turn of the event loop.
   */
  onCallbackError?: (e: unknown) => void;
}

/**
 * What one ingest connection tells its owner (RtmpListener's `onConnection` returns it). Every
 * call comes from a socket read, a timer or the peer's close — never from inside a call on the
 * connection.
 */
export interface RtmpConnectionHandler {
  /**
   * One audio message (RTMP timestamp in ms, the whole FLV AUDIODATA body), in message order.
   * `segmented`: the connection is routed and the message was already pushed to its segmenter
   * (delivered because frames were asked for, or because it is a sequence header). `data` is a
   * view of a Buffer that holds the read's bodies: never reused or overwritten, so it stays valid
   * after the call, but a kept view pins the whole read's bodies (docs/native-api.md "Audio
   * bodies"). `kind`:
   * what the tag header says it is (AUDIO_SEQUENCE_HEADER, AUDIO_FRAME, AUDIO_OTHER).
   */
  audio(timestampMs: number, data: Buffer, segmented: boolean, kind: AudioKind): void;
  /** Any other session event, in order with the audio. After `error` the session is dead. */
  event(e: RtmpControlEvent): void;
  /** No bytes for the time given to setTimeout (once per silent period). */
  timeout(): void;
  /**
   * The connection ran into a cap (reported to the listener's `onLimit` too), before the error or
   * close it causes: e.g. `audio_frame_bytes` before the session's `message_too_large` error.
   */
  limit?(cause: RtmpLimitCause): void;
  /**
   * The peer closed or the socket failed (not called after close()). `error`: the session's
   * error when the peer vanished mid-handshake or mid-message (`protocol_violation`,
   * `handshake_invalid`), else null.
   */
  closed(reason: string, error: { code: string; message: string } | null): void;
}

/** Where a routed connection's audio goes: a native segmenter, and who takes its events. */
export interface SegmenterRoute {
  segmenter: Segmenter;
  onEvents(events: SegmenterEvent[]): void;
}

/** One accepted RTMP connection of an RtmpListener (docs/native-api.md "RtmpServer"). */
export class RtmpConnection {
  /** @internal */
  handler: RtmpConnectionHandler | null = null;
  /** @internal */
  open = true;
  /** @internal Where the routed segmenter's events go (`route`). */
  segmentSink: ((events: SegmenterEvent[]) => void) | null = null;

  constructor(
    private readonly raw: RawRtmpAddon,
    /** Unique among the listener's open connections (an id is reused only after its close). */
    readonly id: number,
    /** The peer, `ip:port`. */
    readonly remote: string,
    private readonly forget: (c: RtmpConnection) => void,
  ) {}

  /** Answers the pending publish with NetStream.Publish.Start (written at once). */
  acceptPublish(): void {
    if (this.open) this.raw.acceptPublish(this.id);
  }
  /** Answers the pending publish (or refuses the running one) with an error onStatus `code`, e.g.
   *  NetStream.Publish.BadName or NetStream.Publish.Rejected (written at once); then close(). */
  rejectPublish(code: string, description: string): void {
    if (this.open) this.raw.rejectPublish(this.id, code, description);
  }
  /** `handler.timeout()` after `ms` without a byte from the peer (0 = never); checked once a second. */
  setTimeout(ms: number): void {
    if (this.open) this.raw.setTimeout(this.id, ms);
  }
  /**
   * From the next socket read on, every audio message goes to `target.segmenter` in C++ (no JS
   * call per message), and what it makes of a read's audio (parts, segments, errors) goes straight
   * to `target.onEvents`, before that read's `audio`/`event` calls (so they belong to the route in
   * effect when the audio was pushed). `audio()` then hears only sequence headers — or every
   * message when `frames` (taps, transcoder), flagged `segmented`. `null`: back to `audio()` for
   * everything. `merge`: with the listener's `mergeReadsMs`, read the socket lazily (every
   * mergeReadsMs) while the segmenter's next part/segment cut is further away than that (frames
   * then reach `audio()` up to that late). Throws TypeError when `target.segmenter` is not a
   * Segmenter.
   */
  route(target: SegmenterRoute | null, frames: boolean, merge = false): void {
    if (!this.open) return;
    this.raw.route(this.id, target ? target.segmenter : null, frames, merge);
    this.segmentSink = target ? target.onEvents : null;
  }
  /** FLV audio body bytes received so far (the ingest bitrate watch samples it). */
  get audioBytes(): number {
    return this.open ? this.raw.audioBytes(this.id) : 0;
  }
  /** Writes what is pending, then closes (FIN; forced after 2 s). No handler call follows. */
  close(): void {
    if (!this.open) return;
    this.open = false;
    this.handler = null;
    this.segmentSink = null;
    this.forget(this);
    this.raw.closeConnection(this.id);
  }
}

/**
 * The RTMP ingest listener: TCP accept and reads in C++ on Node's libuv loop (native/io), a native
 * RTMP session per connection (RTMP 1.0 §5.2–§7), with the caps of RtmpListenerOptions (bytes,
 * ms, counts) enforced in C++ and reported to `onLimit`. `mergeReadsMs` (0..1000, default 0):
 * routed connections are read every that many ms by one timer instead of as bytes arrive (fewer
 * wakeups, that much more latency at most). Throws TypeError for bad options.
 */
export class RtmpListener {
  private readonly raw: RawRtmpAddon;
  private readonly conns = new Map<number, RtmpConnection>();
  private readonly onLimit: ((cause: RtmpLimitCause, remote: string) => void) | undefined;
  private readonly forget = (c: RtmpConnection) => {
    if (this.conns.get(c.id) === c) this.conns.delete(c.id);
  };
  private meta!: Float64Array;
  private arena!: ArrayBuffer;

  constructor(options: RtmpListenerOptions, private readonly onConnection: (c: RtmpConnection) => RtmpConnectionHandler) {
    const { onLimit, onCallbackError, ...native } = options;
    this.onLimit = onLimit;
    const onError = onCallbackError ?? ((e: unknown) => setImmediate(() => { throw e; }));
    const dispatch: RawDispatch = (kind, id, a, b, c, d) => {
      try {
        this.dispatch(kind, id, a, b, c, d);
      } catch (e) {
        onError(e);
      }
    };
    this.raw = new RtmpAddon(native, dispatch);
    this.mapBuffers();
  }

  /** Listens on an IP literal (resolve names first); port 0 = a free one. Returns the bound port.
   *  @throws Error with `code` (EADDRINUSE, EACCES, EINVAL, ...) */
  listen(host: string, port: number, backlog = 511): number {
    return this.raw.listen(host, port, backlog);
  }

  /** Stops listening and closes every connection (no handler calls follow). */
  close(): void {
    for (const c of this.conns.values()) {
      c.open = false;
      c.handler = null;
    }
    this.conns.clear();
    this.raw.close();
  }

  /** Open connections. */
  get size(): number {
    return this.conns.size;
  }

  private dispatch(kind: number, id: number, a: unknown, b: unknown, c: unknown, d: unknown): void {
    if (kind === K_READ) {
      const conn = this.conns.get(id);
      if (conn?.handler) this.read(conn, a as number, b as RtmpControlEvent[] | undefined, c as SegmenterEvent[] | undefined, d as number);
      return;
    }
    if (kind === K_CONNECTION) {
      const conn = new RtmpConnection(this.raw, id, a as string, this.forget);
      this.conns.set(id, conn);
      conn.handler = this.onConnection(conn);
      return;
    }
    if (kind === K_LIMIT) {
      this.onLimit?.(a as RtmpLimitCause, b as string);
      if (id !== 0) this.conns.get(id)?.handler?.limit?.(a as RtmpLimitCause);
      return;
    }
    const conn = this.conns.get(id);
    if (!conn) return;
    if (kind === K_TIMEOUT) {
      conn.handler?.timeout();
      return;
    }
    if (kind === K_CLOSED) {
      this.conns.delete(id);
      const h = conn.handler;
      conn.open = false;
      conn.handler = null;
      h?.closed(a as string, (b as { code: string; message: string } | null) ?? null);
    }
  }

  private read(conn: RtmpConnection, count: number, control: RtmpControlEvent[] | undefined, segEvents: SegmenterEvent[] | undefined, flags: number): void {
    if (flags & READ_BUFFERS_CHANGED) this.mapBuffers();
    const segmented = (flags & READ_SEGMENTED) !== 0;
    // First: they come from this read's audio, pushed before any JS ran, so they belong to the
    // route in effect now (an event below may change it).
    if (segEvents && segEvents.length > 0) conn.segmentSink?.(segEvents);
    if (count > 0) {
      const meta = this.meta;
      const total = meta[0]!;
      let bodies: Buffer | null = null;
      if (total > 0) {
        bodies = Buffer.allocUnsafe(total);
        bodies.set(new Uint8Array(this.arena, 0, total));
      }
      let start = 0;
      let k = 0;
      for (let i = 0; i < count; i++) {
        const h = conn.handler;
        if (!h) return; // closed by an earlier event of this read
        const slot = meta[1 + 2 * i]!;
        if (slot >= 0) {
          const kind = (slot >= 2 * KIND_UNIT ? AUDIO_OTHER : slot >= KIND_UNIT ? AUDIO_FRAME : AUDIO_SEQUENCE_HEADER) as AudioKind;
          const end = meta[2 + 2 * i]!;
          h.audio(slot - kind * KIND_UNIT, start === 0 && end === total ? bodies! : bodies!.subarray(start, end), segmented, kind);
          start = end;
        } else {
          h.event(control![k++]!);
        }
      }
    }
  }

  private mapBuffers(): void {
    const [meta, arena] = this.raw.buffers();
    this.meta = new Float64Array(meta);
    this.arena = arena;
  }
}
