// Segmenter (native addon): every ingest codec into every container it supports, checked with
// ffmpeg/ffprobe on real media made by FFmpeg: AAC → fMP4, MP3 → TS and fMP4, Opus (E-RTMP tags
// built from Ogg Opus, test/helpers/ogg.ts) → fMP4, and LL-HLS parts (decodable one after the other;
// concatenated == segment). Plus the option guards and the codec_mismatch event.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { Segmenter, type ConfigEvent, type PartEvent, type SegmentDoneEvent, type SegmenterEvent, type SegmenterOptions } from '../../../src/native/segmenter.js';
import { exAudioTag, opusTagsFromOgg, type Tag } from '../../helpers/ogg.js';

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures');
const AAC_48K = path.join(fixtures, 'aac/sine48k_stereo_128k.flv');
const MP3_44K = path.join(fixtures, 'mp3/sine44k1_stereo_128k.flv');
const MP3_22K = path.join(fixtures, 'mp3/sine22k05_mono_32k.flv');
const OPUS_OGG = path.join(fixtures, 'opus/sine48k_stereo_128k.ogg');

/** The FLV's audio tags as (timestamp ms, AUDIODATA body). */
function readFlvAudio(file: string): Tag[] {
  const b = fs.readFileSync(file);
  const tags: Tag[] = [];
  let off = b.readUInt32BE(5) + 4;
  while (off + 11 <= b.length) {
    const size = b.readUIntBE(off + 1, 3);
    const timestamp = (b.readUIntBE(off + 4, 3) | (b[off + 7]! << 24)) >>> 0;
    if (off + 11 + size > b.length) break;
    if (b[off] === 8) tags.push({ timestamp, body: b.subarray(off + 11, off + 11 + size) });
    off += 11 + size + 4;
  }
  return tags;
}

function run(tags: Tag[], opts: SegmenterOptions): SegmenterEvent[] {
  const s = new Segmenter(opts);
  const ev: SegmenterEvent[] = [];
  for (const t of tags) ev.push(...s.pushAudio(t.timestamp, t.body));
  ev.push(...s.flush());
  return ev;
}
const configsOf = (ev: SegmenterEvent[]) => ev.filter((e): e is ConfigEvent => e.type === 'config');
const segmentsOf = (ev: SegmenterEvent[]) => ev.filter((e): e is SegmentDoneEvent => e.type === 'segment');
const partsOf = (ev: SegmenterEvent[]) => ev.filter((e): e is PartEvent => e.type === 'part');

function tool(cmd: string, args: string[]): { status: number | null; stdout: Buffer; stderr: string } {
  const r = spawnSync(cmd, args, { maxBuffer: 256 << 20 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr.toString() };
}

const tmpDirs: string[] = [];
afterAll(() => { for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true }); });

interface Media { name: string; data: Buffer; durationMs: number; discontinuity?: boolean }

/** Writes media files and a VOD media playlist (RFC 8216; fMP4 with EXT-X-MAP, version 7). */
function writeHls(items: Media[], init?: Buffer): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skylark-seg-'));
  tmpDirs.push(dir);
  const target = Math.max(1, ...items.map((s) => Math.round(s.durationMs / 1000)));
  const lines = ['#EXTM3U', `#EXT-X-VERSION:${init ? 7 : 3}`, `#EXT-X-TARGETDURATION:${target}`, '#EXT-X-MEDIA-SEQUENCE:0'];
  if (init) {
    fs.writeFileSync(path.join(dir, 'init.mp4'), init);
    lines.push('#EXT-X-MAP:URI="init.mp4"');
  }
  for (const s of items) {
    fs.writeFileSync(path.join(dir, s.name), s.data);
    if (s.discontinuity) lines.push('#EXT-X-DISCONTINUITY');
    lines.push(`#EXTINF:${(s.durationMs / 1000).toFixed(6)},`, s.name);
  }
  lines.push('#EXT-X-ENDLIST', '');
  fs.writeFileSync(path.join(dir, 'playlist.m3u8'), lines.join('\n'));
  return path.join(dir, 'playlist.m3u8');
}

function segmentMedia(segs: SegmentDoneEvent[], ext: string): Media[] {
  return segs.map((s) => ({ name: `seg${s.sequence}.${ext}`, data: s.data, durationMs: s.durationMs, discontinuity: s.discontinuity }));
}

/** Decodes a playlist to mono s16 at `rate`; returns seconds decoded (and asserts no errors). */
function decodedSeconds(playlist: string, rate: number): number {
  const dec = tool('ffmpeg', ['-v', 'error', '-i', playlist, '-f', 's16le', '-ac', '1', '-ar', String(rate), '-']);
  expect(dec.stderr).toBe('');
  expect(dec.status).toBe(0);
  return dec.stdout.length / 2 / rate;
}

interface ProbeStream { codec_type: string; codec_name: string; sample_rate: string; channels: number }
function probeStreams(file: string): ProbeStream[] {
  const r = tool('ffprobe', ['-v', 'error', '-show_streams', '-of', 'json', file]);
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return (JSON.parse(r.stdout.toString()) as { streams: ProbeStream[] }).streams;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('Segmenter: AAC → fMP4', () => {
  const tags = readFlvAudio(AAC_48K);
  const frames = tags.filter((t) => t.body[1] === 1).length;
  const ev = run(tags, { container: 'fmp4', targetDurationMs: 2000 });
  const segs = segmentsOf(ev);
  const [config] = configsOf(ev);

  it('emits config with the init segment, then segments with tfdt on the sample clock', () => {
    expect(ev.filter((e) => e.type === 'error')).toEqual([]);
    expect(config).toMatchObject({ type: 'config', codec: 'aac', codecs: 'mp4a.40.2', sampleRate: 48000, channels: 2, timescale: 48000 });
    expect(Buffer.isBuffer(config!.init)).toBe(true);
    expect(config!.init!.toString('latin1', 4, 12)).toBe('ftypiso6');
    expect(sum(segs.map((s) => s.frames))).toBe(frames);
    segs.forEach((s, i) => {
      expect(s).toMatchObject({ sequence: i, independent: true, timescale: 48000, discontinuity: false });
      expect(s.data.toString('latin1', 4, 8)).toBe('moof');
      if (i > 0) expect(s.baseMediaDecodeTime).toBe(segs[i - 1]!.baseMediaDecodeTime! + segs[i - 1]!.frames * 1024);
    });
  });

  it('plays as an fMP4 HLS playlist: ffmpeg decodes the full duration, ffprobe sees one AAC stream', () => {
    const playlist = writeHls(segmentMedia(segs, 'm4s'), config!.init);
    expect(Math.abs(decodedSeconds(playlist, 48000) - (frames * 1024) / 48000)).toBeLessThanOrEqual(0.1);
    const streams = probeStreams(playlist);
    expect(streams).toHaveLength(1);
    expect(streams[0]).toMatchObject({ codec_type: 'audio', codec_name: 'aac', sample_rate: '48000', channels: 2 });
  });
});

describe('Segmenter: MP3 → TS and fMP4', () => {
  for (const [file, rate, spf, channels] of [[MP3_44K, 44100, 1152, 2], [MP3_22K, 22050, 576, 1]] as const) {
    const tags = readFlvAudio(file);
    const srcSec = Number(tool('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file]).stdout.toString());
    for (const container of ['ts', 'fmp4'] as const) {
      it(`${path.basename(file)} → ${container}: config, ffprobe one mp3 stream (ts: + the timed ID3 stream), full duration decoded`, () => {
        const ev = run(tags, { container, targetDurationMs: 2000, expectCodec: 'mp3' });
        expect(ev.filter((e) => e.type === 'error')).toEqual([]);
        const [config] = configsOf(ev);
        expect(config).toMatchObject({ codec: 'mp3', codecs: 'mp4a.40.34', sampleRate: rate, channels });
        expect(config!.init === undefined).toBe(container === 'ts');
        const segs = segmentsOf(ev);
        expect(sum(segs.map((s) => s.frames))).toBe(tags.length);
        for (const s of segs.slice(0, -1)) expect(Math.abs(s.durationMs - 2000)).toBeLessThan((spf * 1000) / rate);
        const playlist = writeHls(segmentMedia(segs, container === 'ts' ? 'ts' : 'm4s'), config!.init);
        const streams = probeStreams(playlist);
        expect(streams).toHaveLength(container === 'ts' ? 2 : 1); // TS: the PMT declares timed ID3 (segmenter-metadata.test.ts)
        expect(streams[0]).toMatchObject({ codec_type: 'audio', codec_name: 'mp3', sample_rate: String(rate), channels });
        if (container === 'ts') expect(streams[1]).toMatchObject({ codec_type: 'data', codec_name: 'timed_id3' });
        const sec = decodedSeconds(playlist, rate);
        expect(Math.abs(sec - (tags.length * spf) / rate)).toBeLessThanOrEqual(0.1);
        expect(Math.abs(sec - srcSec)).toBeLessThanOrEqual(0.1);
      });
    }
  }
});

describe('Segmenter: Opus (E-RTMP) → fMP4', () => {
  const { tags, samples, preSkip } = opusTagsFromOgg(fs.readFileSync(OPUS_OGG));
  const ev = run(tags, { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'opus' });
  const segs = segmentsOf(ev);
  const [config] = configsOf(ev);

  it('emits an Opus config (48 kHz, dOps init) and 2 s segments of 20 ms packets', () => {
    expect(ev.filter((e) => e.type === 'error')).toEqual([]);
    expect(config).toMatchObject({ codec: 'opus', codecs: 'opus', sampleRate: 48000, channels: 1, timescale: 48000 });
    expect(config!.init!.includes(Buffer.from('dOps'))).toBe(true);
    expect(preSkip).toBe(312);
    expect(segs[0]).toMatchObject({ durationMs: 2000, frames: 100, parts: 4 });
    expect(sum(segs.map((s) => s.durationMs))).toBeCloseTo((samples * 1000) / 48000, 6);
  });

  it('plays: ffmpeg decodes the playlist at the right duration; ffprobe shows opus 48000 Hz', () => {
    const playlist = writeHls(segmentMedia(segs, 'm4s'), config!.init);
    const streams = probeStreams(playlist);
    expect(streams).toHaveLength(1);
    expect(streams[0]).toMatchObject({ codec_type: 'audio', codec_name: 'opus', sample_rate: '48000', channels: 1 });
    const srcSec = decodedSeconds(OPUS_OGG, 48000);  // the Ogg file itself, pre-skip trimmed
    const sec = decodedSeconds(playlist, 48000);
    expect(Math.abs(sec - srcSec)).toBeLessThanOrEqual(0.1);
    expect(Math.abs(sec - (samples - preSkip) / 48000)).toBeLessThanOrEqual(0.1);
  });
});

describe('Segmenter: LL-HLS parts', () => {
  const tags = readFlvAudio(AAC_48K);
  const ev = run(tags, { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500 });
  const parts = partsOf(ev);
  const segs = segmentsOf(ev);
  const [config] = configsOf(ev);

  it('emits parts before their segment; concatenated parts == segment bytes', () => {
    expect(ev.filter((e) => e.type === 'error')).toEqual([]);
    let open: Buffer[] = [];
    let index = 0;
    for (const e of ev) {
      if (e.type === 'part') {
        expect(e).toMatchObject({ partIndex: index++, independent: true, timescale: 48000 });
        expect(e.durationMs).toBeLessThanOrEqual(512 + 1e-9);
        open.push(e.data);
      } else if (e.type === 'segment') {
        expect(Buffer.concat(open).equals(e.data)).toBe(true);
        expect(e.parts).toBe(open.length);
        expect(parts.filter((p) => p.sequence === e.sequence)).toHaveLength(open.length);
        open = [];
        index = 0;
      }
    }
    expect(parts.length).toBeGreaterThanOrEqual(segs.length * 3);
    for (let i = 1; i < parts.length; i++)
      expect(parts[i]!.baseMediaDecodeTime).toBe(parts[i - 1]!.baseMediaDecodeTime + parts[i - 1]!.frames * 1024);
  });

  it('every part is decodable in sequence (parts as a playlist: full duration, no errors)', () => {
    const items = parts.map((p, i) => ({ name: `part${i}.m4s`, data: p.data, durationMs: p.durationMs }));
    const playlist = writeHls(items, config!.init);
    const frames = tags.filter((t) => t.body[1] === 1).length;
    expect(Math.abs(decodedSeconds(playlist, 48000) - (frames * 1024) / 48000)).toBeLessThanOrEqual(0.1);
    // A single part on its own (a player joining at a part boundary).
    const one = writeHls([{ name: 'p.m4s', data: parts[5]!.data, durationMs: parts[5]!.durationMs }], config!.init);
    expect(Math.abs(decodedSeconds(one, 48000) - parts[5]!.durationMs / 1000)).toBeLessThanOrEqual(0.03);
  });
});

describe('Segmenter API', () => {
  it('validates options with TypeError', () => {
    const bad: unknown[] = [
      undefined, {}, { container: 'mp4' }, { container: 'ts', partTargetMs: 500 },
      { container: 'ts', expectCodec: 'opus' }, { container: 'fmp4', expectCodec: 'flac' },
      { container: 'fmp4', targetDurationMs: 50 }, { container: 'fmp4', partTargetMs: 10 },
      { container: 'fmp4', targetDurationMs: 1000, partTargetMs: 1500 }, { container: 'fmp4', partTargetMs: 1.5 },
    ];
    for (const o of bad) expect(() => new Segmenter(o as SegmenterOptions), JSON.stringify(o)).toThrow(TypeError);
    expect(() => new Segmenter({ container: 'fmp4', partTargetMs: 0, expectCodec: 'opus' })).not.toThrow();
    const s = new Segmenter({ container: 'ts' });
    expect(() => s.pushAudio(0, 'x' as unknown as Uint8Array)).toThrow(TypeError);
    expect(() => s.pushAudio(Number.NaN, new Uint8Array(1))).toThrow(TypeError);
  });

  it('refuses other codecs with codec_mismatch (expected, received) and keeps going', () => {
    const s = new Segmenter({ container: 'fmp4', expectCodec: 'opus' });
    const aacSeq = Buffer.from([0xaf, 0x00, 0x11, 0x90]);
    expect(s.pushAudio(0, aacSeq)).toEqual([
      { type: 'error', code: 'codec_mismatch', message: expect.any(String), expected: 'opus', received: 'aac' },
    ]);
    expect(s.pushAudio(0, Buffer.from([0x2f, 0xff, 0xfb, 0x90, 0x64]))[0]).toMatchObject({ code: 'codec_mismatch', received: 'mp3' });
    expect(s.pushAudio(0, exAudioTag(1, 'Opus', Buffer.from([0xfc]))))
      .toEqual([{ type: 'error', code: 'audio_before_sequence_header', message: expect.any(String) }]);
    const head = Buffer.from('4f707573486561640101380180bb0000000000', 'hex');
    expect(s.pushAudio(0, exAudioTag(0, 'Opus', head))[0]).toMatchObject({ type: 'config', codec: 'opus' });
    expect(s.pushAudio(0, exAudioTag(0, 'Opus', head.subarray(0, 10)))[0]).toMatchObject({ code: 'bad_opus_head' });
    expect(new Segmenter({ container: 'ts' }).pushAudio(0, exAudioTag(0, 'Opus', head))[0]).toMatchObject({ code: 'unsupported_codec' });
  });
});
