/**
 * FLV framing of audio tags (Adobe FLV spec v10.1 §E.2–E.4), for the pipes to and from FFmpeg
 * codec processes: a writer that turns (timestamp, AUDIODATA body) into an FLV byte stream, and an
 * incremental reader that turns FFmpeg's FLV output back into audio tags.
 */

/** The 9-byte FLV header (audio only) followed by PreviousTagSize0. */
export function flvHeader(): Buffer {
  return Buffer.from([0x46, 0x4c, 0x56, 0x01, 0x04, 0x00, 0x00, 0x00, 0x09, 0, 0, 0, 0]);
}

/** One audio tag (type 8) + its PreviousTagSize. `timestampMs` is taken modulo 2^32. */
export function flvAudioTag(timestampMs: number, body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(11 + body.length + 4);
  const ts = timestampMs >>> 0;
  out[0] = 8;
  out.writeUIntBE(body.length, 1, 3);
  out.writeUIntBE(ts & 0xffffff, 4, 3);
  out[7] = ts >>> 24;
  out.writeUIntBE(0, 8, 3);
  out.set(body, 11);
  out.writeUInt32BE(11 + body.length, 11 + body.length);
  return out;
}

/** An audio tag read back: timestamp (ms) and the AUDIODATA body. */
export interface FlvAudioTag {
  timestampMs: number;
  body: Buffer;
}

/** Largest tag body accepted from a codec process (bytes); a larger one means a broken stream. */
const MAX_TAG_BYTES = 1 << 20;

/** Incremental FLV reader: push bytes, get complete audio tags. @throws Error on a malformed stream */
export class FlvReader {
  private buf: Buffer = Buffer.alloc(0);
  private headerDone = false;

  push(chunk: Buffer): FlvAudioTag[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const tags: FlvAudioTag[] = [];
    let off = 0;
    if (!this.headerDone) {
      if (this.buf.length < 13) return tags;
      if (this.buf.toString('latin1', 0, 3) !== 'FLV') throw new Error('not an FLV stream');
      off = this.buf.readUInt32BE(5) + 4;
      this.headerDone = true;
    }
    while (this.buf.length - off >= 11) {
      const type = this.buf[off]! & 0x1f;
      const size = this.buf.readUIntBE(off + 1, 3);
      if (size > MAX_TAG_BYTES) throw new Error(`FLV tag of ${size} bytes`);
      if (this.buf.length - off < 11 + size + 4) break;
      if (type === 8) {
        const ts = (this.buf.readUIntBE(off + 4, 3) | (this.buf[off + 7]! << 24)) >>> 0;
        tags.push({ timestampMs: ts, body: Buffer.from(this.buf.subarray(off + 11, off + 11 + size)) });
      }
      off += 11 + size + 4;
    }
    this.buf = this.buf.subarray(off);
    return tags;
  }
}
