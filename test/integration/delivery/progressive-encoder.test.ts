// Listening formats from a layer's HLS output (src/delivery/progressive/encoder.ts): the native Segmenter
// is fed the fixtures; its parts/segments become ADTS, MP3 frames or Ogg Opus chunks that start
// on frame/page boundaries, carry every frame byte for byte, and decode with FFmpeg from the first
// chunk and from one in the middle (a listener joining late).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { Segmenter, type ConfigEvent, type SegmenterEvent, type SegmenterOptions } from '../../../src/native/segmenter.js';
import { FlvReader } from '../../../src/live/media/flv.js';
import { CHUNK_MS, ListenEncoder, type ListenChunk } from '../../../src/delivery/progressive/encoder.js';
import { OggReader, opusPacketSamples } from '../../../src/live/media/ogg.js';
import { opusTagsFromOgg, oggPackets } from '../../helpers/ogg.js';

const fixtures = path.resolve(import.meta.dirname, '../../fixtures');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'skylark-listen-enc-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const flvTags = (file: string) => new FlvReader().push(fs.readFileSync(path.join(fixtures, file))).map((t) => ({ timestamp: t.timestampMs, body: t.body }));

/** Segmenter output as the layer hands it out: parts (with parts) or segments, and the init. */
function units(tags: Array<{ timestamp: number; body: Buffer }>, o: SegmenterOptions) {
  const s = new Segmenter(o);
  const ev: SegmenterEvent[] = [];
  for (const t of tags) ev.push(...s.pushAudio(t.timestamp, t.body));
  ev.push(...s.flush());
  const init = ev.find((e): e is ConfigEvent => e.type === 'config')?.init ?? null;
  const kind = o.partTargetMs ? 'part' : 'segment';
  const media = ev.flatMap((e) => (e.type === kind ? [{ data: e.data, durationMs: e.durationMs, initVersion: 1 }] : []));
  return { init, media };
}

function encodeAll(enc: ListenEncoder, u: ReturnType<typeof units>): ListenChunk[] {
  return u.media.flatMap((m) => enc.encode(m, u.init, 1));
}

/** Decodes a file with FFmpeg: seconds of audio (48 kHz mono s16) and stderr. */
function decode(file: string): { seconds: number; stderr: string; status: number | null } {
  const r = spawnSync('ffmpeg', ['-v', 'error', '-i', file, '-f', 's16le', '-ac', '1', '-ar', '48000', '-'], { maxBuffer: 64 << 20 });
  return { seconds: r.stdout.length / 2 / 48000, stderr: r.stderr.toString(), status: r.status };
}

function write(name: string, ...parts: Buffer[]): string {
  const f = path.join(tmp, name);
  fs.writeFileSync(f, Buffer.concat(parts));
  return f;
}

/** The ADTS frames of a byte stream: raw payloads; throws on a broken header. */
function adtsFrames(b: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let o = 0; o < b.length; ) {
    expect(b[o]).toBe(0xff);
    expect(b[o + 1]! & 0xf6).toBe(0xf0);
    const len = ((b[o + 3]! & 3) << 11) | (b[o + 4]! << 3) | (b[o + 5]! >> 5);
    out.push(b.subarray(o + 7, o + len));
    o += len;
  }
  return out;
}

describe('ListenEncoder', () => {
  it('AAC (fMP4 parts) → ADTS: every raw frame back, chunks of ~0.5 s on frame boundaries, one buffer per part', () => {
    const tags = flvTags('aac/sine48k_stereo_128k.flv');
    const frames = tags.filter((t) => t.body[1] === 1).map((t) => t.body.subarray(2));
    const u = units(tags, { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'aac' });
    const enc = new ListenEncoder('fmp4');
    const perPart = u.media.map((m) => enc.encode(m, u.init, 1));
    for (const cs of perPart) {
      expect(new Set(cs.map((c) => c.data.buffer)).size).toBe(1); // views of one Buffer
      for (const c of cs) expect(c.header.length).toBe(0);
    }
    const chunks = perPart.flat();
    for (const c of chunks) expect([c.data[0], c.data[1]! & 0xf6]).toEqual([0xff, 0xf0]);
    // One chunk per part (a part that closes its segment may be shorter), never longer than a part.
    expect(chunks.length).toBe(u.media.length);
    for (const c of chunks) expect(c.ms).toBeLessThanOrEqual(CHUNK_MS + 1024 / 48 + 1e-6);
    const all = Buffer.concat(chunks.map((c) => c.data));
    expect(adtsFrames(all)).toEqual(frames);
    expect(chunks.reduce((n, c) => n + c.ms, 0)).toBeCloseTo((frames.length * 1024 * 1000) / 48000, 3);
    const whole = decode(write('a.aac', all));
    expect(whole.stderr).toBe('');
    expect(whole.seconds).toBeCloseTo((frames.length * 1024) / 48000, 1);
    const mid = decode(write('mid.aac', ...chunks.slice(7).map((c) => c.data)));
    expect(mid.stderr).toBe('');
    expect(mid.status).toBe(0);
  });

  it('AAC classic segments (2 s, one moof) are cut into ~0.5 s chunks', () => {
    const u = units(flvTags('aac/sine44k1_mono_64k.flv'), { container: 'fmp4', targetDurationMs: 2000, expectCodec: 'aac' });
    const cs = new ListenEncoder('fmp4').encode(u.media[0]!, u.init, 1);
    expect(cs.length).toBe(4);
    for (const c of cs) expect(c.ms).toBeGreaterThan(400);
    expect(decode(write('b.aac', ...cs.map((c) => c.data))).stderr).toBe('');
  });

  it('MP3 (TS segments) → the frames as sent, chunks starting on PES (frame) boundaries', () => {
    const tags = flvTags('mp3/sine44k1_stereo_128k.flv');
    const u = units(tags, { container: 'ts', targetDurationMs: 2000, expectCodec: 'mp3' });
    const chunks = encodeAll(new ListenEncoder('ts'), u);
    for (const c of chunks) expect([c.data[0], c.data[1]! & 0xe0]).toEqual([0xff, 0xe0]);
    expect(chunks.length).toBeGreaterThanOrEqual(u.media.length * 3);
    expect(Buffer.concat(chunks.map((c) => c.data))).toEqual(Buffer.concat(tags.map((t) => t.body.subarray(1))));
    const total = u.media.reduce((n, m) => n + m.durationMs, 0);
    expect(chunks.reduce((n, c) => n + c.ms, 0)).toBeCloseTo(total, 0);
    const mid = decode(write('mid.mp3', ...chunks.slice(5).map((c) => c.data)));
    expect(mid.stderr).toBe('');
  });

  it('Opus → Ogg: OpusHead/OpusTags header, pages of ≤ ~100 ms with continuous granules, every packet back', () => {
    const ogg = fs.readFileSync(path.join(fixtures, 'opus/sine48k_stereo_128k.ogg'));
    const [head, , ...packets] = oggPackets(ogg);
    const u = units(opusTagsFromOgg(ogg).tags, { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'opus' });
    const enc = new ListenEncoder('fmp4');
    const chunks = encodeAll(enc, u);
    expect(chunks.every((c) => c.startable && c.header === enc.header)).toBe(true);
    const read = new OggReader().push(Buffer.concat([enc.header, ...chunks.map((c) => c.data)]));
    expect(read[0]).toEqual(head);
    expect(read[1]!.subarray(0, 8).toString('latin1')).toBe('OpusTags');
    expect(read.slice(2)).toEqual(packets);
    // Pages: every chunk starts with one; granules grow by the samples of the packets they complete.
    let granule = 0n;
    let samples = 0;
    let seq = 2;
    for (const c of chunks) {
      expect(c.data.subarray(0, 4).toString('latin1')).toBe('OggS');
      for (let o = 0; o < c.data.length; ) {
        const n = c.data[o + 26]!;
        let body = 0;
        for (let i = 0; i < n; i++) body += c.data[o + 27 + i]!;
        const g = c.data.readBigInt64LE(o + 6);
        expect(g).toBeGreaterThan(granule);
        expect(c.data.readUInt32LE(o + 18)).toBe(seq++);
        granule = g;
        o += 27 + n + body;
      }
    }
    for (const p of packets) samples += opusPacketSamples(p);
    expect(granule).toBe(BigInt(samples));
    const whole = decode(write('a.opus', enc.header, ...chunks.map((c) => c.data)));
    expect(whole.stderr).toBe('');
    expect(Math.abs(whole.seconds - (samples - head!.readUInt16LE(10)) / 48000)).toBeLessThan(0.1);
    const mid = decode(write('mid.opus', chunks[9]!.header, ...chunks.slice(9).map((c) => c.data)));
    expect(mid.stderr).toBe('');
    expect(mid.seconds).toBeGreaterThan(1);
  });

  it('a new OpusHead chains a new logical Ogg stream (EOS page, then BOS headers) that players follow', () => {
    const ogg = fs.readFileSync(path.join(fixtures, 'opus/sine48k_stereo_128k.ogg'));
    const { tags } = opusTagsFromOgg(ogg);
    const a = units(tags, { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'opus' });
    // The same audio with another pre-skip: another OpusHead, so another dOps in the init section.
    const head2 = Buffer.from(tags[0]!.body);
    head2.writeUInt16LE(100, 5 + 10);
    const b = units([{ timestamp: 0, body: head2 }, ...tags.slice(1)], { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'opus' });
    const enc = new ListenEncoder('fmp4');
    const first = a.media.slice(0, 6).flatMap((m) => enc.encode(m, a.init, 1));
    const firstHeader = enc.header;
    const second = b.media.slice(0, 6).flatMap((m) => enc.encode(m, b.init, 2));
    expect(second[0]).toMatchObject({ ms: 0, startable: false });
    expect(enc.header).not.toBe(firstHeader);
    expect(second.slice(1).every((c) => c.startable && c.header === enc.header)).toBe(true);
    const r = decode(write('chain.opus', firstHeader, ...first.map((c) => c.data), ...second.map((c) => c.data)));
    expect(r.stderr).toBe('');
    expect(r.seconds).toBeGreaterThan(4);
  });

  it('a part that cannot be read back throws and leaves the encoder as it was', () => {
    const u = units(flvTags('aac/sine48k_stereo_128k.flv'), { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'aac' });
    const enc = new ListenEncoder('fmp4');
    expect(() => enc.encode({ data: u.media[0]!.data.subarray(0, 40), durationMs: 500, initVersion: 1 }, u.init, 1)).toThrow();
    expect(() => enc.encode(u.media[0]!, Buffer.from('not an init section'), 2)).toThrow();
    expect(enc.encode(u.media[1]!, u.init, 1).length).toBeGreaterThan(0);
    expect(() => new ListenEncoder('ts').encode({ data: Buffer.alloc(188 * 3), durationMs: 2000, initVersion: 0 }, null, 0)).toThrow();
  });
});
