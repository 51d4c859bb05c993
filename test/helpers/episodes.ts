/**
 * Episodes with real audio for tests that need some (the stream fallback, the dashboard): a tone
 * made by FFmpeg as MP3, and an episode created and given that audio through the API.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { api } from './server.js';
import { ffmpegPath } from './ffmpeg.js';

/** A `seconds` long sine tone at `hz`, MP3 64 kbit/s, written to `dir/file`; its bytes. */
export function toneMp3(dir: string, file: string, seconds: number, hz: number): Buffer {
  const out = path.join(dir, file);
  execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `sine=frequency=${hz}:duration=${seconds}`, '-c:a', 'libmp3lame', '-b:a', '64k', out], { timeout: 30_000 });
  return readFileSync(out);
}

/** Creates episode `title` of podcast `pid` on server `http` and PUTs `audio` (MP3) as its audio (none when null); its id. */
export async function episodeWithAudio(http: string, key: string, pid: string, title: string, audio: Buffer | null): Promise<string> {
  const e = await api(http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title });
  expect(e.status, e.text).toBe(201);
  if (audio) {
    const r = await fetch(`${http}/v2/podcasts/${pid}/episodes/${e.json.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/mpeg' }, body: audio });
    expect(r.status, await r.text()).toBe(200);
  }
  return e.json.id as string;
}
