/**
 * Ogg (RFC 3533) → packets, and Ogg Opus (RFC 7845) → Enhanced RTMP Opus audio tags, for tests:
 * FFmpeg 5.1 cannot put Opus in FLV/RTMP, so tests encode Ogg Opus with FFmpeg and build the E-RTMP
 * tags here (FourCC 'Opus': SequenceStart = OpusHead, CodedFrames = one Opus packet).
 */

/** The packets of an Ogg file with one logical stream (what FFmpeg writes for Opus); lacing values
 *  of 255 continue a packet, across pages too. */
export function oggPackets(file: Uint8Array): Buffer[] {
  const b = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  const packets: Buffer[] = [];
  let cur: Buffer[] = [];
  let off = 0;
  while (off + 27 <= b.length && b.toString('latin1', off, off + 4) === 'OggS') {
    const nseg = b[off + 26]!;
    let body = off + 27 + nseg;
    for (let i = 0; i < nseg; i++) {
      const len = b[off + 27 + i]!;
      if (body + len > b.length) return packets;
      cur.push(b.subarray(body, body + len));
      body += len;
      if (len < 255) {
        packets.push(Buffer.concat(cur));
        cur = [];
      }
    }
    off = body;
  }
  return packets;
}

/** 48 kHz samples of one Opus packet from its TOC (RFC 6716 §3.1); 0 if malformed. */
export function opusPacketSamples(p: Uint8Array): number {
  if (p.length < 1) return 0;
  const config = p[0]! >> 3;
  const frame = config < 12 ? [480, 960, 1920, 2880][config & 3]! : config < 16 ? (config & 1 ? 960 : 480) : 120 << (config & 3);
  const code = p[0]! & 3;
  const count = code === 0 ? 1 : code < 3 ? 2 : p.length > 1 ? p[1]! & 0x3f : 0;
  const n = frame * count;
  return n > 5760 ? 0 : n;
}

/** An Enhanced RTMP audio tag body: (9 << 4 | packetType), FourCC, payload. */
export function exAudioTag(packetType: number, fourCc: string, payload: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([0x90 | packetType]), Buffer.from(fourCc, 'latin1'), payload]);
}

export interface Tag {
  timestamp: number;
  body: Buffer;
}

/** E-RTMP Opus tags from an Ogg Opus file: OpusHead as SequenceStart, then each audio packet (the
 *  OpusTags packet skipped) as CodedFrames, timestamps (ms) from the running TOC durations. */
export function opusTagsFromOgg(file: Uint8Array): { tags: Tag[]; samples: number; preSkip: number } {
  const packets = oggPackets(file);
  const head = packets[0];
  if (!head || head.toString('latin1', 0, 8) !== 'OpusHead') throw new Error('not Ogg Opus');
  const tags: Tag[] = [{ timestamp: 0, body: exAudioTag(0, 'Opus', head) }];
  let samples = 0;
  for (const p of packets.slice(2)) {
    tags.push({ timestamp: Math.floor(samples / 48), body: exAudioTag(1, 'Opus', p) });
    samples += opusPacketSamples(p);
  }
  return { tags, samples, preSkip: head.readUInt16LE(10) };
}
