// Segmenter.pushMetadata (native addon): now-playing changes as timed ID3 in every container, read
// back by the readers players use. fMP4 (AAC, Opus; with and without LL-HLS parts): hls.js's own
// MP4Demuxer (emsg → `parseEmsg` → ID3 scheme check → presentation time) and `getId3Frames`.
// MPEG-TS (MP3): ffprobe (`timed_id3` data stream, the packet's PTS) and hls.js's own TSDemuxer
// (PMT stream_type 0x15 → ID3 PID → PES PTS). hls.js ships these only inside its bundle, so the
// test imports a copy of dist/hls.mjs with one export line added (the code is theirs, unchanged).
// Also: a change pushed at a frame in the middle of a part lands in that part and its segment;
// the rest of the output is byte for byte a run without changes; argument guards.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Segmenter, type ConfigEvent, type PartEvent, type SegmentDoneEvent, type SegmenterEvent, type SegmenterMetadataFields, type SegmenterOptions } from '../../../src/native/segmenter.js';
import { opusTagsFromOgg, type Tag } from '../../helpers/ogg.js';

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures');
const AAC_48K = path.join(fixtures, 'aac/sine48k_stereo_128k.flv');
const MP3_44K = path.join(fixtures, 'mp3/sine44k1_stereo_128k.flv');
const OPUS_OGG = path.join(fixtures, 'opus/sine48k_stereo_128k.ogg');

const SONG: SegmenterMetadataFields = {
  title: 'So What',
  artist: 'Miles Davis',
  album: 'Kind of Blue',
  url: 'https://example.com/kind-of-blue/so-what',
};
/** The ID3 frames hls.js reads from SONG's tag. */
const SONG_FRAMES = [
  { key: 'TIT2', info: '', data: 'So What' },
  { key: 'TPE1', info: '', data: 'Miles Davis' },
  { key: 'TALB', info: '', data: 'Kind of Blue' },
  { key: 'WXXX', info: '', data: 'https://example.com/kind-of-blue/so-what' },
];

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

/** Whether the tag carries an audio frame (not a sequence header). */
function isFrame(t: Tag): boolean {
  const b = t.body;
  if (b[0]! >> 4 === 9) return (b[0]! & 0x0f) === 1; // E-RTMP CodedFrames
  return b[0]! >> 4 === 2 || b[1] === 1; // classic MP3 (every tag), AAC raw
}

/**
 * Runs `tags` through a new Segmenter; `hook(i, s)` is called before tag i is pushed (`at: 'before'`)
 * or after it (`'after'`).
 */
function run(
  tags: Tag[],
  opts: SegmenterOptions,
  hook?: { at: 'before' | 'after'; fn: (i: number, s: Segmenter) => void },
): SegmenterEvent[] {
  const s = new Segmenter(opts);
  const ev: SegmenterEvent[] = [];
  tags.forEach((t, i) => {
    if (hook?.at === 'before') hook.fn(i, s);
    ev.push(...s.pushAudio(t.timestamp, t.body));
    if (hook?.at === 'after') hook.fn(i, s);
  });
  ev.push(...s.flush());
  return ev;
}
/** Pushes SONG right before the tag of frame number `frame` (counting frames from 0). */
function songAtFrame(tags: Tag[], frame: number): { at: 'before'; fn: (i: number, s: Segmenter) => void } {
  const index = tags.map((t, i) => (isFrame(t) ? i : -1)).filter((i) => i >= 0)[frame]!;
  return { at: 'before', fn: (i, s) => { if (i === index) s.pushMetadata(tags[index]!.timestamp, SONG); } };
}
const configOf = (ev: SegmenterEvent[]) => ev.find((e): e is ConfigEvent => e.type === 'config')!;
const segmentsOf = (ev: SegmenterEvent[]) => ev.filter((e): e is SegmentDoneEvent => e.type === 'segment');
const partsOf = (ev: SegmenterEvent[]) => ev.filter((e): e is PartEvent => e.type === 'part');
const media = (ev: SegmenterEvent[]) => ev.filter((e): e is PartEvent | SegmentDoneEvent => e.type === 'part' || e.type === 'segment');

/** Top-level ISOBMFF boxes of `d` as [type, start, end]. */
function topBoxes(d: Uint8Array): [string, number, number][] {
  const out: [string, number, number][] = [];
  const v = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  for (let o = 0; o + 8 <= v.length; ) {
    const size = v.readUInt32BE(o);
    if (size < 8 || o + size > v.length) throw new Error(`bad box at ${o}`);
    out.push([v.toString('latin1', o + 4, o + 8), o, o + size]);
    o += size;
  }
  return out;
}
const withoutEmsg = (d: Uint8Array) =>
  Buffer.concat(topBoxes(d).filter(([t]) => t !== 'emsg').map(([, s, e]) => d.subarray(s, e)));
/** TS packets of `d` whose PID is not `pid`. */
const withoutPid = (d: Uint8Array, pid: number) => {
  const keep: Uint8Array[] = [];
  for (let o = 0; o < d.length; o += 188) if ((((d[o + 1]! & 0x1f) << 8) | d[o + 2]!) !== pid) keep.push(d.subarray(o, o + 188));
  return Buffer.concat(keep);
};

/** Every part/segment equals the run without changes, but for the changes' own bytes. */
function expectOnlyChangesDiffer(withChanges: SegmenterEvent[], without: SegmenterEvent[], container: 'ts' | 'fmp4') {
  const a = media(withChanges);
  const b = media(without);
  expect(a.length).toBe(b.length);
  a.forEach((e, i) => {
    const plain = b[i]!;
    expect(plain.metadata).toBeUndefined();
    expect(e.type).toBe(plain.type);
    if (!e.metadata) expect(Buffer.compare(e.data, plain.data)).toBe(0);
    else expect(Buffer.compare(container === 'fmp4' ? withoutEmsg(e.data) : withoutPid(e.data, 0x101), plain.data)).toBe(0);
  });
}

// ---- hls.js's own demuxers and ID3 reader, from its bundle.
interface Id3Frame { key: string; info: string; data: string }
interface Id3Sample { pts: number; type: string; duration: number; data: Uint8Array }
interface HlsInternals {
  MP4Demuxer: new (observer: object, config: object, typeSupported: object, logger: object) => {
    resetInitSegment(init: Uint8Array, audioCodec: string, videoCodec: undefined, duration: number): void;
    demux(data: Uint8Array, timeOffset: number, chunkMeta: object): { id3Track: { samples: Id3Sample[] } };
  };
  TSDemuxer: new (observer: object, config: object, typeSupported: object, logger: object) => {
    resetInitSegment(init: undefined, audioCodec: string, videoCodec: undefined, duration: number, decrypt: undefined, chunkMeta: object): void;
    demux(data: Uint8Array, timeOffset: number, chunkMeta: object, sampleAes: boolean, flush: boolean): {
      id3Track: { pid: number; samples: Id3Sample[] };
      audioTrack: { pid: number; samples: unknown[] };
    };
  };
  getId3Frames(data: Uint8Array): Id3Frame[];
}
const quiet = { log() {}, info() {}, debug() {}, trace() {}, warn() {}, error() {} };
const observer = { emit() {}, on() {}, off() {} };
const tmpDirs: string[] = [];
let hls: HlsInternals;

beforeAll(async () => {
  const dist = path.join(path.dirname(createRequire(import.meta.url).resolve('hls.js/package.json')), 'dist', 'hls.mjs');
  const code = fs.readFileSync(dist, 'utf8').replace(/^\/\/# sourceMappingURL=.*$/m, '');
  for (const name of ['class MP4Demuxer ', 'class TSDemuxer ', 'function getId3Frames(']) expect(code).toContain(name);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skylark-hlsjs-'));
  tmpDirs.push(dir);
  const file = path.join(dir, 'hls-internals.mjs');
  fs.writeFileSync(file, `${code}\nexport { MP4Demuxer as __MP4Demuxer, TSDemuxer as __TSDemuxer, getId3Frames as __getId3Frames };\n`);
  const m = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  hls = { MP4Demuxer: m.__MP4Demuxer, TSDemuxer: m.__TSDemuxer, getId3Frames: m.__getId3Frames } as HlsInternals;
});
afterAll(() => { for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true }); });

/** What hls.js's MP4Demuxer makes of a part or segment: its ID3 samples (pts in seconds). */
function hlsEmsg(init: Uint8Array, codec: string, data: Uint8Array): Id3Sample[] {
  const d = new hls.MP4Demuxer(observer, { enableEmsgMetadataCues: true }, {}, quiet);
  d.resetInitSegment(init, codec, undefined, 10);
  return d.demux(data, 0, { iframe: false }).id3Track.samples;
}

describe.each([
  { name: 'AAC, LL-HLS parts 2000/500', file: AAC_48K, opus: false, partTargetMs: 500, codec: 'mp4a.40.2', frame: 130, tick: 1024, seq: 1, part: 1, index: 12 },
  { name: 'AAC, no parts', file: AAC_48K, opus: false, partTargetMs: 0, codec: 'mp4a.40.2', frame: 94 + 40, tick: 1024, seq: 1, part: -1, index: 40 },
  { name: 'Opus, LL-HLS parts 2000/500', file: OPUS_OGG, opus: true, partTargetMs: 500, codec: 'opus', frame: 160, tick: 960, seq: 1, part: 2, index: 10 },
])('fMP4, $name', ({ file, opus, partTargetMs, codec, frame, tick, seq, part, index }) => {
  // AAC 48 kHz: 94-frame segments, parts 24/24/24/22; Opus 20 ms: 100-packet segments, parts of 25.
  // `frame` is in segment `seq`, part `part` (-1: no parts), `index` frames into it.
  const tags = opus ? opusTagsFromOgg(fs.readFileSync(OPUS_OGG)).tags : readFlvAudio(file);
  const opts: SegmenterOptions = { container: 'fmp4', partTargetMs };
  const plain = run(tags, opts);
  const ev = run(tags, opts, songAtFrame(tags, frame));
  const init = configOf(ev).init!;

  it('the change lands in the part and segment holding its frame, with that frame’s time', () => {
    expect(ev.filter((e) => e.type === 'error')).toEqual([]);
    const marked = media(ev).filter((e) => e.metadata);
    const seg = segmentsOf(ev).find((s) => s.sequence === seq)!;
    expect(marked).toEqual(part >= 0 ? [partsOf(ev).find((p) => p.sequence === seq && p.partIndex === part), seg] : [seg]);
    const host = marked[0]!;
    const mark = host.metadata![0]!;
    expect(mark).toEqual({
      id: 1,
      timestampMs: tags.filter(isFrame)[frame]!.timestamp,
      pts90k: host.pts90k + (index * tick * 90000) / 48000,
      presentationTime: host.baseMediaDecodeTime! + index * tick,
    });
    expect(seg.metadata).toEqual([mark]);
    if (part >= 0) {
      const parts = partsOf(ev).filter((p) => p.sequence === seq);
      expect(Buffer.compare(Buffer.concat(parts.map((p) => p.data)), seg.data)).toBe(0); // segment = its parts
      expect(topBoxes(host.data).map(([t]) => t)).toEqual(['emsg', 'moof', 'mdat']);
    }
  });

  it('hls.js reads it from the part and from the segment: ID3 scheme, time, TIT2/TPE1/TALB/WXXX', () => {
    const marked = media(ev).filter((e) => e.metadata);
    for (const e of marked) {
      const samples = hlsEmsg(init, codec, e.data);
      expect(samples).toHaveLength(1);
      const [s] = samples;
      expect(s!.type).toBe('https://aomedia.org/emsg/ID3');
      expect(s!.pts).toBe(e.metadata![0]!.presentationTime! / 48000);
      expect(s!.pts).toBeCloseTo(e.metadata![0]!.pts90k / 90000, 9);
      expect(s!.duration).toBe(Infinity); // event_duration 0xFFFFFFFF: until the next change
      expect(hls.getId3Frames(s!.data)).toEqual(SONG_FRAMES);
    }
    for (const e of media(ev).filter((x) => !x.metadata)) expect(hlsEmsg(init, codec, e.data)).toEqual([]);
  });

  it('everything else is byte for byte the run without changes (and the change’s fragment without its emsg)', () => {
    expectOnlyChangesDiffer(ev, plain, 'fmp4');
  });
});

describe('MPEG-TS, MP3', () => {
  // 44.1 kHz MPEG-1 Layer III: 1152-sample frames, 77 per 2 s segment. Frame 107 = segment 1, frame 30.
  const tags = readFlvAudio(MP3_44K);
  const plain = run(tags, { container: 'ts' });
  const ev = run(tags, { container: 'ts' }, songAtFrame(tags, 107));
  const segs = segmentsOf(ev);

  it('the segment holding the frame reports the change, at that frame’s PTS', () => {
    expect(ev.filter((e) => e.type === 'error')).toEqual([]);
    expect(segs.filter((s) => s.metadata).map((s) => s.sequence)).toEqual([1]);
    const mark = segs[1]!.metadata![0]!;
    expect(mark.id).toBe(1);
    expect(mark.timestampMs).toBe(tags.filter(isFrame)[107]!.timestamp);
    expect(Math.abs(mark.pts90k - (segs[1]!.pts90k + (30 * 1152 * 90000) / 44100))).toBeLessThanOrEqual(1);
    expect(mark.presentationTime).toBeUndefined();
    expectOnlyChangesDiffer(ev, plain, 'ts');
  });

  it('ffprobe: a timed_id3 data stream (declared in every segment) with one packet at the PTS', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skylark-id3-'));
    tmpDirs.push(dir);
    const one = path.join(dir, 'seg0.ts'); // a segment without a change still declares the stream
    fs.writeFileSync(one, segs[0]!.data);
    const all = path.join(dir, 'all.ts');
    fs.writeFileSync(all, Buffer.concat(segs.slice(0, 3).map((s) => s.data)));
    for (const f of [one, all]) {
      const r = spawnSync('ffprobe', ['-v', 'error', '-show_streams', '-show_packets', '-of', 'json', f]);
      expect(r.stderr.toString()).toBe('');
      const info = JSON.parse(r.stdout.toString()) as {
        streams: { index: number; codec_type: string; codec_name: string; codec_tag_string: string; id: string }[];
        packets: { stream_index: number; pts: number }[];
      };
      expect(info.streams.map((s) => [s.codec_type, s.codec_name])).toEqual([['audio', 'mp3'], ['data', 'timed_id3']]);
      expect(info.streams[1]).toMatchObject({ codec_tag_string: 'ID3 ', id: '0x101' });
      const data = info.packets.filter((p) => p.stream_index === 1);
      expect(data.map((p) => p.pts)).toEqual(f === one ? [] : [segs[1]!.metadata![0]!.pts90k]);
    }
  });

  it('hls.js TSDemuxer finds the ID3 PID from the PMT and reads the tag at its PTS', () => {
    const d = new hls.TSDemuxer(observer, { handleMpegTsVideoIntegrityErrors: 'process' }, { mpeg: true, mp3: true }, quiet);
    d.resetInitSegment(undefined, 'mp3', undefined, 10, undefined, { iframe: false });
    const r = d.demux(Buffer.concat(segs.slice(0, 3).map((s) => s.data)), 0, { iframe: false }, false, true);
    expect(r.audioTrack.pid).toBe(0x100);
    expect(r.id3Track.pid).toBe(0x101);
    expect(r.audioTrack.samples.length).toBeGreaterThan(200);
    expect(r.id3Track.samples.map((s) => s.pts)).toEqual([segs[1]!.metadata![0]!.pts90k]);
    expect(hls.getId3Frames(r.id3Track.samples[0]!.data)).toEqual(SONG_FRAMES);
  });
});

describe('pushMetadata timing and API', () => {
  const tags = readFlvAudio(AAC_48K);
  const frameTags = tags.map((t, i) => (isFrame(t) ? i : -1)).filter((i) => i >= 0);
  const opts: SegmenterOptions = { container: 'fmp4', partTargetMs: 500 };

  it('pushed while its frame is still pending (part open), the change lands on that frame: same bytes', () => {
    const early = run(tags, opts, songAtFrame(tags, 130));
    const late = run(tags, opts, {
      at: 'after',
      fn: (i, s) => { if (i === frameTags[135]) s.pushMetadata(tags[frameTags[130]!]!.timestamp, SONG); },
    });
    const [a, b] = [media(late), media(early)];
    expect(a.length).toBe(b.length);
    a.forEach((e, i) => expect(Buffer.compare(e.data, b[i]!.data)).toBe(0));
    expect(a.map((e) => e.metadata)).toEqual(b.map((e) => e.metadata));
    expect(a.filter((e) => e.metadata)).toHaveLength(2); // its part and its segment
  });

  it('no change pending for a frame ≥ it: the next frame pushed carries it', () => {
    const ev = run(tags, opts, {
      at: 'after',
      fn: (i, s) => { if (i === frameTags[100]) s.pushMetadata(tags[i]!.timestamp + 3_600_000, SONG); },
    });
    const marked = partsOf(ev).filter((p) => p.metadata);
    expect(marked).toHaveLength(1);
    // Frame 101 = segment 1, part 0, 7 frames in.
    expect(marked[0]).toMatchObject({ sequence: 1, partIndex: 0 });
    expect(marked[0]!.metadata![0]!.pts90k).toBe(marked[0]!.pts90k + 7 * 1920);
  });

  it('content never throws: long, empty, control and unpaired-surrogate strings; null and missing fields', () => {
    const s = new Segmenter(opts);
    const long = 'é'.repeat(300) + '🎵';
    s.pushMetadata(0, { title: long, artist: null, album: undefined, url: 'https://x.test/ü ?a=\n' });
    s.pushMetadata(1, { title: '' });
    s.pushMetadata(2, { title: 'a\u0000b\ud800c', artist: '\u0007', album: 'x'.repeat(100_000), url: null });
    s.pushMetadata(-5, { title: 'negative and huge timestamps wrap like RTMP time' });
    s.pushMetadata(2 ** 40 + 0.5, { title: 'last' });
    const ev: SegmenterEvent[] = [];
    for (const t of tags.slice(0, 40)) ev.push(...s.pushAudio(t.timestamp, t.body));
    ev.push(...s.flush());
    const marks = partsOf(ev).flatMap((p) => p.metadata ?? []);
    expect(marks).toHaveLength(1); // all waited for the next frame: the last call wins
    expect(marks[0]!.id).toBe(5);
    const init = configOf(ev).init!;
    const first = partsOf(ev)[0]!;
    expect(hls.getId3Frames(hlsEmsg(init, 'mp4a.40.2', first.data)[0]!.data)).toEqual([{ key: 'TIT2', info: '', data: 'last' }]);
    // The cut and the cleaning, read back by hls.js: 256 characters, controls as spaces, U+FFFD.
    const s2 = new Segmenter(opts);
    const ev2: SegmenterEvent[] = [];
    ev2.push(...s2.pushAudio(tags[0]!.timestamp, tags[0]!.body));
    s2.pushMetadata(0, { title: long, artist: 'a\u0000b\ud800c', url: 'https://x.test/ü ?a=\n' });
    for (const t of tags.slice(1, 40)) ev2.push(...s2.pushAudio(t.timestamp, t.body));
    ev2.push(...s2.flush());
    const p = partsOf(ev2).find((x) => x.metadata)!;
    expect(hls.getId3Frames(hlsEmsg(configOf(ev2).init!, 'mp4a.40.2', p.data)[0]!.data)).toEqual([
      { key: 'TIT2', info: '', data: 'é'.repeat(256) },
      { key: 'TPE1', info: '', data: 'a b\ufffdc' },
      { key: 'WXXX', info: '', data: 'https://x.test/%C3%BC%20?a=%20' },
    ]);
  });

  it('wrong argument types throw TypeError', () => {
    const s = new Segmenter(opts);
    const bad: unknown[][] = [
      [],
      ['1', { title: 'x' }],
      [NaN, { title: 'x' }],
      [Infinity, { title: 'x' }],
      [0],
      [0, null],
      [0, 'title'],
      [0, {}],
      [0, { title: 1 }],
      [0, { title: 'x', artist: 1 }],
      [0, { title: 'x', album: {} }],
      [0, { title: 'x', url: false }],
    ];
    for (const args of bad) expect(() => (s.pushMetadata as (...a: unknown[]) => void)(...args)).toThrow(TypeError);
    expect(s.pushMetadata(0, { title: 'x' })).toBeUndefined();
  });
});
