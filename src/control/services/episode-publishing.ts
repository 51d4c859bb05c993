/**
 * Episode publication (docs/behaviour.md §5 "Podcasts and episodes", §15): now, at `publishAt`
 * (the scheduler's tick publishes what is due), or once the audio is final when it is still being
 * finished or normalised (`processing`). Each publication is one unit of work that records
 * `podcast.published` and tells the feed, announced after the commit. Knows no HTTP and no SQL text.
 */
import { randomUUID } from 'node:crypto';
import { ApiError, conflict, notFound, paramInvalid } from '../../base/errors/errors.js';
import type { EpisodeRow, PodcastsRepo } from '../../base/db/podcasts-repo.js';
import type { Outbox } from '../../base/outbox.js';
import type { UnitOfWork } from '../../base/db/unit-of-work.js';
import type { PublicUrls } from '../../base/config.js';
import type { LoudnessService } from './loudness.js';
import type { FeedChanged } from './podcasts.js';
import { toEpisodeObject, type EpisodeObject, type PublishEpisodeInput } from './episode-object.js';

/** What publication needs (a part of `EpisodesDeps`, src/control/services/episodes.ts). */
export interface PublishingDeps {
  repo: PodcastsRepo;
  outbox: Outbox;
  urls: () => PublicUrls;
  now: () => number;
  /** Called after a schedule was added, moved or removed (the scheduler re-arms). */
  onScheduleChange?: () => void;
  /** Told of every change of what the feed shows (a published episode's), in its transaction. */
  feedChanged?: FeedChanged;
  /** What a publish request waits on: the loudness work of the episode's audio. */
  loudness?: Pick<LoudnessService, 'settled'>;
  /**
   * How long a publish request waits for the audio's loudness work (ms; 0: not at all) before it
   * answers `processing`: short audio published right after its upload is published at once, with
   * its final audio (docs/podcasts.md "Publishing while the audio is processed").
   */
  publishWaitMs?: number;
}

/** Whether an episode's audio is final: stored, and no loudness normalisation will replace it. */
const audioFinal = (row: EpisodeRow) => row.audio_file !== null && row.loudness_state !== 'normalize';

/** Publishes episodes: now, when due, or when their audio is final. Built by `EpisodesService`. */
export class EpisodePublishing {
  /**
   * @param uow the episodes service's unit of work: one transaction per write (`BEGIN IMMEDIATE`),
   * events after the commit (src/base/db/unit-of-work.ts)
   */
  constructor(
    private readonly d: PublishingDeps,
    private readonly uow: UnitOfWork,
  ) {}

  /** Runs `change` as one unit of work. @throws what the transaction threw (its events are then dropped) */
  private write<T>(change: () => T): T {
    return this.uow.run(change, { immediate: true });
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


  private render(row: EpisodeRow): EpisodeObject {
    return toEpisodeObject(row, this.d.urls());
  }
}
