/**
 * What ingest asks of the rest of the node: the port that the stream lifecycle (services)
 * implements and the composition root (src/main.ts) wires in. Ingest imports no service; it knows
 * streams only through these calls. Every call is made from a socket read or a timer: an
 * implementation must not throw (it logs and retries what it cannot do at once).
 */
import type { AudioCodec } from '../media/codec.js';
import type { Recording } from '../media/recorder.js';
import type { LoudnessReading } from '../media/hub.js';
import type { FallbackPlan } from './fallback.js';

export type { LoudnessReading };

/** Where a stream's audio comes from now (docs/streams.md "Fallback"): null while nothing plays. */
export type StreamSource = 'live' | 'fallback' | null;

/** Why the source changed (`stream.source_changed` `reason`); null: the fallback was set or removed. */
export type SourceChangeReason = 'publisher_connected' | 'publisher_left' | 'silence' | 'audio_returned';

/** A stream's fallback as ingest plays it: the stream's settings (as for a publish) and the plan. */
export interface FallbackSetting {
  grant: PublishGrant;
  plan: FallbackPlan;
}

/** What a publish to a stream may carry, as the stream says (docs/behaviour.md §2, §9). Bitrates in kbps. */
export interface PublishGrant {
  streamId: string;
  /** The ingest codec the stream accepts. */
  codec: AudioCodec;
  /** The ABR ladder, top (the ingest's nominal bitrate) first. */
  ladderKbps: number[];
  /** Whether the stream records into a podcast. */
  recording: boolean;
  /** `low`: LL-HLS parts on the fMP4 layers; `standard`: classic HLS (docs/behaviour.md §3). */
  latencyMode: 'standard' | 'low';
}

/** The answer to a publish: granted, or refused with a reason for the log (never the key). */
export type PublishDecision = { ok: true; grant: PublishGrant } | { ok: false; reason: string };

/** A problem to record as `stream.error` (docs/behaviour.md §9 "Events"): `{ code, message, … }`. */
export interface StreamError {
  code: string;
  message: string;
  [detail: string]: unknown;
}

/** What plays now (docs/behaviour.md §11), as a source said it. Strings as given (≤ 256 characters). */
export interface NowPlayingUpdate {
  title: string;
  artist?: string | null;
  album?: string | null;
  url?: string | null;
  artworkUrl?: string | null;
}

/** The stream lifecycle, as ingest sees it. Times in ms since the epoch; windows in s. */
export interface IngestPort {
  /**
   * Checks a publish: the stream exists and `key` is its stream key (a stream goes live again and
   * again with the same key: docs/streams.md). Never logs
   * the key.
   */
  authorizePublish(streamId: string, key: string): PublishDecision;
  /**
   * Checks a publish the caller vouched for without the key (a WHIP publish token it verified for
   * this stream: docs/behaviour.md "Go live over WHIP"): the stream exists and takes publishes.
   */
  authorizeVouchedPublish?(streamId: string): PublishDecision;
  /**
   * The id of the stream whose own Icecast mount is `mount` (docs/icecast.md "Mounts"; exact,
   * case-sensitive), or null for none (or when the database cannot be read: logged).
   */
  streamOfMount?(mount: string): string | null;
  /** Whether `key` is the stream key of some stream (a source on an unknown mount is told so, not refused). Never logs the key. */
  isStreamKey?(key: string): boolean;
  /** The stream's state now, or null once deleted. */
  streamState(streamId: string): { status: 'idle' | 'live'; reconnectWindowS: number } | null;
  /** Streams an earlier run left `live` (no publisher is connected after a restart). */
  liveStreams(): Array<{ streamId: string; reconnectWindowS: number }>;
  /** The first audio frame of a publish arrived: `idle` → `live`, a new broadcast, `stream.started`. */
  onLive(streamId: string, atMs: number): void;
  /** The reconnect window ran out, or the stream was stopped: `live` → `idle`, the broadcast ends, `stream.ended`. */
  onEnded(streamId: string, atMs: number): void;
  /** `stream.error` with `error`. */
  onError(streamId: string, error: StreamError): void;
  /**
   * A source said what plays now (Icecast metadata call, stream tags): the stream's `nowPlaying`.
   * `null`: nothing known plays now (a new source connected: the last one's title is not its own).
   */
  onMetadata(streamId: string, np: NowPlayingUpdate | null): void;
  /**
   * The stream's recording is finished: make it a draft episode. Resolves once the recording was
   * handed over (its files may then be released); rejects when it could not be (kept for a retry).
   */
  onRecording(streamId: string, recording: Recording): Promise<void>;
  /**
   * The stream's fallback (docs/streams.md "Fallback") with the episodes it can play now (those
   * deleted or without audio left out); null when it has none (or the stream is gone).
   */
  fallback?(streamId: string): FallbackSetting | null;
  /** At start-up: the streams that have a fallback; every `source` an earlier run stored is forgotten (null). */
  fallbackStreams?(): string[];
  /** The streams that have a fallback now (changes nothing): the rendition cache keeps their episodes. */
  fallbackStreamIds?(): string[];
  /** The stream's source changed: its `source`, and `stream.source_changed` with `reason` (none when null). */
  onSourceChanged?(streamId: string, source: StreamSource, reason: SourceChangeReason | null): void;
  /**
   * About once a second while a publisher's audio passes the ladder's codec process: its loudness
   * (docs/streams.md "Live loudness"). Streams without a codec process report none.
   */
  onLoudness?(streamId: string, reading: LoudnessReading): void;
}
