// A bounded, seeded mutation fuzz run of the JS demuxers and remuxer of progressive listening
// (src/delivery/progressive/fmp4-read.ts, ts-read.ts, encoder.ts), inside the normal test run.
//
// Seeds: the native Segmenter's real output for the fixtures — fMP4 init sections, LL-HLS parts and
// segments (AAC, MP3, Opus) and MPEG-TS segments (AAC, MP3). Each mutant is a seed with 1–4
// mutations: bit flips, random bytes, "interesting" 32-bit values written over a field (box sizes,
// sample counts: 0, 1, 0x7fffffff, 0xffffffff, …), inserted, deleted or duplicated ranges, a
// truncation, a splice with another seed. Every reader must either parse — with results inside
// its input and bounded by its size — or throw its documented error (Mp4ReadError, TsReadError;
// ListenEncoder also its plain Error for an fMP4 unit without a usable init section), and never
// take long: each call is timed.
//
// SKYLARK_JS_FUZZ_SEED and SKYLARK_JS_FUZZ_RUNS (mutants per target) change the run; a failure
// names the seed and the mutant's index, so `SKYLARK_JS_FUZZ_SEED=<seed>` replays it.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Segmenter, type ConfigEvent, type SegmenterEvent, type SegmenterOptions } from '../../../src/native/segmenter.js';
import { FlvReader } from '../../../src/live/media/flv.js';
import type { LayerMedia } from '../../../src/live/media/layer-media.js';
import { Mp4ReadError, opusHeadFromDops, readFragments, readInit } from '../../../src/delivery/progressive/fmp4-read.js';
import { TsReadError, readTsAudio } from '../../../src/delivery/progressive/ts-read.js';
import { ListenEncoder } from '../../../src/delivery/progressive/encoder.js';
import { opusTagsFromOgg } from '../../helpers/ogg.js';

const SEED = Number(process.env.SKYLARK_JS_FUZZ_SEED ?? 0x5eed5);
const RUNS = Number(process.env.SKYLARK_JS_FUZZ_RUNS ?? 1500);
/** The slowest a single call may be (ms): the seeds are a few KiB, a sane read takes well under 1 ms (the margin is for a loaded machine). */
const SLOW_MS = 1000;
/** Audio taken from each fixture (ms): a few parts and a segment or two. */
const SEED_AUDIO_MS = 4500;

const fixtures = path.resolve(import.meta.dirname, '../../fixtures');

/** mulberry32: a small seeded PRNG (uniform in [0, 1)). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const INTERESTING = [0, 1, 7, 8, 9, 16, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff];

/** One mutant of `seed` (a new Buffer; the seed is untouched); `other`: a second seed to splice from. */
function mutate(rand: () => number, seed: Uint8Array, other: Uint8Array): Buffer {
  const int = (n: number) => Math.floor(rand() * n);
  let d = Buffer.from(seed);
  const steps = 1 + int(4);
  for (let s = 0; s < steps; s++) {
    const at = int(d.length + 1);
    switch (int(8)) {
      case 0: // flip a bit
        if (d.length > 0) d[int(d.length)]! ^= 1 << int(8);
        break;
      case 1: // a random byte
        if (d.length > 0) d[int(d.length)] = int(256);
        break;
      case 2: // an interesting 32-bit value, big-endian (ISOBMFF and TS fields are)
        if (d.length >= 4) d.writeUInt32BE(INTERESTING[int(INTERESTING.length)]! >>> 0, int(d.length - 3));
        break;
      case 3: // insert random bytes
        d = Buffer.concat([d.subarray(0, at), Buffer.from(Array.from({ length: 1 + int(16) }, () => int(256))), d.subarray(at)]);
        break;
      case 4: // delete a range
        d = Buffer.concat([d.subarray(0, at), d.subarray(Math.min(d.length, at + 1 + int(64)))]);
        break;
      case 5: // truncate
        d = d.subarray(0, at);
        break;
      case 6: {
        // duplicate a range
        const len = 1 + int(64);
        d = Buffer.concat([d.subarray(0, at), d.subarray(at, at + len), d.subarray(at)]);
        break;
      }
      default: {
        // splice: this seed's head, the other's tail
        const cut = int(other.length + 1);
        d = Buffer.concat([d.subarray(0, at), other.subarray(cut)]);
      }
    }
  }
  return d;
}

interface Seeds {
  /** fMP4 init sections (AAC, MP3, Opus) and their trackId. */
  inits: Buffer[];
  /** fMP4 parts and segments, with the init section they need. */
  mp4Units: Array<{ data: Buffer; init: Buffer }>;
  /** TS segments. */
  tsUnits: Buffer[];
}

function segment(tags: Array<{ timestamp: number; body: Buffer }>, opts: SegmenterOptions): SegmenterEvent[] {
  const s = new Segmenter(opts);
  const ev: SegmenterEvent[] = [];
  for (const t of tags) if (t.timestamp <= SEED_AUDIO_MS) ev.push(...s.pushAudio(t.timestamp, t.body));
  ev.push(...s.flush());
  return ev;
}

/** The seeds: what the native Segmenter makes of a few seconds of each fixture. */
function makeSeeds(): Seeds {
  const flv = (file: string) => new FlvReader().push(fs.readFileSync(path.join(fixtures, file))).map((t) => ({ timestamp: t.timestampMs, body: t.body }));
  const seeds: Seeds = { inits: [], mp4Units: [], tsUnits: [] };
  const opus = opusTagsFromOgg(fs.readFileSync(path.join(fixtures, 'opus/sine48k_stereo_128k.ogg'))).tags;
  const mp4: Array<[Array<{ timestamp: number; body: Buffer }>, SegmenterOptions]> = [
    [flv('aac/sine48k_stereo_128k.flv'), { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'aac' }],
    [flv('mp3/sine44k1_stereo_128k.flv'), { container: 'fmp4', targetDurationMs: 2000, expectCodec: 'mp3' }],
    [opus, { container: 'fmp4', targetDurationMs: 2000, partTargetMs: 500, expectCodec: 'opus' }],
  ];
  for (const [tags, opts] of mp4) {
    const ev = segment(tags, opts);
    const init = ev.find((e): e is ConfigEvent => e.type === 'config')!.init!;
    seeds.inits.push(init);
    for (const e of ev) if (e.type === 'part' || e.type === 'segment') seeds.mp4Units.push({ data: e.data, init });
  }
  for (const [file, codec] of [['aac/sine44k1_mono_64k.flv', 'aac'], ['mp3/sine22k05_mono_32k.flv', 'mp3']] as const) {
    for (const e of segment(flv(file), { container: 'ts', targetDurationMs: 2000, expectCodec: codec })) if (e.type === 'segment') seeds.tsUnits.push(e.data);
  }
  return seeds;
}

/**
 * Runs `target` on RUNS mutants of the seeds `pick` chooses (with a context for the target): it
 * must return (its own checks passing) or throw an error `allowed` accepts, each call within
 * SLOW_MS. Returns how many parsed and how many were refused.
 */
function fuzz<C = undefined>(
  name: string,
  pick: (rand: () => number) => [seed: Uint8Array, other: Uint8Array, context?: C],
  target: (d: Buffer, context: C) => void,
  allowed: (e: unknown) => boolean,
): { parsed: number; refused: number } {
  const rand = prng(SEED ^ [...name].reduce((h, c) => Math.imul(h ^ c.charCodeAt(0), 16777619), 2166136261));
  let parsed = 0;
  let refused = 0;
  for (let i = 0; i < RUNS; i++) {
    const [seed, other, context] = pick(rand);
    const d = mutate(rand, seed, other);
    const t0 = performance.now();
    try {
      target(d, context as C);
      parsed++;
    } catch (e) {
      if (!allowed(e)) throw new Error(`${name}: mutant ${i} (seed ${SEED}) threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`, { cause: e });
      refused++;
    }
    const ms = performance.now() - t0;
    if (ms > SLOW_MS) throw new Error(`${name}: mutant ${i} (seed ${SEED}, ${d.length} bytes) took ${ms.toFixed(0)} ms`);
  }
  return { parsed, refused };
}

const isMp4 = (e: unknown) => e instanceof Mp4ReadError;
const isTs = (e: unknown) => e instanceof TsReadError;
/** ListenEncoder: the readers' errors, or its own for an init section it cannot use (encoder.ts `mp4Frames`). */
const isEncoderError = (e: unknown) =>
  isMp4(e) || isTs(e) || (e instanceof Error && e.constructor === Error && /^(fMP4 media without an init section|the AudioSpecificConfig cannot be carried in ADTS)$/.test(e.message));

/** A view's bytes lie inside `d`. */
const inside = (v: Uint8Array, d: Uint8Array) => v.buffer === d.buffer && v.byteOffset >= d.byteOffset && v.byteOffset + v.byteLength <= d.byteOffset + d.byteLength;

describe('JS demux fuzz (seeded, bounded)', () => {
  const seeds = makeSeeds();
  const any = <T>(rand: () => number, list: T[]) => list[Math.floor(rand() * list.length)]!;

  it('has seeds of every kind', () => {
    expect(seeds.inits).toHaveLength(3);
    expect(seeds.mp4Units.length).toBeGreaterThan(10);
    expect(seeds.tsUnits.length).toBeGreaterThan(2);
  });

  it('readInit: a track whose views lie in the input, or Mp4ReadError', () => {
    const r = fuzz('readInit', (rand) => [any(rand, seeds.inits), any(rand, seeds.inits)], (d) => {
      const t = readInit(d);
      expect(['aac', 'mp3', 'opus']).toContain(t.codec);
      expect(t.timescale).toBeGreaterThan(0);
      if (t.asc) expect(inside(t.asc, d)).toBe(true);
      if (t.dops) {
        expect(inside(t.dops, d)).toBe(true);
        expect(opusHeadFromDops(t.dops).length).toBeLessThanOrEqual(19 + 2 + 255);
      }
    }, isMp4);
    expect(r.parsed).toBeGreaterThan(0);
    expect(r.refused).toBeGreaterThan(0);
  }, 30_000);

  it('readFragments: samples inside the input and no more of them than its bytes, or Mp4ReadError', () => {
    const r = fuzz('readFragments', (rand) => [any(rand, seeds.mp4Units).data, any(rand, seeds.mp4Units).data], (d) => {
      const samples = readFragments(d);
      expect(samples.length).toBeLessThanOrEqual(d.length);
      for (const s of samples) {
        if (s.offset < 0 || s.size < 0 || s.offset + s.size > d.length) throw new Error(`sample ${s.offset}+${s.size} outside ${d.length} bytes`);
      }
    }, isMp4);
    expect(r.parsed).toBeGreaterThan(0);
    expect(r.refused).toBeGreaterThan(0);
  }, 30_000);

  it('opusHeadFromDops: an OpusHead of at most 276 bytes, or Mp4ReadError', () => {
    const dops = seeds.inits.map((i) => readInit(i).dops).filter((x): x is Uint8Array => x !== undefined);
    expect(dops).toHaveLength(1);
    fuzz('opusHeadFromDops', () => [dops[0]!, dops[0]!], (d) => {
      const head = opusHeadFromDops(d);
      expect(head.length).toBeLessThanOrEqual(19 + 2 + 255);
      expect(head.subarray(0, 8).toString('latin1')).toBe('OpusHead');
    }, isMp4);
  }, 30_000);

  it('readTsAudio: PES payloads inside the input, at most its bytes in all, or TsReadError', () => {
    const r = fuzz('readTsAudio', (rand) => [any(rand, seeds.tsUnits), any(rand, seeds.tsUnits)], (d) => {
      const a = readTsAudio(d);
      let bytes = 0;
      expect(a.pes.length).toBeLessThanOrEqual(d.length / 188);
      for (const p of a.pes) {
        for (const v of p.payload) if (!inside(v, d)) throw new Error('a PES payload view lies outside the segment');
        bytes += p.bytes;
      }
      expect(bytes).toBeLessThanOrEqual(d.length);
    }, isTs);
    expect(r.parsed).toBeGreaterThan(0);
    expect(r.refused).toBeGreaterThan(0);
  }, 30_000);

  it('ListenEncoder.encode: chunks bounded by the unit (and its init) size, or a documented error', () => {
    const media = (data: Buffer): LayerMedia => ({ data, durationMs: 500, initVersion: 0 });
    /** Output per input byte at most: ADTS adds 7 bytes per frame of ≥ 1 byte; an Ogg page 27 + lacing per packet. */
    const bound = (input: number) => 32 * input + 4096;
    for (const mutateInit of [false, true]) {
      fuzz(`encode fMP4 (${mutateInit ? 'init' : 'unit'} mutated)`, (rand) => {
        const u = any(rand, seeds.mp4Units);
        const other = any(rand, seeds.mp4Units);
        return mutateInit ? [u.init, other.init, u] : [u.data, other.data, u];
      }, (d, u) => {
        // The mutant is the init section or the unit; the other one is the pair's real one.
        const [init, unit] = mutateInit ? [d, u.data] : [u.init, d];
        const chunks = new ListenEncoder('fmp4').encode(media(unit), init, 0);
        let out = 0;
        for (const c of chunks) out += c.data.length + c.header.length;
        expect(out).toBeLessThanOrEqual(bound(unit.length + init.length));
      }, isEncoderError);
    }
    fuzz('encode TS', (rand) => [any(rand, seeds.tsUnits), any(rand, seeds.tsUnits)], (d) => {
      const chunks = new ListenEncoder('ts').encode(media(d), null, 0);
      let out = 0;
      for (const c of chunks) out += c.data.length;
      expect(out).toBeLessThanOrEqual(d.length);
    }, isEncoderError);
  }, 60_000);
});
