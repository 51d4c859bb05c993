/**
 * What a publish is, as ingest sees it (docs/behaviour.md §9 "Ingest"): the publisher a protocol
 * server hands over, the sink it feeds, the settings of the media it makes, and publishing's
 * per-stream entry (./publishing.ts runs the publish state machine over it, ./fallback-switch.ts
 * its source).
 */
import type { StreamHub } from '../media/hub.js';
import type { MediaConnection, PublishInput } from '../media/hub-types.js';
import type { AudioTag } from '../media/codec.js';
import type { NowPlaying, PublishGrant, StreamError, StreamSource } from './port.js';
import type { FallbackSource } from './fallback.js';
import type { FallbackCache } from './fallback-cache.js';

/** A connected publisher, as ingest sees it (one per accepted publish, any protocol). */
export interface Publisher extends MediaConnection {
  /** The peer (`ip:port`), for logs and limits. */
  readonly remote: string;
  /** Closes the publish (and its connection), with `reason` for the log. */
  close(reason: string): void;
  /** Refuses the media after a codec mismatch (RTMP: onStatus NetStream.Publish.Rejected), then closes. */
  reject(description: string): void;
}

/** A publish the caller has vouched for without the stream key: a WHIP publish token it verified for this stream. */
export interface PublishVouch {
  publishToken: true;
}

/** What a granted publish feeds. */
export interface PublishSink {
  /**
   * One audio body (FLV AUDIODATA; RTMP timestamp, ms); `segmented`: the passthrough segmenter
   * has it already (natively routed). `tag`: the body's tag header when the caller read it.
   */
  audio(timestampMs: number, data: Uint8Array, segmented: boolean, tag?: AudioTag): void;
  /** The publisher stopped (unpublish, socket closed or failed). */
  end(): void;
  /** The publish broke a cap of docs/behaviour.md §13 (`frame_too_large`): `stream.error`; the caller then closes it. */
  fail(error: StreamError): void;
}

/** Settings of the media a publish makes. Durations in ms, sizes in bytes. */
export interface PublishingOptions {
  segmentDurationMs: number;
  /** LL-HLS part target for fMP4 layers of `low` latency streams (0 = classic HLS only). */
  partTargetMs: number;
  windowSegments: number;
  /** Whether streams get the ladder's encoded layers (false: the passthrough layer only). */
  abrLadder: boolean;
  /** FFmpeg for the ladder's codec process and the recording remux; null = passthrough only. */
  ffmpeg: () => string | null;
  /** Where recordings are written while a stream is live. */
  recordingsDir: string;
  /** docs/behaviour.md §13 caps. */
  maxAudioFrameBytes: number;
  segmentBytesFactor: number;
  minFreeDiskBytes: number;
  /**
   * Title changes reach the hub's timed metadata (ID3 in every layer, EXT-X-DATERANGE) and the
   * port (the stream's `nowPlaying`) at most once per this long per stream (ms; 0 = every change),
   * coalesced into the newest (docs/listeners.md "Title changes"): one cap, so both end on the same title.
   */
  nowPlayingMinIntervalMs?: number;
  /** The node's cached fallback renditions (docs/streams.md "Fallback"); none: the fallback always encodes live. */
  fallbackCache?: FallbackCache;
}

/** Publishing's entry for one stream: its hub, its publisher and what it plays (shared with ./fallback-switch.ts). */
export interface StreamIngest {
  grant: PublishGrant;
  hub: StreamHub;
  publisher: Publisher | null;
  input: PublishInput | null;
  /** Which attach the current sink belongs to (a replaced publisher's late calls are ignored). */
  generation: number;
  reconnectTimer: NodeJS.Timeout | null;
  codecChecked: boolean;
  /** An audio sequence header arrived on this publish (`live` needs one before a coded frame). */
  sawHeader: boolean;
  /** This publish's audio format was read (from its sequence header, or its first MP3 frame). */
  sawFormat: boolean;
  /** `live` was triggered for this hub. */
  liveTriggered: boolean;
  /** The fallback audio playing now (docs/streams.md "Fallback"), or null. */
  fallback: FallbackSource | null;
  /** What the stream's `source` is (as last told to the port). */
  source: StreamSource;
  /** The live source's last title (put back when its audio returns after a silence). */
  liveTitle: NowPlaying | null;
}

/** Whether two grants make the same media (codec, ladder, latency mode): a hub made for one serves the other. */
export function sameSettings(a: PublishGrant, b: PublishGrant): boolean {
  return a.codec === b.codec && a.latencyMode === b.latencyMode && a.ladderKbps.join() === b.ladderKbps.join();
}
