/**
 * Where episode audio lives on disk: `<dataDir>/media/<podcast_id>/<episode_id>-<token>.<ext>`,
 * uploads in progress under `<dataDir>/media/.tmp/`, files being made from stored audio (a
 * loudness-normalised copy) under `<dataDir>/media/.work/`. A new upload gets a new token, so a file is
 * never rewritten under the same name (its URL and ETag stay valid for what they name). The
 * public URL is `{cdn_url}/media/<podcast_id>/<file name>`.
 */
import { mkdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { randomBase62 } from '../../base/ids.js';

/** File names the media route accepts (also the only names this store creates). */
export const AUDIO_FILE_NAME = /^ep_[A-Za-z0-9]{1,64}-[A-Za-z0-9]{8}\.[a-z0-9]{2,5}$/;
export const PODCAST_ID = /^pod_[A-Za-z0-9]{1,64}$/;

/** Paths of the media store under `dataDir`. */
export class MediaStore {
  readonly root: string;
  private readonly tmp: string;
  private readonly work: string;

  constructor(dataDir: string) {
    this.root = path.join(dataDir, 'media');
    this.tmp = path.join(this.root, '.tmp');
    this.work = path.join(this.root, '.work');
    mkdirSync(this.tmp, { recursive: true });
    mkdirSync(this.work, { recursive: true });
  }

  /** A fresh path for a file made from stored audio (same file system as the audio: `place` renames it). */
  workPath(): string {
    return path.join(this.work, `${randomBase62(16)}.part`);
  }

  /** A fresh temporary path for an upload in progress. */
  tempPath(): string {
    return path.join(this.tmp, `${randomBase62(16)}.part`);
  }

  /** A new file name for episode `episodeId` with extension `ext`. */
  newFileName(episodeId: string, ext: string): string {
    return `${episodeId}-${randomBase62(8)}.${ext}`;
  }

  /** Absolute path of `fileName` of podcast `podcastId`. */
  filePath(podcastId: string, fileName: string): string {
    return path.join(this.root, podcastId, fileName);
  }

  /** Moves a finished upload into place (same file system: an atomic rename). */
  place(tempPath: string, podcastId: string, fileName: string): void {
    mkdirSync(path.join(this.root, podcastId), { recursive: true });
    renameSync(tempPath, this.filePath(podcastId, fileName));
  }

  /** Removes a file (missing is fine). */
  remove(podcastId: string, fileName: string): void {
    rmSync(this.filePath(podcastId, fileName), { force: true });
  }

  /** Removes leftovers of uploads and of files being made, interrupted by a crash (at start). */
  clearTemp(): void {
    for (const dir of [this.tmp, this.work]) {
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
    }
  }
}
