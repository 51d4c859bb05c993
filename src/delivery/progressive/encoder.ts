/**
 * A layer's HLS output → the bytes of progressive (Icecast-style) listening (docs/behaviour.md §10
 * "Listening"): each LL-HLS part or segment is read back into codec frames once (fmp4-read.ts,
 * ts-read.ts beside this file) and written in the listening format — AAC as ADTS frames (the
 * AudioSpecificConfig from the init section's `esds`), MP3 frames as they are, Opus as Ogg pages
 * (RFC 7845: OpusHead and OpusTags pages first, then audio pages whose granule positions count
 * 48 kHz samples continuously across parts).
 *
 * One Buffer is allocated per part/segment (sized first); it is cut into chunks of ~0.5 s of audio
 * (`subarray` views) that each start on a frame (ADTS, MP3) or page (Ogg) boundary, so a listener
 * may start at any chunk. Chunks are immutable and shared by every listener of the layer.
 */
import { ADTS_MAX_PAYLOAD_BYTES, parseAsc, writeAdtsFrame, type AdtsConfig } from '../../live/media/adts.js';
import { OGG_BOS, OGG_EOS, OGG_MAX_LACING, OGG_PAGE_HEADER_BYTES, oggLacing, oggPageBytes, opusPacketSamples, opusTagsPacket, writeOggPage } from '../../live/media/ogg.js';
import type { LayerMedia } from '../../live/media/layer-media.js';
import { opusHeadFromDops, readFragments, readInit, type Mp4AudioTrack } from './fmp4-read.js';
import { readTsAudio } from './ts-read.js';

/** A piece of a mount's stream: immutable, shared by every listener. */
export interface ListenChunk {
  /** The bytes (a view of the unit's one Buffer). */
  data: Buffer;
  /** Audio duration (ms). */
  ms: number;
  /** What a listener starting at this chunk gets first (Ogg: OpusHead + OpusTags pages; else empty). */
  header: Buffer;
  /** A listener may start here (false for the pages that switch to a new chained Ogg stream). */
  startable: boolean;
}

/** Audio per chunk (ms): a chunk closes at the first frame boundary reaching it. */
export const CHUNK_MS = 500;
/** An Ogg page closes at the first packet boundary reaching this much audio (ms). */
export const OGG_PAGE_MS = 100;

const EMPTY = Buffer.alloc(0);

/** One codec frame: its bytes as views (a TS PES may span packets), its duration. */
interface Frame {
  parts: Uint8Array[];
  bytes: number;
  ms: number;
  /** Opus: 48 kHz samples of the packet. */
  samples: number;
}

/** What the frames of a unit are and how they are written. */
type Kind = 'adts' | 'raw' | 'ogg';

/** Stats of what an encoder dropped (frames ADTS or Ogg cannot carry). */
export interface ListenEncoderDrops {
  oversizedFrames: number;
}

/**
 * Turns one layer's parts/segments into listening chunks, in order. One per mount: it keeps the
 * Ogg stream state (serial, page sequence, granule position) so that pages continue across units.
 */
export class ListenEncoder {
  readonly drops: ListenEncoderDrops = { oversizedFrames: 0 };
  private initVersion = -1;
  private track: Mp4AudioTrack | null = null;
  private adts: AdtsConfig | null = null;
  /** Ogg: the current logical stream. */
  private ogg: { head: Buffer; header: Buffer; serial: number; sequence: number; granule: bigint } | null = null;

  constructor(private readonly container: 'ts' | 'fmp4') {}

  /** The header a listener starting now gets (Ogg: OpusHead + OpusTags pages; else empty). */
  get header(): Buffer {
    return this.ogg?.header ?? EMPTY;
  }

  /**
   * The chunks of one part or segment `m` of a layer whose init section is `init` (version
   * `initVersion`; null for TS).
   * @throws Mp4ReadError / TsReadError on a unit or init section that cannot be read; the
   *   encoder's state is unchanged then
   */
  encode(m: LayerMedia, init: Uint8Array | null, initVersion: number): ListenChunk[] {
    const { kind, frames } = this.container === 'ts' ? this.tsFrames(m) : this.mp4Frames(m, init, initVersion);
    const out: ListenChunk[] = [];
    if (kind === 'ogg') {
      const head = opusHeadFromDops(this.track!.dops!);
      if (!this.ogg || !this.ogg.head.equals(head)) out.push(...this.chain(head));
    }
    if (frames.length === 0) return out;
    const groups = chunkGroups(frames);
    if (kind === 'ogg') out.push(...this.oggChunks(frames, groups));
    else out.push(...this.frameChunks(kind, frames, groups));
    return out;
  }

  /** Ogg: the groups' frames as pages of this logical stream (granule positions continue), one chunk per group. */
  private oggChunks(frames: Frame[], groups: Group[]): ListenChunk[] {
    const pages = oggPages(frames, groups);
    let size = 0;
    for (const p of pages) size += oggPageBytes(p.packets);
    const buf = Buffer.allocUnsafe(size);
    const ends: number[] = groups.map(() => 0);
    const s = this.ogg!;
    let o = 0;
    for (const p of pages) {
      s.granule += BigInt(p.samples);
      o = writeOggPage(buf, o, p.packets, { serial: s.serial, sequence: s.sequence++, granule: s.granule, flags: 0 });
      ends[p.group] = o;
    }
    const header = this.header;
    const out: ListenChunk[] = [];
    let start = 0;
    groups.forEach(([, , gms], g) => {
      out.push({ data: buf.subarray(start, ends[g]), ms: gms, header, startable: true });
      start = ends[g]!;
    });
    return out;
  }

  /** ADTS (a 7-byte header per AAC frame) or raw MP3 frames, one chunk per group. */
  private frameChunks(kind: 'adts' | 'raw', frames: Frame[], groups: Group[]): ListenChunk[] {
    let size = 0;
    for (const f of frames) size += f.bytes + (kind === 'adts' ? 7 : 0);
    const buf = Buffer.allocUnsafe(size);
    const header = this.header;
    const out: ListenChunk[] = [];
    let o = 0;
    for (const [a, b, gms] of groups) {
      const start = o;
      for (let i = a; i < b; i++) {
        const f = frames[i]!;
        if (kind === 'adts') o = writeAdtsFrame(this.adts!, f.parts[0]!, buf, o);
        else for (const p of f.parts) {
          buf.set(p, o);
          o += p.length;
        }
      }
      out.push({ data: buf.subarray(start, o), ms: gms, header, startable: true });
    }
    return out;
  }

  /** The frames of an fMP4 part or segment. */
  private mp4Frames(m: LayerMedia, init: Uint8Array | null, initVersion: number): { kind: Kind; frames: Frame[] } {
    if (initVersion !== this.initVersion || !this.track) {
      if (!init) throw new Error('fMP4 media without an init section');
      const track = readInit(init);
      let adts: AdtsConfig | null = null;
      if (track.codec === 'aac') {
        adts = parseAsc(track.asc!);
        if (!adts) throw new Error('the AudioSpecificConfig cannot be carried in ADTS');
      }
      if (track.codec === 'opus') opusHeadFromDops(track.dops!); // throws on a bad dOps before anything changes
      this.track = track;
      this.adts = adts;
      this.initVersion = initVersion;
    }
    const track = this.track;
    const kind: Kind = track.codec === 'aac' ? 'adts' : track.codec === 'opus' ? 'ogg' : 'raw';
    const frames: Frame[] = [];
    for (const s of readFragments(m.data, track.trackId)) {
      const p = m.data.subarray(s.offset, s.offset + s.size);
      if ((kind === 'adts' && s.size > ADTS_MAX_PAYLOAD_BYTES) || (kind === 'ogg' && oggLacing(s.size) > OGG_MAX_LACING) || s.size === 0) {
        this.drops.oversizedFrames++;
        continue;
      }
      const samples = kind === 'ogg' ? opusPacketSamples(p) || Math.round((s.duration * 48000) / track.timescale) : 0;
      frames.push({ parts: [p], bytes: s.size, ms: (s.duration * 1000) / track.timescale, samples });
    }
    return { kind, frames };
  }

  /** The frames (PES payloads) of a TS segment; durations from PTS, the last one's from the segment's. */
  private tsFrames(m: LayerMedia): { kind: Kind; frames: Frame[] } {
    const a = readTsAudio(m.data);
    const pes = a.pes.filter((p) => p.bytes > 0);
    const frames: Frame[] = [];
    const first = pes[0]?.pts ?? null;
    for (let i = 0; i < pes.length; i++) {
      const p = pes[i]!;
      const next = pes[i + 1]?.pts ?? null;
      let ms: number;
      if (p.pts !== null && next !== null) ms = (next - p.pts) / 90;
      else if (p.pts !== null && first !== null) ms = Math.max(0, m.durationMs - (p.pts - first) / 90);
      else ms = m.durationMs / pes.length;
      frames.push({ parts: p.payload, bytes: p.bytes, ms: Math.max(0, ms), samples: 0 });
    }
    return { kind: 'raw', frames };
  }

  /**
   * Starts a new logical Ogg stream for `head` (RFC 3533 §4 chaining): the current one (if any)
   * ends with an empty EOS page; the new one starts with its OpusHead (BOS) and OpusTags pages.
   * Returns the chunk that existing listeners get (not a place for a new listener to start).
   */
  private chain(head: Buffer): ListenChunk[] {
    const serial = (Math.random() * 0xffffffff) >>> 0;
    const tags = opusTagsPacket();
    const header = Buffer.allocUnsafe(oggPageBytes([head]) + oggPageBytes([tags]));
    let o = writeOggPage(header, 0, [head], { serial, sequence: 0, granule: 0n, flags: OGG_BOS });
    writeOggPage(header, o, [tags], { serial, sequence: 1, granule: 0n, flags: 0 });
    const old = this.ogg;
    this.ogg = { head: Buffer.from(head), header, serial, sequence: 2, granule: 0n };
    if (!old) return [];
    const eos = Buffer.allocUnsafe(OGG_PAGE_HEADER_BYTES);
    writeOggPage(eos, 0, [], { serial: old.serial, sequence: old.sequence++, granule: old.granule, flags: OGG_EOS });
    return [{ data: Buffer.concat([eos, header]), ms: 0, header, startable: false }];
  }
}

/** A chunk's frames: `[first, end, ms]` (frame indexes, end exclusive; audio ms). */
type Group = [number, number, number];

/** Groups frames into chunks of ~CHUNK_MS of audio, each closing at the first frame reaching it; a short tail joins the chunk before it. */
function chunkGroups(frames: Frame[]): Group[] {
  const groups: Group[] = [];
  let first = 0;
  let ms = 0;
  for (let i = 0; i < frames.length; i++) {
    ms += frames[i]!.ms;
    if (ms >= CHUNK_MS || i === frames.length - 1) {
      const last = groups[groups.length - 1];
      if (ms < CHUNK_MS / 2 && last) {
        last[1] = i + 1;
        last[2] += ms;
      } else groups.push([first, i + 1, ms]);
      first = i + 1;
      ms = 0;
    }
  }
  return groups;
}

/** One Ogg page to write: its group (chunk), its packets, the 48 kHz samples they carry. */
interface PagePlan {
  group: number;
  packets: Uint8Array[];
  samples: number;
}

/** Opus packets into pages: until OGG_PAGE_MS of audio or the lacing limit (RFC 3533 §6), never across chunks. */
function oggPages(frames: Frame[], groups: Group[]): PagePlan[] {
  const pages: PagePlan[] = [];
  groups.forEach(([a, b], g) => {
    let packets: Uint8Array[] = [];
    let lacing = 0;
    let pageMs = 0;
    let samples = 0;
    const close = () => {
      pages.push({ group: g, packets, samples });
      packets = [];
      lacing = 0;
      pageMs = 0;
      samples = 0;
    };
    for (let i = a; i < b; i++) {
      const f = frames[i]!;
      const p = f.parts[0]!;
      const l = oggLacing(p.length);
      if (packets.length > 0 && lacing + l > OGG_MAX_LACING) close();
      packets.push(p);
      lacing += l;
      pageMs += f.ms;
      samples += f.samples;
      if (pageMs >= OGG_PAGE_MS || i === b - 1) close();
    }
  });
  return pages;
}
