/**
 * The only module that loads the C++ addon (`build/Release/skylark.node`, or `build/Debug/` when
 * only that is built, or the file `SKYLARK_ADDON` names: resolveAddonPath). See docs/native-api.md.
 * `Segmenter` is sans-I/O (bytes in, events out); `RtmpListener` owns the ingest sockets. Protocol
 * and media problems come back as `error` events, never as throws.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

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
    this.raw = new addon.RtmpAddon(native, dispatch);
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

/** Audio codecs the segmenter takes. */
export type AudioCodec = 'aac' | 'mp3' | 'opus';
/** Output containers: MPEG-TS (AAC, MP3) or fragmented MP4 / CMAF (AAC, MP3, Opus; LL-HLS parts). */
export type Container = 'ts' | 'fmp4';

/** Options of `new Segmenter(...)`. Durations in ms. */
export interface SegmenterOptions {
  container: Container;
  /** Segment target, integer 100..60000 (default 2000). */
  targetDurationMs?: number;
  /** LL-HLS part target (fmp4 only), 0 = no parts (default) or an integer 50..targetDurationMs. */
  partTargetMs?: number;
  /** When set, audio of any other codec is refused with an error event `codec_mismatch`. */
  expectCodec?: AudioCodec;
  /** Largest frame (AAC raw_data_block, MP3 frame, Opus packet; bytes), integer 0..16777215;
   *  larger: error `frame_too_large`, dropped. 0 / unset = no cap (AAC is always capped at 8184,
   *  what one ADTS frame carries). */
  maxFrameBytes?: number;
  /** Frame bytes of one segment, integer 0..4294967295; a frame that would exceed it: error
   *  `segment_too_large`, dropped. 0 / unset = no cap. */
  maxSegmentBytes?: number;
  /**
   * With parts only: whether segment events carry the segment's bytes, the concatenation of its
   * parts' bytes in order (default true). false: their `data` is empty and the caller joins the
   * parts it got — the bytes are not made (and allocated) twice. Throws TypeError when not a boolean.
   */
  segmentBytes?: boolean;
}

/** Stable error codes of `{type: 'error'}` segmenter events (docs/native-api.md). */
export type SegmenterErrorCode =
  | 'audio_before_sequence_header'
  | 'bad_audio_specific_config'
  | 'bad_opus_head'
  | 'bad_opus_packet'
  | 'bad_mp3_header'
  | 'unsupported_codec'
  | 'codec_mismatch'
  | 'invalid_audio_tag'
  | 'frame_too_large'
  | 'segment_too_large';

/** `config`: the stream's codec is known (first sequence header / MP3 frame, or a change). */
export interface ConfigEvent {
  type: 'config';
  codec: AudioCodec;
  /** HLS CODECS / RFC 6381: 'mp4a.40.2', 'mp4a.40.5', 'mp4a.40.29', 'mp4a.40.34' (MP3), 'opus'. */
  codecs: string;
  /** Output sample rate (Hz): the SBR rate for HE-AAC, 48000 for Opus. */
  sampleRate: number;
  channels: number;
  /** AAC only: the object type in `codecs`. */
  audioObjectType?: number;
  /** fmp4 only: the fMP4 timescale (= the sample clock: AAC core rate, MP3 rate, 48000 Opus). */
  timescale?: number;
  /** fmp4 only: the init segment (ftyp + moov) for `#EXT-X-MAP`; replaces the previous one. */
  init?: Buffer;
}

/** A now-playing change (`Segmenter.pushMetadata`) as written into a part / segment. */
export interface SegmenterMetadataMark {
  /** The change's number, from 1 (fmp4: the emsg `id`; the same change in a part and its segment). */
  id: number;
  /** The timestamp it was pushed with (RTMP clock, ms, modulo 2^32). */
  timestampMs: number;
  /** PTS of the audio frame it is presented with (90 kHz, same timeline as the events' `pts90k`). */
  pts90k: number;
  /** fmp4 only: the emsg presentation_time, in `timescale` units (the frame's decode time). */
  presentationTime?: number;
}

/** The fields of `Segmenter.pushMetadata` (docs/behaviour.md §11). UTF-8; each cut to 256 characters. */
export interface SegmenterMetadataFields {
  title: string;
  artist?: string | null;
  album?: string | null;
  url?: string | null;
}

/** `part`: one LL-HLS part (fmp4 with partTargetMs), emitted as soon as it closes. */
export interface PartEvent {
  type: 'part';
  /** Media sequence number of the segment the part belongs to. */
  sequence: number;
  /** Index of the part within its segment, from 0. */
  partIndex: number;
  /** One moof+mdat (external buffer). */
  data: Buffer;
  durationMs: number;
  pts90k: number;
  frames: number;
  independent: true;
  baseMediaDecodeTime: number;
  timescale: number;
  /** Now-playing changes it carries (an emsg each before its moof), in presentation order; absent when none. */
  metadata?: SegmenterMetadataMark[];
}

/** `segment`: a finished, immutable media segment. */
export interface SegmentDoneEvent {
  type: 'segment';
  sequence: number;
  /** TS: 188-byte packets; fmp4: moof+mdat (with parts: exactly its parts' bytes concatenated). */
  data: Buffer;
  /** From sample counts (EXTINF), may be fractional. */
  durationMs: number;
  /** PTS of the first frame, 90 kHz (the same timeline in both containers). */
  pts90k: number;
  discontinuity: boolean;
  frames: number;
  independent: true;
  /** fmp4 with parts: how many parts the segment has. */
  parts?: number;
  /** fmp4 only: tfdt of the first frame, in `timescale` units. */
  baseMediaDecodeTime?: number;
  timescale?: number;
  /** Now-playing changes it carries (fmp4: those of its parts; ts: an ID3 PES each), in
   *  presentation order; absent when none. */
  metadata?: SegmenterMetadataMark[];
}

export interface SegmenterErrorEvent {
  type: 'error';
  code: SegmenterErrorCode | (string & {});
  message: string;
  /** codec_mismatch only. */
  expected?: AudioCodec;
  /** codec_mismatch only: what the tag carried ('aac', 'mp3', 'opus', 'pcm', 'fLaC', ...). */
  received?: string;
}

export type SegmenterEvent = ConfigEvent | PartEvent | SegmentDoneEvent | SegmenterErrorEvent;

/** Per-stream-layer segmenter: FLV audio (AAC, MP3, Opus; classic and Enhanced RTMP) in, MPEG-TS or
 *  fMP4 segments (and LL-HLS parts) cut on audio duration out. Never throws for bad media. */
export interface Segmenter {
  /** One FLV AUDIODATA body with its RTMP timestamp (ms). */
  pushAudio(timestampMs: number, data: Uint8Array): SegmenterEvent[];
  /**
   * A now-playing change at `timestampMs` on the pushAudio clock (RTMP ms). It is presented with
   * the first audio frame not yet written out whose timestamp is ≥ it, or, when none is pending,
   * with the next frame pushed, and goes out with that frame's part and segment as timed ID3
   * (ID3v2.4 TIT2/TPE1/TALB/WXXX): fmp4 an `emsg` (scheme https://aomedia.org/emsg/ID3) before
   * the part's `moof`; ts (MP3) an ID3 PES declared in the PMT (Apple timed metadata). Those
   * events list it in `metadata`. Strings are cut to 256 characters; content never throws.
   * @throws TypeError when timestampMs is not a finite number, fields not an object, title not a
   *   string, or artist/album/url not a string, null or undefined
   */
  pushMetadata(timestampMs: number, fields: SegmenterMetadataFields): void;
  /** Ends the open segment (and part). */
  flush(): SegmenterEvent[];
  /** The next audio starts a new segment flagged `discontinuity`. */
  discontinuity(): void;
}

interface Addon {
  Segmenter: new (options: SegmenterOptions) => Segmenter;
  RtmpAddon: new (options: Omit<RtmpListenerOptions, 'onLimit'>, dispatch: RawDispatch) => RawRtmpAddon;
  abiVersion: number;
}

/** The addon file could not be found (`code` 'addon_not_found'); the message names every path tried. */
export class AddonNotFoundError extends Error {
  readonly code = 'addon_not_found';
  constructor(
    message: string,
    /** The paths looked for, in order. */
    readonly tried: string[],
  ) {
    super(message);
    this.name = 'AddonNotFoundError';
  }
}

/**
 * The addon file to load: the file `env.SKYLARK_ADDON` names when set (relative to the current
 * directory), else `<root>/build/Release/skylark.node`, else `<root>/build/Debug/skylark.node`
 * (`node-gyp rebuild --debug`). `exists` is injectable for tests.
 * @throws AddonNotFoundError naming what it looked for when that file (or neither build) exists
 */
export function resolveAddonPath(root: string, env: NodeJS.ProcessEnv = process.env, exists: (p: string) => boolean = existsSync): string {
  const named = env.SKYLARK_ADDON;
  if (named) {
    const file = path.resolve(named);
    if (exists(file)) return file;
    throw new AddonNotFoundError(`SKYLARK_ADDON names ${file}, which does not exist`, [file]);
  }
  const tried = ['Release', 'Debug'].map((type) => path.join(root, 'build', type, 'skylark.node'));
  const found = tried.find((file) => exists(file));
  if (found) return found;
  throw new AddonNotFoundError(
    `the native addon is not built: looked for ${tried.join(' and ')} (npm run build:native builds it; SKYLARK_ADDON may name another skylark.node)`,
    tried,
  );
}

// src/live/native or dist/live/native → the repository root is three levels up.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** The addon file this process loaded (see resolveAddonPath). */
export const addonPath = resolveAddonPath(root);
const addon = createRequire(import.meta.url)(addonPath) as Addon;
/** The loaded addon object, for the other wrappers in src/live/native/ (each types its own class). */
export const loadedAddon: object = addon;

/** Constructor of Segmenter (see SegmenterOptions). Throws TypeError for invalid options. */
export const Segmenter = addon.Segmenter;
