/**
 * Ogg framing of Opus (RFC 3533 pages, RFC 7845 Opus mapping), for the pipes to and from FFmpeg
 * codec processes: FFmpeg 5.1 cannot carry Opus in FLV, so Opus travels as Ogg.
 */

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let r = i << 24;
    for (let j = 0; j < 8; j++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
    t[i] = r >>> 0;
  }
  return t;
})();

/** Ogg's CRC-32 (polynomial 0x04C11DB7, not reflected, initial 0; RFC 3533 §6). */
export function oggCrc(data: Uint8Array): number {
  let crc = 0;
  for (let i = 0; i < data.length; i++) crc = ((crc << 8) ^ CRC_TABLE[((crc >>> 24) ^ data[i]!) & 0xff]!) >>> 0;
  return crc >>> 0;
}

/** Frame duration (48 kHz samples) of TOC configuration 0–31 (RFC 6716 §3.1, Table 2). */
const FRAME_SAMPLES: number[] = [
  480, 960, 1920, 2880, 480, 960, 1920, 2880, 480, 960, 1920, 2880, // SILK NB/MB/WB: 10/20/40/60 ms
  480, 960, 480, 960, // Hybrid SWB/FB: 10/20 ms
  120, 240, 480, 960, 120, 240, 480, 960, 120, 240, 480, 960, 120, 240, 480, 960, // CELT: 2.5/5/10/20 ms
];

/** Samples at 48 kHz in one Opus packet; 0 for a malformed packet (RFC 6716 §3.2). */
export function opusPacketSamples(p: Uint8Array): number {
  if (p.length < 1) return 0;
  const toc = p[0]!;
  const frame = FRAME_SAMPLES[toc >> 3]!;
  const code = toc & 3;
  if (code === 0) return frame;
  if (code === 1 || code === 2) return 2 * frame;
  if (p.length < 2) return 0;
  const n = p[1]! & 0x3f;
  const total = n * frame;
  return n === 0 || total > 5760 ? 0 : total; // at most 120 ms per packet
}

/** Writes an Ogg Opus stream: OpusHead page, OpusTags page, then one page per packet. */
export class OggOpusWriter {
  private seq = 0;
  private granule = 0n;
  private readonly serial = (Math.random() * 0xffffffff) >>> 0;

  /** The two header pages for `opusHead` (the 19+ byte OpusHead of RFC 7845 §5.1). */
  header(opusHead: Uint8Array): Buffer {
    const tags = Buffer.concat([Buffer.from('OpusTags'), u32le(7), Buffer.from('skylark'), u32le(0)]);
    return Buffer.concat([this.page(opusHead, 0x02, 0n), this.page(tags, 0, 0n)]);
  }

  /** One page holding `packet`; the granule advances by the packet's samples. */
  packet(packet: Uint8Array): Buffer {
    this.granule += BigInt(opusPacketSamples(packet));
    return this.page(packet, 0, this.granule);
  }

  private page(data: Uint8Array, flags: number, granule: bigint): Buffer {
    const lacing: number[] = [];
    let left = data.length;
    while (left >= 255) {
      lacing.push(255);
      left -= 255;
    }
    lacing.push(left);
    if (lacing.length > 255) throw new Error('Opus packet too large for one Ogg page');
    const head = Buffer.alloc(27 + lacing.length);
    head.write('OggS', 0, 'latin1');
    head[4] = 0;
    head[5] = flags;
    head.writeBigInt64LE(granule, 6);
    head.writeUInt32LE(this.serial, 14);
    head.writeUInt32LE(this.seq++, 18);
    head[26] = lacing.length;
    head.set(lacing, 27);
    const page = Buffer.concat([head, data]);
    page.writeUInt32LE(oggCrc(page), 22);
    return page;
  }
}

/** Ogg page header bytes before the lacing values (RFC 3533 §6). */
export const OGG_PAGE_HEADER_BYTES = 27;
/** Lacing values one Ogg page holds at most (RFC 3533 §6: `page_segments` is one byte). */
export const OGG_MAX_LACING = 255;
/** Page header flags (RFC 3533 §6 `header_type_flag`). */
export const OGG_BOS = 0x02;
export const OGG_EOS = 0x04;

/** Lacing values a packet of `bytes` takes: one per full 255 bytes, plus its final (< 255) one. */
export const oggLacing = (bytes: number) => Math.floor(bytes / 255) + 1;

/** Bytes of one Ogg page holding exactly `packets` (whole packets, no continuation). */
export function oggPageBytes(packets: readonly Uint8Array[]): number {
  let n = OGG_PAGE_HEADER_BYTES;
  for (const p of packets) n += oggLacing(p.length) + p.length;
  return n;
}

/** Where a page belongs: its logical stream, sequence number, granule position, flags. */
export interface OggPageInfo {
  serial: number;
  sequence: number;
  /** Granule position (for Opus: 48 kHz samples through the last packet completed on the page). */
  granule: bigint;
  /** `OGG_BOS`, `OGG_EOS` or 0. */
  flags: number;
}

/**
 * Writes one Ogg page holding `packets` whole (RFC 3533 §6) into `out` at `offset`, CRC included.
 * The caller sizes `out` with `oggPageBytes(packets)`.
 * @returns the offset after the page
 * @throws RangeError when the packets need more than 255 lacing values
 */
export function writeOggPage(out: Uint8Array, offset: number, packets: readonly Uint8Array[], info: OggPageInfo): number {
  let lacing = 0;
  for (const p of packets) lacing += oggLacing(p.length);
  if (lacing > OGG_MAX_LACING) throw new RangeError(`${lacing} lacing values do not fit one Ogg page`);
  const v = new DataView(out.buffer, out.byteOffset + offset);
  out[offset] = 0x4f; // O
  out[offset + 1] = 0x67; // g
  out[offset + 2] = 0x67; // g
  out[offset + 3] = 0x53; // S
  out[offset + 4] = 0; // version
  out[offset + 5] = info.flags;
  v.setBigInt64(6, info.granule, true);
  v.setUint32(14, info.serial >>> 0, true);
  v.setUint32(18, info.sequence >>> 0, true);
  v.setUint32(22, 0, true);
  out[offset + 26] = lacing;
  let l = offset + OGG_PAGE_HEADER_BYTES;
  for (const p of packets) {
    for (let left = p.length; ; left -= 255) {
      out[l++] = Math.min(left, 255);
      if (left < 255) break;
    }
  }
  let o = l;
  for (const p of packets) {
    out.set(p, o);
    o += p.length;
  }
  v.setUint32(22, oggCrc(out.subarray(offset, o)), true);
  return o;
}

/** An OpusTags packet (RFC 7845 §5.2) with `vendor` and no user comments. */
export function opusTagsPacket(vendor = 'skylark'): Buffer {
  const v = Buffer.from(vendor, 'utf8');
  const b = Buffer.alloc(8 + 4 + v.length + 4);
  b.write('OpusTags', 0, 'latin1');
  b.writeUInt32LE(v.length, 8);
  v.copy(b, 12);
  b.writeUInt32LE(0, 12 + v.length);
  return b;
}

function u32le(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

/**
 * A streaming Ogg demuxer (RFC 3533) for FFmpeg's Ogg output (codec processes) and Ogg files: bytes in (any chunking),
 * whole packets out (lacing values of 255 continue a packet, across pages too). Checks capture
 * pattern and version; CRCs are not checked (the bytes come from our own FFmpeg over a pipe).
 * Limits: a page is at most 65,307 bytes; a packet is capped at MAX_PACKET (larger → dropped).
 */
const MAX_PACKET = 64 * 1024;

export class OggReader {
  private buf: Buffer = Buffer.alloc(0);
  private partial: Buffer[] = [];
  private partialBytes = 0;

  /** Feeds bytes; returns the packets completed by them (in order). @throws Error on a broken stream */
  push(chunk: Buffer): Buffer[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: Buffer[] = [];
    for (;;) {
      if (this.buf.length < 27) break;
      if (this.buf.readUInt32BE(0) !== 0x4f676753 /* OggS */ || this.buf[4] !== 0) throw new Error('not an Ogg page');
      const nSegs = this.buf[26]!;
      const headerLen = 27 + nSegs;
      if (this.buf.length < headerLen) break;
      let bodyLen = 0;
      for (let i = 0; i < nSegs; i++) bodyLen += this.buf[27 + i]!;
      if (this.buf.length < headerLen + bodyLen) break;
      const continued = (this.buf[5]! & 1) === 1;
      if (!continued && this.partialBytes > 0) this.resetPartial(); // lost continuation
      let off = headerLen;
      for (let i = 0; i < nSegs; i++) {
        const lace = this.buf[27 + i]!;
        if (lace > 0) {
          if (this.partialBytes + lace <= MAX_PACKET) this.partial.push(this.buf.subarray(off, off + lace));
          this.partialBytes += lace;
        }
        off += lace;
        if (lace < 255) {
          if (this.partialBytes > 0 && this.partialBytes <= MAX_PACKET) out.push(this.partial.length === 1 ? Buffer.from(this.partial[0]!) : Buffer.concat(this.partial));
          this.resetPartial();
        }
      }
      this.buf = this.buf.subarray(headerLen + bodyLen);
    }
    if (this.buf.length > 0) this.buf = Buffer.from(this.buf); // don't pin the big chunk
    return out;
  }

  private resetPartial(): void {
    this.partial = [];
    this.partialBytes = 0;
  }
}

/** A packet read from an Ogg Opus stream: the OpusHead, the OpusTags, or audio (RFC 7845 §3). */
export interface OggOpusPacket {
  data: Buffer;
  kind: 'head' | 'tags' | 'audio';
}

/** Incremental reader of one logical Ogg Opus stream. @throws Error on a malformed stream */
export class OggOpusReader {
  private readonly ogg = new OggReader();
  private count = 0;

  push(chunk: Buffer): OggOpusPacket[] {
    return this.ogg.push(chunk).map((data) => {
      const n = this.count++;
      return { data, kind: n === 0 ? 'head' : n === 1 ? 'tags' : 'audio' };
    });
  }
}
