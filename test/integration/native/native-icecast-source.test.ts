// IcecastSource (native addon, src/native/icecast-source.ts): Icecast source request bodies made by
// FFmpeg (test/fixtures/icecast) pushed in pieces through the JS wrapper into a real native
// Segmenter — MP3 and AAC into MPEG-TS, Opus into fMP4 — giving segments of the target duration on
// one unbroken timeline that ffprobe reads back frame for frame. Plus chained Ogg (tags per track,
// one timeline), codec_mismatch, the sticky error and the argument guards.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { IcecastSource, type IcecastCodec, type IcecastSourceEvent } from '../../../src/native/icecast-source.js';
import { Segmenter, type ConfigEvent, type SegmentDoneEvent, type SegmenterEvent } from '../../../src/native/segmenter.js';

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/icecast');
const read = (name: string) => fs.readFileSync(path.join(fixtures, name));
/** ffprobe's packet count of a fixture (its *.packets file). */
const packetCount = (name: string) => read(`${name}.packets`).toString().trim().split('\n').length;

const tmpDirs: string[] = [];
afterAll(() => {
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

/** Pushes `body` in pieces of 1..`maxPiece` bytes (a fixed pseudo-random sequence). */
function pieces(body: Buffer, maxPiece: number): Buffer[] {
  const out: Buffer[] = [];
  let seed = 12345;
  for (let at = 0; at < body.length; ) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    const n = 1 + (seed % maxPiece);
    out.push(body.subarray(at, at + n));
    at += n;
  }
  return out;
}

interface Fed {
  audio: Array<{ timestampMs: number; body: Buffer }>;
  events: IcecastSourceEvent[];
  seg: SegmenterEvent[];
}

/** The source's messages straight into a Segmenter, as ingest does with RTMP audio. */
function feed(codec: IcecastCodec, body: Buffer, maxPiece: number, container: 'ts' | 'fmp4', targetDurationMs = 500): Fed {
  const source = new IcecastSource(codec);
  const segmenter = new Segmenter({ container, targetDurationMs, expectCodec: codec });
  const fed: Fed = { audio: [], events: [], seg: [] };
  for (const piece of pieces(body, maxPiece)) {
    source.pushTo(piece, {
      audio: (timestampMs, b) => {
        fed.audio.push({ timestampMs, body: Buffer.from(b) });
        fed.seg.push(...segmenter.pushAudio(timestampMs, b));
      },
      event: (e) => fed.events.push(e),
    });
  }
  fed.seg.push(...segmenter.flush());
  return fed;
}

const segmentsOf = (ev: SegmenterEvent[]) => ev.filter((e): e is SegmentDoneEvent => e.type === 'segment');
const configsOf = (ev: SegmenterEvent[]) => ev.filter((e): e is ConfigEvent => e.type === 'config');

/** Codec and packet count of the segments concatenated (one TS, or init + fragments). */
function probe(fed: Fed, ext: 'ts' | 'mp4'): { codec: string; packets: number } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skylark-icecast-'));
  tmpDirs.push(dir);
  const file = path.join(dir, `all.${ext}`);
  const init = configsOf(fed.seg)[0]?.init;
  fs.writeFileSync(file, Buffer.concat([...(init ? [init] : []), ...segmentsOf(fed.seg).map((s) => s.data)]));
  const r = spawnSync('ffprobe', ['-v', 'error', '-count_packets', '-show_entries', 'stream=codec_name,nb_read_packets', '-of', 'json', file]);
  const stream = (JSON.parse(r.stdout.toString()) as { streams: Array<{ codec_name: string; nb_read_packets: string }> }).streams[0]!;
  return { codec: stream.codec_name, packets: Number(stream.nb_read_packets) };
}

/** Segments of `targetMs` (the last may be shorter), back to back on one timeline, no discontinuity. */
function expectSegments(fed: Fed, targetMs: number, frameMs: number, totalMs: number): void {
  const segs = segmentsOf(fed.seg);
  expect(fed.seg.filter((e) => e.type === 'error')).toEqual([]);
  expect(segs.length).toBeGreaterThanOrEqual(Math.floor(totalMs / targetMs));
  segs.forEach((s, i) => {
    expect(s.discontinuity).toBe(false);
    if (i < segs.length - 1) {
      expect(s.durationMs).toBeGreaterThanOrEqual(targetMs);
      expect(s.durationMs).toBeLessThan(targetMs + frameMs);
      expect(segs[i + 1]!.pts90k - s.pts90k).toBeCloseTo((s.durationMs * 90), -1);
    }
  });
  expect(segs.reduce((sum, s) => sum + s.durationMs, 0)).toBeCloseTo(totalMs, 3);
}

describe('IcecastSource → Segmenter', () => {
  it('MP3 (ID3v2 + Info frame first): 500 ms TS segments, every frame in them', () => {
    const name = 'mp3_44k1_stereo_128k.mp3';
    const frames = packetCount(name);
    const fed = feed('mp3', read(name), 700, 'ts');
    expect(fed.events).toEqual([]);
    expect(fed.audio).toHaveLength(frames);
    expect(fed.audio[0]!.body[0]).toBe(0x2f);
    expect(fed.audio.map((a) => a.timestampMs).slice(0, 4)).toEqual([0, 26, 52, 78]);
    expect(configsOf(fed.seg)).toMatchObject([{ codec: 'mp3', sampleRate: 44100, channels: 2 }]);
    expectSegments(fed, 500, 1152 / 44.1, (frames * 1152 * 1000) / 44100);
    expect(probe(fed, 'ts')).toEqual({ codec: 'mp3', packets: frames });
  });

  it('AAC (ADTS): a sequence header, then 500 ms TS segments of every frame', () => {
    const name = 'aac_48k_stereo_96k.aac';
    const frames = packetCount(name);
    const fed = feed('aac', read(name), 300, 'ts');
    expect(fed.events).toEqual([]);
    expect(fed.audio).toHaveLength(frames + 1);
    expect([...fed.audio[0]!.body]).toEqual([0xaf, 0x00, 0x11, 0x90]);
    expect(configsOf(fed.seg)).toMatchObject([{ codec: 'aac', codecs: 'mp4a.40.2', sampleRate: 48000, channels: 2 }]);
    expectSegments(fed, 500, 1024 / 48, (frames * 1024 * 1000) / 48000);
    expect(probe(fed, 'ts')).toEqual({ codec: 'aac', packets: frames });
  });

  it('Opus (Ogg): SequenceStart, OpusTags as an event, 500 ms fMP4 segments of every packet', () => {
    const name = 'opus_48k_stereo_64k.ogg';
    const packets = packetCount(name);
    const fed = feed('opus', read(name), 1000, 'fmp4');
    expect(fed.events).toEqual([
      { type: 'tags', timestampMs: 0, vendor: 'Lavf59.27.100', comments: ['encoder=Lavc59.37.100 libopus', 'title=First Song', 'artist=Some Artist'], truncated: false },
    ]);
    expect(fed.audio).toHaveLength(packets + 1);
    expect(fed.audio[0]!.body.subarray(0, 13).toString('latin1')).toBe('\x90OpusOpusHead');
    expect(configsOf(fed.seg)).toMatchObject([{ codec: 'opus', sampleRate: 48000, channels: 2 }]);
    expectSegments(fed, 500, 20, packets * 20);
    expect(probe(fed, 'mp4')).toEqual({ codec: 'opus', packets });
  });

  it('chained Ogg Opus (a track change): one timeline, one config, the tags of each track', () => {
    const a = 'opus_48k_stereo_64k.ogg';
    const b = 'opus_48k_stereo_64k_b.ogg';
    const total = packetCount(a) + packetCount(b);
    const source = new IcecastSource('opus');
    const fed = feed('opus', Buffer.concat([read(a), read(b)]), 4000, 'fmp4');
    expect(fed.events.map((e) => (e.type === 'tags' ? [e.timestampMs, e.comments[1]] : e))).toEqual([
      [0, 'title=First Song'],
      [packetCount(a) * 20, 'title=Second Song'],
    ]);
    expect(configsOf(fed.seg)).toHaveLength(1);
    expectSegments(fed, 500, 20, total * 20);
    expect(probe(fed, 'mp4')).toEqual({ codec: 'opus', packets: total });
    source.push(read(b));
    expect(source.tags?.comments).toContain('artist=Other Artist');
    expect(source.stats).toMatchObject({ chainedStreams: 0, badCrcPages: 0, messages: packetCount(b) + 1 });
  });

  it('whole, in pieces or byte by byte: the same messages', () => {
    for (const [codec, name] of [['mp3', 'mp3_22k05_mono_32k.mp3'], ['aac', 'aac_44k1_mono_48k.aac'], ['opus', 'opus_48k_mono_32k.ogg']] as const) {
      const body = read(name);
      const whole = new IcecastSource(codec).push(body);
      const bytewise = new IcecastSource(codec);
      const out = [...body].flatMap((_, i) => bytewise.push(body.subarray(i, i + 1)));
      expect(out).toEqual(whole);
      expect(whole.length).toBeGreaterThan(5);
      expect(bytewise.retainedBytes).toBeLessThan(64 * 1024);
    }
  });
});

describe('IcecastSource errors', () => {
  it('another codec is codec_mismatch naming what was sent; the error is sticky', () => {
    const s = new IcecastSource('opus');
    expect(s.push(read('vorbis_44k1_stereo.ogg'))).toEqual([
      { type: 'error', code: 'codec_mismatch', message: 'the source sends Ogg vorbis, the stream takes opus', expected: 'opus', received: 'vorbis' },
    ]);
    expect(s.failed).toBe(true);
    expect(s.push(read('opus_48k_mono_32k.ogg'))).toEqual([]);
    expect(new IcecastSource('aac').push(read('mp3_44k1_stereo_128k.mp3'))).toMatchObject([{ type: 'error', code: 'codec_mismatch', received: 'mp3' }]);
    expect(new IcecastSource('mp3').push(read('mp2_44k1_stereo.mp2'))).toMatchObject([{ type: 'error', code: 'codec_mismatch', received: 'mp2' }]);
  });

  it('garbage is no_sync after 64 KiB; a packet over maxFrameBytes is frame_too_large', () => {
    const s = new IcecastSource('mp3');
    const garbage = Buffer.alloc(100 * 1024, 0x42);
    const events = s.push(garbage);
    expect(events).toMatchObject([{ type: 'error', code: 'no_sync' }]);
    expect(s.stats.junkBytes).toBe(64 * 1024 + 1);
    expect(s.retainedBytes).toBe(0);
    // 1024 bytes: every MP3 frame of this fixture fits (≤ 418 bytes) ...
    expect(new IcecastSource('mp3', { maxFrameBytes: 1024 }).push(read('mp3_44k1_stereo_128k.mp3')).some((e) => e.type === 'error')).toBe(false);
  });

  it('argument guards throw TypeError', () => {
    expect(() => new IcecastSource('flac' as IcecastCodec)).toThrow(TypeError);
    expect(() => new IcecastSource('mp3', { maxFrameBytes: 100 })).toThrow(/maxFrameBytes/);
    expect(() => new IcecastSource('mp3', { maxFrameBytes: 2048.5 })).toThrow(TypeError);
    const s = new IcecastSource('aac');
    expect(() => s.push('abc' as unknown as Uint8Array)).toThrow(/Uint8Array/);
    const body = read('aac_48k_stereo_96k.aac');
    expect(() => s.pushTo(body, { audio: () => s.push(body), event: () => {} })).toThrow(/re-entrant/);
  });
});
