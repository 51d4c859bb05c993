/**
 * The ABR ladder's codec process (docs/behaviour.md §3): ONE FFmpeg per stream, ingest audio on stdin,
 * one encoded layer per extra pipe (fd 3, 4, …) on the way out. FFmpeg only encodes; segmenting,
 * timing and playlists stay ours, so every layer is cut at the same boundaries. AAC and MP3 travel
 * as FLV; Opus as Ogg (FFmpeg 5.1 cannot put Opus in FLV). Output tags come back as FLV AUDIODATA
 * bodies (Enhanced RTMP `Opus` FourCC bodies for Opus), ready for a segmenter.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { flvAudioTag, flvHeader, FlvReader } from './flv.js';
import { OggOpusReader, OggOpusWriter, opusPacketSamples } from './ogg.js';
import { readAudioTag, type AudioCodec, type AudioTag } from './codec.js';

/** Options of one stream's ladder. Bitrates in kbps. */
export interface TranscoderOptions {
  ffmpeg: string;
  codec: AudioCodec;
  /** The encoded layers' bitrates, e.g. [128, 64]. */
  layers: number[];
  /** An encoded audio tag of layer `kbps`: timestamp (ms, on the ingest clock) and AUDIODATA body. */
  onAudio(kbps: number, timestampMs: number, body: Buffer): void;
  /** The process ended without close() (crash, bad input, missing binary). */
  onFailure(reason: string): void;
  /**
   * Silence detection on the decoded ingest (docs/streams.md "Fallback"): FFmpeg's `silencedetect`
   * at −50 dBFS over this many seconds, on the audio this process decodes anyway; null or unset: none.
   */
  silenceSeconds?: number | null;
  /**
   * After close(), how long FFmpeg may take to encode what it was given before it is killed (ms;
   * default 2000: at a stream's end the tail of the lower layers is not worth waiting for).
   */
  closeGraceMs?: number;
  /** The ingest fell silent for `silenceSeconds` (true), or sound returned after that (false). */
  onSilence?(silent: boolean): void;
  /**
   * Loudness of the decoded ingest (docs/streams.md "Live loudness"), every 100 ms from FFmpeg's
   * `ebur128` (ITU-R BS.1770-4): `momentary` the last 400 ms block, `shortTerm` the last 3 s, in
   * LUFS (at least `LOUDNESS_FLOOR`).
   */
  onLoudness?(momentary: number, shortTerm: number): void;
}

/** Below this level (dBFS) audio counts as silence (docs/streams.md "Fallback"). */
export const SILENCE_DB = -50;

/** The lowest loudness reported (LUFS): FFmpeg's `ebur128` figure for digital silence. */
export const LOUDNESS_FLOOR = -120.7;

/** One `ebur128` frame log line: `… t: 1.2  TARGET:-23 LUFS  M: -20.1 S: -21.0  I: … LRA: …`. */
const EBUR128_LINE = /\bM:\s*(\S+)\s+S:\s*(\S+)/;

/**
 * The momentary and short-term loudness (LUFS) of an `ebur128` frame log line, or null for any
 * other line. Values FFmpeg prints as `-inf`/`nan` (or below the floor) read as `LOUDNESS_FLOOR`.
 */
export function parseEbur128(line: string): { momentary: number; shortTerm: number } | null {
  if (!line.includes('TARGET:')) return null;
  const m = EBUR128_LINE.exec(line);
  if (!m) return null;
  const lufs = (v: string) => {
    const n = Number.parseFloat(v);
    return Number.isFinite(n) ? Math.max(LOUDNESS_FLOOR, n) : LOUDNESS_FLOOR;
  };
  return { momentary: lufs(m[1]!), shortTerm: lufs(m[2]!) };
}

/** Ingest bytes buffered for a stalled FFmpeg before it is declared stuck (bytes). */
const MAX_STDIN_BACKLOG = 2 << 20;

/**
 * Ingest tags for FFmpeg's stdin are gathered for this long and written with one `writev` (ms):
 * five 20 ms Opus packets per system call and per FFmpeg wake-up instead of one
 * (docs/benchmarks.md "WebRTC fan-out"). The encoded layers lag the ingest by at most this much more.
 */
export const STDIN_BATCH_MS = 100;
const ENCODER: Record<AudioCodec, string> = { aac: 'aac', mp3: 'libmp3lame', opus: 'libopus' };

/** E-RTMP audio body: byte 0 = (9 << 4) | packetType, FourCC, payload (Enhanced RTMP v2). */
export function eRtmpOpusBody(packetType: 0 | 1, payload: Uint8Array): Buffer {
  const b = Buffer.allocUnsafe(5 + payload.length);
  b[0] = 0x90 | packetType;
  b.write('Opus', 1, 'latin1');
  b.set(payload, 5);
  return b;
}

/**
 * The FFmpeg arguments of a ladder (exported for tests and the docs). Besides the encoded layers,
 * an analysis output always measures loudness (`ebur128`, docs/streams.md "Live loudness"), and
 * one detects silence when `silenceSeconds` is set.
 */
export function transcoderArgs(codec: AudioCodec, layers: number[], silenceSeconds: number | null = null): string[] {
  const input = codec === 'opus' ? ['-f', 'ogg'] : ['-f', 'flv'];
  // ebur128 and silencedetect report at level info; -nostats keeps progress lines off stderr.
  const args = ['-hide_banner', '-loglevel', 'info', '-nostats', '-nostdin', '-probesize', '32', '-analyzeduration', '0', ...input, '-i', 'pipe:0'];
  layers.forEach((kbps, i) => {
    args.push('-map', '0:a:0', '-c:a', ENCODER[codec], '-b:a', `${kbps}k`);
    if (codec === 'opus') args.push('-f', 'ogg', '-page_duration', '20000');
    else args.push('-f', 'flv');
    args.push('-flush_packets', '1', `pipe:${3 + i}`);
  });
  args.push('-map', '0:a:0', '-af', 'ebur128=framelog=info', '-f', 'null', '-');
  if (silenceSeconds) args.push('-map', '0:a:0', '-af', `silencedetect=n=${SILENCE_DB}dB:d=${silenceSeconds}`, '-f', 'null', '-');
  return args;
}

/** One stream's ladder process. */
export class LadderTranscoder {
  private readonly child: ChildProcess;
  private readonly stdin: Writable;
  private closed = false;
  private failed = false;
  private ogg: OggOpusWriter | null = null;
  private firstIngestTs: number | null = null;
  private stderr = '';
  /** The flush of the gathered stdin writes (stdin corked while it is pending). */
  private batch: NodeJS.Timeout | null = null;
  /** Resolves when the process has exited and every layer's output was read. */
  readonly exited: Promise<void>;

  constructor(private readonly o: TranscoderOptions) {
    const stdio: Array<'pipe' | 'ignore'> = ['pipe', 'ignore', 'pipe', ...o.layers.map(() => 'pipe' as const)];
    this.child = spawn(o.ffmpeg, transcoderArgs(o.codec, o.layers, o.silenceSeconds ?? null), { stdio });
    this.stdin = this.child.stdin!;
    this.stdin.on('error', () => {}); // EPIPE after a crash: reported by 'exit'
    let partial = '';
    this.child.stderr!.on('data', (d: Buffer) => {
      const lines = (partial + d.toString()).split('\n');
      partial = lines.pop()!.slice(-4096);
      for (const line of lines) this.stderrLine(line);
    });
    this.child.on('error', (e) => this.fail(`cannot run ffmpeg: ${e.message}`));
    this.child.on('exit', (code, signal) => {
      if (!this.closed) this.fail(`ffmpeg exited (${signal ?? code}): ${this.stderr.trim().slice(-500)}`);
    });
    if (o.codec !== 'opus') this.stdin.write(flvHeader());
    const outputs = o.layers.map((kbps, i) => {
      const out = this.child.stdio[3 + i] as Readable;
      this.readLayer(kbps, out);
      return new Promise<void>((resolve) => out.once('close', () => resolve()));
    });
    this.exited = Promise.all([...outputs, new Promise<void>((resolve) => this.child.once('close', () => resolve()))]).then(() => undefined);
  }

  /**
   * Feeds one ingest AUDIODATA body (classic FLV for AAC/MP3, E-RTMP `Opus` for Opus), read as
   * `tag` when the caller has read it already.
   */
  push(timestampMs: number, body: Uint8Array, tag: AudioTag = readAudioTag(body)): void {
    if (this.closed || this.failed) return;
    if (this.firstIngestTs === null) this.firstIngestTs = timestampMs;
    if (this.stdin.writableLength > MAX_STDIN_BACKLOG) return this.fail('ffmpeg stopped reading its input');
    if (this.o.codec !== 'opus') {
      this.write(flvAudioTag(timestampMs, body));
      return;
    }
    if (tag.codec !== 'opus') return;
    if (tag.kind === 'header') {
      if (!this.ogg) {
        this.ogg = new OggOpusWriter();
        this.write(this.ogg.header(tag.payload));
      }
    } else if (tag.kind === 'frame' && this.ogg) this.write(this.ogg.packet(tag.payload));
  }

  /** Gathers `b` for the next flush (`STDIN_BATCH_MS`); bounded by the backlog check in `push`. */
  private write(b: Uint8Array): void {
    if (!this.batch) {
      this.stdin.cork();
      this.batch = setTimeout(() => this.flush(), STDIN_BATCH_MS);
    }
    this.stdin.write(b);
  }

  /** Writes what was gathered (one `writev`). */
  private flush(): void {
    if (!this.batch) return;
    clearTimeout(this.batch);
    this.batch = null;
    this.stdin.uncork();
  }

  /** Stops the process (publisher gone, stream ended). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.flush();
    this.stdin.end();
    const kill = setTimeout(() => this.child.kill('SIGKILL'), this.o.closeGraceMs ?? 2000);
    kill.unref();
    this.child.once('exit', () => clearTimeout(kill));
  }

  /** One stderr line: an `ebur128` or `silencedetect` report, or kept for a failure's reason. */
  private stderrLine(line: string): void {
    const loudness = parseEbur128(line);
    if (loudness) this.o.onLoudness?.(loudness.momentary, loudness.shortTerm);
    else if (line.includes('silence_start:')) this.o.onSilence?.(true);
    else if (line.includes('silence_end:')) this.o.onSilence?.(false);
    else if (!line.includes('silencedetect') && !line.includes('ebur128')) this.stderr = `${this.stderr}${line}\n`.slice(-4096);
  }

  private fail(reason: string): void {
    if (this.failed || this.closed) return;
    this.failed = true;
    if (this.batch) clearTimeout(this.batch);
    this.batch = null;
    this.child.kill('SIGKILL');
    this.o.onFailure(reason);
  }

  /** Re-bases a layer's timestamps so its first tag lands on the first ingest timestamp. */
  private readLayer(kbps: number, out: Readable): void {
    let firstOut: number | null = null;
    const at = (ts: number) => {
      if (firstOut === null) firstOut = ts;
      return (this.firstIngestTs ?? 0) + (ts - firstOut);
    };
    if (this.o.codec !== 'opus') {
      const reader = new FlvReader();
      out.on('data', (chunk: Buffer) => {
        try {
          for (const t of reader.push(chunk)) this.o.onAudio(kbps, at(t.timestampMs), t.body);
        } catch (e) {
          this.fail(`bad FLV from ffmpeg: ${(e as Error).message}`);
        }
      });
      return;
    }
    const reader = new OggOpusReader();
    let samples = 0;
    out.on('data', (chunk: Buffer) => {
      try {
        for (const p of reader.push(chunk)) {
          if (p.kind === 'head') this.o.onAudio(kbps, at(0), eRtmpOpusBody(0, p.data));
          else if (p.kind === 'audio') {
            this.o.onAudio(kbps, at(Math.round(samples / 48)), eRtmpOpusBody(1, p.data));
            samples += opusPacketSamples(p.data);
          }
        }
      } catch (e) {
        this.fail(`bad Ogg from ffmpeg: ${(e as Error).message}`);
      }
    });
  }
}
