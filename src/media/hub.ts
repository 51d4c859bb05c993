/**
 * The per-stream media hub: feeds ingest audio to the stream's segmenter and keeps the finished
 * segments (immutable, in memory) for the HLS side. One hub per live stream; it outlives publisher
 * reconnects (the timeline continues with a discontinuity). Imports no other app folder: the
 * segmenter comes in through a factory.
 */

/** A finished segment. `data` is the native buffer itself (never copied). */
export interface Segment {
  sequence: number;
  data: Uint8Array;
  durationMs: number;
  discontinuity: boolean;
  /** Discontinuity sequence number of this segment (RFC 8216 §4.3.3.3). */
  discontinuitySequence: number;
}

/** Segmenter events the hub understands (the native TsSegmenter's, see docs/native-api.md). */
export type HubSegmenterEvent =
  | { type: 'config'; codecs: string; sampleRate: number; channels: number }
  | { type: 'segment'; sequence: number; data: Uint8Array; durationMs: number; discontinuity: boolean }
  | { type: 'error'; code: string; message: string };

export interface SegmenterLike {
  pushAudio(timestampMs: number, data: Uint8Array): HubSegmenterEvent[];
  flush(): HubSegmenterEvent[];
  discontinuity(): void;
}

/** Hub settings. Durations in ms; bitrates in kbps. */
export interface HubOptions {
  targetDurationMs: number;
  /** Segments listed in the live playlist. */
  windowSegments: number;
  /** Nominal ingest bitrate (kbps), used for BANDWIDTH until segments are measured. */
  nominalKbps: number;
  createSegmenter: () => SegmenterLike;
}

/** What one pushAudio did. `started`: the first audio frame after a sequence header arrived. */
export interface PushResult {
  started: boolean;
  errors: Array<{ code: string; message: string }>;
}

/**
 * A subscriber to a hub's ingest audio (the WebRTC packet source). `audio` gets every FLV
 * AUDIODATA body as pushed (sequence headers included) before the segmenter sees it; `data` is
 * only valid during the call (copy what you keep). `end` when the stream ends.
 */
export interface AudioTap {
  audio(timestampMs: number, data: Uint8Array): void;
  end(): void;
}

/** Segments kept past the window, so that a player that just read the playlist can still fetch them. */
const RETAIN_EXTRA = 4;

export class StreamHub {
  /** Bumped on every change a playlist shows (new segment, end). */
  version = 0;
  ended = false;
  codecs: string | null = null;
  sampleRate = 0;
  channels = 0;
  /** Largest segment duration seen (ms). */
  maxDurationMs = 0;
  private readonly segments: Segment[] = [];
  private readonly segmenter: SegmenterLike;
  private sawAudio = false;
  private discontinuitySequence = 0;
  private totalBytes = 0;
  private totalMs = 0;
  private peakBps = 0;
  private taps: AudioTap[] = [];
  /** The last audio sequence header pushed (AAC AudioSpecificConfig or E-RTMP SequenceStart), copied. */
  audioHeader: Uint8Array | null = null;

  constructor(readonly streamId: string, readonly opts: HubOptions) {
    this.segmenter = opts.createSegmenter();
  }

  /** Feeds one FLV AUDIODATA body with its RTMP timestamp (ms). */
  pushAudio(timestampMs: number, data: Uint8Array): PushResult {
    if (isAnySequenceHeader(data)) this.audioHeader = data.slice();
    if (this.taps.length !== 0) for (const t of this.taps) t.audio(timestampMs, data);
    const events = this.segmenter.pushAudio(timestampMs, data);
    const errors = this.apply(events);
    let started = false;
    if (!this.sawAudio && this.codecs !== null && errors.length === 0 && !isSequenceHeader(data)) {
      this.sawAudio = true;
      started = true;
    }
    return { started, errors };
  }

  /** The publisher left: close the open segment. */
  flush(): void {
    this.apply(this.segmenter.flush());
  }

  /** A publisher (re)attached to a running timeline: the next segment is a discontinuity. */
  discontinuity(): void {
    this.segmenter.discontinuity();
  }

  /** The stream ended: playlists get EXT-X-ENDLIST; audio taps hear `end`. */
  end(): void {
    if (this.ended) return;
    this.flush();
    this.ended = true;
    this.version++;
    const taps = this.taps;
    this.taps = [];
    for (const t of taps) t.end();
  }

  /** Subscribes to the ingest audio (costs nothing per push without subscribers). Returns the unsubscribe function. */
  onAudio(tap: AudioTap): () => void {
    this.taps = [...this.taps, tap];
    return () => {
      this.taps = this.taps.filter((t) => t !== tap);
    };
  }

  /** The segments of the live window, oldest first. */
  window(): Segment[] {
    return this.segments.slice(-this.opts.windowSegments);
  }

  /** A retained segment by media sequence number. */
  segment(sequence: number): Segment | undefined {
    const first = this.segments[0];
    if (!first) return undefined;
    return this.segments[sequence - first.sequence];
  }

  /** Peak and average bitrate of the segments so far (bits/s), nominal until one exists. */
  bandwidth(): { peak: number; average: number } {
    if (this.totalMs === 0) {
      const nominal = Math.round(this.opts.nominalKbps * 1000 * 1.1);
      return { peak: nominal, average: nominal };
    }
    return { peak: Math.round(this.peakBps), average: Math.round((this.totalBytes * 8000) / this.totalMs) };
  }

  private apply(events: HubSegmenterEvent[]): Array<{ code: string; message: string }> {
    const errors: Array<{ code: string; message: string }> = [];
    for (const e of events) {
      if (e.type === 'config') {
        this.codecs = e.codecs;
        this.sampleRate = e.sampleRate;
        this.channels = e.channels;
      } else if (e.type === 'segment') {
        if (e.discontinuity && this.segments.length > 0) this.discontinuitySequence++;
        this.segments.push({
          sequence: e.sequence,
          data: e.data,
          durationMs: e.durationMs,
          discontinuity: e.discontinuity && this.segments.length > 0,
          discontinuitySequence: this.discontinuitySequence,
        });
        if (this.segments.length > this.opts.windowSegments + RETAIN_EXTRA) this.segments.shift();
        this.maxDurationMs = Math.max(this.maxDurationMs, e.durationMs);
        this.totalBytes += e.data.byteLength;
        this.totalMs += e.durationMs;
        if (e.durationMs > 0) this.peakBps = Math.max(this.peakBps, (e.data.byteLength * 8000) / e.durationMs);
        this.version++;
      } else errors.push({ code: e.code, message: e.message });
    }
    return errors;
  }
}

/** AAC sequence header: SoundFormat 10 and AACPacketType 0 (FLV spec E.4.2). */
function isSequenceHeader(d: Uint8Array): boolean {
  return d.length >= 2 && d[0]! >> 4 === 10 && d[1] === 0;
}

/** An audio sequence header: AAC packet type 0 (FLV E.4.2) or an E-RTMP SequenceStart (ExHeader, packet type 0). */
function isAnySequenceHeader(d: Uint8Array): boolean {
  if (d.length < 2) return false;
  const b = d[0]!;
  if (b >> 4 === 10) return d[1] === 0;
  return b >> 4 === 9 && (b & 0x0f) === 0 && d.length >= 5;
}

/** Hubs by stream id. */
export class MediaRegistry {
  private readonly hubs = new Map<string, StreamHub>();

  get(streamId: string): StreamHub | undefined {
    return this.hubs.get(streamId);
  }
  /** The stream's hub, created on first use. */
  open(streamId: string, opts: HubOptions): StreamHub {
    let hub = this.hubs.get(streamId);
    if (!hub) {
      hub = new StreamHub(streamId, opts);
      this.hubs.set(streamId, hub);
    }
    return hub;
  }
  delete(streamId: string): void {
    this.hubs.delete(streamId);
  }
}
