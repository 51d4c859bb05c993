/**
 * Reading our own fragmented MP4 back (ISO/IEC 14496-12): the init section's audio track
 * (timescale, sample entry, codec configuration) and the samples of a part or segment (one or more
 * `moof` + `mdat` pairs). Pure functions over `(data, offset)`; results point into the input (byte
 * ranges, `subarray` views), nothing is copied. What progressive listening (src/delivery/progressive/) turns back
 * into ADTS, MP3 frames or Ogg Opus.
 *
 * Boxes read: §4.2 box header (32-bit and 64-bit sizes), §8.2 moov, §8.3 trak, §8.4 mdia/mdhd,
 * §8.5.2 stsd with §12.2.3 AudioSampleEntry (`mp4a` + ISO/IEC 14496-14 §5.6 `esds`, `Opus` + `dOps`
 * of the Opus-in-ISOBMFF mapping §4.3, `.mp3`), §8.8.4 moof, §8.8.6 traf, §8.8.7 tfhd, §8.8.8 trun,
 * §8.1.1 mdat. Other boxes (styp, emsg, prft, sidx …) are skipped.
 */

/** A malformed or unsupported MP4 structure; `message` says what and where. */
export class Mp4ReadError extends Error {
  override name = 'Mp4ReadError';
}

/** What the init section says about the (first) audio track. */
export interface Mp4AudioTrack {
  trackId: number;
  /** Media timescale (ticks per second, `mdhd`). */
  timescale: number;
  /** The sample entry's 4CC: `mp4a`, `Opus`, `.mp3`. */
  format: string;
  /** `aac` (mp4a with an AudioSpecificConfig), `mp3` (mp4a with object type 0x6B/0x69, or `.mp3`), `opus`. */
  codec: 'aac' | 'mp3' | 'opus';
  channels: number;
  /** Sample rate of the sample entry (Hz). */
  sampleRate: number;
  /** AAC: the AudioSpecificConfig (DecoderSpecificInfo of `esds`), a view. */
  asc?: Uint8Array;
  /** Opus: the `dOps` box payload (OpusSpecificBox, big-endian), a view. */
  dops?: Uint8Array;
}

/** One sample of a fragment: its bytes are `data.subarray(offset, offset + size)`. */
export interface Mp4Sample {
  offset: number;
  size: number;
  /** Duration in the track's timescale. */
  duration: number;
}

interface Box {
  type: string;
  /** Start of the box header. */
  start: number;
  /** Start of the payload. */
  body: number;
  /** End of the box (exclusive). */
  end: number;
}

const u32 = (d: Uint8Array, o: number) => ((d[o]! << 24) >>> 0) + (d[o + 1]! << 16) + (d[o + 2]! << 8) + d[o + 3]!;
const u16 = (d: Uint8Array, o: number) => (d[o]! << 8) | d[o + 1]!;
const fourCc = (d: Uint8Array, o: number) => String.fromCharCode(d[o]!, d[o + 1]!, d[o + 2]!, d[o + 3]!);

/** The box at `offset` (within `[offset, end)`). @throws Mp4ReadError when its header or size does not fit */
export function readBox(d: Uint8Array, offset: number, end = d.length): Box {
  if (offset + 8 > end) throw new Mp4ReadError(`box header at ${offset} runs past ${end}`);
  let size = u32(d, offset);
  const type = fourCc(d, offset + 4);
  let body = offset + 8;
  if (size === 1) {
    if (offset + 16 > end) throw new Mp4ReadError(`'${type}' largesize at ${offset} runs past ${end}`);
    const hi = u32(d, offset + 8);
    if (hi !== 0) throw new Mp4ReadError(`'${type}' at ${offset} is larger than 4 GiB`);
    size = u32(d, offset + 12);
    body = offset + 16;
  } else if (size === 0) size = end - offset; // extends to the end of its container
  if (size < body - offset || offset + size > end) throw new Mp4ReadError(`'${type}' at ${offset} has size ${size}, past ${end}`);
  return { type, start: offset, body, end: offset + size };
}

/** The child boxes of `[start, end)`, in order. @throws Mp4ReadError */
function children(d: Uint8Array, start: number, end: number): Box[] {
  const out: Box[] = [];
  for (let o = start; o < end; ) {
    const b = readBox(d, o, end);
    out.push(b);
    o = b.end;
  }
  return out;
}

/** The first child of type `type` in `[start, end)`, or undefined. */
function child(d: Uint8Array, start: number, end: number, type: string): Box | undefined {
  return children(d, start, end).find((b) => b.type === type);
}

/** Follows `path` (4CCs) down from `[start, end)`. @throws Mp4ReadError when a box is missing */
function descend(d: Uint8Array, start: number, end: number, path: string[]): Box {
  let box: Box | undefined;
  for (const type of path) {
    box = child(d, start, end, type);
    if (!box) throw new Mp4ReadError(`no '${type}' box (looking for ${path.join('/')})`);
    start = box.body;
    end = box.end;
  }
  return box!;
}

/** A descriptor of ISO/IEC 14496-1 §7.2.2.1 (tag, expandable size of up to 4 bytes). */
function descriptor(d: Uint8Array, o: number, end: number): { tag: number; body: number; end: number } {
  if (o + 2 > end) throw new Mp4ReadError('esds: truncated descriptor');
  const tag = d[o++]!;
  let size = 0;
  for (let i = 0; i < 4; i++) {
    if (o >= end) throw new Mp4ReadError('esds: truncated descriptor size');
    const b = d[o++]!;
    size = (size << 7) | (b & 0x7f);
    if ((b & 0x80) === 0) break;
  }
  if (o + size > end) throw new Mp4ReadError(`esds: descriptor 0x${tag.toString(16)} runs past its box`);
  return { tag, body: o, end: o + size };
}

/**
 * The `esds` payload (after its FullBox header) → object type indication and DecoderSpecificInfo
 * (ISO/IEC 14496-1 §7.2.6.5 ES_Descriptor, §7.2.6.6 DecoderConfigDescriptor, §7.2.6.7).
 */
function readEsds(d: Uint8Array, start: number, end: number): { objectType: number; dsi: Uint8Array | undefined } {
  const es = descriptor(d, start, end);
  if (es.tag !== 0x03) throw new Mp4ReadError('esds: no ES_Descriptor');
  let o = es.body + 2; // ES_ID
  const flags = d[o++]!;
  if (flags & 0x80) o += 2; // dependsOn_ES_ID
  if (flags & 0x40) o += 1 + d[o]!; // URL
  if (flags & 0x20) o += 2; // OCR_ES_Id
  while (o < es.end) {
    const dc = descriptor(d, o, es.end);
    if (dc.tag === 0x04) {
      const objectType = d[dc.body]!;
      let dsi: Uint8Array | undefined;
      for (let p = dc.body + 13; p < dc.end; ) {
        const x = descriptor(d, p, dc.end);
        if (x.tag === 0x05) dsi = d.subarray(x.body, x.end);
        p = x.end;
      }
      return { objectType, dsi };
    }
    o = dc.end;
  }
  throw new Mp4ReadError('esds: no DecoderConfigDescriptor');
}

/**
 * Reads the first audio track of an init section (`ftyp` + `moov`).
 * @throws Mp4ReadError on a malformed init section or an audio format other than AAC, MP3, Opus
 */
export function readInit(d: Uint8Array): Mp4AudioTrack {
  const moov = children(d, 0, d.length).find((b) => b.type === 'moov');
  if (!moov) throw new Mp4ReadError('no moov box');
  for (const trak of children(d, moov.body, moov.end)) {
    if (trak.type !== 'trak') continue;
    const tkhd = descend(d, trak.body, trak.end, ['tkhd']);
    const trackId = u32(d, tkhd.body + 4 + (d[tkhd.body] === 1 ? 16 : 8));
    const mdia = descend(d, trak.body, trak.end, ['mdia']);
    const hdlr = descend(d, mdia.body, mdia.end, ['hdlr']);
    if (fourCc(d, hdlr.body + 8) !== 'soun') continue;
    const mdhd = descend(d, mdia.body, mdia.end, ['mdhd']);
    const timescale = u32(d, mdhd.body + 4 + (d[mdhd.body] === 1 ? 16 : 8));
    if (timescale === 0) throw new Mp4ReadError('mdhd timescale is 0');
    const stsd = descend(d, mdia.body, mdia.end, ['minf', 'stbl', 'stsd']);
    if (u32(d, stsd.body + 4) < 1) throw new Mp4ReadError('stsd has no sample entry');
    const entry = readBox(d, stsd.body + 8, stsd.end);
    // AudioSampleEntry: 6 reserved, data_reference_index(2), 8 reserved, channelcount(2),
    // samplesize(2), pre_defined(2), reserved(2), samplerate(4, 16.16) — then its boxes.
    const e = entry.body;
    if (e + 28 > entry.end) throw new Mp4ReadError(`sample entry '${entry.type}' is truncated`);
    const channels = u16(d, e + 16);
    const sampleRate = u16(d, e + 24);
    const boxes = e + 28;
    if (entry.type === 'mp4a') {
      const esds = child(d, boxes, entry.end, 'esds');
      if (!esds) throw new Mp4ReadError("mp4a without 'esds'");
      const { objectType, dsi } = readEsds(d, esds.body + 4, esds.end);
      if (objectType === 0x6b || objectType === 0x69) return { trackId, timescale, format: 'mp4a', codec: 'mp3', channels, sampleRate };
      if (objectType !== 0x40 || !dsi || dsi.length < 2) throw new Mp4ReadError(`mp4a object type 0x${objectType.toString(16)} is not AAC with an AudioSpecificConfig`);
      return { trackId, timescale, format: 'mp4a', codec: 'aac', channels, sampleRate, asc: dsi };
    }
    if (entry.type === 'Opus') {
      const dops = child(d, boxes, entry.end, 'dOps');
      if (!dops || dops.end - dops.body < 11) throw new Mp4ReadError("Opus without a valid 'dOps'");
      return { trackId, timescale, format: 'Opus', codec: 'opus', channels, sampleRate, dops: d.subarray(dops.body, dops.end) };
    }
    if (entry.type === '.mp3') return { trackId, timescale, format: '.mp3', codec: 'mp3', channels, sampleRate };
    throw new Mp4ReadError(`unsupported sample entry '${entry.type}'`);
  }
  throw new Mp4ReadError('no audio track');
}

/**
 * The samples of a fragment — every `moof` + `mdat` pair in `d` (a part, or a segment made of
 * parts), in decode order — of the track `trackId` (the first `traf` when undefined). Sample sizes
 * and durations come from `trun`, else the `tfhd` defaults; the data offset counts from the `moof`
 * (default-base-is-moof, or no base offset) or from `base_data_offset`. A fragment never holds more
 * samples than it has bytes (every sample Skylark writes has one at least), so a `trun` count past
 * that is refused before any sample is listed: the result stays bounded by the input.
 * @throws Mp4ReadError on a malformed fragment, a sample outside `d`, or more samples than `d` has bytes
 */
export function readFragments(d: Uint8Array, trackId?: number): Mp4Sample[] {
  const out: Mp4Sample[] = [];
  for (const top of children(d, 0, d.length)) {
    if (top.type !== 'moof') continue;
    for (const traf of children(d, top.body, top.end)) {
      if (traf.type !== 'traf') continue;
      const boxes = children(d, traf.body, traf.end);
      const tfhd = boxes.find((b) => b.type === 'tfhd');
      if (!tfhd) throw new Mp4ReadError('traf without tfhd');
      const tfFlags = u32(d, tfhd.body) & 0xffffff;
      let o = tfhd.body + 4;
      const id = u32(d, o);
      o += 4;
      if (trackId !== undefined && id !== trackId) continue;
      let base = top.start;
      if (tfFlags & 0x1) {
        if (u32(d, o) !== 0) throw new Mp4ReadError('base_data_offset beyond 4 GiB');
        base = u32(d, o + 4);
        o += 8;
      }
      if (tfFlags & 0x2) o += 4; // sample_description_index
      let defDuration = 0;
      let defSize = 0;
      if (tfFlags & 0x8) {
        defDuration = u32(d, o);
        o += 4;
      }
      if (tfFlags & 0x10) {
        defSize = u32(d, o);
        o += 4;
      }
      if (o > tfhd.end) throw new Mp4ReadError('tfhd is truncated');
      let next = base; // where the next trun's samples start without a data_offset
      for (const trun of boxes) {
        if (trun.type !== 'trun') continue;
        const flags = u32(d, trun.body) & 0xffffff;
        const count = u32(d, trun.body + 4);
        let p = trun.body + 8;
        let at = next;
        if (flags & 0x1) {
          at = base + (u32(d, p) | 0); // signed 32-bit
          p += 4;
        }
        if (flags & 0x4) p += 4; // first_sample_flags
        const per = ((flags & 0x100) !== 0 ? 4 : 0) + ((flags & 0x200) !== 0 ? 4 : 0) + ((flags & 0x400) !== 0 ? 4 : 0) + ((flags & 0x800) !== 0 ? 4 : 0);
        if (p + count * per > trun.end) throw new Mp4ReadError(`trun of ${count} samples is truncated`);
        if (out.length + count > d.length) throw new Mp4ReadError(`trun of ${count} samples: more samples than the ${d.length}-byte fragment has bytes`);
        for (let i = 0; i < count; i++) {
          let duration = defDuration;
          let size = defSize;
          if (flags & 0x100) {
            duration = u32(d, p);
            p += 4;
          }
          if (flags & 0x200) {
            size = u32(d, p);
            p += 4;
          }
          if (flags & 0x400) p += 4;
          if (flags & 0x800) p += 4;
          if (at < 0 || at + size > d.length) throw new Mp4ReadError(`sample of ${size} bytes at ${at} lies outside the ${d.length}-byte fragment`);
          out.push({ offset: at, size, duration });
          at += size;
        }
        next = at;
      }
    }
  }
  return out;
}

/**
 * The `dOps` payload (Opus-in-ISOBMFF §4.3.2, big-endian) as the OpusHead packet of RFC 7845 §5.1
 * (little-endian, magic `OpusHead`, version 1). @throws Mp4ReadError when `dops` is too short
 */
export function opusHeadFromDops(dops: Uint8Array): Buffer {
  if (dops.length < 11) throw new Mp4ReadError('dOps is shorter than 11 bytes');
  const family = dops[10]!;
  const table = family === 0 ? 0 : 2 + dops[1]!;
  if (dops.length < 11 + table) throw new Mp4ReadError('dOps channel mapping table is truncated');
  const head = Buffer.alloc(19 + table);
  head.write('OpusHead', 0, 'latin1');
  head[8] = 1;
  head[9] = dops[1]!; // OutputChannelCount
  head.writeUInt16LE(u16(dops, 2), 10); // PreSkip
  head.writeUInt32LE(u32(dops, 4), 12); // InputSampleRate
  head.writeInt16LE((u16(dops, 8) << 16) >> 16, 16); // OutputGain (Q7.8, signed)
  head[18] = family;
  if (table > 0) head.set(dops.subarray(11, 11 + table), 19);
  return head;
}
