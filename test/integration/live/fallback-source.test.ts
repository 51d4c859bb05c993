/**
 * The fallback source (docs/streams.md "Fallback") with real FFmpeg, real episode files and the
 * native Icecast source parser: episodes play one after another in real time, as audio messages of
 * the stream's codec on one continuous clock, each announcing its title; a broken file is skipped;
 * `close()` stops and detaches. And the ladder's silence detection arguments.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FallbackSource, fallbackArgs, type FallbackPlan } from '../../../src/live/ingest/fallback.js';
import { transcoderArgs } from '../../../src/live/media/transcoder.js';
import { readAudioTag, type AudioCodec, type AudioTag } from '../../../src/live/media/codec.js';
import type { PublishInput } from '../../../src/live/media/hub-types.js';
import { ffmpegPath } from '../../../src/base/ffmpeg.js';

let dir: string;
const ffmpeg = ffmpegPath()!;
const quiet = { info() {}, warn() {}, error() {} };

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'skylark-fallback-'));
  for (const [name, hz] of [['a', 440], ['b', 880]] as const) {
    execFileSync(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `sine=frequency=${hz}:duration=1.5`, '-c:a', 'libmp3lame', '-b:a', '64k', path.join(dir, `${name}.mp3`)]);
  }
  writeFileSync(path.join(dir, 'broken.mp3'), 'not audio at all');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Plays `plan` as `codec` until the second title has played 300 ms (at most `ms`), collecting what a hub would get. */
async function play(codec: AudioCodec, plan: FallbackPlan, ms: number) {
  const got: Array<{ ts: number; tag: AudioTag }> = [];
  const titles: Array<{ title: string; at: number }> = [];
  let detached = false;
  const input: PublishInput = {
    audio: (ts, data, tag) => got.push({ ts, tag: tag ?? readAudioTag(data) }),
    live: () => {},
    detach: () => {
      detached = true;
    },
  };
  const src = new FallbackSource({ streamId: 'stm_test', ffmpeg, codec, kbps: 128, format: { sampleRate: 48000, channels: 2 }, plan: () => plan, title: (title) => titles.push({ title, at: got.length }), log: quiet });
  const start = Date.now();
  src.start(input);
  let second = 0;
  while (Date.now() - start < ms) {
    await new Promise((r) => setTimeout(r, 50));
    if (titles.length >= 2 && !second) second = Date.now();
    if (second && Date.now() - second > 300) break;
  }
  src.close();
  return { got, titles, detached, elapsed: Date.now() - start };
}

describe('FallbackSource', () => {
  it.each(['aac', 'mp3', 'opus'] as const)('plays the episodes in order in real time as %s on one clock, with their titles', async (codec) => {
    const plan: FallbackPlan = { items: [{ id: 'ep_a', path: path.join(dir, 'a.mp3'), title: 'A' }, { id: 'ep_broken', path: path.join(dir, 'broken.mp3'), title: 'Broken' }, { id: 'ep_b', path: path.join(dir, 'b.mp3'), title: 'B' }], order: 'sequential', silenceSeconds: null };
    const { got, titles, detached, elapsed } = await play(codec, plan, 15_000);
    expect(detached).toBe(true);
    expect(got.every((m) => m.tag.codec === codec)).toBe(true);
    if (codec !== 'mp3') expect(got[0]!.tag.kind).toBe('header');
    // The broken file is skipped (logged): A, then B.
    expect(titles.map((t) => t.title).slice(0, 2)).toEqual(['A', 'B']);
    const frames = got.filter((m) => m.tag.kind === 'frame');
    // Real time: 1.5 s of A, then some of B — never more audio than time passed.
    const lastTs = frames.at(-1)!.ts;
    expect(lastTs).toBeGreaterThan(1500);
    expect(lastTs).toBeLessThan(elapsed + 200);
    // One clock: timestamps never go back, and B continues where A stopped (no gap over 100 ms).
    for (let i = 1; i < frames.length; i++) {
      expect(frames[i]!.ts).toBeGreaterThanOrEqual(frames[i - 1]!.ts);
      expect(frames[i]!.ts - frames[i - 1]!.ts).toBeLessThan(100);
    }
  }, 20_000);

  it('shuffle plays every episode of a round once', async () => {
    const plan: FallbackPlan = { items: [{ id: 'ep_a', path: path.join(dir, 'a.mp3'), title: 'A' }, { id: 'ep_b', path: path.join(dir, 'b.mp3'), title: 'B' }], order: 'shuffle', silenceSeconds: null };
    const { titles } = await play('aac', plan, 15_000);
    expect(titles.slice(0, 2).map((t) => t.title).sort()).toEqual(['A', 'B']);
  }, 20_000);

  it('encodes to the stream codec at its top bitrate on stdout, in the live source\'s format (Opus: always 48 kHz)', () => {
    const stereo48 = { sampleRate: 48000, channels: 2 };
    expect(fallbackArgs('/x.mp3', 'aac', 128, stereo48)).toEqual(expect.arrayContaining(['-re', '-i', '/x.mp3', '-b:a', '128k', '-f', 'adts', 'pipe:1', '-ar', '48000', '-ac', '2']));
    expect(fallbackArgs('/x.mp3', 'aac', 128, { sampleRate: 44100, channels: 1 })).toEqual(expect.arrayContaining(['-ar', '44100', '-ac', '1']));
    expect(fallbackArgs('/x.mp3', 'opus', 320, { sampleRate: 44100, channels: 2 })).toEqual(expect.arrayContaining(['-c:a', 'libopus', '-f', 'ogg', '-b:a', '320k', '-ar', '48000']));
    expect(fallbackArgs('/x.mp3', 'mp3', 64, { sampleRate: 22050, channels: 2 })).toEqual(expect.arrayContaining(['-c:a', 'libmp3lame', '-f', 'mp3', '-ar', '22050']));
  });
});

describe('silence detection in the ladder process', () => {
  it('adds silencedetect at −50 dBFS over silenceSeconds, at log level info, only when asked', () => {
    const args = transcoderArgs('aac', [64], 7);
    expect(args.join(' ')).toContain('-af silencedetect=n=-50dB:d=7 -f null -');
    expect(args).toEqual(expect.arrayContaining(['-loglevel', 'info', '-nostats']));
    expect(transcoderArgs('aac', [64]).join(' ')).not.toContain('silencedetect');
    expect(transcoderArgs('aac', [], 5).join(' ')).toContain('silencedetect');
  });
});
