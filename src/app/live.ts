/**
 * The composition root's live plane, built right after base: the fallback cache, the media
 * registry and publishing (ingest's state machine over the stream lifecycle, its port, reached
 * through `ingestPortOf`), and — once control and delivery exist — the RTMP and Icecast source
 * servers that feed it.
 */
import path from 'node:path';
import type { Base } from './base.js';
import type { IngestPort } from '../live/ports.js';
import { Publishing } from '../live/ingest/publishing.js';
import { ICECAST_DEFAULTS, IcecastServer } from '../live/ingest/icecast-server.js';
import type { IcecastListening } from '../live/ingest/port.js';
import { INGEST_DEFAULTS, RtmpIngest } from '../live/ingest/rtmp-ingest.js';
import { ffmpegPath } from '../base/ffmpeg.js';
import { MediaRegistry } from '../live/media/registry.js';
import { FallbackCache } from '../live/ingest/fallback-cache.js';
import { TimelinesRepo } from '../base/db/timelines-repo.js';
import { WHIP_INGEST_DEFAULTS, WhipIngest } from '../live/ingest/whip.js';
import type { TimelineMark, TimelineStore } from '../live/media/timeline.js';

/**
 * The node's cache of fallback renditions (docs/streams.md "Fallback"), `<dataDir>/fallback-cache`:
 * built with the live plane; the control services tell it of deleted and replaced episode audio.
 * @throws Error when the directory cannot be created
 */
export function buildFallbackCache(b: Base): FallbackCache {
  return new FallbackCache({ dir: path.join(b.config.dataDir, 'fallback-cache'), ffmpeg: ffmpegPath, log: b.log.child('live'), minFreeDiskBytes: b.config.limits.minFreeDiskBytes, now: b.now });
}

/** Publishing, built: the hubs of live streams and the ingest that feeds them. */
export interface Live {
  /** The hubs (delivery's readers watch each one opened: `onOpen`). */
  media: MediaRegistry;
  ingest: Publishing;
  /** WHIP publishes (docs/behaviour.md "Go live over WHIP"): what their RTP becomes; the WebRTC side is delivery's. */
  whip: WhipIngest;
}

/**
 * The HLS timeline marks over SQLite (docs/streams.md "One timeline"): read once per stream and
 * run; written after the current callback (never under native ingest), through the write retry
 * (a locked or full database is retried, logged, and never ends a stream).
 */
export function timelineStore(b: Pick<Base, 'db' | 'writes' | 'now'>): TimelineStore {
  const repo = new TimelinesRepo(b.db);
  return {
    load: (streamId) => new Map(repo.load(streamId).map((r): [string, TimelineMark] => [r.layer, { sequence: r.sequence, discontinuity: r.discontinuity }])),
    save: (streamId, layer, mark) => {
      setImmediate(() => b.writes.run(`timeline:${streamId}`, 'HLS timeline mark', () => void repo.reserve(streamId, layer, mark.sequence, mark.discontinuity, b.now())));
    },
  };
}

/**
 * The ingest port over its implementation, the stream lifecycle, which is a control service and so
 * built after the live plane (docs/architecture.md "One composition root"): bound once here, each
 * call goes to `impl()`, which ingest reaches only from a socket read, a timer or `recover` — once
 * every plane is built.
 */
export function ingestPortOf(impl: () => Required<IngestPort>): Required<IngestPort> {
  return {
    authorizePublish: (streamId, key) => impl().authorizePublish(streamId, key),
    authorizeVouchedPublish: (streamId) => impl().authorizeVouchedPublish(streamId),
    streamOfMount: (mount) => impl().streamOfMount(mount),
    isStreamKey: (key) => impl().isStreamKey(key),
    streamState: (streamId) => impl().streamState(streamId),
    liveStreams: () => impl().liveStreams(),
    onLive: (streamId, atMs) => impl().onLive(streamId, atMs),
    onEnded: (streamId, atMs) => impl().onEnded(streamId, atMs),
    onError: (streamId, error) => impl().onError(streamId, error),
    onMetadata: (streamId, np) => impl().onMetadata(streamId, np),
    onRecording: (streamId, recording) => impl().onRecording(streamId, recording),
    fallback: (streamId) => impl().fallback(streamId),
    fallbackStreams: () => impl().fallbackStreams(),
    fallbackStreamIds: () => impl().fallbackStreamIds(),
    onSourceChanged: (streamId, source, reason) => impl().onSourceChanged(streamId, source, reason),
    onLoudness: (streamId, reading) => impl().onLoudness(streamId, reading),
    onLiveFormat: (streamId, format) => impl().onLiveFormat(streamId, format),
  };
}

/** Builds the media registry and publishing over `port` (the stream lifecycle, docs/streams.md), the fallback playing from `fallbackCache`. */
export function buildPublishing(b: Base, port: IngestPort, fallbackCache: FallbackCache): Live {
  const { config } = b;
  const media = new MediaRegistry(b.now, timelineStore(b), b.log.child('live'));
  const ingest = new Publishing({
    port,
    media,
    log: b.log.child('live'),
    limits: b.limits,
    now: b.now,
    options: {
      segmentDurationMs: config.segmentDurationMs,
      partTargetMs: Math.min(config.partDurationMs, config.segmentDurationMs),
      windowSegments: config.liveWindowSegments,
      abrLadder: config.abrLadder,
      ffmpeg: ffmpegPath,
      recordingsDir: path.join(config.dataDir, 'recordings'),
      maxAudioFrameBytes: config.limits.maxAudioFrameBytes,
      segmentBytesFactor: config.limits.segmentBytesFactor,
      minFreeDiskBytes: config.limits.minFreeDiskBytes,
      nowPlayingMinIntervalMs: config.limits.nowPlayingMinIntervalMs,
      fallbackCache,
    },
  });
  const whip = new WhipIngest({
    publishing: ingest,
    port,
    log: b.log.child('whip'),
    limits: b.limits,
    options: { ...WHIP_INGEST_DEFAULTS, ffmpeg: ffmpegPath, maxFrameBytes: config.limits.maxAudioFrameBytes, mergeMs: config.ingestMergeMs },
  });
  return { media, ingest, whip };
}

/** The ingest servers (not listening yet). */
export interface IngestServers {
  rtmp: RtmpIngest;
  /** Icecast sources, and listeners on the same port (docs/icecast.md). */
  icecast: IcecastServer;
}

/** Builds the RTMP and Icecast source servers over `port` (the stream lifecycle); `listeners` is what the Icecast port answers listeners. */
export function buildIngestServers(b: Base, live: Live, port: Pick<IngestPort, 'authorizePublish' | 'onError' | 'streamOfMount' | 'isStreamKey'>, listeners: IcecastListening): IngestServers {
  const { config, limits } = b;
  const rtmp = new RtmpIngest(live.ingest, b.log.child('rtmp'), { ...INGEST_DEFAULTS, mergeReadsMs: config.ingestMergeMs, limitSettings: config.limits, limits });
  const icecast = new IcecastServer(
    live.ingest,
    port,
    b.log.child('icecast'),
    limits,
    {
      ...ICECAST_DEFAULTS,
      maxConnections: config.limits.icecastMaxConnections,
      maxConnectionsPerIp: config.limits.icecastMaxConnectionsPerIp,
      maxAudioFrameBytes: config.limits.maxAudioFrameBytes,
      listenSendBufferBytes: config.limits.listenSendBufferBytes,
    },
    listeners,
  );
  return { rtmp, icecast };
}
