/**
 * Episode loudness (docs/podcasts.md "Loudness"): every episode's audio, uploaded or recorded, is
 * measured per ITU-R BS.1770-4 / EBU R128 after it is stored, never while the upload waits; when
 * the podcast has a `loudnessTarget`, new audio is also normalised to it with two-pass linear
 * `loudnorm` under a −1 dBTP true-peak ceiling (AES TD1008), and the normalised copy becomes the
 * episode's audio while the upload is kept as the original. The work is durable (the episode row
 * says what is left: `measure` or `normalize`), so a restart resumes it; FFmpeg runs in a capped,
 * low-priority pool (src/base/ffmpeg.ts). A Feature of the composition root.
 */
import { rmSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Feature } from '../../base/background.js';
import type { LoudnessRepo, LoudnessWork } from '../../base/db/loudness-repo.js';
import type { Logger } from '../../base/logger.js';
import { FfmpegPoolClosedError, type FfmpegPool } from '../../base/ffmpeg.js';
import { encodeLike, LOSSY_TRUE_PEAK_TARGET, SILENCE_LUFS, TRUE_PEAK_CEILING, type LoudnessAnalyzer, type LoudnessMeasure } from '../episode-audio/loudness.js';
import type { MediaStore } from '../episode-audio/store.js';

/** A new podcast's `loudnessTarget` (LUFS): the Apple Podcasts and AES TD1008 figure for streams. */
export const LOUDNESS_TARGET_DEFAULT = -16;
/** The targets a podcast may set (LUFS). */
export const LOUDNESS_TARGET_MIN = -24;
export const LOUDNESS_TARGET_MAX = -10;
/** Audio within this many LU of the target (and under the true-peak ceiling) is served as uploaded. */
export const LOUDNESS_TOLERANCE_LU = 0.5;

/** An episode's `loudness` object (docs/podcasts.md "Loudness"). */
export interface EpisodeLoudness extends LoudnessMeasure {
  /** True when `audioUrl` serves the normalised copy (the upload is at `originalAudioUrl`). */
  normalized: boolean;
  /** The target (LUFS) the served audio was normalised to; null when not normalised. */
  target: number | null;
  /** How: one linear gain, or FFmpeg's dynamic mode where a single gain would break the true-peak ceiling; null when not normalised. */
  method: 'linear' | 'dynamic' | null;
  /** The upload as it came, when normalised (public with the episode); else null. */
  originalAudioUrl: string | null;
  /** The upload's own measurement, when normalised; else null. */
  original: LoudnessMeasure | null;
}

/** The stored form (the `episodes.loudness` JSON). */
interface StoredLoudness {
  m: LoudnessMeasure;
  normalized: boolean;
  target: number | null;
  method: 'linear' | 'dynamic' | null;
  original: LoudnessMeasure | null;
}

/** Renders the stored JSON as the episode's `loudness` (null until measured). */
export function toEpisodeLoudness(json: string | null | undefined, originalAudioUrl: string | null): EpisodeLoudness | null {
  if (!json) return null;
  const s = JSON.parse(json) as StoredLoudness;
  return { ...s.m, normalized: s.normalized, target: s.target, method: s.method, originalAudioUrl: s.normalized ? originalAudioUrl : null, original: s.original };
}

export interface LoudnessDeps {
  repo: LoudnessRepo;
  media: MediaStore;
  analyzer: LoudnessAnalyzer;
  /** The pool the analyzer runs in (closed at shutdown, killing what runs). */
  pool: FfmpegPool;
  /** Jobs at once (the pool's concurrency). */
  concurrency: number;
  now: () => number;
  log: Logger;
  /** Told when a normalised copy became an episode's audio (episode, file name, path, bytes, seconds), as the upload path tells of new audio. */
  audioReplaced?: (episodeId: string, fileName: string, path: string, sizeBytes: number, durationSeconds: number | null) => void;
  /** Told when an episode's audio is final (measured, normalised, or not measurable): a publication that waited for it may happen. */
  audioFinal?: (episodeId: string) => void;
}

/** Measures and normalises episode audio in the background. */
export class LoudnessService implements Feature {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly running = new Set<string>();
  /** Episodes given new work while their job ran: queued again when it ends. */
  private readonly again = new Set<string>();
  /** Callers waiting for an episode's job to end (`settled`). */
  private readonly waiters = new Map<string, Set<() => void>>();
  private started = false;
  private closed = false;

  constructor(private readonly d: LoudnessDeps) {}

  /**
   * Resolves once episode `episodeId`'s audio has no loudness work left (measured, normalised or
   * failed; at once when it has none), or after `maxWaitMs` (ms), or at shutdown, whichever comes
   * first: a publish request waits this long so that short audio goes out at once, final.
   */
  async settled(episodeId: string, maxWaitMs: number): Promise<void> {
    const deadline = Date.now() + maxWaitMs;
    while (!this.closed && this.started) {
      const st = this.d.repo.job(episodeId)?.loudness_state;
      const left = deadline - Date.now();
      if ((st !== 'measure' && st !== 'normalize') || left <= 0) return;
      await new Promise<void>((resolve) => {
        const set = this.waiters.get(episodeId) ?? new Set<() => void>();
        this.waiters.set(episodeId, set);
        const done = () => {
          clearTimeout(timer);
          set.delete(done);
          if (set.size === 0 && this.waiters.get(episodeId) === set) this.waiters.delete(episodeId);
          resolve();
        };
        const timer = setTimeout(done, left);
        set.add(done);
      });
    }
  }

  /** Wakes the callers of `settled` for `episodeId` (its job ended). */
  private wake(episodeId: string): void {
    for (const done of [...(this.waiters.get(episodeId) ?? [])]) done();
  }

  /**
   * Inside the transaction that gives episode `episodeId` of podcast `podcastId` new audio: forgets
   * the old measurement and original, and records the work (normalise when the podcast has a
   * target, else measure). Call `enqueue` after the commit.
   */
  resetForNewAudio(episodeId: string, podcastId: string): LoudnessWork {
    const work: LoudnessWork = this.d.repo.target(podcastId) === null ? 'measure' : 'normalize';
    this.d.repo.reset(episodeId, work);
    return work;
  }

  /** Sets podcast `podcastId`'s target (LUFS, null = off); applies to audio stored from now on. */
  setTarget(podcastId: string, target: number | null): void {
    this.d.repo.setTarget(podcastId, target);
  }

  /** Queues episode `episodeId`'s pending work (no-op when queued already or closed; after the running job when one runs). */
  enqueue(episodeId: string): void {
    if (this.closed) return;
    if (this.running.has(episodeId)) {
      this.again.add(episodeId);
      return;
    }
    if (this.queued.has(episodeId)) return;
    this.queued.add(episodeId);
    this.queue.push(episodeId);
    this.pump();
  }

  /** Resumes the work a restart interrupted (and audio stored before measurement existed). */
  start(): void {
    this.started = true;
    for (const id of this.d.repo.pending()) this.enqueue(id);
    this.pump();
  }

  /** Stops: running FFmpeg is killed; unfinished work stays recorded for the next start. */
  close(): void {
    this.closed = true;
    this.d.pool.close();
    for (const id of [...this.waiters.keys()]) this.wake(id);
  }

  private pump(): void {
    while (this.started && !this.closed && this.running.size < Math.max(1, this.d.concurrency) && this.queue.length > 0) {
      const id = this.queue.shift()!;
      this.queued.delete(id);
      this.running.add(id);
      void this.run(id)
        .then((settled) => settled && !this.closed && this.d.audioFinal?.(id))
        .catch((e: unknown) => this.closed || this.d.log.error('loudness job failed', { episodeId: id, err: e instanceof Error ? e.stack : String(e) }))
        .finally(() => {
          this.running.delete(id);
          if (this.again.delete(id)) this.enqueue(id);
          this.wake(id);
          this.pump();
        });
    }
  }

  /** One episode's loudness work; true when its audio is now final (the work ended, whatever its result). */
  private async run(id: string): Promise<boolean> {
    const row = this.d.repo.job(id);
    if (!row || !row.audio_file || (row.loudness_state !== 'measure' && row.loudness_state !== 'normalize')) return false;
    const file = row.audio_file;
    const input = this.d.media.filePath(row.podcast_id, file);
    const ext = path.extname(file).slice(1);
    const target = row.loudness_state === 'normalize' ? row.loudness_target : null;
    const lossyGuess = !['flac', 'wav'].includes(ext);
    let tmp: string | null = null;
    try {
      const a = await this.d.analyzer.analyse(input, target !== null ? { target, truePeak: lossyGuess ? LOSSY_TRUE_PEAK_TARGET : TRUE_PEAK_CEILING } : undefined);
      if (this.closed) return false;
      const asIs: StoredLoudness = { m: a.measure, normalized: false, target: null, method: null, original: null };
      const encode = target !== null && a.loudnorm && needsNormalising(a.measure, target) ? encodeLike(a.stream, ext) : null;
      if (target !== null && a.loudnorm && encode && this.d.repo.job(id)?.status !== 'published') {
        tmp = this.d.media.workPath();
        const truePeak = encode.lossy ? LOSSY_TRUE_PEAK_TARGET : TRUE_PEAK_CEILING;
        const { method } = await this.d.analyzer.normalise(input, tmp, target, truePeak, a.loudnorm, encode);
        const after = await this.d.analyzer.analyse(tmp);
        if (this.closed) return false;
        const newFile = this.d.media.newFileName(id, ext);
        const newSize = statSync(tmp).size;
        this.d.media.place(tmp, row.podcast_id, newFile);
        tmp = null;
        const loudness: StoredLoudness = { m: after.measure, normalized: true, target, method, original: a.measure };
        if (this.d.repo.swapToNormalized({ id, file, newFile, newSize, loudness: JSON.stringify(loudness), now: this.d.now() })) {
          this.d.log.info('episode audio normalised', { episodeId: id, target, method, fromLufs: a.measure.integratedLufs, toLufs: after.measure.integratedLufs });
          this.d.audioReplaced?.(id, newFile, this.d.media.filePath(row.podcast_id, newFile), newSize, row.audio_duration);
          return true;
        }
        // Published meanwhile (its enclosure stays what it published) or given other audio: the copy goes.
        this.d.media.remove(row.podcast_id, newFile);
      }
      return this.d.repo.setMeasured(id, file, JSON.stringify(asIs));
    } catch (e) {
      if (this.closed || e instanceof FfmpegPoolClosedError) return false;
      this.d.log.warn('episode audio could not be measured', { episodeId: id, err: e instanceof Error ? e.message : String(e) });
      this.d.repo.setFailed(id, file);
      return true;
    } finally {
      if (tmp) rmSync(tmp, { force: true });
    }
  }
}

/** Whether audio measured `m` should be normalised to `target`: not silence, and off target or over the true-peak ceiling. */
export function needsNormalising(m: LoudnessMeasure, target: number): boolean {
  if (m.integratedLufs <= SILENCE_LUFS) return false;
  return Math.abs(m.integratedLufs - target) > LOUDNESS_TOLERANCE_LU || (m.truePeakDbtp ?? -99) > TRUE_PEAK_CEILING;
}
