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

/** Samples at 48 kHz in one Opus packet, from its TOC byte and frame count (RFC 6716 §3.1). 0 if malformed. */
export function opusPacketSamples(packet: Uint8Array): number {
  if (packet.length < 1) return 0;
  const toc = packet[0]!;
  const config = toc >> 3;
  let frame: number;
  if (config < 12) frame = [480, 960, 1920, 2880][config & 3]!; // SILK: 10, 20, 40, 60 ms
  else if (config < 16) frame = [480, 960][config & 1]!; // Hybrid: 10, 20 ms
  else frame = [120, 240, 480, 960][config & 3]!; // CELT: 2.5, 5, 10, 20 ms
  const code = toc & 3;
  let frames: number;
  if (code === 0) frames = 1;
  else if (code === 1 || code === 2) frames = 2;
  else {
    if (packet.length < 2) return 0;
    frames = packet[1]! & 0x3f;
  }
  const total = frame * frames;
  return total > 5760 ? 0 : total; // at most 120 ms
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

function u32le(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

/** A packet read from an Ogg Opus stream. `head` marks the OpusHead packet. */
export interface OggOpusPacket {
  data: Buffer;
  kind: 'head' | 'tags' | 'audio';
}

/** Incremental Ogg reader for one logical Opus stream. @throws Error on a malformed stream */
export class OggOpusReader {
  private buf: Buffer = Buffer.alloc(0);
  private partial: Buffer[] = [];
  private count = 0;

  push(chunk: Buffer): OggOpusPacket[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: OggOpusPacket[] = [];
    let off = 0;
    while (this.buf.length - off >= 27) {
      if (this.buf.toString('latin1', off, off + 4) !== 'OggS') throw new Error('lost Ogg page sync');
      const nseg = this.buf[off + 26]!;
      if (this.buf.length - off < 27 + nseg) break;
      let size = 0;
      for (let i = 0; i < nseg; i++) size += this.buf[off + 27 + i]!;
      if (this.buf.length - off < 27 + nseg + size) break;
      let p = off + 27 + nseg;
      for (let i = 0; i < nseg; i++) {
        const lace = this.buf[off + 27 + i]!;
        this.partial.push(this.buf.subarray(p, p + lace));
        p += lace;
        if (lace < 255) {
          const data = Buffer.concat(this.partial);
          this.partial = [];
          const kind = this.count === 0 ? 'head' : this.count === 1 ? 'tags' : 'audio';
          this.count++;
          out.push({ data, kind });
        }
      }
      off = p;
    }
    this.buf = this.buf.subarray(off);
    return out;
  }
}
