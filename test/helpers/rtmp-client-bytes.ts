/**
 * What an RTMP publisher sends, as bytes, for the listener tests: the simple handshake (C0 C1 C2),
 * Set Chunk Size, `connect` / `createStream` / `publish` (AMF0), and audio messages — the FLV
 * AUDIODATA bodies of the FFmpeg-made fixtures (test/fixtures/{aac,mp3}/*.flv) or Enhanced RTMP
 * Opus tags from test/fixtures/opus/*.ogg. RTMP spec 1.0 §5.2, §5.3, §7.2; E-RTMP v2 audio.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OggReader, opusPacketSamples } from '../../src/live/media/ogg.js';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures');

/** C0 (version 3), C1 and C2 (zeros: the server checks neither). */
export const HANDSHAKE = Buffer.concat([Buffer.from([3]), Buffer.alloc(2 * 1536)]);

type Amf = number | string | null | { [k: string]: Amf };
/** AMF0 values (number, string, null, object). */
export function amf(...values: Amf[]): Buffer {
  return Buffer.concat(values.map(amfValue));
}
function amfValue(v: Amf): Buffer {
  if (v === null) return Buffer.from([0x05]);
  if (typeof v === 'number') {
    const b = Buffer.alloc(9);
    b.writeDoubleBE(v, 1);
    return b;
  }
  if (typeof v === 'string') {
    const s = Buffer.from(v, 'utf8');
    const h = Buffer.from([0x02, s.length >> 8, s.length & 0xff]);
    return Buffer.concat([h, s]);
  }
  const parts: Buffer[] = [Buffer.from([0x03])];
  for (const [k, val] of Object.entries(v)) {
    const key = Buffer.from(k, 'utf8');
    parts.push(Buffer.from([key.length >> 8, key.length & 0xff]), key, amfValue(val));
  }
  parts.push(Buffer.from([0, 0, 0x09]));
  return Buffer.concat(parts);
}

/** The 12-byte type-0 chunk header of a message (timestamp below 0xFFFFFF). */
export function header(csid: number, type: number, streamId: number, timestamp: number, length: number): Buffer {
  const h = Buffer.alloc(12);
  h[0] = csid & 0x3f;
  h.writeUIntBE(timestamp, 1, 3);
  h.writeUIntBE(length, 4, 3);
  h[7] = type;
  h.writeUInt32LE(streamId, 8);
  return h;
}

/** One message as a type-0 chunk and type-3 continuations of `chunkSize`. */
export function message(csid: number, type: number, streamId: number, timestamp: number, body: Buffer, chunkSize: number): Buffer {
  const out: Buffer[] = [header(csid, type, streamId, timestamp, body.length)];
  for (let o = 0; o < body.length; o += chunkSize) {
    if (o > 0) out.push(Buffer.from([0xc0 | (csid & 0x3f)]));
    out.push(body.subarray(o, o + chunkSize));
  }
  return Buffer.concat(out);
}

export const CHUNK_SIZE = 4096;
/** RTMP audio messages go on this chunk stream (as FFmpeg's do). */
export const AUDIO_CSID = 4;

/** Handshake, Set Chunk Size 4096, connect, createStream and publish of `live/stm_test`. */
export function publishPrefix(key = 'sk_test_key'): Buffer {
  const setChunk = Buffer.alloc(4);
  setChunk.writeUInt32BE(CHUNK_SIZE);
  return Buffer.concat([
    HANDSHAKE,
    message(2, 1, 0, 0, setChunk, 128),
    message(3, 20, 0, 0, amf('connect', 1, { app: 'live/stm_test', type: 'nonprivate', flashVer: 'FMLE/3.0', tcUrl: 'rtmp://127.0.0.1/live/stm_test' }), CHUNK_SIZE),
    message(3, 20, 0, 0, amf('createStream', 2, null), CHUNK_SIZE),
    message(3, 20, 1, 0, amf('publish', 3, null, key, 'live'), CHUNK_SIZE),
  ]);
}

/** Audio messages (FLV AUDIODATA bodies with their timestamps, ms) on message stream 1. */
export function audioMessages(tags: Array<{ ts: number; body: Buffer }>): Buffer {
  return Buffer.concat(tags.map((t) => message(AUDIO_CSID, 8, 1, t.ts, t.body, CHUNK_SIZE)));
}

/** The audio tags of an FLV fixture (e.g. 'mp3/sine44k1_stereo_128k.flv'). */
export function flvAudioTags(rel: string): Array<{ ts: number; body: Buffer }> {
  const b = readFileSync(path.join(fixtures, rel));
  const tags: Array<{ ts: number; body: Buffer }> = [];
  let off = b.readUInt32BE(5) + 4;
  while (off + 11 <= b.length) {
    const size = b.readUIntBE(off + 1, 3);
    const ts = (b.readUIntBE(off + 4, 3) | (b[off + 7]! << 24)) >>> 0;
    if (off + 11 + size > b.length) break;
    if (b[off] === 8) tags.push({ ts, body: b.subarray(off + 11, off + 11 + size) });
    off += 11 + size + 4;
  }
  return tags;
}

/** An Enhanced RTMP audio tag body: ExHeader byte (SoundFormat 9 | AudioPacketType), FourCC, payload. */
export function exAudio(packetType: number, fourCc: string, payload: Buffer): Buffer {
  return Buffer.concat([Buffer.from([0x90 | packetType]), Buffer.from(fourCc, 'latin1'), payload]);
}

/** E-RTMP Opus tags of an Ogg Opus fixture: SequenceStart (OpusHead), then CodedFrames per packet. */
export function opusTags(rel: string): Array<{ ts: number; body: Buffer }> {
  const packets = new OggReader().push(readFileSync(path.join(fixtures, rel)));
  const head = packets.shift()!;
  packets.shift(); // OpusTags
  const tags = [{ ts: 0, body: exAudio(0, 'Opus', head) }];
  let samples = 0;
  for (const p of packets) {
    tags.push({ ts: Math.floor(samples / 48), body: exAudio(1, 'Opus', p) });
    samples += opusPacketSamples(p);
  }
  return tags;
}
