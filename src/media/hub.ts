/**
 * The per-stream media hub: the layers of the stream's HLS ladder (PRODUCT.md §3, §9 "HLS") —
 * the ingest passed through, plus the layers an FFmpeg codec process encodes from it — and the
 * taps that hear the ingest audio (WebRTC, recording). One hub per live stream; it outlives
 * publisher reconnects (the timeline continues with a discontinuity). Imports no other app folder:
 * segmenters come in through a factory.
 */
import { Layer, type LayerSegmenter } from './layer.js';

export { Layer } from './layer.js';
export type { Segment, Part } from './layer.js';

export type HubCodec = 'aac' | 'mp3' | 'opus';

/** What the segmenter factory is asked for (the native Segmenter's options). Durations in ms. */
export interface SegmenterRequest {
  container: 'ts' | 'fmp4';
  targetDurationMs: number;
  partTargetMs: number;
  expectCodec: HubCodec;
}

/** Hub settings. Durations in ms; bitrates in kbps. */
export interface HubOptions {
  codec: HubCodec;
  targetDurationMs: number;
  /** LL-HLS part target for fMP4 layers (0 = classic HLS only). */
  partTargetMs: number;
  /** Segments listed in the live playlist. */
  windowSegments: number;
  /** The ladder, top first: [passthrough nominal kbps, encoded layers' kbps…]. */
  ladder: number[];
  createSegmenter: (o: SegmenterRequest) => LayerSegmenter;
}

/**
 * A subscriber to a hub's ingest audio (the WebRTC packet source, the recorder). `audio` gets every
 * FLV AUDIODATA body as pushed (sequence headers included) before the segmenter sees it; `data` is
 * only valid during the call (copy what you keep). `end` when the stream ends.
 */
export interface AudioTap {
  audio(timestampMs: number, data: Uint8Array): void;
  end(): void;
}

/** A segmenter error of one pushed frame (the frame was dropped). */
export interface HubError {
  code: string;
  message: string;
  expected?: string;
  received?: string;
}

const NO_ERRORS: HubError[] = [];

/**
 * The container of a codec's layers (docs/decisions.md "HLS"): AAC and Opus in fMP4/CMAF with
 * LL-HLS parts; MP3 in MPEG-TS (what every player takes for MP3).
 */
export function containerFor(codec: HubCodec): 'ts' | 'fmp4' {
  return codec === 'mp3' ? 'ts' : 'fmp4';
}

/** Layer name of a layer of `kbps`: `a128`. */
export const layerName = (kbps: number) => `a${kbps}`;

export class StreamHub {
  ended = false;
  /** The ladder's layers, top (passthrough) first. */
  readonly layers: Layer[];
  private taps: AudioTap[] = [];
  /** The last audio sequence header pushed (AAC AudioSpecificConfig or E-RTMP SequenceStart), copied. */
  audioHeader: Uint8Array | null = null;

  constructor(readonly streamId: string, readonly opts: HubOptions) {
    const container = containerFor(opts.codec);
    const partTargetMs = container === 'fmp4' ? opts.partTargetMs : 0;
    this.layers = opts.ladder.map(
      (kbps, i) =>
        new Layer({
          name: layerName(kbps),
          kbps,
          container,
          targetDurationMs: opts.targetDurationMs,
          partTargetMs,
          windowSegments: opts.windowSegments,
          passthrough: i === 0,
          createSegmenter: () => opts.createSegmenter({ container, targetDurationMs: opts.targetDurationMs, partTargetMs, expectCodec: opts.codec }),
        }),
    );
  }

  /** The passthrough layer (the ingest, not re-encoded). */
  get top(): Layer {
    return this.layers[0]!;
  }

  /** Sum of the layers' versions: changes whenever any playlist would. */
  get version(): number {
    let v = this.ended ? 1 : 0;
    for (const l of this.layers) v += l.version + (l.failed ? 1 : 0);
    return v;
  }

  /** Feeds one ingest FLV AUDIODATA body (RTMP timestamp, ms) to the taps and the passthrough layer. */
  pushAudio(timestampMs: number, data: Uint8Array): HubError[] {
    this.tapAudio(timestampMs, data);
    const errors = this.top.push(timestampMs, data);
    return errors.length === 0 ? NO_ERRORS : errors;
  }

  /**
   * Feeds one ingest body to the taps only (and keeps a sequence header): the passthrough layer's
   * segmenter got it already (natively routed ingest, whose segmenter events go to `top.apply`).
   */
  tapAudio(timestampMs: number, data: Uint8Array): void {
    if (data.length >= 2 && isSequenceHeader(data)) this.audioHeader = data.slice();
    if (this.taps.length !== 0) for (const t of this.taps) t.audio(timestampMs, data);
  }

  /** Whether any tap listens (then every ingest frame must reach `pushAudio`/`tapAudio`). */
  get tapped(): boolean {
    return this.taps.length !== 0;
  }

  /** Called after a tap subscribes or unsubscribes (the live side re-routes ingest). */
  onTapsChanged: (() => void) | null = null;

  /** Feeds one encoded audio tag of the layer of `kbps` (from the ladder's codec process). */
  pushEncoded(kbps: number, timestampMs: number, data: Uint8Array): HubError[] {
    const layer = this.layers.find((l) => l.o.kbps === kbps && !l.o.passthrough);
    return layer && !layer.failed && !layer.ended ? layer.push(timestampMs, data) : NO_ERRORS;
  }

  /** The encoded layers stop (their codec process failed): they leave the multivariant playlist. */
  failEncoded(): void {
    for (const l of this.layers) if (!l.o.passthrough && !l.failed) l.failed = true;
  }

  /**
   * The publisher left: close the open segments — of every layer, or only of the passthrough
   * layer or only of the encoded ones (these close once the codec process has drained, so that
   * its last frames do not make a short extra segment).
   */
  flush(which: 'all' | 'passthrough' | 'encoded' = 'all'): void {
    for (const l of this.layers) if (which === 'all' || l.o.passthrough === (which === 'passthrough')) l.flush();
  }

  /** A publisher (re)attached to a running timeline: every layer's next segment is a discontinuity. */
  discontinuity(): void {
    for (const l of this.layers) l.discontinuity();
  }

  /** The stream ended: playlists get EXT-X-ENDLIST; audio taps hear `end`. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    for (const l of this.layers) l.end();
    const taps = this.taps;
    this.taps = [];
    for (const t of taps) t.end();
  }

  /** A layer by URL name. */
  layer(name: string): Layer | undefined {
    for (const l of this.layers) if (l.name === name) return l;
    return undefined;
  }

  /** Layers the multivariant playlist lists: the passthrough once ready, the others unless failed. */
  listed(): Layer[] {
    return this.top.ready ? this.layers.filter((l) => l.o.passthrough || !l.failed) : [];
  }

  /** Subscribes to the ingest audio (costs nothing per push without subscribers). Returns the unsubscribe function. */
  onAudio(tap: AudioTap): () => void {
    this.taps = [...this.taps, tap];
    this.onTapsChanged?.();
    return () => {
      const before = this.taps.length;
      this.taps = this.taps.filter((t) => t !== tap);
      if (this.taps.length !== before) this.onTapsChanged?.();
    };
  }
}

/** An audio sequence header: AAC packet type 0 (FLV E.4.2) or an E-RTMP SequenceStart (ExHeader, packet type 0). */
function isSequenceHeader(d: Uint8Array): boolean {
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
