/**
 * The Episodes resource (docs/behaviour.md §5 "Podcasts and episodes", §9 "Events", §15): drafts,
 * their audio (probed, stored by MediaStore), transcripts and chapters, and the draft a stream's
 * recording becomes (§3 "Recording"). Publication is src/control/services/episode-publishing.ts;
 * the episode object src/control/services/episode-object.ts. Writes that record events run as one
 * unit of work (src/base/db/unit-of-work.ts). Knows no HTTP and no SQL text.
 */
import { copyFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { ApiError, conflict, notFound, paramInvalid } from '../../base/errors/errors.js';
import { newId } from '../../base/ids.js';
import { UnknownCursorError, type PageQuery } from '../../base/db/paginate.js';
import type { EpisodeRow, EpisodeStatus } from '../../base/db/podcasts-repo.js';
import { UnitOfWork } from '../../base/db/unit-of-work.js';
import type { ChaptersDocument } from './play-log.js';
import type { LoudnessService } from './loudness.js';
import { NotAudioError, probeAudio, type AudioInfo } from '../episode-audio/probe.js';
import type { MediaStore } from '../episode-audio/store.js';
import { toEpisodeObject, type CreateEpisodeInput, type EpisodeObject, type PublishEpisodeInput, type TranscriptMime, type UpdateEpisodeInput } from './episode-object.js';
import { EpisodePublishing, type PublishingDeps } from './episode-publishing.js';

/** What the episodes service is built with (src/app/control.ts): publication's needs, and the audio's. */
export interface EpisodesDeps extends PublishingDeps {
  media: MediaStore;
  /** Probes an audio file (tests may inject). Default: FFmpeg/ffprobe. */
  probe?: (file: string) => Promise<AudioInfo>;
  /** Told of new audio once stored (its file name under the media store, path, size, duration): download counting measures its first minute. */
  audioPlaced?: (episodeId: string, fileName: string, path: string, sizeBytes: number, durationSeconds: number | null) => void;
  /** Told of an episode whose audio file was deleted or replaced, once done (the stream fallback's rendition cache). */
  audioGone?: (episodeId: string) => void;
  /** Measures (and, with the podcast's `loudnessTarget`, normalises) new audio in the background. */
  loudness?: Pick<LoudnessService, 'resetForNewAudio' | 'enqueue' | 'settled'>;
}

/** The Episodes resource: every change of an episode, and its publication through `EpisodePublishing`. */
export class EpisodesService {
  private readonly probe: (file: string) => Promise<AudioInfo>;
  /** Writes that record events: one transaction (`BEGIN IMMEDIATE`), events after the commit (src/base/db/unit-of-work.ts). */
  private readonly uow: UnitOfWork;
  /** Publication, in the same unit of work. */
  private readonly publishing: EpisodePublishing;

  constructor(private readonly d: EpisodesDeps) {
    this.probe = d.probe ?? ((f) => probeAudio(f));
    this.uow = new UnitOfWork(d.repo.db, d.outbox);
    this.publishing = new EpisodePublishing(d, this.uow);
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

  /** POST /podcasts/{id}/publish: see `EpisodePublishing.publish`. @throws ApiError 400, 404, 409 */
  publish(accountId: string, podcastId: string, input: PublishEpisodeInput): EpisodeObject {
    return this.publishing.publish(accountId, podcastId, input);
  }

  /** `publish`, waiting up to `publishWaitMs` for the audio: see `EpisodePublishing.publishWhenFinal`. @throws what `publish` throws */
  publishWhenFinal(accountId: string, podcastId: string, input: PublishEpisodeInput): Promise<EpisodeObject> {
    return this.publishing.publishWhenFinal(accountId, podcastId, input);
  }

  /** Publishes an episode that waits for its audio once that is final: see `EpisodePublishing.publishWhenReady`. */
  publishWhenReady(episodeId: string): boolean {
    return this.publishing.publishWhenReady(episodeId);
  }

  /** The scheduler's tick: see `EpisodePublishing.publishDue`. Returns how many were published. */
  publishDue(): number {
    return this.publishing.publishDue();
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
