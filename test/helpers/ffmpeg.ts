/** Locates FFmpeg for tests: `ffmpeg` on PATH, else the binary shipped by @ffmpeg-installer/ffmpeg. */
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

let cached: string | undefined;
/** Path of an ffmpeg binary. @throws Error when neither is available */
export function ffmpegPath(): string {
  if (cached) return cached;
  if (spawnSync('ffmpeg', ['-version']).status === 0) return (cached = 'ffmpeg');
  const installer = createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string };
  return (cached = installer.path);
}

/**
 * Runs `cmd args` to the end (killed after `timeoutMs` ms): exit code (or signal name) and the
 * whole stdout and stderr as text. Never rejects.
 */
export function run(cmd: string, args: string[], timeoutMs = 20_000): Promise<{ code: number | string | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout!.on('data', (d) => (stdout += d));
    p.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.once('exit', (c, s) => {
      clearTimeout(timer);
      resolve({ code: c ?? s, stdout, stderr });
    });
  });
}
