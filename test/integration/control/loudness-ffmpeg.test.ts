/**
 * The FFmpeg side of episode loudness (docs/podcasts.md "Loudness"), with real processes:
 * - `FfmpegPool` never runs more than its concurrency at once (children log their start and end to
 *   a file; the log's order is checked, not its timing), and `close()` kills what runs and refuses
 *   what waits;
 * - the readers of FFmpeg's output (`ebur128` summary, `loudnorm` JSON, the input report's audio
 *   stream) on what a real FFmpeg prints, silence included;
 * - `encodeLike` keeps codec, bit rate, sample rate and channels, and declines codecs it does not
 *   re-encode.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { FfmpegPool, FfmpegPoolClosedError } from '../../../src/base/ffmpeg.js';
import { encodeLike, LoudnessAnalyzer, parseAudioStream, parseEbur128Summary, parseLoudnormJson } from '../../../src/control/episode-audio/loudness.js';
import { ffmpegPath, run } from '../../helpers/ffmpeg.js';
import { tempDir } from '../../helpers/server.js';

const tmp = tempDir('skylark-loudness-');
afterAll(() => tmp.cleanup());
const ffmpeg = ffmpegPath();

/** A node child that appends `start <n>`, waits `ms`, appends `end <n>`. */
const child = (log: string, n: number, ms: number) => ['-e', `const fs=require('fs');fs.appendFileSync(${JSON.stringify(log)},'start ${n}\\n');setTimeout(()=>{fs.appendFileSync(${JSON.stringify(log)},'end ${n}\\n')},${ms})`];

describe('FfmpegPool', () => {
  it('runs at most `concurrency` children at once, all of them in the end', async () => {
    const log = path.join(tmp.dir, 'pool.log');
    const pool = new FfmpegPool({ bin: process.execPath, concurrency: 2 });
    const results = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => pool.run(child(log, n, 150))));
    expect(results.every((r) => r.code === 0)).toBe(true);
    let running = 0;
    let most = 0;
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    for (const l of lines) {
      running += l.startsWith('start') ? 1 : -1;
      most = Math.max(most, running);
    }
    expect(lines).toHaveLength(12);
    expect(most).toBe(2);
  });

  it('close() kills what runs and refuses what waits and what comes later', async () => {
    const pool = new FfmpegPool({ bin: process.execPath, concurrency: 1 });
    const log = path.join(tmp.dir, 'closed.log');
    const first = pool.run(['-e', `require('fs').appendFileSync(${JSON.stringify(log)},'started\\n');setTimeout(()=>{},60000)`]);
    const waiting = pool.run(child(log, 2, 10)).catch((e: unknown) => e);
    // Close once the first child is really running (it wrote its line).
    for (let i = 0; i < 200; i++) {
      try {
        if (readFileSync(log, 'utf8').includes('started')) break;
      } catch {
        // not yet written
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    pool.close();
    await expect(first).rejects.toBeInstanceOf(FfmpegPoolClosedError);
    expect(await waiting).toBeInstanceOf(FfmpegPoolClosedError);
    await expect(pool.run(['-e', ''])).rejects.toBeInstanceOf(FfmpegPoolClosedError);
    expect(readFileSync(log, 'utf8')).toBe('started\n');
  });
});

describe('reading FFmpeg', () => {
  it('reads the ebur128 summary, the loudnorm JSON and the audio stream of a real run', async () => {
    const file = path.join(tmp.dir, 'tone.mp3');
    const made = await run(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=997:sample_rate=48000:duration=4', '-ac', '2', '-c:a', 'libmp3lame', '-b:a', '96k', file]);
    expect(made.code, made.stderr).toBe(0);
    const r = await run(ffmpeg, [
      '-hide_banner', '-nostats', '-i', file, '-filter_complex',
      '[0:a:0]asplit=2[a][b];[a]ebur128=peak=true:framelog=verbose[m];[b]loudnorm=I=-16:TP=-1:LRA=50:print_format=json[n]',
      '-map', '[m]', '-f', 'null', '-', '-map', '[n]', '-f', 'null', '-',
    ]);
    expect(r.code, r.stderr.slice(-400)).toBe(0);
    const m = parseEbur128Summary(r.stderr);
    // A 997 Hz sine of amplitude 1/8 (−18 dBFS peak) upmixed to two channels at −3 dB each:
    // about −21 LUFS (two channels of −24 LUFS each), true peak about −21 dBTP, no range.
    expect(Math.abs(m.integratedLufs - -21.1)).toBeLessThan(1);
    expect(Math.abs(m.truePeakDbtp! - -21.1)).toBeLessThan(1);
    expect(m.lraLu).toBeLessThan(1);
    const j = parseLoudnormJson(r.stderr);
    expect(Math.abs(j.inputI - m.integratedLufs)).toBeLessThan(0.5);
    expect(Number.isFinite(j.inputThresh) && Number.isFinite(j.targetOffset)).toBe(true);
    expect(parseAudioStream(r.stderr)).toEqual({ codec: 'mp3', sampleRate: 48000, channels: 2, bitRate: 96000 });
  });

  it('measures digital silence as −70 LUFS with no true peak, through the analyzer', async () => {
    const file = path.join(tmp.dir, 'silence.wav');
    expect((await run(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'anullsrc=sample_rate=44100:channel_layout=mono', '-t', '3', file])).code).toBe(0);
    const pool = new FfmpegPool({ bin: ffmpeg, concurrency: 1 });
    const a = await new LoudnessAnalyzer(pool).analyse(file, { target: -16, truePeak: -1 });
    pool.close();
    expect(a.measure).toEqual({ integratedLufs: -70, truePeakDbtp: null, lraLu: 0 });
    expect(a.stream).toMatchObject({ codec: 'pcm_s16le', sampleRate: 44100, channels: 1 });
    expect(a.loudnorm!.inputI).toBe(-99);
    rmSync(file);
  });
});

describe('encodeLike', () => {
  it('re-encodes with the codec, bit rate, sample rate and channels of the original, in its container', () => {
    expect(encodeLike({ codec: 'mp3', sampleRate: 44100, channels: 1, bitRate: 64000 }, 'mp3')).toEqual({
      args: ['-c:a', 'libmp3lame', '-b:a', '64000', '-ar', '44100', '-ac', '1', '-f', 'mp3'],
      lossy: true,
    });
    expect(encodeLike({ codec: 'aac', sampleRate: 48000, channels: 2, bitRate: null }, 'm4a')).toEqual({
      args: ['-c:a', 'aac', '-b:a', '128000', '-ar', '48000', '-ac', '2', '-f', 'mp4', '-movflags', '+faststart'],
      lossy: true,
    });
    expect(encodeLike({ codec: 'pcm_s24le', sampleRate: 96000, channels: 2, bitRate: 4608000 }, 'wav')).toEqual({
      args: ['-c:a', 'pcm_s24le', '-ar', '96000', '-ac', '2', '-f', 'wav'],
      lossy: false,
    });
    expect(encodeLike({ codec: 'alac', sampleRate: 44100, channels: 2, bitRate: null }, 'm4a')).toBeNull();
  });
});
