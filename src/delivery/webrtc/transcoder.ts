/**
 * The shared AAC/MP3 → Opus codec process of one stream (docs/behaviour.md §3): FFmpeg as a pure codec
 * (stdin: ADTS for AAC, raw MP3 frames for MP3; stdout: Ogg Opus, 48 kHz, 60 ms packets, one page
 * per packet so nothing waits for a page to fill). Our side splits the Ogg pages into packets and
 * drops the two header packets (OpusHead, OpusTags, RFC 7845 §5). FFmpeg is `ffmpeg` on PATH, else
 * the binary of `@ffmpeg-installer/ffmpeg`.
 *
 * Backpressure: if FFmpeg stops reading, at most MAX_PENDING_BYTES wait in stdin; more input is
 * dropped (and counted) rather than buffered without bound.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { ffmpegPath } from '../../base/ffmpeg.js';
import { OggReader } from '../../live/media/ogg.js';

const MAX_PENDING_BYTES = 256 * 1024;
/**
 * Opus frame (packet) duration of the transcoded layer (ms). 60 ms rather than the usual 20: every
 * packet costs each peer one SRTP encryption and one UDP send (the per-peer wall, see
 * docs/listeners.md), so 60 ms packets carry 3× the listeners per core for +40 ms of latency
 * (browsers accept up to 120 ms, RFC 7587 §7).
 */
export const FRAME_MS = 60;

/** Path of the FFmpeg binary (src/base/ffmpeg.ts). @throws Error when there is none */
function ffmpegBinary(): string {
  const bin = ffmpegPath();
  if (!bin) throw new Error('FFmpeg was not found (install ffmpeg or set SKYLARK_FFMPEG)');
  return bin;
}

export interface TranscoderEvents {
  /** One Opus packet (20 ms at 48 kHz). */
  packet(p: Buffer): void;
  /** The process ended (stopped, or failed: `error` set). */
  exit(error: string | null): void;
}

/** One FFmpeg codec process. */
export class OpusTranscoder {
  private readonly child: ChildProcess;
  private readonly ogg = new OggReader();
  private headersLeft = 2;
  private stopped = false;
  private stderr = '';
  /** Input bytes dropped because FFmpeg did not keep up. */
  droppedBytes = 0;

  /** Starts FFmpeg for input `format` (`aac` = ADTS, `mp3`). */
  constructor(format: 'aac' | 'mp3', private readonly ev: TranscoderEvents, bitrateKbps = 96) {
    const args = ['-hide_banner', '-loglevel', 'error', '-nostdin', '-fflags', '+nobuffer', '-probesize', '32', '-analyzeduration', '0', '-f', format, '-i', 'pipe:0',
      '-vn', '-c:a', 'libopus', '-b:a', `${bitrateKbps}k`, '-ar', '48000', '-ac', '2', '-frame_duration', String(FRAME_MS), '-application', 'audio',
      '-f', 'ogg', '-page_duration', String(FRAME_MS * 1000), '-flush_packets', '1', 'pipe:1'];
    this.child = spawn(ffmpegBinary(), args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdin!.on('error', () => {}); // EPIPE when FFmpeg dies: reported through exit
    this.child.stdout!.on('data', (chunk: Buffer) => {
      let packets: Buffer[];
      try {
        packets = this.ogg.push(chunk);
      } catch (e) {
        this.stderr += String(e);
        this.child.kill('SIGKILL');
        return;
      }
      for (const p of packets) {
        if (this.headersLeft > 0) {
          this.headersLeft--;
          continue;
        }
        this.ev.packet(p);
      }
    });
    this.child.stderr!.on('data', (d) => {
      if (this.stderr.length < 4096) this.stderr += d;
    });
    this.child.once('error', (e) => {
      this.stderr += String(e);
    });
    this.child.once('close', (code, signal) => {
      this.ev.exit(this.stopped ? null : `ffmpeg exited (${code ?? signal}): ${this.stderr.trim().slice(0, 500)}`);
    });
  }

  /** Writes input bytes (ADTS frames or MP3 frames). */
  write(b: Uint8Array): void {
    if (this.stopped) return;
    const stdin = this.child.stdin!;
    if (stdin.writableLength > MAX_PENDING_BYTES) {
      this.droppedBytes += b.length;
      return;
    }
    stdin.write(b);
  }

  /** Stops the process (no exit error reported). */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.child.stdin!.end();
    this.child.kill('SIGTERM');
  }
}
