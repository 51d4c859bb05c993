/**
 * The composition root's live plane: the media registry and publishing (ingest's state machine
 * over the stream lifecycle, its port), then the RTMP and Icecast source servers that feed it.
 */
import path from 'node:path';
import type { Base } from './base.js';
import type { IngestPort } from '../live/ports.js';
import { Publishing } from '../live/ingest/publishing.js';
import { ICECAST_DEFAULTS, IcecastServer, type IcecastListening } from '../live/ingest/icecast-server.js';
import { INGEST_DEFAULTS, RtmpIngest } from '../live/ingest/rtmp-ingest.js';
import { ffmpegPath } from '../base/ffmpeg.js';
import { WatchedMediaRegistry } from '../delivery/threads/index.js';
import { FallbackCache } from '../live/ingest/fallback-cache.js';
import { TimelinesRepo } from '../base/db/timelines-repo.js';
import { WHIP_INGEST_DEFAULTS, WhipIngest } from '../live/ingest/whip.js';
import type { TimelineMark, TimelineStore } from '../live/media/timeline.js';

/**
 * The node's cache of fallback renditions (docs/streams.md "Fallback"), `<dataDir>/fallback-cache`:
 * built before the control services, which tell it of deleted and replaced episode audio.
 * @throws Error when the directory cannot be created
 */
export function buildFallbackCache(b: Base): FallbackCache {
  return new FallbackCache({ dir: path.join(b.config.dataDir, 'fallback-cache'), ffmpeg: ffmpegPath, log: b.log.child('live'), minFreeDiskBytes: b.config.limits.minFreeDiskBytes, now: b.now });
}

/** Publishing, built: the hubs of live streams and the ingest that feeds them. */
export interface Live {
  /** The hubs (watched: worker threads mirror them). */
  media: WatchedMediaRegistry;
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

/** Builds the media registry and publishing over `port` (the stream lifecycle, docs/streams.md), the fallback playing from `fallbackCache`. */
export function buildPublishing(b: Base, port: IngestPort, fallbackCache: FallbackCache): Live {
  const { config } = b;
  const media = new WatchedMediaRegistry(b.now, timelineStore(b), b.log.child('live'));
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
    options: { ...WHIP_INGEST_DEFAULTS, ffmpeg: ffmpegPath, maxFrameBytes: config.limits.maxAudioFrameBytes },
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
