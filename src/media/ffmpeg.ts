/**
 * Where FFmpeg comes from (PRODUCT.md §3): `ffmpeg` on PATH, else the binary shipped inside the
 * `@ffmpeg-installer/ffmpeg` npm package, so a fresh machine needs nothing but `npm ci`.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

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
