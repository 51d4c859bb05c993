/**
 * The fallback's rendition cache (docs/streams.md "Fallback") with real FFmpeg and real files: a
 * rendition is built once (48 kHz stereo, the stream's codec, readable by ffprobe) and then
 * answered; a rendition cut short or damaged is never answered and is built again; what a crash
 * left is removed; `sync` keeps what the plans name only, `forget` drops an episode's entries; a
 * failed build (bad source, full disk) is logged, not retried at once, and answers null; the
 * fallback source plays a cached rendition paced in JS (no process), with its title; the pacer hands
 * the file's audio on in real time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FallbackCache } from '../../../src/live/ingest/fallback-cache.js';
import { FallbackSource, type FallbackPlan, type RenditionWant } from '../../../src/live/ingest/fallback.js';
import { readAudioTag, type AudioCodec } from '../../../src/live/media/codec.js';
import type { PublishInput } from '../../../src/live/media/hub-types.js';
import { ffmpegPath } from '../../../src/base/ffmpeg.js';
import { paceRendition } from '../../../src/live/ingest/rendition-pacer.js';
import { IcecastSource } from '../../../src/native/icecast-source.js';

let dir: string;
const ffmpeg = ffmpegPath()!;
const ffprobe = ffmpeg.replace(/ffmpeg$/, 'ffprobe');

/** A logger that keeps what it was told. */
function spyLog() {
  const lines: Array<{ level: string; msg: string; f?: Record<string, unknown> }> = [];
  const at = (level: string) => (msg: string, f?: Record<string, unknown>) => void lines.push({ level, msg, f });
  return { lines, info: at('info'), warn: at('warn'), error: at('error') };
}

async function until<T>(fn: () => T, what: string, ms = 20_000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const cacheDir = (name: string) => path.join(dir, name);
const filesIn = (d: string) => readdirSync(d).filter((f) => f !== '.part');
const STEREO_48K = { sampleRate: 48000, channels: 2 };
const want = (id: string, file: string, codec: AudioCodec = 'aac', kbps = 128, format = STEREO_48K): RenditionWant => ({ episodeId: id, path: path.join(dir, file), codec, kbps, format });
const open = (name: string, log = spyLog(), extra: Partial<ConstructorParameters<typeof FallbackCache>[0]> = {}) =>
  new FallbackCache({ dir: cacheDir(name), ffmpeg: () => ffmpeg, log, minFreeDiskBytes: 0, ...extra });

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'skylark-fallback-cache-'));
  for (const [name, hz] of [['a', 440], ['b', 880]] as const) {
    execFileSync(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `sine=frequency=${hz}:duration=1.5`, '-c:a', 'libmp3lame', '-b:a', '64k', path.join(dir, `${name}.mp3`)]);
  }
  writeFileSync(path.join(dir, 'broken.mp3'), 'not audio at all');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('FallbackCache', () => {
  it.each(['aac', 'mp3', 'opus'] as const)('builds a %s rendition once (48 kHz stereo, readable), then answers it', async (codec) => {
    const c = open(`build-${codec}`);
    const w = want('ep_a', 'a.mp3', codec, 96);
    expect(c.rendition(w)).toBeNull();
    const file = await until(() => c.rendition(w), 'the rendition');
    expect(path.dirname(file)).toBe(cacheDir(`build-${codec}`));
    expect(filesIn(cacheDir(`build-${codec}`))).toEqual([path.basename(file)]);
    const probe = execFileSync(ffprobe, ['-v', 'error', '-show_entries', 'stream=codec_name,sample_rate,channels', '-of', 'csv=p=0', file]).toString().trim();
    expect(probe).toBe(`${codec},48000,2`);
    // Another codec or bitrate is another entry.
    expect(c.rendition({ ...w, kbps: 64 })).toBeNull();
    c.close();
  }, 30_000);

  it('never answers a rendition cut short or damaged; builds it again', async () => {
    const log = spyLog();
    const c = open('damage', log);
    const w = want('ep_a', 'a.mp3');
    c.rendition(w);
    const file = await until(() => c.rendition(w), 'the rendition');
    const good = readFileSync(file);
    c.close();

    // Damaged (same size): a new process reads it back before its first use.
    const bad = Buffer.from(good);
    bad.fill(0x55, 2000, 2400);
    writeFileSync(file, bad);
    const d = open('damage', log);
    expect(d.rendition(w)).toBeNull();
    const again = await until(() => d.rendition(w), 'the rendition built again');
    expect(log.lines.some((l) => l.msg.includes('damaged'))).toBe(true);
    expect(readFileSync(again).equals(bad)).toBe(false);

    // Cut short: not used, removed, built again.
    truncateSync(again, 1000);
    expect(d.rendition(w)).toBeNull();
    expect(log.lines.some((l) => l.msg.includes('not whole'))).toBe(true);
    const third = await until(() => d.rendition(w), 'the rendition built a third time');
    expect(readFileSync(third).length).toBeGreaterThan(1000);
    d.close();
  }, 30_000);

  it('removes what a crash left and files that are not its own at start', () => {
    const d = cacheDir('leftovers');
    mkdirSync(path.join(d, '.part'), { recursive: true });
    writeFileSync(path.join(d, '.part', 'ep_a.0123456789abcdef.aac128.x.part'), 'half');
    writeFileSync(path.join(d, 'stray.txt'), 'x');
    const c = open('leftovers');
    expect(filesIn(d)).toEqual([]);
    expect(readdirSync(path.join(d, '.part'))).toEqual([]);
    c.close();
  });

  it('sync keeps what the plans name only; forget drops an episode', async () => {
    const c = open('bounds');
    const a = want('ep_a', 'a.mp3');
    const b = want('ep_b', 'b.mp3');
    c.sync([a, b]);
    await until(() => c.rendition(a) && c.rendition(b), 'both renditions');
    expect(c.usage().entries).toBe(2);
    c.sync([a]);
    expect(c.usage().entries).toBe(1);
    expect(filesIn(cacheDir('bounds'))).toHaveLength(1);
    expect(c.rendition(a)).not.toBeNull();
    c.forget('ep_a');
    expect(filesIn(cacheDir('bounds'))).toEqual([]);
    expect(c.usage()).toEqual({ entries: 0, bytes: 0 });
    c.close();
  }, 30_000);

  it('logs a failed build and does not retry it at once; a full disk builds nothing', async () => {
    const log = spyLog();
    const c = open('fail', log);
    const w = want('ep_broken', 'broken.mp3');
    expect(c.rendition(w)).toBeNull();
    await until(() => log.lines.find((l) => l.msg.includes('could not be built')), 'the failure');
    expect(c.rendition(w)).toBeNull();
    await new Promise((r) => setTimeout(r, 300)); // A fixed wait on purpose: the failed build is not retried at once.
    expect(log.lines.filter((l) => l.msg.includes('could not be built'))).toHaveLength(1);
    expect(filesIn(cacheDir('fail'))).toEqual([]);
    c.close();

    const full = spyLog();
    const f = open('full', full, { minFreeDiskBytes: Number.MAX_SAFE_INTEGER });
    expect(f.rendition(want('ep_a', 'a.mp3'))).toBeNull();
    const line = await until(() => full.lines.find((l) => l.msg.includes('could not be built')), 'the disk refusal');
    expect(String(line.f?.err)).toContain('disk full');
    expect(filesIn(cacheDir('full'))).toEqual([]);
    f.close();
  }, 30_000);
});

describe('FallbackSource with cached renditions', () => {
  it('plays a cached rendition paced in JS, with its title, and encodes an episode not cached yet', async () => {
    const c = open('source');
    const a = want('ep_a', 'a.mp3');
    c.rendition(a);
    await until(() => c.rendition(a), 'the rendition');
    const answered: Array<string | null> = [];
    const renditions = { rendition: (w: RenditionWant) => (answered.push(c.rendition(w)), answered.at(-1)!), unusable: (f: string) => c.unusable(f), prepare: () => {} };
    const plan: FallbackPlan = { items: [{ id: 'ep_a', path: a.path, title: 'A' }, { id: 'ep_b', path: path.join(dir, 'b.mp3'), title: 'B' }], order: 'sequential', silenceSeconds: null };
    const got: Array<{ ts: number; codec: string }> = [];
    const titles: string[] = [];
    const input: PublishInput = { audio: (ts, data, tag) => got.push({ ts, codec: (tag ?? readAudioTag(data)).codec }), live: () => {}, detach: () => {} };
    const src = new FallbackSource({ streamId: 'stm_test', ffmpeg, codec: 'aac', kbps: 128, format: STEREO_48K, plan: () => plan, title: (t) => titles.push(t), log: spyLog(), renditions });
    src.start(input);
    const from: string[] = [];
    await until(() => {
      const p = src.playing();
      if (p && from.at(-1) !== `${p.episodeId} ${p.from}`) from.push(`${p.episodeId} ${p.from}`);
      return titles.length >= 2;
    }, 'both titles', 15_000);
    src.close();
    expect(src.playing()).toBeNull();
    expect(from.slice(0, 2)).toEqual(['ep_a rendition', 'ep_b encode']);
    expect(titles.slice(0, 2)).toEqual(['A', 'B']);
    expect(answered[0]).toMatch(/ep_a\..*\.aac$/);
    expect(answered[1]).toBeNull(); // B is not cached yet: encoded, and its build queued
    expect(got.every((m) => m.codec === 'aac')).toBe(true);
    // A's rendition (1.5 s) played in real time, B continued on the same clock.
    expect(got.at(-1)!.ts).toBeGreaterThan(1400);
    for (let i = 1; i < got.length; i++) expect(got[i]!.ts).toBeGreaterThanOrEqual(got[i - 1]!.ts);
    await until(() => c.rendition(want('ep_b', 'b.mp3')), 'B built');
    c.close();
  }, 30_000);
});

describe('paceRendition', () => {
  it.each(['aac', 'mp3', 'opus'] as const)('hands a %s rendition on in real time, every message once, then ends', async (codec) => {
    const c = open(`pace-${codec}`);
    const w = want('ep_a', 'a.mp3', codec);
    c.rendition(w);
    const file = await until(() => c.rendition(w), 'the rendition');
    c.close();
    // What the parser makes of the whole file at once.
    let all = 0;
    new IcecastSource(codec, { maxFrameBytes: 65536 }).pushTo(readFileSync(file), { audio: () => void all++, event: () => {} });
    const got: number[] = [];
    let early = 0;
    let ended: string | null | undefined;
    const start = performance.now();
    paceRendition(file, codec, {
      audio: (ts) => {
        if (ts > performance.now() - start + 1) early++;
        got.push(ts);
      },
      end: (e) => (ended = e),
    });
    await until(() => ended !== undefined, 'the end', 10_000);
    expect(ended).toBeNull();
    expect(early).toBe(0); // never ahead of the clock
    expect(got.length).toBe(all);
    expect(got.at(-1)!).toBeGreaterThan(1400);
  }, 30_000);

  it('stops without an end; a file that is not audio ends with an error', async () => {
    const c = open('pace-stop');
    const w = want('ep_a', 'a.mp3');
    c.rendition(w);
    const file = await until(() => c.rendition(w), 'the rendition');
    c.close();
    let n = 0;
    let ended = false;
    const run = paceRendition(file, 'aac', { audio: () => void n++, end: () => (ended = true) });
    await until(() => n > 0, 'audio');
    run.stop();
    const at = n;
    await new Promise((r) => setTimeout(r, 300)); // A fixed wait on purpose: nothing more is paced after stop().
    expect(n).toBe(at);
    expect(ended).toBe(false);

    let error: string | null | undefined;
    writeFileSync(path.join(dir, 'zeros.aac'), Buffer.alloc(100_000));
    paceRendition(path.join(dir, 'zeros.aac'), 'aac', { audio: () => {}, end: (e) => (error = e) });
    await until(() => error !== undefined, 'the error', 10_000);
    expect(error).toBeTruthy();
  }, 30_000);
});
