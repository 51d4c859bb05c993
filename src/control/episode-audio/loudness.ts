/**
 * Episode loudness with FFmpeg (docs/podcasts.md "Loudness"): measurement per ITU-R BS.1770-4 /
 * EBU R128 (the `ebur128` filter with true peak: integrated loudness in LUFS, loudness range in LU,
 * true peak in dBTP) and two-pass linear `loudnorm` normalisation: the first pass measures the
 * file, the second applies one gain computed from those measurements (`linear=true`; FFmpeg falls
 * back to its dynamic mode only when a linear gain would break the true-peak ceiling or the
 * loudness range), re-encoded with the original's codec, bit rate, sample rate and channels into
 * the original's container. Every run goes through an `FfmpegPool` (capped, low priority, off the
 * event loop). Knows no database and no HTTP.
 */
import type { FfmpegPool } from '../../base/ffmpeg.js';

/** A BS.1770-4 measurement of a whole file. */
export interface LoudnessMeasure {
  /** Integrated (gated) loudness, LUFS; −70 or lower is silence. */
  integratedLufs: number;
  /** Maximum true peak (4× oversampled), dBTP; null for digital silence. */
  truePeakDbtp: number | null;
  /** Loudness range (EBU Tech 3342), LU. */
  lraLu: number;
}

/** The first audio stream of a file as FFmpeg's input report describes it. */
export interface AudioStreamInfo {
  /** FFmpeg's codec name: `mp3`, `aac`, `vorbis`, `opus`, `flac`, `pcm_s16le`, … */
  codec: string;
  sampleRate: number | null;
  channels: number | null;
  /** Bits per second (the stream's, else the container's); null when FFmpeg gives none. */
  bitRate: number | null;
}

/** The first `loudnorm` pass: what the second needs (`measured_*`, `offset`). */
export interface LoudnormPass {
  inputI: number;
  inputTp: number;
  inputLra: number;
  inputThresh: number;
  targetOffset: number;
}

/** A file's measurement, its audio stream and (when asked for a target) its first `loudnorm` pass. */
export interface Analysis {
  measure: LoudnessMeasure;
  stream: AudioStreamInfo;
  loudnorm: LoudnormPass | null;
}

/** FFmpeg could not read or measure the file (the message holds its last words). */
export class LoudnessError extends Error {}

/** The true-peak ceiling of normalised audio, dBTP (AES TD1008). */
export const TRUE_PEAK_CEILING = -1;
/**
 * The ceiling `loudnorm` is given for lossy codecs, dBTP: half a dB under the ceiling, the room
 * MP3/AAC/Vorbis/Opus encoding takes back as overshoot, so the served file stays under −1 dBTP.
 */
export const LOSSY_TRUE_PEAK_TARGET = -1.5;
/** Audio this quiet or quieter (LUFS) is taken as silence: it is measured, never normalised. */
export const SILENCE_LUFS = -70;

const num = (s: string | undefined): number | null => {
  if (s === undefined) return null;
  const n = Number(s);
  return Number.isFinite(n) ? n : null;
};

/**
 * Reads the last `ebur128` summary of an FFmpeg stderr (`I: -23.0 LUFS`, `LRA: 5.1 LU`, and
 * with `peak=true` the true peak `Peak: -3.2 dBFS`). @throws LoudnessError when there is none
 */
export function parseEbur128Summary(stderr: string): LoudnessMeasure {
  const at = stderr.lastIndexOf('Summary:');
  if (at < 0) throw new LoudnessError('FFmpeg printed no loudness summary');
  const s = stderr.slice(at);
  const i = /\bI:\s+(-?[\d.]+|-?inf|nan)\s+LUFS/.exec(s);
  const lra = /\bLRA:\s+(-?[\d.]+|nan)\s+LU\b/.exec(s);
  const tp = /True peak:\s*\n\s*Peak:\s+(-?[\d.]+|-?inf|nan)\s+dB/.exec(s);
  if (!i || !lra) throw new LoudnessError('FFmpeg printed an incomplete loudness summary');
  return {
    integratedLufs: Math.max(num(i[1]) ?? SILENCE_LUFS, SILENCE_LUFS),
    truePeakDbtp: num(tp?.[1]),
    lraLu: num(lra[1]) ?? 0,
  };
}

/**
 * Reads the JSON block `loudnorm` prints with `print_format=json` (the last one of an FFmpeg
 * stderr). Values FFmpeg gives as `-inf` come back as −99 (the floor of its `measured_*` options).
 * @throws LoudnessError when there is none
 */
export function parseLoudnormJson(stderr: string): LoudnormPass & { normalizationType: string | null } {
  const at = stderr.lastIndexOf('"input_i"');
  const open = at < 0 ? -1 : stderr.lastIndexOf('{', at);
  const close = at < 0 ? -1 : stderr.indexOf('}', at);
  if (open < 0 || close < 0) throw new LoudnessError('FFmpeg printed no loudnorm measurement');
  let j: Record<string, string>;
  try {
    j = JSON.parse(stderr.slice(open, close + 1)) as Record<string, string>;
  } catch {
    throw new LoudnessError('FFmpeg printed an unreadable loudnorm measurement');
  }
  const v = (k: string) => Math.max(-99, Math.min(99, num(j[k]) ?? -99));
  return {
    inputI: v('input_i'),
    inputTp: v('input_tp'),
    inputLra: Math.max(0, num(j.input_lra) ?? 0),
    inputThresh: v('input_thresh'),
    targetOffset: num(j.target_offset) ?? 0,
    normalizationType: typeof j.normalization_type === 'string' ? j.normalization_type : null,
  };
}

const CHANNELS: Record<string, number> = { mono: 1, stereo: 2, '2.1': 3, '3.0': 3, quad: 4, '4.0': 4, '5.0': 5, '5.1': 6, '6.1': 7, '7.1': 8 };

/**
 * Reads the first audio stream of FFmpeg's input report (`Stream #0:0: Audio: mp3, 44100 Hz,
 * stereo, fltp, 128 kb/s`). @throws LoudnessError when there is none
 */
export function parseAudioStream(stderr: string): AudioStreamInfo {
  const m = /^\s*Stream #0:\d+\S*: Audio: ([a-z0-9_]+)[^,\n]*(?:, (\d+) Hz)?(?:, ([^,\n]+))?(?:, [^,\n]+)?(?:, (\d+) kb\/s)?/m.exec(stderr);
  if (!m) throw new LoudnessError('FFmpeg found no audio stream');
  const layout = m[3]?.trim();
  const channels = layout === undefined ? null : (CHANNELS[layout] ?? num(/^(\d+) channels/.exec(layout)?.[1]) ?? null);
  const containerRate = /^\s*Duration: .*?, bitrate: (\d+) kb\/s/m.exec(stderr)?.[1];
  const kbps = num(m[4]) ?? num(containerRate);
  return { codec: m[1]!, sampleRate: num(m[2]), channels, bitRate: kbps === null ? null : kbps * 1000 };
}

/** How a codec is re-encoded: FFmpeg's encoder, whether it is lossy, and the bit rate used when the original gives none. */
const ENCODERS: Record<string, { encoder: string; lossy: boolean; defaultBitRate?: number }> = {
  mp3: { encoder: 'libmp3lame', lossy: true, defaultBitRate: 128_000 },
  aac: { encoder: 'aac', lossy: true, defaultBitRate: 128_000 },
  vorbis: { encoder: 'libvorbis', lossy: true, defaultBitRate: 128_000 },
  opus: { encoder: 'libopus', lossy: true, defaultBitRate: 96_000 },
  flac: { encoder: 'flac', lossy: false },
};
/** Output container of each file extension the media store uses (src/control/episode-audio/probe.ts). */
const MUXERS: Record<string, string[]> = {
  mp3: ['-f', 'mp3'],
  m4a: ['-f', 'mp4', '-movflags', '+faststart'],
  aac: ['-f', 'adts'],
  ogg: ['-f', 'ogg'],
  flac: ['-f', 'flac'],
  wav: ['-f', 'wav'],
  webm: ['-f', 'webm'],
};

/**
 * The FFmpeg output options that re-encode `stream` like the original (codec, bit rate, sample
 * rate, channels) into the container of extension `ext`, and whether the codec is lossy; null when
 * Skylark does not re-encode that codec (the episode is then measured, not normalised).
 */
export function encodeLike(stream: AudioStreamInfo, ext: string): { args: string[]; lossy: boolean } | null {
  const muxer = MUXERS[ext];
  if (!muxer) return null;
  let enc = ENCODERS[stream.codec];
  if (!enc && /^pcm_[a-z0-9]+$/.test(stream.codec)) enc = { encoder: stream.codec, lossy: false };
  if (!enc) return null;
  const args = ['-c:a', enc.encoder];
  if (enc.lossy) args.push('-b:a', String(stream.bitRate ?? enc.defaultBitRate));
  if (stream.sampleRate) args.push('-ar', String(stream.sampleRate));
  if (stream.channels) args.push('-ac', String(stream.channels));
  return { args: [...args, ...muxer], lossy: enc.lossy };
}

/** The base options of every run: quiet progress, no stdin, one thread (the pool caps the processes). */
const BASE = ['-hide_banner', '-nostdin', '-nostats', '-threads', '1'];

/** Measures files and writes normalised copies through an FFmpeg pool. */
export class LoudnessAnalyzer {
  constructor(private readonly pool: FfmpegPool) {}

  /**
   * Measures `file` (BS.1770-4: integrated LUFS, true peak dBTP, LRA LU) in one decoding; with
   * `loudnormFor` it also runs the first `loudnorm` pass for that target (LUFS) and true-peak
   * ceiling (dBTP) on the same decoded audio. @throws LoudnessError; FfmpegPoolClosedError at shutdown
   */
  async analyse(file: string, loudnormFor?: { target: number; truePeak: number }): Promise<Analysis> {
    const ebur = 'ebur128=peak=true:framelog=verbose';
    const graph = loudnormFor
      ? ['-filter_complex', `[0:a:0]asplit=2[a][b];[a]${ebur}[m];[b]loudnorm=I=${loudnormFor.target}:TP=${loudnormFor.truePeak}:LRA=50:print_format=json[n]`, '-map', '[m]', '-f', 'null', '-', '-map', '[n]', '-f', 'null', '-']
      : ['-filter_complex', `[0:a:0]${ebur}[m]`, '-map', '[m]', '-f', 'null', '-'];
    const r = await this.pool.run([...BASE, '-i', `file:${file}`, ...graph]);
    if (r.code !== 0) throw new LoudnessError(`FFmpeg could not measure the audio (${r.code ?? r.signal}): ${lastLine(r.stderr)}`);
    return { stream: parseAudioStream(r.stderr), measure: parseEbur128Summary(r.stderr), loudnorm: loudnormFor ? parseLoudnormJson(r.stderr) : null };
  }

  /**
   * Writes `out`: `input` normalised to `target` LUFS under the true-peak ceiling `truePeak` dBTP
   * with the second `loudnorm` pass (linear gain from `pass`'s measurements), encoded with
   * `encode.args` (see `encodeLike`). Returns the mode FFmpeg used: `linear`, or `dynamic` when a
   * single gain could not meet the ceiling. @throws LoudnessError; FfmpegPoolClosedError at shutdown
   */
  async normalise(input: string, out: string, target: number, truePeak: number, pass: LoudnormPass, encode: { args: string[] }): Promise<{ method: 'linear' | 'dynamic' }> {
    const lra = Math.min(50, Math.max(7, Math.ceil(pass.inputLra + 1)));
    const filter =
      `loudnorm=I=${target}:TP=${truePeak}:LRA=${lra}:measured_I=${pass.inputI}:measured_TP=${pass.inputTp}:measured_LRA=${pass.inputLra}` +
      `:measured_thresh=${pass.inputThresh}:offset=${pass.targetOffset}:linear=true:print_format=json`;
    const r = await this.pool.run([...BASE, '-i', `file:${input}`, '-map', '0:a:0', '-map_metadata', '0', '-af', filter, ...encode.args, '-y', `file:${out}`]);
    if (r.code !== 0) throw new LoudnessError(`FFmpeg could not normalise the audio (${r.code ?? r.signal}): ${lastLine(r.stderr)}`);
    return { method: parseLoudnormJson(r.stderr).normalizationType === 'dynamic' ? 'dynamic' : 'linear' };
  }
}

const lastLine = (s: string) => s.trim().split('\n').pop()?.slice(0, 300) ?? '';
