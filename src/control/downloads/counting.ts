/**
 * Podcast download counting, built (docs/podcasts.md "Download counting"): the counter, the hook
 * the episode audio route calls for every request (src/control/feed/routes.ts `onAudio`), the size of an
 * episode's first minute (stored at upload, computed once for older audio), and the statistics
 * service the API and the dashboard read. With `SKYLARK_DOWNLOAD_COUNTING=0` nothing is counted
 * (the statistics still answer what was counted before).
 */
import type { Feature } from '../../base/background.js';
import type { Database } from '../../base/db/database.js';
import { DownloadsRepo } from '../../base/db/downloads-repo.js';
import type { PodcastsRepo } from '../../base/db/podcasts-repo.js';
import type { BytesRequest, FileAnswer } from '../../base/http/files.js';
import { clientAddress, trustedProxies } from '../../base/http/client-address.js';
import type { Logger } from '../../base/logger.js';
import { minuteBytes } from '../episode-audio/minute-bytes.js';
import type { MediaStore } from '../episode-audio/store.js';
import { PodcastStatsService } from '../services/podcast-stats.js';
import { DownloadCounter } from './counter.js';

/** The download counting room, built. */
export interface Downloads extends Feature {
  /** For the episode audio route: observes a request (null counter: counting is off). */
  onAudio: (req: BytesRequest, podcastId: string, file: string) => FileAnswer['observe'];
  /** Measures the first-minute size of audio just placed at `path` (upload, recording, or a loudness-normalised copy) and keeps it. Never throws. */
  audioPlaced: (episodeId: string, file: string, path: string, sizeBytes: number, durationSeconds: number | null) => void;
  stats: PodcastStatsService;
  /** The counter (null when counting is off). */
  counter: DownloadCounter | null;
}

export interface DownloadsOptions {
  db: Database;
  podcasts: PodcastsRepo;
  media: MediaStore;
  /** `SKYLARK_TRUSTED_PROXIES` (CIDRs): peers whose `X-Forwarded-For` names the client. */
  trustedProxies: string[];
  log: Logger;
  now: () => number;
  /** `SKYLARK_DOWNLOAD_COUNTING` (default on). */
  enabled: boolean;
  /** How often the counter writes its batch (ms, default 5000). */
  flushMs?: number;
  /** `SKYLARK_DOWNLOAD_CLIENTS_PER_DAY`: clients tracked per day, shared fairly per podcast (default `MAX_CLIENTS_PER_DAY`). */
  maxClientsPerDay?: number;
}

/** Audio files remembered (id, first-minute bytes); names never change meaning, so entries never go stale. */
const FILES_MAX = 10_000;

/** Builds download counting; `start` opens the day's state, `close` writes what is pending. */
export function createDownloads(o: DownloadsOptions): Downloads {
  const repo = new DownloadsRepo(o.db);
  const log = o.log.child('downloads');
  const counter = o.enabled ? new DownloadCounter({ repo, log, now: o.now, ...(o.flushMs ? { flushMs: o.flushMs } : {}), ...(o.maxClientsPerDay ? { maxClientsPerDay: o.maxClientsPerDay } : {}) }) : null;
  const trusted = trustedProxies(o.trustedProxies);
  const files = new Map<string, { episodeId: string; minuteBytes: number }>();
  const remember = (file: string, info: { episodeId: string; minuteBytes: number }) => {
    if (files.size >= FILES_MAX) files.clear();
    files.set(file, info);
  };

  const audioPlaced: Downloads['audioPlaced'] = (episodeId, file, path, sizeBytes, durationSeconds) => {
    try {
      const bytes = minuteBytes(path, sizeBytes, durationSeconds);
      // Stored for an upload; a loudness-normalised copy's is kept in memory (the column stays the upload's).
      repo.setMinuteBytes(episodeId, file, bytes);
      remember(file, { episodeId, minuteBytes: bytes });
    } catch (e) {
      log.warn('the first minute of an episode could not be measured', { episodeId, err: e instanceof Error ? e.message : String(e) });
    }
  };

  /** Id and first-minute bytes of audio file `file`, measured and stored on first use when the upload predates counting. */
  const fileInfo = (podcastId: string, file: string) => {
    const hit = files.get(file);
    if (hit) return hit;
    const row = repo.audioEpisode(file);
    if (!row) return undefined;
    let bytes = row.audio_minute_bytes;
    if (bytes === null) {
      try {
        bytes = minuteBytes(o.media.filePath(podcastId, file), row.audio_size, row.audio_duration);
        repo.setMinuteBytes(row.id, file, bytes);
      } catch (e) {
        log.warn('the first minute of an episode could not be measured', { episodeId: row.id, err: e instanceof Error ? e.message : String(e) });
        return undefined;
      }
    }
    const info = { episodeId: row.id, minuteBytes: bytes };
    remember(file, info);
    return info;
  };

  const onAudio: Downloads['onAudio'] = (req, podcastId, file) => {
    if (!counter) return undefined;
    const info = fileInfo(podcastId, file);
    if (!info) return undefined;
    const ip = clientAddress(req.peer, req.forwardedFor, trusted);
    return counter.request({ podcastId, episodeId: info.episodeId, minuteBytes: info.minuteBytes, ip, userAgent: req.userAgent }, req.method);
  };

  return {
    onAudio,
    audioPlaced,
    counter,
    stats: new PodcastStatsService({ downloads: repo, podcasts: o.podcasts, flush: () => counter?.flush(), now: o.now }),
    start: () => counter?.start(),
    close: () => counter?.close(),
  };
}
