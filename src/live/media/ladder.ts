/**
 * A stream's HLS ladder (docs/behaviour.md §3, §9 "HLS"): its layers — the ingest passed through on
 * top, then the layers one FFmpeg codec process encodes from it — and that process for the
 * current publish: started when a publisher attaches, drained into the encoded layers when it
 * leaves, given up (the passthrough layer keeps serving) when it fails. The same process reports
 * silence and loudness (docs/streams.md "Fallback", "Live loudness"). Owned by the stream's hub
 * (src/live/media/hub.ts); the path: docs/architecture.md "The two paths".
 */
import { Layer } from './layer.js';
import { LadderTranscoder } from './transcoder.js';
import { readAudioTag, type AudioCodec } from './codec.js';
import { Segmenter } from '../../native/segmenter.js';
import type { AudioTap, HubError, HubEvents, HubOptions, SegmenterRequest } from './hub-types.js';

/** Momentary values (100 ms apart) gathered into one `HubEvents.loudness` report: one second. */
const LOUDNESS_BATCH = 10;
/** The longest wait for a closed codec process to hand over its last frames (it is killed after 2 s). */
export const DRAIN_TIMEOUT_MS = 3000;

/**
 * The container of a codec's layers (docs/decisions.md "HLS"): AAC and Opus in fMP4/CMAF with
 * LL-HLS parts; MP3 in MPEG-TS (what every player takes for MP3).
 */
export function containerFor(codec: AudioCodec): 'ts' | 'fmp4' {
  return codec === 'mp3' ? 'ts' : 'fmp4';
}

/** Layer name of a layer of `kbps`: `a128`. */
export const layerName = (kbps: number) => `a${kbps}`;

/**
 * The layers of a hub's ladder, top (passthrough) first, one per `opts.ladder` entry, each with its
 * own segmenter (the native one unless `opts.createSegmenter`), continuing `opts.continues` and
 * reserving its numbers in `opts.timeline`.
 */
export function ladderLayers(opts: HubOptions): Layer[] {
  const container = containerFor(opts.codec);
  const partTargetMs = container === 'fmp4' ? opts.partTargetMs : 0;
  const create = opts.createSegmenter ?? ((o: SegmenterRequest) => new Segmenter(o));
  return opts.ladder.map(
    (kbps, i) =>
      new Layer({
        name: layerName(kbps),
        kbps,
        container,
        targetDurationMs: opts.targetDurationMs,
        partTargetMs,
        windowSegments: opts.windowSegments,
        passthrough: i === 0,
        ...(opts.continues ? { continues: opts.continues } : {}),
        ...(opts.timeline ? { reservation: opts.timeline.layer(layerName(kbps)) } : {}),
        createSegmenter: () =>
          create({
            container,
            targetDurationMs: opts.targetDurationMs,
            partTargetMs,
            expectCodec: opts.codec,
            ...(opts.maxFrameBytes ? { maxFrameBytes: opts.maxFrameBytes } : {}),
            ...(opts.segmentBytesFactor ? { maxSegmentBytes: Math.ceil(((opts.segmentBytesFactor * kbps * 1000) / 8) * (opts.targetDurationMs / 1000)) } : {}),
            // A segment of an LL-HLS layer is its parts' bytes: the layer joins them when the
            // segment is first read, instead of the segmenter making (allocating) them twice.
            ...(partTargetMs > 0 ? { segmentBytes: false } : {}),
          }),
      }),
  );
}

/** Resolves when `t` has exited and its outputs were read, or after DRAIN_TIMEOUT_MS. */
function drained(t: LadderTranscoder): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, DRAIN_TIMEOUT_MS);
    timer.unref();
    void t.exited.then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** What the ladder needs of its hub. */
export interface LadderHost {
  readonly streamId: string;
  readonly opts: HubOptions;
  readonly events: HubEvents;
  /** The codec process of a publisher muted while the fallback plays (its silence and loudness count), or null. */
  mutedTranscoder(): LadderTranscoder | null;
  /** Whether the attached publish is a publisher (not the stream's fallback audio). */
  publisherAttached(): boolean;
  /** The codec process failed: the hub routes the publish again (no process to feed any more). */
  reroute(): void;
  /** Errors of an encoded layer's segmenter (those frames were dropped). */
  errors(errors: HubError[]): void;
}

/**
 * The codec process of a hub's ladder and the taps on its encoded layers. `layers`: the hub's
 * layers (`ladderLayers`), top first.
 */
export class Ladder {
  /** The ladder's codec process of the current publish (null: none, or it failed). */
  transcoder: LadderTranscoder | null = null;
  /** The codec process of a publish that has left, emptying its last frames into the encoded layers. */
  draining: LadderTranscoder | null = null;
  /** Taps of the encoded layers, by layer; each layer's last sequence header (copied). */
  private readonly taps = new Map<Layer, AudioTap[]>();
  private readonly headers = new Map<Layer, Uint8Array>();

  constructor(
    readonly layers: Layer[],
    private readonly host: LadderHost,
  ) {}

  /**
   * A publisher attaches: the last publish's codec process, if still draining, is cut off (its
   * tail is dropped and the encoded layers' open segments close now, before the new timeline
   * starts).
   */
  cutDrain(): void {
    if (this.draining) {
      this.draining = null;
      this.flush('encoded');
    }
  }

  /** The codec process of a new publish replaces the current one (`silenceSeconds`: see `start`). */
  restart(silenceSeconds: number | null): void {
    this.transcoder?.close();
    this.transcoder = this.start(silenceSeconds);
  }

  /**
   * The publisher left: the passthrough layer's open segment closes now; the encoded layers' once
   * the codec process has handed over its last frames (or at once without one).
   */
  detach(): void {
    const t = this.transcoder;
    this.transcoder = null;
    this.flush('passthrough');
    if (t) {
      // FFmpeg still holds the last ~100 ms of the encoded layers: let it hand them over before
      // their open segments close (else they would make a short extra segment).
      this.draining = t;
      t.close();
      void drained(t).then(() => {
        if (this.draining !== t) return; // a new publisher or the end took over
        this.draining = null;
        this.flush('encoded');
      });
    } else this.flush('encoded');
  }

  /** The stream ended: the passthrough layer ends now, the encoded ones once the codec process has drained. */
  end(): void {
    const t = this.transcoder ?? this.draining;
    this.transcoder = null;
    if (t) {
      this.draining = t;
      t.close();
      this.layers[0]!.end();
      void drained(t).then(() => {
        if (this.draining === t) this.draining = null;
        for (const l of this.layers) l.end();
      });
    } else for (const l of this.layers) l.end();
  }

  /** Stops both codec processes (the current and a draining one) without waiting. */
  stop(): void {
    this.transcoder?.close();
    this.transcoder = null;
    this.draining?.close();
    this.draining = null;
  }

  /**
   * The publisher left: close the open segments — of every layer, or only of the passthrough
   * layer or only of the encoded ones.
   */
  flush(which: 'passthrough' | 'encoded'): void {
    for (const l of this.layers) if (l.o.passthrough === (which === 'passthrough')) l.flush();
  }

  /** The encoded layers stop (their codec process failed): they leave the multivariant playlist. */
  failEncoded(): void {
    for (const l of this.layers) if (!l.o.passthrough && !l.failed) l.failed = true;
  }

  /** Subscribes to an encoded layer's audio bodies, as the codec process hands them over. Returns the unsubscribe function. */
  tap(layer: Layer, tap: AudioTap): () => void {
    this.taps.set(layer, [...(this.taps.get(layer) ?? []), tap]);
    return () => {
      const left = (this.taps.get(layer) ?? []).filter((t) => t !== tap);
      if (left.length > 0) this.taps.set(layer, left);
      else this.taps.delete(layer);
    };
  }

  /** The last audio sequence header of an encoded layer, or null. */
  header(layer: Layer): Uint8Array | null {
    return this.headers.get(layer) ?? null;
  }

  /** Every encoded layer's taps, forgotten (the stream ended: the caller tells them `end`). */
  takeTaps(): AudioTap[] {
    const taps = [...this.taps.values()].flat();
    this.taps.clear();
    return taps;
  }

  /**
   * Starts the ladder's codec process for a publish, or null for a one-layer ladder (without silence
   * detection) or no FFmpeg. `silenceSeconds`: the same process also detects silence.
   */
  private start(silenceSeconds: number | null): LadderTranscoder | null {
    const { opts, events, streamId } = this.host;
    const encoded = this.layers.filter((l) => !l.o.passthrough && !l.failed).map((l) => l.o.kbps);
    if (encoded.length === 0 && !silenceSeconds) return null;
    const fail = (reason: string) => {
      if (this.transcoder !== t) return;
      this.transcoder = null;
      this.failEncoded();
      this.host.reroute(); // no codec process to feed: frames may stay in C++
      opts.log?.error('ladder codec process failed; the passthrough layer keeps serving', { streamId, reason });
      events.error({ code: 'transcoder_failed', message: `The ABR ladder's encoder stopped: ${reason}` });
    };
    const ffmpeg = opts.ffmpeg?.() ?? null;
    if (!ffmpeg) {
      this.failEncoded();
      opts.log?.error('no ffmpeg: the ABR ladder is off; the passthrough layer keeps serving', { streamId });
      events.error({ code: 'transcoder_failed', message: 'FFmpeg was not found, so only the passthrough layer is served.' });
      return null;
    }
    const blocks: number[] = [];
    const t: LadderTranscoder = new LadderTranscoder({
      ffmpeg,
      codec: opts.codec,
      layers: encoded,
      onAudio: (kbps, ts, body) => this.encodedAudio(t, kbps, ts, body),
      onFailure: (reason) => fail(reason),
      silenceSeconds,
      onSilence: (silent) => {
        if (this.transcoder === t || this.host.mutedTranscoder() === t) events.silence?.(silent);
      },
      onLoudness: (momentary, shortTerm) => {
        const publisher = (this.transcoder === t && this.host.publisherAttached()) || this.host.mutedTranscoder() === t;
        if (!publisher) return;
        blocks.push(momentary);
        if (blocks.length >= LOUDNESS_BATCH) events.loudness?.({ momentary: blocks.splice(0), shortTerm });
      },
    });
    return t;
  }

  /** One body of the `kbps` layer from codec process `t`: to the layer's taps and its segmenter. */
  private encodedAudio(t: LadderTranscoder, kbps: number, ts: number, body: Uint8Array): void {
    if (this.transcoder !== t && this.draining !== t) return; // a replaced publish's late frames
    const layer = this.layers.find((l) => l.o.kbps === kbps && !l.o.passthrough);
    if (!layer || layer.failed || layer.ended) return;
    const taps = this.taps.get(layer);
    if (taps || !this.headers.has(layer)) {
      const tag = readAudioTag(body);
      if (tag.kind === 'header') this.headers.set(layer, body.slice());
      if (taps) for (const tap of taps) tap.audio(ts, body, tag);
    }
    const errors = layer.push(ts, body);
    if (errors.length > 0) this.host.errors(errors);
  }
}
