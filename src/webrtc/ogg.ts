/**
 * A streaming Ogg demuxer (RFC 3533) for the codec process's output: bytes in (any chunking),
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
