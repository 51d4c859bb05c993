/**
 * The fallback's cached renditions (docs/streams.md "Fallback", "The rendition cache"): each
 * episode of a fallback plan is encoded ONCE into the stream's fallback rendition — the stream's
 * codec at the top of its ladder, at the sample rate and channels of the stream's last live source
 * (48 kHz stereo before any), in the byte stream an Icecast source sends
 * (ADTS, MP3, Ogg Opus: `fallbackOutputArgs`) — and kept as a file under the data directory, so
 * that playing it in real time is a copy (`cachedArgs`), not an encode.
 *
 * Files: `<dir>/<episodeId>.<fingerprint>.<codec><kbps>-<rate>-<channels>.<bytes>.<digest>.<ext>`
 * (rate in Hz). The fingerprint
 * (16 hex digits of SHA-1) is taken over the episode audio's path, size and modification time: new
 * audio (a new upload, a loudness-normalised copy) is a new entry, never the old one. `<bytes>` and
 * `<digest>` (16 hex digits of the SHA-1 of the content) are the rendition's as written: a file of
 * another size (cut short) is never used; an entry this process did not write is read back and
 * checked against its digest before its first use (a queued check: until then the fallback encodes
 * live), and one that does not match is removed and built again. Builds run one at a time per node, at normal speed (not real time), niced (base/ffmpeg.ts
 * `FfmpegPool`), into `<dir>/.part/` and are flushed to disk (fsync) and then renamed: a crash
 * mid-write leaves a `.part` file, removed at the next start, never an entry in use.
 *
 * The cache holds what the plans name and nothing else: `sync(wanted)` (at start-up and at every
 * change of a plan) removes every other entry and queues the missing ones; `forget(episodeId)`
 * (an episode deleted, or its audio replaced) removes an episode's entries at once. A build that
 * fails (FFmpeg error, a full disk: less than `minFreeDiskBytes` plus the source's size free) is
 * logged and not tried again for `retryAfterMs`; the fallback then plays with the live encode.
 */
import { createReadStream, mkdirSync, readdirSync, renameSync, rmSync, statSync, statfsSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { FfmpegPool } from '../../base/ffmpeg.js';
import type { AudioCodec } from '../media/codec.js';
import type { MediaLog } from '../media/hub-types.js';
import { fallbackOutputArgs, type FallbackRenditions, type RenditionWant } from './fallback.js';

/** Settings of the cache. Sizes in bytes, durations in ms. */
export interface FallbackCacheOptions {
  /** The cache's own directory (`<dataDir>/fallback-cache`): every file in it is the cache's. */
  dir: string;
  /** The FFmpeg binary, or null (no builds: the fallback encodes live). */
  ffmpeg: () => string | null;
  log: MediaLog;
  /** Free space a build leaves on the disk at least (docs/behaviour.md §13 `minFreeDiskBytes`). */
  minFreeDiskBytes: number;
  /** Wait before a failed build is tried again (ms; default 10 minutes). */
  retryAfterMs?: number;
  /** Longest build (ms; default 2 hours). */
  buildTimeoutMs?: number;
  now?: () => number;
}

interface Entry {
  file: string;
  bytes: number;
  digest: string;
  episodeId: string;
  /** Written or read back and checked by this process. */
  checked: boolean;
}

interface Job {
  kind: 'build' | 'check';
  key: string;
  want: RenditionWant;
  cancelled: boolean;
}

/** The file extension of a rendition per codec. */
const EXT: Record<AudioCodec, string> = { aac: 'aac', mp3: 'mp3', opus: 'opus' };
/** Episode ids the cache accepts in a file name (the ids Skylark makes: `ep_…`). */
const EPISODE_ID = /^[A-Za-z0-9_-]{1,80}$/;
/** A cache file name: episode id, fingerprint, codec + kbps + rate + channels (the key), bytes, digest, extension. */
const FILE_NAME = /^([A-Za-z0-9_-]{1,80}\.[0-9a-f]{16}\.(?:aac|mp3|opus)\d{1,4}-\d{4,6}-\d{1,2})\.(\d{1,15})\.([0-9a-f]{16})\.(?:aac|mp3|opus)$/;

/**
 * The renditions cache of one node (see the file comment). `rendition(want)` answers the path of
 * a complete rendition or null (and queues its build); never throws once constructed: file errors
 * are logged and the fallback encodes live.
 */
export class FallbackCache implements FallbackRenditions {
  private readonly entries = new Map<string, Entry>();
  private readonly queue: Job[] = [];
  private running: Job | null = null;
  private readonly failedUntil = new Map<string, number>();
  private readonly partDir: string;
  private pool: FfmpegPool | null = null;
  private closed = false;
  private readonly now: () => number;

  /** Opens (creates) `dir`, removes what a crash left in `.part/`, and indexes the entries found. @throws Error when `dir` cannot be created */
  constructor(private readonly o: FallbackCacheOptions) {
    this.now = o.now ?? Date.now;
    this.partDir = path.join(o.dir, '.part');
    rmSync(this.partDir, { recursive: true, force: true });
    mkdirSync(this.partDir, { recursive: true });
    for (const name of readdirSync(o.dir)) {
      if (name === '.part') continue;
      const m = FILE_NAME.exec(name);
      if (m) this.entries.set(m[1]!, { file: name, bytes: Number(m[2]), digest: m[3]!, episodeId: name.slice(0, name.indexOf('.')), checked: false });
      else this.unlink(name);
    }
  }

  /** The complete, checked rendition of `want` (an absolute path), or null: its check or build is queued (a build unless it failed lately). */
  rendition(want: RenditionWant): string | null {
    if (this.closed) return null;
    const key = this.keyOf(want);
    if (!key) return null;
    const e = this.entries.get(key);
    if (e) {
      const file = path.join(this.o.dir, e.file);
      if (sizeOf(file) === e.bytes) {
        if (e.checked) return file;
        this.enqueue(key, want);
        return null;
      }
      this.o.log.warn('fallback cache: a rendition is not whole, removed', { episodeId: want.episodeId, file: e.file });
      this.remove(key);
    }
    this.enqueue(key, want);
    return null;
  }

  /** A rendition that did not play (FFmpeg failed on it): removed; built again after `retryAfterMs`. */
  unusable(file: string): void {
    for (const [key, e] of this.entries) {
      if (path.join(this.o.dir, e.file) !== file) continue;
      this.o.log.warn('fallback cache: a rendition did not play, removed', { episodeId: e.episodeId, file: e.file });
      this.remove(key);
      this.failedUntil.set(key, this.now() + (this.o.retryAfterMs ?? 600_000));
    }
  }

  /** What every plan names now: every other entry (and queued or running build) goes; missing ones are queued. */
  sync(wanted: RenditionWant[]): void {
    if (this.closed) return;
    const keep = new Map<string, RenditionWant>();
    for (const w of wanted) {
      const key = this.keyOf(w);
      if (key) keep.set(key, w);
    }
    for (const key of [...this.entries.keys()]) if (!keep.has(key)) this.remove(key);
    this.dropJobs((j) => !keep.has(j.key));
    for (const [key, w] of keep) if (!this.entries.get(key)?.checked) this.enqueue(key, w);
  }

  /** Queues the check or build of each of `wanted` not whole and checked yet (nothing is removed). */
  prepare(wanted: RenditionWant[]): void {
    if (this.closed) return;
    for (const w of wanted) {
      const key = this.keyOf(w);
      if (key && !this.entries.get(key)?.checked) this.enqueue(key, w);
    }
  }

  /** Episode `episodeId` was deleted or got new audio: its entries and builds go. */
  forget(episodeId: string): void {
    for (const [key, e] of [...this.entries]) if (e.episodeId === episodeId) this.remove(key);
    this.dropJobs((j) => j.want.episodeId === episodeId);
  }

  /** Entries now: the number and their bytes (diagnostics, tests). */
  usage(): { entries: number; bytes: number } {
    let bytes = 0;
    for (const e of this.entries.values()) bytes += e.bytes;
    return { entries: this.entries.size, bytes };
  }

  /** Stops: the running build is killed (its `.part` file is removed at the next start), nothing more is built. */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.pool?.close();
  }

  /** The entry key of `want`, or null when it cannot be cached (odd id, audio file missing). */
  private keyOf(w: RenditionWant): string | null {
    if (!EPISODE_ID.test(w.episodeId) || !Number.isInteger(w.kbps) || w.kbps <= 0 || w.kbps > 9999) return null;
    const { sampleRate, channels } = w.format;
    if (!Number.isInteger(sampleRate) || sampleRate < 1000 || sampleRate > 999_999 || !Number.isInteger(channels) || channels < 1 || channels > 99) return null;
    let st;
    try {
      st = statSync(w.path);
    } catch {
      return null;
    }
    const fp = createHash('sha1').update(`${w.path}\0${st.size}\0${st.mtimeMs}`).digest('hex').slice(0, 16);
    return `${w.episodeId}.${fp}.${w.codec}${w.kbps}-${sampleRate}-${channels}`;
  }

  private remove(key: string): void {
    const e = this.entries.get(key);
    if (!e) return;
    this.entries.delete(key);
    this.unlink(e.file);
  }

  private unlink(name: string): void {
    try {
      rmSync(path.join(this.o.dir, name), { force: true, recursive: true });
    } catch (e) {
      this.o.log.warn('fallback cache: cannot remove a file', { file: name, err: (e as Error).message });
    }
  }

  private dropJobs(drop: (j: Job) => boolean): void {
    for (let i = this.queue.length - 1; i >= 0; i--) if (drop(this.queue[i]!)) this.queue.splice(i, 1);
    if (this.running && drop(this.running)) this.running.cancelled = true;
  }

  /** Queues the check of `key`'s entry (first: it is quick) or, without one, its build. */
  private enqueue(key: string, want: RenditionWant): void {
    if (this.closed || this.entries.get(key)?.checked || this.running?.key === key || this.queue.some((j) => j.key === key)) return;
    if (this.entries.has(key)) this.queue.unshift({ kind: 'check', key, want, cancelled: false });
    else if ((this.failedUntil.get(key) ?? 0) > this.now()) return;
    else this.queue.push({ kind: 'build', key, want, cancelled: false });
    this.pump();
  }

  private pump(): void {
    if (this.running || this.closed) return;
    const job = this.queue.shift();
    if (!job) return;
    this.running = job;
    void (job.kind === 'check' ? this.check(job) : this.build(job)).finally(() => {
      this.running = null;
      this.pump();
    });
  }

  /** Builds one rendition into `.part/`, then flushes and renames it into place. Never rejects. */
  private async build(job: Job): Promise<void> {
    const { want, key } = job;
    const ffmpeg = this.o.ffmpeg();
    if (!ffmpeg) return;
    const tmp = path.join(this.partDir, `${key}.${randomBytes(6).toString('hex')}.part`);
    const t0 = this.now();
    try {
      this.checkDisk(want.path);
      this.pool ??= new FfmpegPool({ bin: ffmpeg, concurrency: 1, niceness: 10, timeoutMs: this.o.buildTimeoutMs ?? 7_200_000 });
      const r = await this.pool.run(renditionBuildArgs(want, tmp));
      if (job.cancelled || this.closed) return;
      if (r.code !== 0) throw new Error(`ffmpeg exited with ${r.code ?? r.signal}: ${r.stderr.trim().slice(-300)}`);
      const bytes = await flushed(tmp);
      if (bytes === 0) throw new Error('ffmpeg wrote no audio');
      const digest = await digestOf(tmp);
      if (job.cancelled || this.closed) return;
      const file = `${key}.${bytes}.${digest}.${EXT[want.codec]}`;
      renameSync(tmp, path.join(this.o.dir, file));
      await flushed(this.o.dir).catch(() => 0);
      this.entries.set(key, { file, bytes, digest, episodeId: want.episodeId, checked: true });
      this.o.log.info('fallback cache: rendition built', { episodeId: want.episodeId, codec: want.codec, kbps: want.kbps, bytes, ms: this.now() - t0 });
    } catch (e) {
      if (this.closed) return;
      this.failedUntil.set(key, this.now() + (this.o.retryAfterMs ?? 600_000));
      this.o.log.warn('fallback cache: a rendition could not be built; the fallback encodes it live', { episodeId: want.episodeId, codec: want.codec, kbps: want.kbps, err: (e as Error).message });
    } finally {
      rmSync(tmp, { force: true });
    }
  }

  /** Reads an entry back and compares its digest: a match is used from now on; a mismatch is removed and built again. Never rejects. */
  private async check(job: Job): Promise<void> {
    const e = this.entries.get(job.key);
    if (!e) return;
    let digest = '';
    try {
      digest = await digestOf(path.join(this.o.dir, e.file));
    } catch {
      // unreadable: as damaged
    }
    if (job.cancelled || this.closed || this.entries.get(job.key) !== e) return;
    if (digest === e.digest) {
      e.checked = true;
      return;
    }
    this.o.log.warn('fallback cache: a rendition is damaged (digest), removed', { episodeId: e.episodeId, file: e.file });
    this.remove(job.key);
    this.queue.push({ kind: 'build', key: job.key, want: job.want, cancelled: false });
  }

  /** @throws Error when the disk holding the cache has less than `minFreeDiskBytes` plus the source's size free */
  private checkDisk(source: string): void {
    const s = statfsSync(this.o.dir);
    const free = s.bavail * s.bsize;
    const need = this.o.minFreeDiskBytes + statSync(source).size;
    if (free < need) throw new Error(`disk full: ${free} bytes free, ${need} needed`);
  }
}

/**
 * The FFmpeg arguments that build the rendition `want` (its episode file as its codec at its kbps
 * in its format) into `out`, at full speed: the same decode, resampling and encoding as the live
 * encode (`fallbackArgs`), to a file.
 */
export function renditionBuildArgs(want: RenditionWant, out: string): string[] {
  return ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', '-i', want.path, ...fallbackOutputArgs(want.codec, want.kbps, want.format), out];
}

/** The size of `file` in bytes, or -1 when it is missing. */
function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return -1;
  }
}

/** The first 16 hex digits of the SHA-1 of `file`'s content, read as a stream. @throws Error from the file system */
async function digestOf(file: string): Promise<string> {
  const h = createHash('sha1');
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer);
  return h.digest('hex').slice(0, 16);
}

/** Flushes `p` (a file or a directory) to disk; its size in bytes. @throws Error from the file system */
async function flushed(p: string): Promise<number> {
  const h = await open(p, 'r');
  try {
    await h.sync();
    return (await h.stat()).size;
  } finally {
    await h.close();
  }
}
