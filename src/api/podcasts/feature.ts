/**
 * The podcasts feature module (PRODUCT.md §5): builds its repo and services from the shared
 * AppContext, registers the `/v2/podcasts…` API, the public feed `/feed/<podcast_id>.xml` and
 * episode audio `/media/<podcast_id>/<file>`, and runs the publication scheduler between
 * `start` (after listening) and `close`.
 *
 * Configuration: `config.maxUploadBytes` (`SKYLARK_MAX_UPLOAD_BYTES`, default 500 MB) caps audio uploads;
 * `config.limits.minFreeDiskBytes` (`SKYLARK_MIN_FREE_DISK_BYTES`) is the free space they must leave.
 */
import type { AppContext, Feature } from '../../context.js';
import { PodcastsRepo } from '../../db/podcasts-repo.js';
import { PodcastsService, recordingPodcastCheck } from '../../services/podcasts.js';
import { EpisodesService } from '../../services/episodes.js';
import { PublishScheduler } from '../../services/scheduler.js';
import { MediaStore, AUDIO_FILE_NAME, PODCAST_ID } from '../../media-files/store.js';
import { FeedService } from '../../feed/feed-service.js';
import { registerBytesRoute } from '../../http/files.js';
import { notFound } from '../../errors/errors.js';
import { registerPodcastRoutes } from './routes.js';

/** Audio `Cache-Control` max-age (s): file names change on every upload, deletion should not linger long. */
const AUDIO_MAX_AGE = 3600;

/** The started feature plus what other modules may call (tests, the streams side, recordings). */
export interface PodcastsFeature extends Feature {
  podcasts: PodcastsService;
  episodes: EpisodesService;
  feed: FeedService;
  /** For the streams side: validates `recording.podcastId` (400 `parameter_invalid`, param `recording.podcastId`). */
  checkRecordingPodcast: (accountId: string, podcastId: string) => void;
}

/** Registers the podcasts feature on `ctx` (before `http.finish()`). */
export function registerPodcasts(ctx: AppContext): PodcastsFeature {
  const maxUploadBytes = ctx.config.maxUploadBytes;
  const log = ctx.log.child('podcasts');
  const repo = new PodcastsRepo(ctx.db);
  const media = new MediaStore(ctx.config.dataDir);
  let scheduler: PublishScheduler | null = null;
  const poke = () => scheduler?.poke();
  const podcasts = new PodcastsService({ repo, urls: ctx.urls, now: ctx.now, onScheduleChange: poke });
  const episodes = new EpisodesService({ repo, outbox: ctx.outbox, media, urls: ctx.urls, now: ctx.now, onScheduleChange: poke });
  const feed = new FeedService({ repo, recordingStreams: (id) => ctx.streams.recordingInto(id), urls: ctx.urls, now: ctx.now });

  registerPodcastRoutes({ http: ctx.http, guard: ctx.guard, podcasts, episodes, media, maxUploadBytes, minFreeDiskBytes: ctx.config.limits.minFreeDiskBytes, limits: ctx.limits, log });

  const onError = (e: unknown, requestId: string) => log.error('unhandled error', { requestId, err: e instanceof Error ? e.stack : String(e) });
  registerBytesRoute(ctx.http, '/feed/:file', (req) => feed.answer(req.params[0]!), onError);
  registerBytesRoute(
    ctx.http,
    '/media/:podcast/:file',
    (req) => {
      const [podcastId, file] = req.params as [string, string];
      const row = PODCAST_ID.test(podcastId) && AUDIO_FILE_NAME.test(file) ? repo.audioFile(file) : undefined;
      // Audio is public once its episode is published; drafts and scheduled episodes stay private.
      if (!row || row.podcast_id !== podcastId || row.status !== 'published') return { kind: 'error', error: notFound('episode audio', file.slice(0, 80), 'file') };
      return {
        kind: 'file',
        path: media.filePath(podcastId, file),
        size: row.audio_size,
        etag: `"${file.slice(0, file.lastIndexOf('.'))}-${row.audio_size.toString(16)}"`,
        lastModified: row.audio_updated_at,
        contentType: row.audio_mime,
        cacheControl: `public, max-age=${AUDIO_MAX_AGE}`,
        headers: { 'Access-Control-Allow-Origin': '*' },
      };
    },
    onError,
  );

  return {
    podcasts,
    episodes,
    feed,
    checkRecordingPodcast: recordingPodcastCheck(repo),
    start() {
      media.clearTemp();
      scheduler = new PublishScheduler({ nextDueAt: () => repo.nextDueAt(), publishDue: () => episodes.publishDue(), now: ctx.now, log });
      scheduler.start();
    },
    close() {
      scheduler?.close();
      scheduler = null;
    },
  };
}
