/**
 * The feed room's delivery routes (docs/behaviour.md §5), public and cacheable, answered through the byte
 * routes of src/base/http/files.ts (conditional requests, ranges, HEAD):
 * - `GET|HEAD /feed/<podcast_id>.xml`: the podcast feed, rendered by the FeedService
 *   (./feed-service.ts);
 * - `GET|HEAD /media/<podcast_id>/<file>`: an episode's audio file, public once the episode is
 *   published (drafts and scheduled episodes stay private: 404);
 * - `GET|HEAD /media/<podcast_id>/<episode_id>.chapters.json`: its Podcasting 2.0 JSON chapters
 *   (`application/json+chapters`, docs/behaviour.md §11), public on the same terms;
 * - `GET|HEAD /media/<podcast_id>/<episode_id>.transcript.<vtt|srt|json>`: its transcript in the
 *   format it was given (docs/podcasts.md "Transcripts"), public on the same terms.
 * Registered by the composition root, like the HLS routes.
 */
import { createHash } from 'node:crypto';
import type { HttpServer } from '../../base/http/server.js';
import { registerBytesRoute, type Answer, type BytesRequest, type FileAnswer } from '../../base/http/files.js';
import { notFound } from '../../base/errors/errors.js';
import type { PodcastsRepo } from '../../base/db/podcasts-repo.js';
import { AUDIO_FILE_NAME, PODCAST_ID, type MediaStore } from '../episode-audio/store.js';
import type { Logger } from '../../base/logger.js';
import type { FeedService } from './feed-service.js';
import { CHAPTERS_TYPE } from './render.js';
import { TRANSCRIPT_EXT, type TranscriptMime } from '../services/episode-object.js';

/** Audio `Cache-Control` max-age (s): file names change on every upload, deletion should not linger long. */
const AUDIO_MAX_AGE = 3600;

export interface FeedRoutesDeps {
  feed: FeedService;
  /** Episode audio rows by file name. */
  repo: PodcastsRepo;
  /** Where the audio files are. */
  media: MediaStore;
  /** Where an unexpected error (answered 500) is logged. */
  log: Logger;
  /**
   * Told every request for a published episode's audio (podcast id, file name): answers what
   * observes the bytes sent (download counting, docs/podcasts.md "Download counting"), or nothing.
   */
  onAudio?: (req: BytesRequest, podcastId: string, file: string) => FileAnswer['observe'];
}

/** Registers the feed and episode audio routes on `http`. */
export function registerFeedRoutes(http: HttpServer, d: FeedRoutesDeps): void {
  const onError = (e: unknown, requestId: string) => d.log.error('unhandled error', { requestId, err: e instanceof Error ? e.stack : String(e) });
  registerBytesRoute(http, '/feed/:file', (req) => d.feed.answer(req.params[0]!), onError);
  registerBytesRoute(http, '/media/:podcast/:file', (req) => sideFileAnswer(d, req.params[0]!, req.params[1]!) ?? audioAnswer(d, req.params[0]!, req.params[1]!, req), onError);
}

/** `<episode_id>.chapters.json` */
const CHAPTERS_FILE = /^(ep_[A-Za-z0-9]{1,64})\.chapters\.json$/;

/** The answer for `/media/<podcastId>/<episode_id>.chapters.json`: the chapters of a published episode that has them, else 404. */
function chaptersAnswer(d: FeedRoutesDeps, podcastId: string, file: string): Answer {
  const id = CHAPTERS_FILE.exec(file)![1]!;
  const row = PODCAST_ID.test(podcastId) ? d.repo.chapters(id) : undefined;
  if (!row || row.podcast_id !== podcastId || row.status !== 'published' || !row.chapters) return { kind: 'error', error: notFound('episode chapters', file.slice(0, 80), 'file') };
  const body = Buffer.from(row.chapters, 'utf8');
  return {
    kind: 'bytes',
    body,
    etag: `"${createHash('sha1').update(body).digest('base64url')}"`,
    lastModified: row.updated_at,
    contentType: CHAPTERS_TYPE,
    cacheControl: `public, max-age=${AUDIO_MAX_AGE}`,
    headers: { 'Access-Control-Allow-Origin': '*' },
  };
}

/** The answer for `/media/<podcastId>/<file>`: the file of a published episode (ETag from its name and size), else 404. */
function audioAnswer(d: FeedRoutesDeps, podcastId: string, file: string, req: BytesRequest): Answer {
  const row = PODCAST_ID.test(podcastId) && AUDIO_FILE_NAME.test(file) ? d.repo.audioFile(file) : undefined;
  if (!row || row.podcast_id !== podcastId || row.status !== 'published') return { kind: 'error', error: notFound('episode audio', file.slice(0, 80), 'file') };
  const observe = d.onAudio?.(req, podcastId, file);
  return {
    ...(observe ? { observe } : {}),
    kind: 'file',
    path: d.media.filePath(podcastId, file),
    size: row.audio_size,
    etag: `"${file.slice(0, file.lastIndexOf('.'))}-${row.audio_size.toString(16)}"`,
    lastModified: row.audio_updated_at,
    contentType: row.audio_mime,
    cacheControl: `public, max-age=${AUDIO_MAX_AGE}`,
    headers: { 'Access-Control-Allow-Origin': '*' },
  };
}

/** The answer for an episode's side file (chapters, transcript) named `file`; undefined for any other name (audio). */
function sideFileAnswer(d: FeedRoutesDeps, podcastId: string, file: string): Answer | undefined {
  if (CHAPTERS_FILE.test(file)) return chaptersAnswer(d, podcastId, file);
  if (TRANSCRIPT_FILE.test(file)) return transcriptAnswer(d, podcastId, file);
  return undefined;
}

/** `<episode_id>.transcript.<vtt|srt|json>` (docs/podcasts.md "Transcripts"). */
const TRANSCRIPT_FILE = /^(ep_[A-Za-z0-9]{1,64})\.transcript\.(vtt|srt|json)$/;

/** Served `Content-Type` of a transcript by its stored MIME type. */
const TRANSCRIPT_CONTENT_TYPE: Record<string, string> = {
  'text/vtt': 'text/vtt; charset=utf-8',
  'application/x-subrip': 'application/x-subrip; charset=utf-8',
  'application/json': 'application/json; charset=utf-8',
};

/** The answer for `/media/<podcastId>/<episode_id>.transcript.<ext>`: the transcript of a published episode in that format, else 404. */
function transcriptAnswer(d: FeedRoutesDeps, podcastId: string, file: string): Answer {
  const m = TRANSCRIPT_FILE.exec(file)!;
  const row = PODCAST_ID.test(podcastId) ? d.repo.transcript(m[1]!) : undefined;
  const type = row?.transcript_type;
  if (!row || row.podcast_id !== podcastId || row.status !== 'published' || !row.transcript || !type || TRANSCRIPT_EXT[type as TranscriptMime] !== m[2]) {
    return { kind: 'error', error: notFound('episode transcript', file.slice(0, 80), 'file') };
  }
  const body = Buffer.from(row.transcript, 'utf8');
  return {
    kind: 'bytes',
    body,
    etag: `"${createHash('sha1').update(body).digest('base64url')}"`,
    lastModified: row.updated_at,
    contentType: TRANSCRIPT_CONTENT_TYPE[type] ?? 'text/plain; charset=utf-8',
    cacheControl: `public, max-age=${AUDIO_MAX_AGE}`,
    headers: { 'Access-Control-Allow-Origin': '*' },
  };
}
