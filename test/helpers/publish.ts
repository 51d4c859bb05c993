/** Real FFmpeg RTMP publishers for tests. */
import { spawn, type ChildProcess } from 'node:child_process';
import { ffmpegPath } from './ffmpeg.js';

export interface PublishOptions {
  seconds: number;
  /** FFmpeg audio codec arguments; default AAC 128 kbps stereo 48 kHz. */
  codecArgs?: string[];
  frequency?: number;
}

/** Publishes a sine tone over RTMP in real time (`-re`) to `url` (rtmpUrl/streamKey). */
export function publish(url: string, o: PublishOptions): ChildProcess & { stderrText: () => string } {
  const args = ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', `sine=frequency=${o.frequency ?? 440}:sample_rate=48000`, '-t', String(o.seconds),
    ...(o.codecArgs ?? ['-ac', '2', '-c:a', 'aac', '-b:a', '128k']), '-f', 'flv', url];
  const child = spawn(ffmpegPath(), args, { stdio: ['ignore', 'ignore', 'pipe'] }) as ChildProcess & { stderrText: () => string };
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  child.stderrText = () => err;
  return child;
}

/** Resolves with the exit code (or signal name) of a child process. */
export function exited(p: ChildProcess): Promise<number | string | null> {
  return new Promise((resolve) => {
    if (p.exitCode !== null) return resolve(p.exitCode);
    if (p.signalCode !== null) return resolve(p.signalCode);
    p.once('exit', (c, s) => resolve(c ?? s));
  });
}
