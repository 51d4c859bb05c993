/**
 * IcecastSource: the sans-I/O parser of one Icecast source connection's request body (an MP3,
 * ADTS or Ogg Opus byte stream, as FFmpeg, libshout clients and Liquidsoap send it), turning it
 * into the audio messages an RTMP publisher of the same audio sends — FLV AUDIODATA bodies with a
 * timestamp in ms — so they feed the same Segmenter. See docs/native-api.md "IcecastSource".
 */
import { loadedAddon } from './addon.js';

/** The codec a stream takes (and an Icecast source must send): `Content-Type` audio/mpeg → 'mp3',
 *  audio/aac or audio/aacp (ADTS) → 'aac', audio/ogg or application/ogg (Ogg Opus) → 'opus'. */
export type IcecastCodec = 'mp3' | 'aac' | 'opus';

/** Stable error codes of IcecastSource `error` events. */
export type IcecastSourceErrorCode =
  | 'codec_mismatch' // the bytes are another codec (`received` names it)
  | 'no_sync' // 64 KiB without a frame (MP3/ADTS) or a page with a good CRC (Ogg)
  | 'frame_too_large' // a frame / Opus packet over maxFrameBytes
  | 'bad_header' // an unusable OpusHead, a missing OpusTags, an ADTS setup we cannot carry, ...
  | 'tag_too_large'; // an ID3v2 tag over 1 MiB

/** OpusTags (RFC 7845 §5.2) of an Ogg Opus source: one per logical stream (a chained stream —
 *  a new track — brings new ones). */
export interface IcecastTags {
  /** The encoder's vendor string. */
  vendor: string;
  /** User comments in order, as sent: 'KEY=value' (e.g. 'TITLE=…', 'ARTIST=…'; keys in any case). */
  comments: string[];
  /** Comments were dropped (the packet was over 16 KiB, e.g. cover art, or over 256 comments). */
  truncated: boolean;
}

/** What IcecastSource reports besides audio, in order with it. */
export type IcecastSourceEvent =
  /** OpusTags; `timestampMs`: the timestamp of the audio that follows them. */
  | ({ type: 'tags'; timestampMs: number } & IcecastTags)
  /** Sticky: nothing more comes from this source; close it. */
  | {
      type: 'error';
      code: IcecastSourceErrorCode | (string & {});
      message: string;
      /** codec_mismatch only: the codec the stream takes. */
      expected?: IcecastCodec;
      /** codec_mismatch only: what was sent ('mp3', 'aac', 'mp2', 'mp1', 'opus', 'vorbis', 'flac', 'speex', 'theora', 'ogg'). */
      received?: string;
    };

/** What `IcecastSource.pushTo` calls, in stream order. */
export interface IcecastHandler {
  /**
   * One audio message: timestamp (ms from the first audio, from sample counts; 32-bit like RTMP's)
   * and the whole FLV AUDIODATA body (MP3 frame; AAC sequence header or raw frame; Enhanced RTMP
   * Opus SequenceStart or CodedFrames). `body` is a view of a Buffer that holds the push's bodies;
   * it is never reused (keep a copy anyway if you keep it long: it pins that buffer).
   */
  audio(timestampMs: number, body: Buffer): void;
  /** OpusTags or the (sticky) error. */
  event(e: IcecastSourceEvent): void;
}

/** Counters since the start (bytes unless named otherwise). */
export interface IcecastSourceStats {
  bytesIn: number;
  /** Audio messages out (sequence headers included). */
  messages: number;
  /** Skipped while looking for sync. */
  junkBytes: number;
  /** ID3v2 tags skipped. */
  tagBytes: number;
  /** MP3 Xing/Info/VBRI frames dropped. */
  infoFrames: number;
  syncLosses: number;
  badCrcPages: number;
  /** Ogg pages of other logical streams. */
  ignoredPages: number;
  /** Breaks in the Opus stream's page sequence. */
  pageGaps: number;
  /** Opus packets lost with missing pages, or malformed. */
  droppedPackets: number;
  /** Chained Ogg logical streams after the first. */
  chainedStreams: number;
}

/** The addon's class (native/binding/icecast_source.cc); only the wrapper below uses it. */
interface RawIcecastSource {
  /** (items << 3) | RAW_* flags; the batch is in buffers() until the next push(). */
  push(data: Uint8Array): number;
  buffers(): [ArrayBuffer, ArrayBuffer];
  takeEvents(): IcecastSourceEvent[];
  readonly stats: IcecastSourceStats;
  readonly tags: IcecastTags | null;
  readonly retainedBytes: number;
  readonly failed: boolean;
}
type RawIcecastSourceCtor = new (codec: IcecastCodec, options?: { maxFrameBytes?: number }) => RawIcecastSource;
const RawIcecastSource = (loadedAddon as { IcecastSource: RawIcecastSourceCtor }).IcecastSource;
const RAW_BUFFERS_CHANGED = 2;
const RAW_EVENTS = 4;
const NO_EVENTS: IcecastSourceEvent[] = [];

/**
 * One Icecast source connection's request body → audio messages for the Segmenter (same timeline
 * and bodies an RTMP publisher of the audio would send). Never throws for bad bytes (they become
 * a sticky `error` event); throws TypeError for a codec other than 'mp3' | 'aac' | 'opus', a
 * `maxFrameBytes` (bytes: largest MP3 frame, AAC raw frame or Opus packet; default 8192) outside
 * 1024..1048576, data that is not a Uint8Array, or a push from inside a handler.
 */
export class IcecastSource {
  private readonly raw: RawIcecastSource;
  private meta!: Float64Array;
  private arena!: ArrayBuffer;
  private iterating = false;

  constructor(
    /** The codec the stream takes. */
    readonly codec: IcecastCodec,
    options?: { maxFrameBytes?: number },
  ) {
    this.raw = new RawIcecastSource(codec, options);
    this.mapBuffers();
  }

  /** Feeds request body bytes (any split) and calls `handler` for what they completed, in order. */
  pushTo(data: Uint8Array, handler: IcecastHandler): void {
    if (this.iterating) throw new TypeError('IcecastSource.push: re-entrant call');
    const r = this.raw.push(data);
    if (r === 0) return;
    if (r & RAW_BUFFERS_CHANGED) this.mapBuffers();
    const count = Math.floor(r / 8);
    if (count === 0) return;
    const meta = this.meta;
    const events = r & RAW_EVENTS ? this.raw.takeEvents() : NO_EVENTS;
    const total = meta[0]!;
    // One copy of the push's bodies out of the reused arena (a slice of Node's pool when small).
    let bodies: Buffer | null = null;
    if (total > 0) {
      bodies = Buffer.allocUnsafe(total);
      bodies.set(new Uint8Array(this.arena, 0, total));
    }
    this.iterating = true;
    try {
      let start = 0;
      let k = 0;
      for (let i = 0; i < count; i++) {
        const ts = meta[1 + 2 * i]!;
        if (ts >= 0) {
          const end = meta[2 + 2 * i]!;
          handler.audio(ts, start === 0 && end === total ? bodies! : bodies!.subarray(start, end));
          start = end;
        } else {
          handler.event(events[k++]!);
        }
      }
    } finally {
      this.iterating = false;
    }
  }

  /** The same as objects (tests, tools): audio as `{type: 'audio', timestampMs, body}`. */
  push(data: Uint8Array): Array<{ type: 'audio'; timestampMs: number; body: Buffer } | IcecastSourceEvent> {
    const out: Array<{ type: 'audio'; timestampMs: number; body: Buffer } | IcecastSourceEvent> = [];
    this.pushTo(data, {
      audio: (timestampMs, body) => out.push({ type: 'audio', timestampMs, body }),
      event: (e) => out.push(e),
    });
    return out;
  }

  /** The newest OpusTags (Ogg Opus sources), or null. */
  get tags(): IcecastTags | null {
    return this.raw.tags;
  }

  /** Counters since the start. */
  get stats(): IcecastSourceStats {
    return this.raw.stats;
  }

  /** Bytes held between pushes (a partial frame, page or packet): ≤ 8201 for MP3/AAC, ≤ 65307 +
   *  max(maxFrameBytes, 16384) for Ogg Opus. */
  get retainedBytes(): number {
    return this.raw.retainedBytes;
  }

  /** The sticky error happened: later pushes are ignored. */
  get failed(): boolean {
    return this.raw.failed;
  }

  private mapBuffers(): void {
    const [meta, arena] = this.raw.buffers();
    this.meta = new Float64Array(meta);
    this.arena = arena;
  }
}
