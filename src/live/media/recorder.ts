/**
 * Recording (docs/behaviour.md §3): keeps a stream's ingest audio on disk without re-encoding, so that a
 * draft episode can be made from it when the stream ends. AAC is written as ADTS (ISO/IEC 14496-3
 * §1.A.2) and remuxed to MP4 (`.m4a`, what podcast apps play) at the end; MP3 frames are written
 * as they come (`.mp3`); Opus goes into Ogg (`.opus`, RFC 7845). Reconnects append to the same file:
 * the recording is one continuous programme.
 *
 * A recording survives the process: beside the audio, `<name>.json` (the sidecar) names the stream
 * and the codec until the recording was handed over (`Recording.release`). After a restart the
 * sidecars list what was left (`Recorder.leftovers`): a stream still live resumes its file
 * (`Recorder.resume`), any other is finished as it is (`Recorder.finishLeftover`).
 *
 * Disk: the recorder stops (and says why through `onStopped`) before the volume's free space falls
 * under `minFreeBytes`, or when a write fails (ENOSPC, EIO); what was written stays and is finished.
 * The floor is checked as it writes (`statfs`, at most every `DISK_CHECK_EVERY_MS` and every
 * `DISK_CHECK_EVERY_BYTES`), counting the bytes still buffered, so space taken by anyone else on
 * the volume stops it too. An AAC recording is remuxed at the end only when the copy fits above
 * the floor; otherwise it is kept as ADTS (docs/behaviour.md §13).
 */
import { createWriteStream, mkdirSync, rmSync, readdirSync, readFileSync, writeFileSync, existsSync, statfsSync, type WriteStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { OggOpusWriter } from './ogg.js';
import { adtsFrame, parseAsc, ADTS_MAX_PAYLOAD_BYTES, type AdtsConfig } from './adts.js';
import { readAudioTag, type AudioCodec, type AudioTag } from './codec.js';

/** A finished recording: the file, its MIME type and size (bytes). */
export interface Recording {
  path: string;
  mimeType: string;
  sizeBytes: number;
  /** The stream it recorded ('' when opened without one). */
  streamId: string;
  /** When the recording started (ms since the epoch, from its sidecar; 0 when unknown): the broadcast it belongs to is the first that started since. */
  startedAt: number;
  /** Forgets the recording on disk (sidecar and, if still there, the file): call once it was handed over. */
  release(): Promise<void>;
}

/** What a sidecar says of a recording left by an earlier run. */
export interface RecordingLeftover {
  streamId: string;
  codec: AudioCodec;
  /** The raw audio file (ADTS, MP3 or Ogg Opus), absolute; it may be gone if its remux finished. */
  rawPath: string;
  /** The sidecar file, absolute. */
  sidecar: string;
  /** When the recording started (ms since the epoch). */
  startedAt: number;
}

/** Why a recording stopped before its stream ended. */
export type RecordingStop = { reason: 'disk_free'; freeBytes: number; minFreeBytes: number } | { reason: 'write_failed'; message: string };

/** Options of `Recorder.open` / `resume`. */
export interface RecorderOptions {
  /** The stream recorded (written to the sidecar). */
  streamId?: string;
  /** Stop before the volume's free space falls under this many bytes (0 = only on write errors). */
  minFreeBytes?: number;
  /** The recording stopped early (disk floor, write error); called once. */
  onStopped?: (s: RecordingStop) => void;
  /** The first frame that cannot be recorded (an AAC frame over 8184 bytes, which ADTS cannot carry); once per recording. */
  onDrop?: (why: string) => void;
}

/** Free space is checked again after this many bytes were written… */
const DISK_CHECK_EVERY_BYTES = 64 * 1024;
/** …or this long (ms) after the last check, whichever comes first: others write to the volume too. */
const DISK_CHECK_EVERY_MS = 500;

const EXT: Record<AudioCodec, string> = { aac: 'aac', mp3: 'mp3', opus: 'opus' };

/** Writes one stream's recording. */
export class Recorder {
  private readonly out: WriteStream;
  private adts: AdtsConfig | null = null;
  private ogg: OggOpusWriter | null = null;
  private bytes = 0;
  private sinceCheck = 0;
  private checkedAt = 0;
  private stopped: RecordingStop | null = null;
  /** Frames skipped because they cannot be recorded (AAC over 8184 bytes). */
  droppedFrames = 0;
  readonly rawPath: string;
  readonly sidecar: string;

  /**
   * Opens `<dir>/<name>.<aac|mp3|opus>` (appending) and writes its sidecar `<name>.json`.
   * @throws Error when the directory or the sidecar cannot be written
   */
  static async open(dir: string, name: string, codec: AudioCodec, o: RecorderOptions = {}): Promise<Recorder> {
    return Recorder.create(dir, name, codec, o);
  }

  /**
   * `open`, synchronously (the first frames may follow at once).
   * @throws Error when the directory or the sidecar cannot be written
   */
  static create(dir: string, name: string, codec: AudioCodec, o: RecorderOptions = {}): Recorder {
    mkdirSync(dir, { recursive: true });
    const rawPath = path.join(dir, `${name}.${EXT[codec]}`);
    const sidecar = path.join(dir, `${name}.json`);
    writeFileSync(sidecar, JSON.stringify({ streamId: o.streamId ?? '', codec, rawPath: path.basename(rawPath), startedAt: Date.now() }));
    return new Recorder(rawPath, sidecar, codec, o);
  }

  /** Reopens a leftover recording to append to it (its stream is live again after a restart). */
  static resume(l: RecordingLeftover, o: RecorderOptions = {}): Recorder {
    return new Recorder(l.rawPath, l.sidecar, l.codec, { ...o, streamId: l.streamId });
  }

  /** The recordings an earlier run left in `dir` (sidecars without a handed-over recording). */
  static leftovers(dir: string): RecordingLeftover[] {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return [];
    }
    const out: RecordingLeftover[] = [];
    for (const n of names) {
      if (!n.endsWith('.json')) continue;
      const sidecar = path.join(dir, n);
      try {
        const j = JSON.parse(readFileSync(sidecar, 'utf8')) as { streamId?: unknown; codec?: unknown; rawPath?: unknown; startedAt?: unknown };
        if (typeof j.streamId !== 'string' || typeof j.rawPath !== 'string' || (j.codec !== 'aac' && j.codec !== 'mp3' && j.codec !== 'opus')) continue;
        out.push({ streamId: j.streamId, codec: j.codec, rawPath: path.join(dir, path.basename(j.rawPath)), sidecar, startedAt: typeof j.startedAt === 'number' ? j.startedAt : 0 });
      } catch {
        // A sidecar cut short by a crash while it was written: nothing to recover from it.
      }
    }
    return out;
  }

  /**
   * Finishes a leftover recording as it is (AAC remuxed when `ffmpeg` is given). A recording whose
   * remux had already finished is taken from its `.m4a`.
   * @throws Error when no audio of it is left
   */
  static async finishLeftover(l: RecordingLeftover, ffmpeg: string | null): Promise<Recording> {
    if (!existsSync(l.rawPath)) {
      const m4a = l.rawPath.replace(/\.aac$/, '.m4a');
      if (l.codec === 'aac' && existsSync(m4a)) return recording(m4a, 'audio/mp4', l.streamId, l.sidecar);
      throw new Error('the recording left no audio');
    }
    const r = Recorder.resume(l);
    r.bytes = (await stat(l.rawPath)).size;
    return r.finish(ffmpeg);
  }

  private constructor(
    rawPath: string,
    sidecar: string,
    private readonly codec: AudioCodec,
    private readonly o: RecorderOptions,
  ) {
    this.rawPath = rawPath;
    this.sidecar = sidecar;
    this.out = createWriteStream(rawPath, { flags: 'a' });
    this.out.on('error', (e) => {
      // Out of space because someone else filled the volume between two checks: that is the floor.
      const free = o.minFreeBytes ? freeBytes(path.dirname(rawPath)) : null;
      if (free !== null && free < o.minFreeBytes!) this.stop({ reason: 'disk_free', freeBytes: free, minFreeBytes: o.minFreeBytes! });
      else this.stop({ reason: 'write_failed', message: e.message });
    });
    if (o.minFreeBytes) {
      // Refuse to start on a volume already under the floor.
      const free = freeBytes(path.dirname(rawPath));
      if (free !== null && free < o.minFreeBytes) this.stop({ reason: 'disk_free', freeBytes: free, minFreeBytes: o.minFreeBytes });
    }
  }

  /**
   * Appends one ingest AUDIODATA body (classic FLV or Enhanced RTMP), read by `tag` when the caller
   * has read it already. Unusable tags are skipped; nothing is written once the recording stopped.
   */
  push(body: Uint8Array, tag: AudioTag = readAudioTag(body)): void {
    if (this.stopped) return;
    const { kind, payload } = tag;
    if (this.codec === 'aac') {
      if (kind === 'header') this.adts = parseAsc(payload);
      else if (kind === 'frame' && this.adts && payload.length > 0) {
        if (payload.length > ADTS_MAX_PAYLOAD_BYTES) {
          if (this.droppedFrames++ === 0) this.o.onDrop?.(`AAC frame of ${payload.length} bytes does not fit ADTS (at most ${ADTS_MAX_PAYLOAD_BYTES} bytes)`);
          return;
        }
        this.write(adtsFrame(this.adts, payload));
      }
    } else if (this.codec === 'mp3') {
      if (kind === 'frame') this.write(payload);
    } else if (kind === 'header' && !this.ogg) {
      this.ogg = new OggOpusWriter();
      this.write(this.ogg.header(payload));
    } else if (kind === 'frame' && this.ogg) this.write(this.ogg.packet(payload));
  }

  /** Audio bytes written so far. */
  get sizeBytes(): number {
    return this.bytes;
  }

  /** Why the recording stopped early, or null while it records. */
  get stoppedFor(): RecordingStop | null {
    return this.stopped;
  }

  /**
   * Closes the file; AAC is remuxed into `.m4a` with FFmpeg (`-c copy`) when `ffmpeg` is given.
   * The sidecar stays until `Recording.release()`.
   * @throws Error when nothing was recorded or the file cannot be written
   */
  async finish(ffmpeg: string | null): Promise<Recording> {
    await new Promise<void>((resolve) => {
      if (this.out.closed || this.out.destroyed) return resolve();
      this.out.end(() => resolve());
    });
    const size = await stat(this.rawPath).then((s) => s.size, () => 0);
    if (this.bytes === 0 && size === 0) throw new Error('nothing was recorded');
    const id = this.o.streamId ?? '';
    if (this.codec === 'mp3') return recording(this.rawPath, 'audio/mpeg', id, this.sidecar);
    if (this.codec === 'opus') return recording(this.rawPath, 'audio/ogg', id, this.sidecar);
    if (!ffmpeg || !this.roomFor(size)) return recording(this.rawPath, 'audio/aac', id, this.sidecar);
    const m4a = this.rawPath.replace(/\.aac$/, '.m4a');
    await new Promise<void>((resolve, reject) => {
      const p = spawn(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', '-f', 'aac', '-i', this.rawPath, '-c', 'copy', '-movflags', '+faststart', m4a], { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      p.stderr!.on('data', (d) => (err += d));
      p.on('error', reject);
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`ffmpeg remux failed (${code}): ${err.slice(0, 300)}`))));
    });
    await rm(this.rawPath, { force: true });
    return recording(m4a, 'audio/mp4', id, this.sidecar);
  }

  /** Whether a copy of `bytes` (the remux) leaves the volume above the floor; without a floor, always. */
  private roomFor(bytes: number): boolean {
    const floor = this.o.minFreeBytes;
    const free = floor ? freeBytes(path.dirname(this.rawPath)) : null;
    return free === null || free - bytes >= floor!;
  }

  /** Forgets a recording that is not wanted (sidecar and file removed). */
  discard(): void {
    this.out.destroy();
    rmSync(this.sidecar, { force: true });
    rmSync(this.rawPath, { force: true });
  }

  private write(b: Uint8Array): void {
    const floor = this.o.minFreeBytes;
    if (floor) {
      this.sinceCheck += b.length;
      const now = Date.now();
      if (this.sinceCheck >= DISK_CHECK_EVERY_BYTES || now - this.checkedAt >= DISK_CHECK_EVERY_MS) {
        this.sinceCheck = 0;
        this.checkedAt = now;
        const free = freeBytes(path.dirname(this.rawPath));
        // What is buffered and this write land too; a margin of one check interval is kept, so
        // the floor itself is never crossed.
        if (free !== null && free - this.out.writableLength - b.length - DISK_CHECK_EVERY_BYTES < floor) {
          return this.stop({ reason: 'disk_free', freeBytes: free, minFreeBytes: floor });
        }
      }
    }
    this.bytes += b.length;
    this.out.write(b);
  }

  private stop(s: RecordingStop): void {
    if (this.stopped) return;
    this.stopped = s;
    this.o.onStopped?.(s);
  }
}

/** Free bytes of the volume holding `dir` for an unprivileged writer, or null if unknown. */
function freeBytes(dir: string): number | null {
  try {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    return null;
  }
}

/** The `startedAt` a sidecar holds (ms), or 0 when it is gone or has none. */
function sidecarStartedAt(sidecar: string): number {
  try {
    const j = JSON.parse(readFileSync(sidecar, 'utf8')) as { startedAt?: unknown };
    return typeof j.startedAt === 'number' ? j.startedAt : 0;
  } catch {
    return 0;
  }
}

async function recording(file: string, mimeType: string, streamId: string, sidecar: string): Promise<Recording> {
  return {
    path: file,
    mimeType,
    sizeBytes: (await stat(file)).size,
    streamId,
    startedAt: sidecarStartedAt(sidecar),
    release: async () => {
      await rm(sidecar, { force: true });
      await rm(file, { force: true });
    },
  };
}
