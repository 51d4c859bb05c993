/**
 * Recording (PRODUCT.md §3): keeps a stream's ingest audio on disk without re-encoding, so that a
 * draft episode can be made from it when the stream ends. AAC is written as ADTS (ISO/IEC 14496-3
 * §1.A.2) and remuxed to MP4 (`.m4a`, what podcast apps play) at the end; MP3 frames are written
 * as they come (`.mp3`); Opus goes into Ogg (`.opus`, RFC 7845). Reconnects append to the same file:
 * the recording is one continuous programme.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { OggOpusWriter } from './ogg.js';
import { adtsFrame, parseAsc, type AdtsConfig } from './adts.js';

export type RecordCodec = 'aac' | 'mp3' | 'opus';

/** A finished recording: the file, its MIME type and size (bytes). */
export interface Recording {
  path: string;
  mimeType: string;
  sizeBytes: number;
}

/** Writes one stream's recording. */
export class Recorder {
  private readonly out: WriteStream;
  private adts: AdtsConfig | null = null;
  private ogg: OggOpusWriter | null = null;
  private bytes = 0;
  /** AAC frames too large for ADTS (over 8184 bytes), skipped. */
  droppedFrames = 0;
  readonly rawPath: string;

  /**
   * Opens `<dir>/<name>.<aac|mp3|opus>` for writing. `onDrop` hears of the first frame that cannot
   * be recorded (an AAC frame over 8184 bytes, which ADTS cannot carry): once per recording.
   */
  static async open(dir: string, name: string, codec: RecordCodec, onDrop?: (reason: string) => void): Promise<Recorder> {
    await mkdir(dir, { recursive: true });
    return new Recorder(path.join(dir, `${name}.${codec}`), codec, onDrop);
  }

  private constructor(rawPath: string, private readonly codec: RecordCodec, private readonly onDrop?: (reason: string) => void) {
    this.rawPath = rawPath;
    this.out = createWriteStream(rawPath, { flags: 'a' });
    this.out.on('error', () => {}); // reported by finish()
  }

  /**
   * Appends one ingest AUDIODATA body (classic FLV or Enhanced RTMP). Unusable tags are skipped, and
   * so are AAC frames over 8184 bytes (counted in `droppedFrames`; `onDrop` hears of the first).
   */
  push(body: Uint8Array): void {
    if (body.length < 2) return;
    const format = body[0]! >> 4;
    const ex = format === 9 && body.length >= 5;
    const packetType = ex ? body[0]! & 0x0f : format === 10 ? (body[1] === 0 ? 0 : 1) : 1;
    const payload = ex ? body.subarray(5) : format === 10 ? body.subarray(2) : body.subarray(1);
    if (this.codec === 'aac') {
      if (packetType === 0) this.adts = parseAsc(payload);
      else if (packetType === 1 && this.adts && payload.length > 0) {
        let frame: Buffer;
        try {
          frame = adtsFrame(this.adts, payload);
        } catch (e) {
          if (!(e instanceof RangeError)) throw e;
          return this.drop(e.message);
        }
        this.write(frame);
      }
    } else if (this.codec === 'mp3') {
      if (packetType === 1 && payload.length > 0) this.write(payload);
    } else if (packetType === 0 && !this.ogg) {
      this.ogg = new OggOpusWriter();
      this.write(this.ogg.header(payload));
    } else if (packetType === 1 && this.ogg) this.write(this.ogg.packet(payload));
  }

  /** Audio bytes written so far. */
  get sizeBytes(): number {
    return this.bytes;
  }

  /**
   * Closes the file; AAC is remuxed into `.m4a` with FFmpeg (`-c copy`) when `ffmpeg` is given.
   * @throws Error when nothing was recorded or the file cannot be written
   */
  async finish(ffmpeg: string | null): Promise<Recording> {
    await new Promise<void>((resolve, reject) => this.out.end((e?: Error | null) => (e ? reject(e) : resolve())));
    if (this.bytes === 0) throw new Error('nothing was recorded');
    if (this.codec === 'mp3') return { path: this.rawPath, mimeType: 'audio/mpeg', sizeBytes: (await stat(this.rawPath)).size };
    if (this.codec === 'opus') return { path: this.rawPath, mimeType: 'audio/ogg', sizeBytes: (await stat(this.rawPath)).size };
    if (!ffmpeg) return { path: this.rawPath, mimeType: 'audio/aac', sizeBytes: (await stat(this.rawPath)).size };
    const m4a = this.rawPath.replace(/\.aac$/, '.m4a');
    await new Promise<void>((resolve, reject) => {
      const p = spawn(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', '-f', 'aac', '-i', this.rawPath, '-c', 'copy', '-movflags', '+faststart', m4a], { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      p.stderr!.on('data', (d) => (err += d));
      p.on('error', reject);
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`ffmpeg remux failed (${code}): ${err.slice(0, 300)}`))));
    });
    await rm(this.rawPath, { force: true });
    return { path: m4a, mimeType: 'audio/mp4', sizeBytes: (await stat(m4a)).size };
  }

  private drop(reason: string): void {
    if (this.droppedFrames++ === 0) this.onDrop?.(reason);
  }

  private write(b: Uint8Array): void {
    this.bytes += b.length;
    this.out.write(b);
  }
}
