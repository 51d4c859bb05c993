/**
 * Audio probing with FFmpeg alone (no ffprobe: what @ffmpeg-installer ships) and with ffprobe,
 * on real files made by FFmpeg: the two agree on type and duration; non-audio is refused.
 */
import { describe, expect, it, afterAll } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { NotAudioError, parseFfmpegReport, probeAudio } from '../../../src/control/episode-audio/probe.js';
import { tempDir } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

const tmp = tempDir();
afterAll(() => tmp.cleanup());
const make = (file: string, args: string[], input = 'sine=frequency=440:duration=3') => {
  const out = path.join(tmp.dir, file);
  execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', input, ...args, out], { timeout: 30_000 });
  return out;
};

describe('probeAudio', () => {
  const haveFfprobe = spawnSync('ffprobe', ['-version']).status === 0;
  for (const [file, args, mime] of [
    ['a.mp3', ['-c:a', 'libmp3lame', '-b:a', '64k'], 'audio/mpeg'],
    ['a.m4a', ['-c:a', 'aac', '-b:a', '64k'], 'audio/x-m4a'],
    ['a.ogg', ['-c:a', 'libopus', '-b:a', '48k'], 'audio/ogg'],
    ['a.wav', ['-c:a', 'pcm_s16le'], 'audio/wav'],
    ['a.flac', ['-c:a', 'flac'], 'audio/flac'],
  ] as const) {
    it(`knows ${file} with ffmpeg alone${haveFfprobe ? ' and with ffprobe' : ''}`, async () => {
      const f = make(file, [...args]);
      const viaFfmpeg = await probeAudio(f, { forceFfmpeg: true });
      expect(viaFfmpeg.mimeType).toBe(mime);
      expect(viaFfmpeg.durationSeconds).toBeGreaterThan(2.5);
      expect(viaFfmpeg.durationSeconds).toBeLessThan(3.5);
      if (haveFfprobe) {
        const viaProbe = await probeAudio(f);
        expect(viaProbe.mimeType).toBe(mime);
        expect(Math.abs(viaProbe.durationSeconds! - viaFfmpeg.durationSeconds!)).toBeLessThan(0.05);
      }
    });
  }

  it('refuses video, images and text', async () => {
    const video = make('v.mp4', ['-c:v', 'mpeg4', '-t', '1'], 'testsrc=size=64x64:rate=5');
    await expect(probeAudio(video, { forceFfmpeg: true })).rejects.toBeInstanceOf(NotAudioError);
    const png = make('i.png', ['-frames:v', '1'], 'testsrc=size=16x16');
    await expect(probeAudio(png, { forceFfmpeg: true })).rejects.toBeInstanceOf(NotAudioError);
    const txt = path.join(tmp.dir, 't.txt');
    writeFileSync(txt, 'hello, this is not audio\n'.repeat(100));
    await expect(probeAudio(txt, { forceFfmpeg: true })).rejects.toBeInstanceOf(NotAudioError);
    if (haveFfprobe) await expect(probeAudio(txt)).rejects.toBeInstanceOf(NotAudioError);
  });

  it('parses an ffmpeg report with cover art as audio', () => {
    const report = `Input #0, mp3, from 'file:x.mp3':
  Duration: 00:01:02.50, start: 0.025057, bitrate: 128 kb/s
  Stream #0:0: Audio: mp3, 44100 Hz, stereo, fltp, 128 kb/s
  Stream #0:1: Video: mjpeg (Baseline), yuvj420p(pc), 600x600, 90k tbr, 90k tbn (attached pic)
At least one output file must be specified`;
    expect(parseFfmpegReport(report)).toEqual({ formatNames: ['mp3'], audioStreams: 1, videoStreams: 0, durationSeconds: 62.5 });
  });
});
