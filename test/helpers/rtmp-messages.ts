/**
 * A small RTMP chunk-stream reader in TypeScript, independent of the native parser: the reference
 * the listener tests compare with. Reads either direction after the handshake (C0 C1 C2 or S0 S1
 * S2, 1 + 2 × 1536 bytes): basic headers of 1–3 bytes, message headers of type 0–3, extended
 * timestamps (repeated on type-3 chunks, as FFmpeg writes them, or not), Set Chunk Size. RTMP spec
 * 1.0 §5.3 (chunking), §7.1 (message types); AMF0 (just enough to read command replies).
 * For well-formed recorded or built streams only: it does not validate.
 */

export const HANDSHAKE_BYTES = 1 + 2 * 1536;

export interface RtmpMessage {
  type: number;
  streamId: number;
  /** ms, RTMP clock. */
  timestamp: number;
  body: Buffer;
  /** Offset in the input just after the chunk that completed the message. */
  end: number;
}

interface ChunkStream {
  type: number;
  streamId: number;
  length: number;
  timestamp: number;
  tsField: number;
  extended: boolean;
  parts: Buffer[];
  got: number;
}

/** Every complete message in `bytes` from `start` (default: just after the handshake). */
export function readMessages(bytes: Buffer, start = HANDSHAKE_BYTES): RtmpMessage[] {
  const out: RtmpMessage[] = [];
  const streams = new Map<number, ChunkStream>();
  let chunkSize = 128;
  let p = start;
  while (p < bytes.length) {
    const b0 = bytes[p]!;
    const fmt = b0 >> 6;
    let csid = b0 & 0x3f;
    let h = p + 1;
    if (csid === 0) csid = 64 + bytes[h++]!;
    else if (csid === 1) {
      csid = 64 + bytes[h]! + 256 * bytes[h + 1]!;
      h += 2;
    }
    let s = streams.get(csid);
    if (!s) {
      s = { type: 0, streamId: 0, length: 0, timestamp: 0, tsField: 0, extended: false, parts: [], got: 0 };
      streams.set(csid, s);
    }
    const starting = s.got === 0;
    if (fmt <= 2) {
      let ts = bytes.readUIntBE(h, 3);
      if (fmt <= 1) {
        s.length = bytes.readUIntBE(h + 3, 3);
        s.type = bytes[h + 6]!;
      }
      if (fmt === 0) s.streamId = bytes.readUInt32LE(h + 7);
      h += [11, 7, 3][fmt]!;
      s.extended = ts === 0xffffff;
      if (s.extended) {
        ts = bytes.readUInt32BE(h);
        h += 4;
      }
      s.tsField = ts;
      if (starting) s.timestamp = fmt === 0 ? ts : s.timestamp + ts;
    } else {
      if (s.extended && h + 4 <= bytes.length && bytes.readUInt32BE(h) === s.tsField) h += 4;
      if (starting) s.timestamp += s.tsField;
    }
    const n = Math.min(chunkSize, s.length - s.got);
    if (h + n > bytes.length) break; // a partial chunk at the end
    s.parts.push(bytes.subarray(h, h + n));
    s.got += n;
    p = h + n;
    if (s.got === s.length) {
      const body = Buffer.concat(s.parts);
      out.push({ type: s.type, streamId: s.streamId, timestamp: s.timestamp, body, end: p });
      if (s.type === 1) chunkSize = body.readUInt32BE(0) & 0x7fffffff;
      s.parts = [];
      s.got = 0;
    }
  }
  return out;
}

export type Amf = number | string | boolean | null | undefined | { [k: string]: Amf };

/** AMF0 values one after the other (number, boolean, string, object, null, undefined, ECMA array). */
export function decodeAmf(b: Buffer): Amf[] {
  let p = 0;
  const str = () => {
    const n = b.readUInt16BE(p);
    p += 2;
    const s = b.toString('utf8', p, p + n);
    p += n;
    return s;
  };
  const props = (): Record<string, Amf> => {
    const o: Record<string, Amf> = {};
    for (;;) {
      const k = str();
      if (k === '' && b[p] === 9) {
        p++;
        return o;
      }
      o[k] = value();
    }
  };
  const value = (): Amf => {
    const t = b[p++];
    if (t === 0) {
      p += 8;
      return b.readDoubleBE(p - 8);
    }
    if (t === 1) return b[p++] !== 0;
    if (t === 2) return str();
    if (t === 3) return props();
    if (t === 5) return null;
    if (t === 6) return undefined;
    if (t === 8) {
      p += 4;
      return props();
    }
    throw new Error(`AMF0 type ${t}`);
  };
  const out: Amf[] = [];
  while (p < b.length) out.push(value());
  return out;
}

/** The name of an AMF0 command message (type 20), or '' for any other message. */
export function commandName(m: RtmpMessage): string {
  if (m.type !== 20 || m.body[0] !== 2) return '';
  return m.body.toString('utf8', 3, 3 + m.body.readUInt16BE(1));
}

/**
 * The audio messages (type 8, non-empty) a server session takes from a publisher: those after its
 * `publish` command and before `FCUnpublish` / `deleteStream` / `closeStream`.
 */
export function publishedAudio(clientBytes: Buffer): RtmpMessage[] {
  let publishing = false;
  const audio: RtmpMessage[] = [];
  for (const m of readMessages(clientBytes)) {
    const name = commandName(m);
    if (name === 'publish') publishing = true;
    else if (name === 'FCUnpublish' || name === 'deleteStream' || name === 'closeStream') publishing = false;
    else if (m.type === 8 && publishing && m.body.length > 0) audio.push(m);
  }
  return audio;
}
