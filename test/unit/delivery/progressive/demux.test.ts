// Reading our own HLS output back (src/delivery/progressive/fmp4-read.ts, src/delivery/progressive/ts-read.ts): the native
// Segmenter is fed the fixtures (AAC and MP3 from FLV, Opus as E-RTMP tags from Ogg), and every
// frame comes back byte for byte from its parts, its segments and its init section.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Segmenter, type ConfigEvent, type PartEvent, type SegmentDoneEvent, type SegmenterEvent, type SegmenterOptions } from '../../../../src/native/segmenter.js';
import { FlvReader } from '../../../../src/live/media/flv.js';
import { Mp4ReadError, opusHeadFromDops, readFragments, readInit } from '../../../../src/delivery/progressive/fmp4-read.js';
import { TsReadError, readTsAudio } from '../../../../src/delivery/progressive/ts-read.js';
import { opusTagsFromOgg, oggPackets } from '../../../helpers/ogg.js';

const fixtures = path.resolve(import.meta.dirname, '../../../fixtures');
const flvTags = (file: string) => new FlvReader().push(fs.readFileSync(path.join(fixtures, file))).map((t) => ({ timestamp: t.timestampMs, body: t.body }));

function run(tags: Array<{ timestamp: number; body: Buffer }>, opts: SegmenterOptions): SegmenterEvent[] {
  const s = new Segmenter(opts);
  const ev: SegmenterEvent[] = [];
  for (const t of tags) ev.push(...s.pushAudio(t.timestamp, t.body));
  ev.push(...s.flush());
  expect(ev.filter((e) => e.type === 'error')).toEqual([]);
  return ev;
}
const parts = (ev: SegmenterEvent[]) => ev.filter((e): e is PartEvent => e.type === 'part');
const segments = (ev: SegmenterEvent[]) => ev.filter((e): e is SegmentDoneEvent => e.type === 'segment');
const config = (ev: SegmenterEvent[]) => ev.find((e): e is ConfigEvent => e.type === 'config')!;
const samplesOf = (units: Buffer[], trackId?: number) =>
  units.flatMap((u) => readFragments(u, trackId).map((s) => ({ bytes: u.subarray(s.offset, s.offset + s.size), duration: s.duration })));

describe('fMP4 read-back', () => {
  for (const file of ['aac/sine48k_stereo_128k.flv', 'aac/sine44k1_mono_64k.flv']) {
    it(`AAC ${file}: init → AudioSpecificConfig and timescale; parts and segments → every raw frame`, () => {
      const tags = flvTags(file);
      const frames = tags.filter((t) => t.body[1] === 1).map((t) => t.body.subarray(2));
      const asc = tags.find((t) => t.body[1] === 0)!.body.subarray(2);
      const ev = run(tags, { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'aac' });
      const c = config(ev);
      const track = readInit(c.init!);
      expect(track).toMatchObject({ codec: 'aac', format: 'mp4a', timescale: c.sampleRate, channels: c.channels, sampleRate: c.sampleRate });
      expect(Buffer.from(track.asc!)).toEqual(Buffer.from(asc));
      for (const units of [parts(ev).map((p) => p.data), segments(ev).map((s) => s.data)]) {
        const got = samplesOf(units, track.trackId);
        expect(got.length).toBe(frames.length);
        got.forEach((s, i) => {
          expect(s.duration).toBe(1024);
          expect(Buffer.from(s.bytes).equals(frames[i]!)).toBe(true);
        });
      }
      // Classic (no parts): one moof per segment.
      const classic = run(tags, { container: 'fmp4', targetDurationMs: 2000, expectCodec: 'aac' });
      expect(Buffer.concat(samplesOf(segments(classic).map((s) => s.data)).map((s) => s.bytes))).toEqual(Buffer.concat(frames));
    });
  }

  it('Opus: init → dOps as the original OpusHead; every packet back with its duration', () => {
    const ogg = fs.readFileSync(path.join(fixtures, 'opus/sine48k_stereo_128k.ogg'));
    const { tags } = opusTagsFromOgg(ogg);
    const [head, , ...packets] = oggPackets(ogg);
    const ev = run(tags, { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'opus' });
    const track = readInit(config(ev).init!);
    expect(track).toMatchObject({ codec: 'opus', format: 'Opus', timescale: 48000 });
    expect(opusHeadFromDops(track.dops!)).toEqual(head);
    const got = samplesOf(parts(ev).map((p) => p.data));
    expect(got.length).toBe(packets.length);
    got.forEach((s, i) => {
      expect(Buffer.from(s.bytes).equals(packets[i]!)).toBe(true);
      expect(s.duration).toBe(960);
    });
  });

  it('MP3 in fMP4: the init names mp3; frames come back concatenated as sent', () => {
    const tags = flvTags('mp3/sine44k1_stereo_128k.flv');
    const ev = run(tags, { container: 'fmp4', targetDurationMs: 2000, expectCodec: 'mp3' });
    expect(readInit(config(ev).init!).codec).toBe('mp3');
    const got = samplesOf(segments(ev).map((s) => s.data));
    expect(Buffer.concat(got.map((s) => s.bytes))).toEqual(Buffer.concat(tags.map((t) => t.body.subarray(1))));
  });

  it('refuses malformed input with Mp4ReadError, never reads outside the buffer', () => {
    const ev = run(flvTags('aac/sine48k_stereo_128k.flv'), { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'aac' });
    const part = parts(ev)[0]!.data;
    expect(() => readFragments(part.subarray(0, part.length - 10))).toThrow(Mp4ReadError);
    expect(() => readFragments(part.subarray(0, 30))).toThrow(Mp4ReadError);
    expect(() => readInit(Buffer.from('garbage!garbage!'))).toThrow(Mp4ReadError);
    const init = Buffer.from(config(ev).init!);
    expect(() => readInit(init.subarray(0, init.length - 20))).toThrow(Mp4ReadError);
    // Every truncation of a part either reads a prefix of its samples or throws Mp4ReadError.
    for (let n = 0; n < part.length; n += 7) {
      try {
        for (const s of readFragments(part.subarray(0, n))) expect(s.offset + s.size).toBeLessThanOrEqual(n);
      } catch (e) {
        expect(e).toBeInstanceOf(Mp4ReadError);
      }
    }
  });

  it('refuses a trun that lists more samples than the fragment has bytes (no unbounded sample list)', () => {
    const box = (type: string, ...body: Buffer[]) => {
      const b = Buffer.concat(body);
      const h = Buffer.alloc(8);
      h.writeUInt32BE(8 + b.length, 0);
      h.write(type, 4, 'latin1');
      return Buffer.concat([h, b]);
    };
    const u32 = (...v: number[]) => Buffer.concat(v.map((x) => Buffer.from([x >>> 24, (x >>> 16) & 0xff, (x >>> 8) & 0xff, x & 0xff])));
    // tfhd: no defaults (samples of 0 bytes); trun: no per-sample fields, 2^23 samples.
    const frag = (count: number) => box('moof', box('traf', box('tfhd', u32(0, 1)), box('trun', u32(0, count))));
    expect(readFragments(frag(3))).toHaveLength(3);
    expect(() => readFragments(frag(0x800000))).toThrow(/more samples than the \d+-byte fragment has bytes/);
  });
});

describe('MPEG-TS read-back', () => {
  for (const file of ['mp3/sine44k1_stereo_128k.flv', 'mp3/sine22k05_mono_32k.flv']) {
    it(`MP3 ${file}: the audio PES payloads are the frames as sent, PTS on the 90 kHz clock`, () => {
      const tags = flvTags(file);
      const ev = run(tags, { container: 'ts', targetDurationMs: 2000, expectCodec: 'mp3' });
      const segs = segments(ev);
      const out: Uint8Array[] = [];
      for (const s of segs) {
        const a = readTsAudio(s.data);
        expect([0x03, 0x04]).toContain(a.streamType);
        expect(a.pes.length).toBeGreaterThan(1);
        for (const pes of a.pes) {
          expect(pes.pts).not.toBeNull();
          expect(pes.bytes).toBe(pes.payload.reduce((n, v) => n + v.length, 0));
          out.push(...pes.payload);
        }
        const pts = a.pes.map((p) => p.pts!);
        for (let i = 1; i < pts.length; i++) expect(pts[i]!).toBeGreaterThan(pts[i - 1]!);
      }
      expect(Buffer.concat(out)).toEqual(Buffer.concat(tags.map((t) => t.body.subarray(1))));
    });
  }

  it('AAC in TS: ADTS frames come back as written', () => {
    const tags = flvTags('aac/sine48k_stereo_128k.flv');
    const ev = run(tags, { container: 'ts', targetDurationMs: 2000, expectCodec: 'aac' });
    const a = readTsAudio(segments(ev)[0]!.data);
    expect(a.streamType).toBe(0x0f);
    const es = Buffer.concat(a.pes.flatMap((p) => p.payload));
    expect(es.readUInt16BE(0) & 0xfff6).toBe(0xfff0); // ADTS sync
  });

  it('refuses what is not a TS segment with TsReadError', () => {
    expect(() => readTsAudio(Buffer.alloc(100))).toThrow(TsReadError);
    expect(() => readTsAudio(Buffer.alloc(188))).toThrow(TsReadError);
    const b = Buffer.alloc(188);
    b[0] = 0x47;
    expect(() => readTsAudio(b)).toThrow(/no PAT/);
  });
});
