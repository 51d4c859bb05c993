/**
 * Audio probing for episode uploads (docs/behaviour.md §5: "type and duration probed"). Uses `ffprobe`
 * when it is on PATH (JSON output); otherwise FFmpeg alone (`ffmpeg -i`, system binary on PATH or
 * the one shipped by @ffmpeg-installer/ffmpeg, which has no ffprobe) and parses its input report.
 * Only audio containers podcast apps play are accepted; anything else is "not audio".
 */
import { spawn, spawnSync } from 'node:child_process';
import { ffmpegPath } from '../../base/ffmpeg.js';

/** What an accepted audio file is. */
export interface AudioInfo {
  /** MIME type for `Content-Type` and the feed's `enclosure type`. */
  mimeType: string;
  /** File extension without the dot (`mp3`, `m4a`, …). */
  ext: string;
  /** Seconds (container duration), rounded to milliseconds; null when the container does not say. */
  durationSeconds: number | null;
}

/** The file is not audio Skylark accepts (the caller answers 415 `unsupported_media_type`). */
export class NotAudioError extends Error {}

/** FFmpeg's format names (first of the comma list or any of it) → MIME type and extension. */
const FORMATS: Array<{ names: string[]; mimeType: string; ext: string }> = [
  { names: ['mp3'], mimeType: 'audio/mpeg', ext: 'mp3' },
  { names: ['mov', 'mp4', 'm4a'], mimeType: 'audio/x-m4a', ext: 'm4a' },
  { names: ['aac'], mimeType: 'audio/aac', ext: 'aac' },
  { names: ['ogg'], mimeType: 'audio/ogg', ext: 'ogg' },
  { names: ['flac'], mimeType: 'audio/flac', ext: 'flac' },
  { names: ['wav'], mimeType: 'audio/wav', ext: 'wav' },
  { names: ['matroska', 'webm'], mimeType: 'audio/webm', ext: 'webm' },
];

/** Longest a probe may run (ms) before it is killed and the file refused. */
const PROBE_TIMEOUT_MS = 30_000;

interface Tools {
  ffprobe: string | null;
  ffmpeg: string;
}
let tools: Tools | undefined;

/** `ffprobe` on PATH if any, and `ffmpeg` on PATH or the npm-shipped binary. @throws Error when no FFmpeg exists */
export function probeTools(): Tools {
  if (tools) return tools;
  const ffprobe = spawnSync('ffprobe', ['-version']).status === 0 ? 'ffprobe' : null;
  const ffmpeg = ffmpegPath();
  if (!ffmpeg) throw new Error('FFmpeg was not found (install ffmpeg or set SKYLARK_FFMPEG)');
  return (tools = { ffprobe, ffmpeg });
}

function run(bin: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout.length < 1 << 20 ? (stdout += d) : undefined));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr.length < 1 << 20 ? (stderr += d) : undefined));
    const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** What either prober found: the format names, the kinds of streams and the duration. */
export interface ProbeFacts {
  formatNames: string[];
  audioStreams: number;
  /** Video streams that are not cover art (attached pictures). */
  videoStreams: number;
  durationSeconds: number | null;
}

/**
 * Probes `file`. @throws NotAudioError when it is not an accepted audio file; Error when FFmpeg
 * cannot be run at all.
 */
export async function probeAudio(file: string, opts: { forceFfmpeg?: boolean } = {}): Promise<AudioInfo> {
  const t = probeTools();
  const facts = t.ffprobe && !opts.forceFfmpeg ? await probeWithFfprobe(t.ffprobe, file) : await probeWithFfmpeg(t.ffmpeg, file);
  return classify(facts);
}

/** Decides from the facts. @throws NotAudioError */
export function classify(f: ProbeFacts): AudioInfo {
  if (f.audioStreams === 0) throw new NotAudioError('The file holds no audio stream.');
  if (f.videoStreams > 0) throw new NotAudioError('The file holds video; upload audio only.');
  const fmt = FORMATS.find((x) => x.names.some((n) => f.formatNames.includes(n)));
  if (!fmt) throw new NotAudioError(`Audio in the '${f.formatNames.join(',')}' container is not supported; upload MP3, M4A/AAC, Ogg, FLAC, WAV or WebM.`);
  const d = f.durationSeconds !== null && Number.isFinite(f.durationSeconds) && f.durationSeconds > 0 ? Math.round(f.durationSeconds * 1000) / 1000 : null;
  return { mimeType: fmt.mimeType, ext: fmt.ext, durationSeconds: d };
}

async function probeWithFfprobe(bin: string, file: string): Promise<ProbeFacts> {
  const r = await run(bin, ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', `file:${file}`]);
  if (r.code !== 0) throw new NotAudioError('The file is not a media file FFmpeg can read.');
  let j: { format?: { format_name?: string; duration?: string }; streams?: Array<{ codec_type?: string; disposition?: { attached_pic?: number } }> };
  try {
    j = JSON.parse(r.stdout);
  } catch {
    throw new NotAudioError('The file is not a media file FFmpeg can read.');
  }
  const streams = j.streams ?? [];
  return {
    formatNames: (j.format?.format_name ?? '').split(','),
    audioStreams: streams.filter((s) => s.codec_type === 'audio').length,
    videoStreams: streams.filter((s) => s.codec_type === 'video' && s.disposition?.attached_pic !== 1).length,
    durationSeconds: j.format?.duration !== undefined ? Number(j.format.duration) : null,
  };
}

async function probeWithFfmpeg(bin: string, file: string): Promise<ProbeFacts> {
  // With no output file ffmpeg prints the input report to stderr and exits 1: that is expected.
  const r = await run(bin, ['-hide_banner', '-nostdin', '-i', `file:${file}`]);
  return parseFfmpegReport(r.stderr);
}

/**
 * Parses the input report of `ffmpeg -i` (stderr): `Input #0, mp3, from '…':`, `Duration:
 * 00:01:02.50, …`, `Stream #0:0: Audio: …`, `Stream #0:1: Video: mjpeg … (attached pic)`.
 * @throws NotAudioError when there is no input report (not a media file)
 */
export function parseFfmpegReport(stderr: string): ProbeFacts {
  const input = /^Input #0, ([^\s]+), from /m.exec(stderr);
  if (!input) throw new NotAudioError('The file is not a media file FFmpeg can read.');
  const dur = /^\s*Duration: (\d+):(\d{2}):(\d{2}(?:\.\d+)?)/m.exec(stderr);
  const streams = [...stderr.matchAll(/^\s*Stream #0:\d+.*?: (Audio|Video|Data|Subtitle|Attachment): (.*)$/gm)];
  return {
    formatNames: input[1]!.replace(/,$/, '').split(','),
    audioStreams: streams.filter((m) => m[1] === 'Audio').length,
    videoStreams: streams.filter((m) => m[1] === 'Video' && !/\(attached pic\)/.test(m[2]!)).length,
    durationSeconds: dur ? Number(dur[1]) * 3600 + Number(dur[2]) * 60 + Number(dur[3]) : null,
  };
}
