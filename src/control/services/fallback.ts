/**
 * The episodes a stream's fallback plays (docs/streams.md "Fallback"): episodes of the stream's
 * account, published or draft, with audio in the episode media store. The check refuses a list
 * that names another one; the resolution (each time the fallback starts an episode) leaves out
 * what was deleted or lost its audio since.
 */
import type { PodcastsRepo } from '../../base/db/podcasts-repo.js';
import { ApiError } from '../../base/errors/errors.js';
import type { MediaStore } from '../episode-audio/store.js';
import type { FallbackItem } from '../../live/ports.js';

/** Looks fallback episodes up in the account's episodes and their files in the media store. */
export class FallbackEpisodes {
  constructor(
    private readonly repo: PodcastsRepo,
    private readonly media: MediaStore,
  ) {}

  /**
   * Refuses the first id that is not an episode of the account, or one without audio: 400
   * `parameter_invalid`, `param` = `fallback.episodeIds[i]`. @throws ApiError
   */
  check(accountId: string, episodeIds: string[]): void {
    episodeIds.forEach((id, i) => {
      const e = this.repo.episodeAudio(id, accountId);
      const param = `fallback.episodeIds[${i}]`;
      if (!e) throw new ApiError('parameter_invalid', `No such episode: '${id}'.`, { param });
      if (!e.audio_file) throw new ApiError('parameter_invalid', `The episode '${id}' has no audio: upload it first.`, { param });
    });
  }

  /** The playable episodes among `episodeIds` (of the account, with audio), in the order given. */
  items(accountId: string, episodeIds: string[]): FallbackItem[] {
    const out: FallbackItem[] = [];
    for (const id of episodeIds) {
      const e = this.repo.episodeAudio(id, accountId);
      if (e?.audio_file) out.push({ id: e.id, path: this.media.filePath(e.podcast_id, e.audio_file), title: e.title });
    }
    return out;
  }
}
