/**
 * Where FFmpeg comes from (docs/behaviour.md §3): `ffmpeg` on PATH, else the binary shipped inside the
 * `@ffmpeg-installer/ffmpeg` npm package, so a fresh machine needs nothing but `npm ci`. And
 * `FfmpegPool`: capped, low-priority FFmpeg child processes for whole-file work (episode loudness,
 * docs/podcasts.md "Loudness").
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { setPriority } from 'node:os';

let cached: string | null | undefined;

/** Path of an ffmpeg binary, or null when there is none. Resolved once per process. */
export function ffmpegPath(): string | null {
  if (cached !== undefined) return cached;
  const override = process.env.SKYLARK_FFMPEG;
  if (override) return (cached = override);
  if (spawnSync('ffmpeg', ['-version'], { stdio: 'ignore' }).status === 0) return (cached = 'ffmpeg');
  try {
    const installer = createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string };
    return (cached = installer.path);
  } catch {
    return (cached = null);
  }
}

/** What one FFmpeg run left behind: its exit code (null when killed), the signal, and its output as text. */
export interface FfmpegRunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  /** The first 32 KiB and the last 64 KiB of stderr (the input report and the filters' summaries). */
  stderr: string;
}

/** Refused: the pool was closed (shutdown) before or while the run went. */
export class FfmpegPoolClosedError extends Error {}

/**
 * Runs FFmpeg as child processes, at most `concurrency` at once (later runs wait in order), each
 * at a lower CPU priority (`niceness`, as `nice(1)`), each killed after `timeoutMs`: the heavy work
 * (whole-file analysis, re-encoding) stays off the event loop and cannot take every core from
 * live streams, however many uploads arrive together. `close()` kills what runs and refuses what waits.
 */
export class FfmpegPool {
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private readonly children = new Set<ChildProcess>();
  private closed = false;

  /**
   * @param opts.bin the ffmpeg binary (`ffmpegPath()`)
   * @param opts.concurrency runs at once, ≥ 1
   * @param opts.niceness added CPU niceness of each child (0–19; default 10)
   * @param opts.timeoutMs longest run (ms; default 1 hour) before it is killed
   */
  constructor(private readonly opts: { bin: string; concurrency: number; niceness?: number; timeoutMs?: number }) {}

  /** Runs `ffmpeg args` when a slot is free. Never rejects for a failing FFmpeg (see `code`). @throws FfmpegPoolClosedError after close(); Error when it cannot be spawned */
  async run(args: string[]): Promise<FfmpegRunResult> {
    if (this.closed) throw new FfmpegPoolClosedError('the FFmpeg pool is closed');
    // A finishing run hands its slot straight to the first waiter (no newcomer can slip in between).
    if (this.running >= Math.max(1, this.opts.concurrency)) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      if (this.closed) throw new FfmpegPoolClosedError('the FFmpeg pool is closed');
      return await this.spawnOne(args);
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }

  /** Kills running children and refuses waiting and later runs. */
  close(): void {
    this.closed = true;
    for (const c of this.children) c.kill('SIGKILL');
    for (const w of this.waiting.splice(0)) w();
  }

  private spawnOne(args: string[]): Promise<FfmpegRunResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.opts.bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      this.children.add(child);
      if (child.pid !== undefined) {
        try {
          setPriority(child.pid, Math.min(19, Math.max(0, this.opts.niceness ?? 10)));
        } catch {
          // not permitted here: it runs at normal priority
        }
      }
      let stdout = '';
      let head = '';
      let tail = '';
      child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout.length < 1 << 20 ? (stdout += d) : undefined));
      child.stderr!.setEncoding('utf8').on('data', (d: string) => {
        if (head.length < 32 * 1024) head += d;
        else tail = (tail + d).slice(-64 * 1024);
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), this.opts.timeoutMs ?? 3_600_000);
      child.once('error', (e) => {
        clearTimeout(timer);
        this.children.delete(child);
        reject(e);
      });
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        this.children.delete(child);
        if (this.closed) reject(new FfmpegPoolClosedError('the FFmpeg pool is closed'));
        else resolve({ code, signal, stdout, stderr: head + tail });
      });
    });
  }
}
