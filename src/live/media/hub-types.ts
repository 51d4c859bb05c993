/**
 * What a stream hub (src/live/media/hub.ts) and its owner exchange: the hub's options and events,
 * the publisher's connection and the input a publish feeds, the taps on its audio. Declared apart
 * so that the hub's parts (ladder.ts, hub-recording.ts, registry.ts) share them without importing
 * the hub. Behaviour: docs/behaviour.md §3, §9 "Events", §13; the path: docs/architecture.md.
 */
import type { LayerError } from './layer.js';
import type { AudioCodec, AudioTag } from './codec.js';
import type { Segmenter, SegmenterEvent } from '../../native/segmenter.js';
import type { StreamTimeline } from './timeline.js';
import type { Recording, RecordingLeftover } from './recorder.js';

/** What a segmenter factory is asked for (the native Segmenter's options). Durations in ms, sizes in bytes. */
export interface SegmenterRequest {
  container: 'ts' | 'fmp4';
  targetDurationMs: number;
  partTargetMs: number;
  expectCodec: AudioCodec;
  maxFrameBytes?: number;
  maxSegmentBytes?: number;
  /** With parts: false = segment events carry no bytes, the layer joins its parts (`SegmenterOptions.segmentBytes`). */
  segmentBytes?: boolean;
}

/** What media logs through (a structural subset of the server's Logger). */
export interface MediaLog {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/**
 * A problem of the stream's media to report as `stream.error` (docs/behaviour.md §9 "Events"): codes
 * `transcoder_failed`, `bitrate_spike` (with `measuredKbps`, `nominalKbps`), `frame_too_large`,
 * `segment_too_large`, `recording_stopped`. `fatal`: the publish must end (the caps of §13).
 */
export interface MediaError {
  code: string;
  message: string;
  fatal?: boolean;
  [detail: string]: unknown;
}

/** What a hub tells its owner. */
export interface HubEvents {
  error(e: MediaError): void;
  /** The stream's recording finished (after `end()` or `stopRecording()`), to become a draft episode. */
  recording?(r: Recording): void;
  /**
   * The publisher's audio fell silent (below −50 dBFS) for `HubOptions.silenceSeconds` (true), or
   * sound returned after that (false): docs/streams.md "Fallback".
   */
  silence?(silent: boolean): void;
  /**
   * The publisher's loudness (docs/streams.md "Live loudness"), about once a second, from the
   * ladder's codec process; a stream without one (a one-layer ladder without silence detection)
   * reports none, nor does the fallback audio.
   */
  loudness?(reading: LoudnessReading): void;
}

/**
 * One second of a publisher's loudness (ITU-R BS.1770-4, in LUFS): `momentary` the 400 ms blocks
 * that ended in it, 100 ms apart (75 % overlap: the standard's gating blocks), oldest first;
 * `shortTerm` the loudness of the last 3 s.
 */
export interface LoudnessReading {
  momentary: number[];
  shortTerm: number;
}

/** Where and how a stream records (docs/behaviour.md §3 "Recording"). */
export interface RecordingTarget {
  dir: string;
  /** File name without extension, unique per recording. */
  name: string;
  /** Stop before the volume's free space falls under this (bytes). */
  minFreeBytes: number;
  /** A recording an earlier run left for this stream, to append to. */
  resume?: RecordingLeftover;
}

/** Hub settings. Durations in ms; bitrates in kbps; sizes in bytes. */
export interface HubOptions {
  codec: AudioCodec;
  targetDurationMs: number;
  /** LL-HLS part target for fMP4 layers (0 = classic HLS only). */
  partTargetMs: number;
  /** Segments listed in the live playlist. */
  windowSegments: number;
  /** The ladder, top first: [passthrough nominal kbps, encoded layers' kbps…]. */
  ladder: number[];
  /** Largest audio frame a segmenter takes (docs/behaviour.md §13); unset: no cap. */
  maxFrameBytes?: number;
  /** A segment holds at most this × its nominal bytes (nominal kbps × target duration); unset: no cap. */
  segmentBytesFactor?: number;
  /** FFmpeg for the ladder's codec process and the recording's remux; null: passthrough only. */
  ffmpeg?: () => string | null;
  /** Record the stream (null: no recording). */
  recording?: RecordingTarget | null;
  log?: MediaLog;
  /** Segmenters other than the native one (benches). */
  createSegmenter?: (o: SegmenterRequest) => Segmenter;
  /** Where the stream's previous broadcast left its HLS timeline (set by `MediaRegistry.open`; see `Layer` `continues`). */
  continues?: Timeline;
  /** Where the stream's layers reserve the numbers they hand out, across restarts (set by `MediaRegistry.open`; src/live/media/timeline.ts). */
  timeline?: StreamTimeline;
  /** Seconds of silence after which `HubEvents.silence` fires (read when a publisher attaches); null: no detection. */
  silenceSeconds?: () => number | null;
}

/** Where a stream's HLS timeline stands: the next media sequence number and the discontinuity sequence number. */
export interface Timeline {
  sequence: number;
  discontinuity: number;
}

/**
 * A subscriber to a hub's ingest audio (the WebRTC packet source). `audio` gets every FLV
 * AUDIODATA body as pushed (sequence headers included) with its read tag header; `data` is only
 * valid during the call (copy what you keep). `end` when the stream ends.
 */
export interface AudioTap {
  audio(timestampMs: number, data: Uint8Array, tag: AudioTag): void;
  end(): void;
}

/** A segmenter error of one pushed frame (the frame was dropped). */
export type HubError = LayerError;

/**
 * What media needs of a publisher's connection (the RTMP listener's, an Icecast source's): to
 * have its audio routed natively into a segmenter, and its byte count.
 */
export interface MediaConnection {
  /**
   * From the next socket read, audio goes straight into `target.segmenter` (in C++) and what it
   * makes of it to `target.onEvents`; the publish input (`PublishInput.audio`) then hears only
   * sequence headers — or every message when `frames` — flagged `segmented`. null: everything
   * back to the publish input. `merge`: the
   * socket may be read lazily while no part or segment is about to close.
   */
  route(target: { segmenter: Segmenter; onEvents(events: SegmenterEvent[]): void } | null, frames: boolean, merge: boolean): void;
  /** Audio body bytes received on this publish so far. */
  audioBytes(): number;
}

/** A publish attached to a hub: how its audio reaches media. */
export interface PublishInput {
  /**
   * One ingest audio body (RTMP timestamp, ms) read as `tag`; `segmented`: the passthrough
   * segmenter has it already (natively routed). Problems go to `HubEvents.error`.
   */
  audio(timestampMs: number, data: Uint8Array, tag: AudioTag, segmented: boolean): void;
  /** The publish is live (codec checked, first frame in): its audio may now be routed natively. */
  live(): void;
  /** The publisher left: open segments close; the hub waits for the next publisher or `end()`. */
  detach(): void;
}
