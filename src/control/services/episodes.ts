/**
 * The Episodes resource and publishing (docs/behaviour.md §5, §9 "Podcasts", "Events"): drafts, audio
 * (probed, stored by MediaStore), publication now or at `publishAt` (the scheduler publishes when
 * due), `podcast.published` / `podcast.deleted` events recorded in the transaction of the change
 * and announced after the commit. Knows no HTTP and no SQL text.
 */
import { randomUUID } from 'node:crypto';
import { copyFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { ApiError, conflict, notFound, paramInvalid } from '../../base/errors/errors.js';
import { newId } from '../../base/ids.js';
import { UnknownCursorError, type PageQuery } from '../../base/db/paginate.js';
import type { EpisodeRow, EpisodeStatus, EpisodeType, PodcastsRepo } from '../../base/db/podcasts-repo.js';
import type { Outbox } from '../../base/outbox.js';
import { UnitOfWork } from '../../base/db/unit-of-work.js';
import type { PublicUrls } from '../../base/config.js';
import type { ChaptersDocument } from './play-log.js';
import { toEpisodeLoudness, type EpisodeLoudness, type LoudnessService } from './loudness.js';
import { jsonList, type FeedChanged, type PodcastPerson } from './podcasts.js';

/** A `podcast:soundbite`: a shareable part of the episode (seconds) with an optional title. */
export interface EpisodeSoundbite {
  startTime: number;
  duration: number;
  title?: string;
}

/** A validated `POST /podcasts/{id}/episodes` body (api/podcasts/schemas.ts validates it). */
export interface CreateEpisodeInput {
  title: string;
  description?: string;
  season?: number | null;
  episodeNumber?: number | null;
  episodeType?: 'full' | 'trailer' | 'bonus';
  explicit?: boolean;
  /** Podcasting 2.0 `podcast:person` entries of the episode (docs/podcasts.md "Feed completeness"). */
  persons?: PodcastPerson[];
  /** `podcast:soundbite` entries. */
  soundbites?: EpisodeSoundbite[];
}

/** A validated `PATCH /podcasts/{id}/episodes/{eid}` body; `status: 'draft'` cancels a schedule. */
export interface UpdateEpisodeInput extends Partial<CreateEpisodeInput> {
  status?: 'draft';
}

/** A validated `POST /podcasts/{id}/publish` body; `publishAt` ISO 8601 with a zone. */
export interface PublishEpisodeInput {
  episodeId: string;
  publishAt?: string;
}
import { NotAudioError, probeAudio, type AudioInfo } from '../episode-audio/probe.js';
import type { MediaStore } from '../episode-audio/store.js';

/** The episode object of the API. Times are ISO 8601 UTC. */
export interface EpisodeObject {
  id: string;
  object: 'episode';
  podcastId: string;
  title: string;
  description: string;
  /**
   * `draft`, `scheduled`, `published`, or `processing`: publication was asked while the audio is
   * still being finished (a recording's hand-over) or loudness-normalised, and happens once it is
   * final (docs/podcasts.md "Publishing while the audio is processed").
   */
  status: EpisodeStatus | 'processing';
  /** `{cdn_url}/media/<podcast_id>/<file>`; the feed's enclosure URL. Null before audio is uploaded. */
  audioUrl: string | null;
  audio: { mimeType: string; sizeBytes: number; durationSeconds: number | null } | null;
  /** Fixed at first publication; null before. */
  guid: string | null;
  season: number | null;
  episodeNumber: number | null;
  episodeType: EpisodeType;
  explicit: boolean;
  publishAt: string | null;
  publishedAt: string | null;
  sourceStreamId: string | null;
  /**
   * Podcasting 2.0 JSON chapters (`application/json+chapters`) at
   * `{cdn_url}/media/<podcast_id>/<episode_id>.chapters.json` — one per track of the recorded stream
   * (docs/behaviour.md §11); public once published. Null when the episode has none.
   */
  chaptersUrl: string | null;
  /**
   * The transcript (`PUT …/transcript`) at `{cdn_url}/media/<podcast_id>/<episode_id>.transcript.<vtt|srt|json>`,
   * public once published; null when none. `transcriptType` is its MIME type.
   */
  transcriptUrl: string | null;
  transcriptType: TranscriptMime | null;
  persons: PodcastPerson[];
  soundbites: EpisodeSoundbite[];
  /**
   * The BS.1770-4 loudness of what `audioUrl` serves, and whether that is a normalised copy of the
   * upload (docs/podcasts.md "Loudness"); null until measured, shortly after the audio is stored.
   */
  loudness: EpisodeLoudness | null;
  createdAt: string;
  updatedAt: string;
}

/** The transcript formats (docs/podcasts.md "Transcripts") by MIME type, with their file extension. */
export const TRANSCRIPT_EXT = { 'text/vtt': 'vtt', 'application/x-subrip': 'srt', 'application/json': 'json' } as const;
export type TranscriptMime = keyof typeof TRANSCRIPT_EXT;

/** `{cdn_url}/media/<podcast_id>/<episode_id>.transcript.<ext>` of a transcript of `type`. */
export const transcriptUrlOf = (urls: PublicUrls, podcastId: string, episodeId: string, type: TranscriptMime) =>
  `${urls.cdnUrl}/media/${podcastId}/${episodeId}.transcript.${TRANSCRIPT_EXT[type]}`;

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** `{cdn_url}/media/<podcast_id>/<file name>`. */
export const audioUrlOf = (urls: PublicUrls, podcastId: string, fileName: string) => `${urls.cdnUrl}/media/${podcastId}/${fileName}`;

/** `{cdn_url}/media/<podcast_id>/<episode_id>.chapters.json`. */
export const chaptersUrlOf = (urls: PublicUrls, podcastId: string, episodeId: string) => `${urls.cdnUrl}/media/${podcastId}/${episodeId}.chapters.json`;

/** Whether an episode's audio is final: stored, and no loudness normalisation will replace it. */
const audioFinal = (row: EpisodeRow) => row.audio_file !== null && row.loudness_state !== 'normalize';

/** Renders a row as the API object. */
export function toEpisodeObject(row: EpisodeRow, urls: PublicUrls): EpisodeObject {
  return {
    id: row.id,
    object: 'episode',
    podcastId: row.podcast_id,
    title: row.title,
    description: row.description,
    status: row.publish_pending === 1 ? 'processing' : row.status,
    audioUrl: row.audio_file ? audioUrlOf(urls, row.podcast_id, row.audio_file) : null,
    audio: row.audio_file ? { mimeType: row.audio_mime!, sizeBytes: row.audio_size!, durationSeconds: row.audio_duration } : null,
    guid: row.guid,
    season: row.season,
    episodeNumber: row.episode_number,
    episodeType: row.episode_type,
    explicit: row.explicit === 1,
    publishAt: iso(row.publish_at),
    publishedAt: iso(row.published_at),
    sourceStreamId: row.source_stream_id,
    chaptersUrl: row.chapters ? chaptersUrlOf(urls, row.podcast_id, row.id) : null,
    transcriptUrl: row.transcript && row.transcript_type ? transcriptUrlOf(urls, row.podcast_id, row.id, row.transcript_type as TranscriptMime) : null,
    transcriptType: row.transcript && row.transcript_type ? (row.transcript_type as TranscriptMime) : null,
    persons: jsonList(row.persons),
    soundbites: jsonList(row.soundbites),
    loudness: toEpisodeLoudness(row.loudness, row.original_audio_file ? audioUrlOf(urls, row.podcast_id, row.original_audio_file) : null),
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}

export interface EpisodesDeps {
  repo: PodcastsRepo;
  outbox: Outbox;
  media: MediaStore;
  urls: () => PublicUrls;
  now: () => number;
  /** Called after a schedule was added, moved or removed (the scheduler re-arms). */
  onScheduleChange?: () => void;
  /** Probes an audio file (tests may inject). Default: FFmpeg/ffprobe. */
  probe?: (file: string) => Promise<AudioInfo>;
  /** Told of every change of what the feed shows (a published episode's), in its transaction. */
  feedChanged?: FeedChanged;
  /** Told of new audio once stored (its file name under the media store, path, size, duration): download counting measures its first minute. */
  audioPlaced?: (episodeId: string, fileName: string, path: string, sizeBytes: number, durationSeconds: number | null) => void;
  /** Told of an episode whose audio file was deleted or replaced, once done (the stream fallback's rendition cache). */
  audioGone?: (episodeId: string) => void;
  /** Measures (and, with the podcast's `loudnessTarget`, normalises) new audio in the background. */
  loudness?: Pick<LoudnessService, 'resetForNewAudio' | 'enqueue' | 'settled'>;
  /**
   * How long a publish request waits for the audio's loudness work (ms; 0: not at all) before it
   * answers `processing`: short audio published right after its upload is published at once, with
   * its final audio (docs/podcasts.md "Publishing while the audio is processed").
   */
  publishWaitMs?: number;
}

export class EpisodesService {
  private readonly probe: (file: string) => Promise<AudioInfo>;
  /** Writes that record events: one transaction (`BEGIN IMMEDIATE`), events after the commit (src/base/db/unit-of-work.ts). */
  private readonly uow: UnitOfWork;

  constructor(private readonly d: EpisodesDeps) {
    this.probe = d.probe ?? ((f) => probeAudio(f));
    this.uow = new UnitOfWork(d.repo.db, d.outbox);
  }

  /** Runs `change` as one unit of work. @throws what the transaction threw (its events are then dropped) */
  private write<T>(change: () => T): T {
    return this.uow.run(change, { immediate: true });
  }

  /** Creates a draft episode of podcast `podcastId`. @throws ApiError 404 (podcast), 409 (archived) */
  create(accountId: string, podcastId: string, input: CreateEpisodeInput): EpisodeObject {
    const podcast = this.d.repo.getPodcast(podcastId, accountId);
    if (!podcast) throw notFound('podcast', podcastId);
    if (podcast.status === 'archived') throw conflict('The podcast is archived and takes no new episodes.');
    const row = this.newRow(accountId, podcastId, input.title, {
      description: input.description ?? '',
      season: input.season ?? null,
      episode_number: input.episodeNumber ?? null,
      episode_type: input.episodeType ?? 'full',
      explicit: input.explicit ? 1 : 0,
    });
    this.d.repo.tx(() => {
      this.d.repo.insertEpisode(row);
      if (input.persons || input.soundbites) this.d.repo.setEpisodeTags(row.id, JSON.stringify(input.persons ?? []), JSON.stringify(input.soundbites ?? []));
      this.touchPodcast(podcastId);
    });
    return this.get(accountId, podcastId, row.id);
  }

  /** @throws ApiError 404 */
  get(accountId: string, podcastId: string, id: string): EpisodeObject {
    return this.render(this.row(accountId, podcastId, id));
  }

  /** A page of a podcast's episodes, newest first. @throws ApiError 400 (unknown cursor), 404 (podcast) */
  list(accountId: string, podcastId: string, status: EpisodeStatus | 'processing' | undefined, q: PageQuery): { data: EpisodeObject[]; hasMore: boolean } {
    if (!this.d.repo.podcastExists(podcastId, accountId)) throw notFound('podcast', podcastId);
    try {
      const page = this.d.repo.listEpisodes(accountId, podcastId, status, q);
      return { data: page.rows.map((r) => this.render(r)), hasMore: page.hasMore };
    } catch (e) {
      if (e instanceof UnknownCursorError) throw paramInvalid(e.param, e.message);
      throw e;
    }
  }

  /**
   * Applies a PATCH. `status: "draft"` cancels a schedule (a draft → 409 already draft; a published
   * episode cannot go back → 409). @throws ApiError 400, 404, 409
   */
  update(accountId: string, podcastId: string, id: string, input: UpdateEpisodeInput): EpisodeObject {
    let scheduleChanged = false;
    const out = this.d.repo.tx(() => {
      const row = { ...this.row(accountId, podcastId, id) };
      if (input.title !== undefined) row.title = input.title;
      if (input.description !== undefined) row.description = input.description;
      if (input.season !== undefined) row.season = input.season;
      if (input.episodeNumber !== undefined) row.episode_number = input.episodeNumber;
      if (input.episodeType !== undefined) row.episode_type = input.episodeType;
      if (input.explicit !== undefined) row.explicit = input.explicit ? 1 : 0;
      if (input.status === 'draft' && row.publish_pending === 1) {
        // Cancels a publication that waits for the audio.
        this.d.repo.setPublishPending(id, 0);
        row.publish_pending = 0;
      } else if (input.status === 'draft') {
        if (row.status === 'draft') throw conflict('The episode is already a draft.');
        if (row.status === 'published') throw conflict('A published episode cannot go back to draft; delete it to take it out of the feed.');
        row.status = 'draft';
        row.publish_at = null;
        scheduleChanged = true;
      }
      row.updated_at = this.d.now();
      this.d.repo.updateEpisode(row);
      if (input.persons !== undefined || input.soundbites !== undefined) {
        const persons = input.persons !== undefined ? JSON.stringify(input.persons) : (row.persons ?? '[]');
        const soundbites = input.soundbites !== undefined ? JSON.stringify(input.soundbites) : (row.soundbites ?? '[]');
        this.d.repo.setEpisodeTags(id, persons, soundbites);
      }
      this.touchPodcast(podcastId);
      if (row.status === 'published') this.d.feedChanged?.(accountId, podcastId, 'changed');
      return this.row(accountId, podcastId, id);
    });
    if (scheduleChanged) this.d.onScheduleChange?.();
    return this.render(out);
  }

  /**
   * Deletes an episode and its audio file. A published one records `podcast.deleted` carrying the
   * episode as it was (plus `deleted: true`). @throws ApiError 404
   */
  delete(accountId: string, podcastId: string, id: string): { id: string; object: 'episode'; deleted: true } {
    let row!: EpisodeRow;
    this.write(() => {
      row = this.row(accountId, podcastId, id);
      this.d.repo.deleteEpisode(id);
      this.touchPodcast(podcastId);
      if (row.status === 'published') {
        this.d.outbox.record(accountId, 'podcast.deleted', { object: { ...this.render(row), deleted: true } });
        this.d.feedChanged?.(accountId, podcastId, 'changed');
      }
    });
    if (row.audio_file) this.d.media.remove(podcastId, row.audio_file);
    if (row.original_audio_file) this.d.media.remove(podcastId, row.original_audio_file);
    if (row.audio_file) this.d.audioGone?.(id);
    if (row.status === 'scheduled') this.d.onScheduleChange?.();
    return { id, object: 'episode', deleted: true };
  }

  /**
   * Before an audio upload is read: the episode must exist. Returns nothing; throws to refuse.
   * @throws ApiError 404
   */
  checkUploadTarget(accountId: string, podcastId: string, id: string): void {
    this.row(accountId, podcastId, id);
  }

  /**
   * Takes a finished upload at `tempPath`: probes it (415 `unsupported_media_type` when it is not
   * audio), moves it into the media store under a new name, records type, size and duration, and
   * removes the previous file. The temporary file is consumed either way.
   * @throws ApiError 404 (episode gone meanwhile), 415
   */
  async attachAudio(accountId: string, podcastId: string, id: string, tempPath: string, sizeBytes: number): Promise<EpisodeObject> {
    let info: AudioInfo;
    try {
      info = await this.probe(tempPath);
    } catch (e) {
      rmSync(tempPath, { force: true });
      if (e instanceof NotAudioError) throw new ApiError('unsupported_media_type', `The body is not an audio file Skylark accepts: ${e.message}`);
      throw e;
    }
    const fileName = this.d.media.newFileName(id, info.ext);
    let old: string | null = null;
    let oldOriginal: string | null = null;
    let out: EpisodeRow;
    try {
      this.d.media.place(tempPath, podcastId, fileName);
      out = this.d.repo.tx(() => {
        const row = { ...this.row(accountId, podcastId, id) };
        old = row.audio_file;
        oldOriginal = row.original_audio_file ?? null;
        const now = this.d.now();
        Object.assign(row, {
          audio_file: fileName,
          audio_mime: info.mimeType,
          audio_size: sizeBytes,
          audio_duration: info.durationSeconds,
          audio_updated_at: now,
          updated_at: now,
        });
        this.d.repo.updateEpisode(row);
        if (this.d.loudness) {
          // New audio: its loudness is measured (and normalised) afresh once committed.
          row.loudness_state = this.d.loudness.resetForNewAudio(id, podcastId);
          Object.assign(row, { loudness: null, original_audio_file: null, original_audio_size: null });
        }
        this.touchPodcast(podcastId);
        if (row.status === 'published') this.d.feedChanged?.(accountId, podcastId, 'changed');
        return row;
      });
    } catch (e) {
      rmSync(tempPath, { force: true });
      this.d.media.remove(podcastId, fileName);
      throw e;
    }
    if (old) this.d.media.remove(podcastId, old);
    if (oldOriginal) this.d.media.remove(podcastId, oldOriginal);
    if (old) this.d.audioGone?.(id);
    this.d.loudness?.enqueue(id);
    this.d.audioPlaced?.(id, fileName, this.d.media.filePath(podcastId, fileName), sizeBytes, info.durationSeconds);
    // A publication that waited for this audio happens now if nothing will replace it (no normalisation).
    if (out.publish_pending === 1 && this.publishWhenReady(id)) return this.get(accountId, podcastId, id);
    return this.render(out);
  }

  /**
   * `publish`, then, when the episode is `processing` because its audio is being normalised, waits
   * up to `publishWaitMs` for that work: audio that is final within it is published before the
   * answer (the answer says `published`), else the answer says `processing` and the publication
   * happens when the audio is final. @throws what `publish` throws
   */
  async publishWhenFinal(accountId: string, podcastId: string, input: PublishEpisodeInput): Promise<EpisodeObject> {
    const out = this.publish(accountId, podcastId, input);
    if (out.status !== 'processing' || !this.d.loudness || !this.d.publishWaitMs) return out;
    await this.d.loudness.settled(out.id, this.d.publishWaitMs);
    const row = this.d.repo.getEpisode(out.id, podcastId, accountId);
    return row ? this.render(row) : out;
  }

  /**
   * Publishes episode `episodeId` if its publication waits for its audio and that audio is now
   * final (stored, and no loudness normalisation will replace it): `podcast.published`, the feed
   * notifications, as `publish` does. Called when a recording's audio is stored and when the
   * loudness work of an episode ends. In an archived podcast the wait is dropped (the episode stays
   * a draft). Returns whether it was published.
   */
  publishWhenReady(episodeId: string): boolean {
    let done = false;
    this.write(() => {
      const row = this.d.repo.getEpisodeAny(episodeId);
      if (!row || row.publish_pending !== 1) return;
      const podcast = this.d.repo.getPodcast(row.podcast_id, row.account_id);
      if (!podcast || podcast.status === 'archived') {
        this.d.repo.setPublishPending(episodeId, 0);
        return;
      }
      const now = Math.max(this.d.now(), row.updated_at);
      if (!this.d.repo.publishPending(episodeId, randomUUID(), now)) return;
      this.afterPublished(row.account_id, row.podcast_id, this.d.repo.getEpisodeAny(episodeId)!, now);
      done = true;
    });
    return done;
  }

  /**
   * POST /podcasts/{id}/publish. Without `publishAt` (or with one that is now due it is refused):
   * published now, `podcast.published`, the podcast becomes `published` if it was a draft. With a
   * future `publishAt`: `scheduled` (re-scheduling a scheduled episode moves it).
   * @throws ApiError 400 (`publishAt` not in the future; `episode_audio_missing`), 404, 409 (archived
   * podcast; episode already published)
   */
  publish(accountId: string, podcastId: string, input: PublishEpisodeInput): EpisodeObject {
    const now = this.d.now();
    const at = input.publishAt !== undefined ? Date.parse(input.publishAt) : null;
    if (at !== null && at <= now) throw paramInvalid('publishAt', 'publishAt must be in the future; omit it to publish now.');
    let out!: EpisodeRow;
    this.write(() => {
      const podcast = this.d.repo.getPodcast(podcastId, accountId);
      if (!podcast) throw notFound('podcast', podcastId);
      if (podcast.status === 'archived') throw conflict('The podcast is archived: no new publication.');
      const row = this.d.repo.getEpisode(input.episodeId, podcastId, accountId);
      if (!row) throw notFound('episode', input.episodeId, 'episodeId');
      if (row.status === 'published') throw conflict('The episode is already published.');
      if (row.publish_pending === 1) throw conflict('The episode is already waiting to be published: it is published once its audio is final.');
      // A recording's episode exists a moment before its audio is stored (the hand-over): that audio is coming.
      if (!row.audio_file && !row.source_stream_id) throw new ApiError('episode_audio_missing', 'The episode has no audio: upload it with PUT /podcasts/{id}/episodes/{eid}/audio first.', { param: 'episodeId' });
      out = { ...row, updated_at: now };
      if (at === null && !audioFinal(row)) {
        // The audio is still being finished or normalised: published once it is final (`processing` until then).
        out = { ...out, status: 'draft', publish_at: null };
        this.d.repo.updateEpisode(out);
        this.d.repo.setPublishPending(row.id, 1);
        out.publish_pending = 1;
        this.touchPodcast(podcastId);
      } else if (at !== null) {
        out.status = 'scheduled';
        out.publish_at = at;
        this.d.repo.updateEpisode(out);
        this.touchPodcast(podcastId);
      } else {
        out.status = 'published';
        out.publish_at = null;
        out.published_at = now;
        out.guid = row.guid ?? randomUUID();
        this.d.repo.updateEpisode(out);
        this.afterPublished(accountId, podcastId, out, now);
      }
    });
    this.d.onScheduleChange?.();
    return this.render(out);
  }

  /**
   * Publishes every scheduled episode due at `now()` (the scheduler's tick): each in its own
   * transaction, only if still scheduled and due (so a publication happens once, never early).
   * Returns how many were published.
   */
  publishDue(): number {
    let n = 0;
    // Due while the audio is still processed: the publication waits for the audio instead.
    this.d.repo.tx(() => this.d.repo.dueToPending(this.d.now()));
    for (const id of this.d.repo.pendingReady()) if (this.publishWhenReady(id)) n++;
    for (;;) {
      const due = this.d.repo.dueEpisodes(this.d.now());
      if (due.length === 0) break;
      for (const ep of due) {
        const done = this.write(() => {
          const now = this.d.now();
          if (!this.d.repo.publishIfDue(ep.id, randomUUID(), now)) return false;
          const row = this.d.repo.getEpisode(ep.id, ep.podcast_id, ep.account_id)!;
          const podcast = this.d.repo.getPodcast(ep.podcast_id, ep.account_id);
          if (podcast?.status === 'archived') {
            // Archiving unschedules; this only happens if both raced. Keep it out of the feed.
            this.d.repo.updateEpisode({ ...row, status: 'draft', publish_at: null, published_at: null, updated_at: now });
            return false;
          }
          this.afterPublished(ep.account_id, ep.podcast_id, row, now);
          return true;
        });
        if (done) n++;
      }
      if (due.length < 100) break;
    }
    return n;
  }

  /**
   * Stores `text` (already checked, UTF-8) as the episode's transcript of MIME type `type`,
   * replacing any earlier one. Served at `transcriptUrl` once the episode is published.
   * @throws ApiError 404
   */
  setTranscript(accountId: string, podcastId: string, id: string, type: TranscriptMime, text: string): EpisodeObject {
    return this.writeTranscript(accountId, podcastId, id, text, type);
  }

  /** Removes the episode's transcript (none is no error). @throws ApiError 404 */
  deleteTranscript(accountId: string, podcastId: string, id: string): EpisodeObject {
    return this.writeTranscript(accountId, podcastId, id, null, null);
  }

  private writeTranscript(accountId: string, podcastId: string, id: string, text: string | null, type: TranscriptMime | null): EpisodeObject {
    const out = this.d.repo.tx(() => {
      const row = this.row(accountId, podcastId, id);
      this.d.repo.setTranscript(id, text, type, Math.max(this.d.now(), row.updated_at));
      this.touchPodcast(podcastId);
      if (row.status === 'published') this.d.feedChanged?.(accountId, podcastId, 'changed');
      return this.row(accountId, podcastId, id);
    });
    return this.render(out);
  }

  /**
   * Stores `text` (a checked Podcasting 2.0 JSON chapters document, UTF-8) as the episode's
   * chapters, replacing any earlier ones (a recording's too). Served at `chaptersUrl` and listed
   * as `podcast:chapters` once the episode is published. @throws ApiError 404
   */
  setChapters(accountId: string, podcastId: string, id: string, text: string): EpisodeObject {
    return this.writeChapters(accountId, podcastId, id, text);
  }

  /** Removes the episode's chapters (none is no error). @throws ApiError 404 */
  deleteChapters(accountId: string, podcastId: string, id: string): EpisodeObject {
    return this.writeChapters(accountId, podcastId, id, null);
  }

  private writeChapters(accountId: string, podcastId: string, id: string, text: string | null): EpisodeObject {
    const out = this.d.repo.tx(() => {
      const row = this.row(accountId, podcastId, id);
      this.d.repo.setChapters(id, text, Math.max(this.d.now(), row.updated_at));
      this.touchPodcast(podcastId);
      if (row.status === 'published') this.d.feedChanged?.(accountId, podcastId, 'changed');
      return this.row(accountId, podcastId, id);
    });
    return this.render(out);
  }

  /** The episode's chapters document and transcript as stored (null when none), for editing them (the dashboard). @throws ApiError 404 */
  documents(accountId: string, podcastId: string, id: string): { chapters: string | null; transcript: string | null; transcriptType: TranscriptMime | null } {
    const row = this.row(accountId, podcastId, id);
    return { chapters: row.chapters, transcript: row.transcript ?? null, transcriptType: row.transcript ? ((row.transcript_type ?? null) as TranscriptMime | null) : null };
  }

  /** Whether a draft episode was already made from stream `streamId`'s recording. */
  hasRecordingOf(streamId: string): boolean {
    return this.d.repo.hasEpisodeFromStream(streamId);
  }

  /**
   * Creates a draft episode from a finished stream recording (docs/behaviour.md §3 "Recording", §11): the
   * file at `filePath` is probed, moved (or copied when `keepSource`) into the media store, and the
   * draft carries `sourceStreamId` and the `chapters` of the stream's tracks (served at
   * `chaptersUrl` once published). With `publish: 'auto'` (docs/streams.md "Listen again") its
   * publication is asked at once and happens when the audio is final (normalised). For the
   * recording side to call when a recording stream ends.
   * @throws ApiError 404 (podcast), 415 (not audio)
   */
  async createFromRecording(args: {
    accountId: string;
    podcastId: string;
    streamId: string;
    title: string;
    filePath: string;
    keepSource?: boolean;
    chapters?: ChaptersDocument | null;
    publish?: 'draft' | 'auto';
  }): Promise<EpisodeObject> {
    const podcast = this.d.repo.getPodcast(args.podcastId, args.accountId);
    if (!podcast) throw notFound('podcast', args.podcastId);
    const temp = this.d.media.tempPath();
    if (args.keepSource) copyFileSync(args.filePath, temp);
    else {
      try {
        renameSync(args.filePath, temp);
      } catch {
        copyFileSync(args.filePath, temp); // another file system
        rmSync(args.filePath, { force: true });
      }
    }
    const row = this.newRow(args.accountId, args.podcastId, args.title.slice(0, 200) || 'Recording', {
      source_stream_id: args.streamId,
      chapters: args.chapters && args.chapters.chapters.length > 0 ? JSON.stringify(args.chapters) : null,
    });
    this.d.repo.tx(() => {
      this.d.repo.insertEpisode(row);
      if (args.publish === 'auto' && podcast.status !== 'archived') this.d.repo.setPublishPending(row.id, 1);
      this.touchPodcast(args.podcastId);
    });
    const { size } = statSync(temp);
    try {
      return await this.attachAudio(args.accountId, args.podcastId, row.id, temp, size);
    } catch (e) {
      this.d.repo.tx(() => this.d.repo.deleteEpisode(row.id));
      throw e;
    }
  }

  /** Inside the publishing transaction: podcast draft → published, `podcast.published` recorded. */
  private afterPublished(accountId: string, podcastId: string, row: EpisodeRow, now: number): void {
    this.d.repo.setPodcastStatus(podcastId, 'draft', 'published', now);
    this.touchPodcast(podcastId);
    this.d.outbox.record(accountId, 'podcast.published', { object: this.render(row) });
    this.d.feedChanged?.(accountId, podcastId, 'published');
  }

  /** Marks the podcast changed (its `updatedAt`, the feed's Last-Modified). */
  private touchPodcast(podcastId: string): void {
    this.d.repo.touchPodcast(podcastId, this.d.now());
  }

  private newRow(accountId: string, podcastId: string, title: string, extra: Partial<EpisodeRow>): EpisodeRow {
    const now = this.d.now();
    return {
      id: newId('ep'),
      account_id: accountId,
      podcast_id: podcastId,
      title,
      description: '',
      status: 'draft',
      audio_file: null,
      audio_mime: null,
      audio_size: null,
      audio_duration: null,
      audio_updated_at: null,
      guid: null,
      season: null,
      episode_number: null,
      episode_type: 'full',
      explicit: 0,
      publish_at: null,
      published_at: null,
      source_stream_id: null,
      chapters: null,
      created_at: now,
      updated_at: now,
      ...extra,
    };
  }

  private row(accountId: string, podcastId: string, id: string): EpisodeRow {
    if (!this.d.repo.podcastExists(podcastId, accountId)) throw notFound('podcast', podcastId);
    const row = this.d.repo.getEpisode(id, podcastId, accountId);
    if (!row) throw notFound('episode', id);
    return row;
  }

  private render(row: EpisodeRow): EpisodeObject {
    return toEpisodeObject(row, this.d.urls());
  }
}
