/**
 * Episode loudness (migration 011, docs/podcasts.md "Loudness"): a podcast's normalisation target,
 * each episode's measurement and pending work, and the swap of an episode's audio to its normalised
 * copy (the upload kept as `original_audio_file`). Times are Unix milliseconds. The only SQL of
 * the loudness feature.
 */
import type { Database } from './database.js';

/** The work an episode's audio still waits for: measure it, or measure and normalise it. */
export type LoudnessWork = 'measure' | 'normalize';

/** What a loudness job needs of an episode. */
export interface LoudnessJobRow {
  id: string;
  podcast_id: string;
  status: 'draft' | 'scheduled' | 'published';
  audio_file: string | null;
  audio_size: number | null;
  audio_duration: number | null;
  loudness_state: LoudnessWork | 'done' | 'failed' | null;
  /** The podcast's target (LUFS), or null when off. */
  loudness_target: number | null;
}

/** Prepared statements over the loudness columns of `podcasts` and `episodes`. */
export class LoudnessRepo {
  private readonly s;

  constructor(readonly db: Database) {
    this.s = {
      setTarget: db.prepare('UPDATE podcasts SET loudness_target = ? WHERE id = ?'),
      target: db.prepare('SELECT loudness_target FROM podcasts WHERE id = ?').pluck(),
      job: db.prepare(`SELECT e.id, e.podcast_id, e.status, e.audio_file, e.audio_size, e.audio_duration, e.loudness_state, p.loudness_target
        FROM episodes e JOIN podcasts p ON p.id = e.podcast_id WHERE e.id = ?`),
      reset: db.prepare(`UPDATE episodes SET loudness = NULL, loudness_state = @work, original_audio_file = NULL, original_audio_size = NULL WHERE id = @id`),
      pending: db.prepare(`SELECT id FROM episodes WHERE loudness_state IN ('measure','normalize') ORDER BY seq`).pluck(),
      measured: db.prepare(`UPDATE episodes SET loudness = @loudness, loudness_state = 'done' WHERE id = @id AND audio_file = @file`),
      failed: db.prepare(`UPDATE episodes SET loudness_state = 'failed' WHERE id = @id AND audio_file = @file`),
      swap: db.prepare(`UPDATE episodes SET original_audio_file = audio_file, original_audio_size = audio_size, audio_file = @newFile,
        audio_size = @newSize, loudness = @loudness, loudness_state = 'done', audio_updated_at = @now, updated_at = @now
        WHERE id = @id AND audio_file = @file AND status <> 'published'`),
    };
  }

  /** Sets podcast `podcastId`'s target (LUFS; null = off). */
  setTarget(podcastId: string, target: number | null): void {
    this.s.setTarget.run(target, podcastId);
  }
  /** Podcast `podcastId`'s target (LUFS), or null (off, or no such podcast). */
  target(podcastId: string): number | null {
    return (this.s.target.get(podcastId) as number | null | undefined) ?? null;
  }
  /** Episode `id` with its podcast's target, or undefined. */
  job(id: string): LoudnessJobRow | undefined {
    return this.s.job.get(id) as LoudnessJobRow | undefined;
  }
  /** New audio for episode `id`: forgets its measurement and original, and marks the work to do. */
  reset(id: string, work: LoudnessWork): void {
    this.s.reset.run({ id, work });
  }
  /** Ids of episodes whose audio waits for measurement or normalisation, oldest first. */
  pending(): string[] {
    return this.s.pending.all() as string[];
  }
  /** Stores the measurement (JSON) of episode `id` if it still has audio `file`; false when not. */
  setMeasured(id: string, file: string, loudness: string): boolean {
    return this.s.measured.run({ id, file, loudness }).changes === 1;
  }
  /** Marks episode `id`'s audio `file` as not measurable. */
  setFailed(id: string, file: string): void {
    this.s.failed.run({ id, file });
  }
  /**
   * Makes `newFile` (`newSize` bytes) episode `id`'s audio and keeps `file` as its original, with
   * the measurement (JSON) — only if the episode still has audio `file` and is not published.
   * False when nothing changed.
   */
  swapToNormalized(a: { id: string; file: string; newFile: string; newSize: number; loudness: string; now: number }): boolean {
    return this.s.swap.run(a).changes === 1;
  }
}
