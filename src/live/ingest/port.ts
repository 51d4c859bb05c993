/**
 * What ingest asks of the rest of the node: the port that the stream lifecycle (services)
 * implements and the composition root (src/main.ts) wires in. Ingest imports no service; it knows
 * streams only through these calls. Every call is made from a socket read or a timer: an
 * implementation must not throw (it logs and retries what it cannot do at once).
 */
import type { AudioCodec } from '../media/codec.js';
import type { Recording } from '../media/recorder.js';
import type { LoudnessReading } from '../media/hub-types.js';
import type { FallbackPlan } from './fallback.js';
import type { ProgressiveClient, ProgressiveSink } from '../../base/http/routes/progressive.js';
import type { AudioFormat } from '../media/audio-format.js';

export type { LoudnessReading };

/** Where a stream's audio comes from now (docs/streams.md "Fallback"): null while nothing plays. */
export type StreamSource = 'live' | 'fallback' | null;

/** Why the source changed (`stream.source_changed` `reason`); null: the fallback was set or removed. */
export type SourceChangeReason = 'publisher_connected' | 'publisher_left' | 'silence' | 'audio_returned';

/** A stream's fallback as ingest plays it: the stream's settings (as for a publish) and the plan. */
export interface FallbackSetting {
  grant: PublishGrant;
  plan: FallbackPlan;
  /** The format of the stream's last live source as stored (`onLiveFormat`), or null when none ever published. */
  liveFormat?: AudioFormat | null;
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

/**
 * What plays now (docs/behaviour.md §11), as a source said it (Icecast metadata or stream tags,
 * RTMP `onMetaData`, the API, a fallback episode) and as the port carries it to the lifecycle.
 * Strings as given (≤ 256 characters); absent and null alike mean unknown.
 */
export interface NowPlaying {
  title: string;
  artist?: string | null;
  album?: string | null;
  url?: string | null;
  artworkUrl?: string | null;
  /**
   * When the change was asked (ms since the epoch): the API passes the moment it answered with;
   * ingest stamps a source's change as it takes it, so that a change the title cap holds back
   * (docs/listeners.md "Title changes") keeps the moment it was asked. Always set on the port.
   */
  startedAtMs?: number;
  /**
   * True for the title of a fallback episode as it starts (docs/streams.md "Fallback"): in the
   * stream's play log, but no broadcast's track.
   */
  fallback?: boolean;
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
   * What plays now changed, once the title cap let it through (ingest caps every source's changes:
   * docs/listeners.md "Title changes"): the stream's `nowPlaying`, started at `np.startedAtMs`.
   * `null`: nothing known plays now (a new source connected: the last one's title is not its own).
   */
  onMetadata(streamId: string, np: NowPlaying | null): void;
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
  /**
   * A live source announced another sample rate or channel count than the stream's last one: kept
   * (across restarts), so that the fallback is encoded at it (docs/streams.md "Fallback").
   */
  onLiveFormat?(streamId: string, format: AudioFormat): void;
}

// ── The Icecast port's listeners (docs/icecast.md "Listeners") ───────────────────────────────
// Ingest's Icecast server reads a listener's request head and hands it to the listening side
// (delivery) through these; the one declaration both planes use.

/** A listener's request on the Icecast port (`GET|HEAD /live/<id>[.<ext>]`). */
export interface IcecastListenRequest {
  method: 'GET' | 'HEAD';
  streamId: string;
  /** The extension of `/live/<id>.<ext>` (`mp3`, `aac`, `opus`, `ogg`), or null for the bare mount. */
  ext: string | null;
  /** The query string without `?` ('' for none). */
  query: string;
  /** A request header by lower-case name ('' when absent). */
  header(name: string): string;
  /** The peer's address. */
  remoteAddress: string;
}

/**
 * Where a listener's body goes: the socket, with the very contract of an HTTP progressive body
 * (backpressure: `write` false, then the client's `writable`); `end` closes the connection after the body.
 */
export type IcecastListenSink = ProgressiveSink;

/** What the listening side answers: a refusal (`status` such as `404 Not Found`) or a stream. */
export type IcecastListenAnswer =
  | { refuse: { status: string; headers: ReadonlyArray<readonly [string, string]>; body: Uint8Array } }
  | { stream: { headers: ReadonlyArray<readonly [string, string]>; open(sink: IcecastListenSink): ProgressiveClient } };

/** The listening side of the Icecast port (src/delivery/progressive/icecast-port.ts implements it; the composition root wires it in). */
export interface IcecastListening {
  /** Answers a listener; a stream's `open` is called once its head is written and returns what runs when the client goes. */
  listen(req: IcecastListenRequest): IcecastListenAnswer;
  /** The body of `GET /status-json.xsl`. */
  statusJson(): string;
}
