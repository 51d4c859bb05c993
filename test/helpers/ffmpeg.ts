/** Locates FFmpeg for tests: `ffmpeg` on PATH, else the binary shipped by @ffmpeg-installer/ffmpeg. */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

let cached: string | undefined;
/** Path of an ffmpeg binary. @throws Error when neither is available */
export function ffmpegPath(): string {
  if (cached) return cached;
  if (spawnSync('ffmpeg', ['-version']).status === 0) return (cached = 'ffmpeg');
  const installer = createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string };
  return (cached = installer.path);
}
