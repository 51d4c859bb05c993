/**
 * Reading our own MPEG-TS segments back (ISO/IEC 13818-1): PAT → PMT → the audio elementary
 * stream's PES packets, as views into the segment (a PES spans TS packets, so its payload is a list
 * of views; nothing is copied). What progressive listening (src/delivery/progressive/) turns back into MP3
 * frames (or ADTS). Pure functions over `(data, offset)`.
 *
 * Read: §2.4.3.2 transport packet header, §2.4.3.4 adaptation field (skipped), §2.4.4.3 PAT,
 * §2.4.4.8 PMT (the first MPEG audio, ADTS AAC stream; other streams such as timed ID3 metadata
 * are ignored), §2.4.3.6 PES header (PTS). Each segment is self-contained (PAT and PMT first).
 */

/** A malformed or unsupported transport stream; `message` says what and where. */
export class TsReadError extends Error {
  override name = 'TsReadError';
}

/** One PES packet of the audio stream: its PTS (90 kHz, null without) and payload views in order. */
export interface TsPes {
  pts: number | null;
  payload: Uint8Array[];
  /** Total payload bytes. */
  bytes: number;
}

/** The audio stream of a segment. */
export interface TsAudio {
  /** PMT stream_type: 0x03 / 0x04 MPEG-1/2 audio (MP3), 0x0F ADTS AAC. */
  streamType: number;
  pid: number;
  pes: TsPes[];
}

const PACKET = 188;
/** Stream types read as audio: MPEG-1 audio, MPEG-2 audio, ADTS AAC. */
const AUDIO_TYPES = new Set([0x03, 0x04, 0x0f]);

/** The payload start of the packet at `o` (after the adaptation field), or -1 when it has none. */
function payloadStart(d: Uint8Array, o: number): number {
  const afc = (d[o + 3]! >> 4) & 3;
  if (afc === 0 || afc === 2) return -1;
  let p = o + 4;
  if (afc === 3) p += 1 + d[p]!;
  return p > o + PACKET ? -1 : p;
}

/** The section of a PSI packet (after pointer_field), as [start, end) within the packet. */
function section(d: Uint8Array, o: number, p: number): [number, number] {
  const start = p + 1 + d[p]!;
  if (start + 3 > o + PACKET) throw new TsReadError(`PSI section at ${o} is truncated`);
  const len = ((d[start + 1]! & 0x0f) << 8) | d[start + 2]!;
  const end = start + 3 + len - 4; // without CRC_32
  if (end > o + PACKET) throw new TsReadError(`PSI section at ${o} spans packets (not written by Skylark)`);
  return [start, end];
}

/**
 * The audio stream of one TS segment: its PES packets in order, payloads as views into `d`.
 * @throws TsReadError when `d` is not whole 188-byte packets with sync bytes, has no PAT/PMT
 *   before the audio, or no audio stream
 */
export function readTsAudio(d: Uint8Array): TsAudio {
  if (d.length % PACKET !== 0) throw new TsReadError(`segment of ${d.length} bytes is not whole TS packets`);
  let pmtPid = -1;
  let audio: TsAudio | null = null;
  let cur: TsPes | null = null;
  for (let o = 0; o < d.length; o += PACKET) {
    if (d[o] !== 0x47) throw new TsReadError(`no sync byte at ${o}`);
    const pusi = (d[o + 1]! & 0x40) !== 0;
    const pid = ((d[o + 1]! & 0x1f) << 8) | d[o + 2]!;
    const p = payloadStart(d, o);
    if (p < 0) continue;
    if (pid === 0 && pusi) {
      const [s, e] = section(d, o, p);
      for (let i = s + 8; i + 4 <= e; i += 4) {
        const program = (d[i]! << 8) | d[i + 1]!;
        if (program !== 0) {
          pmtPid = ((d[i + 2]! & 0x1f) << 8) | d[i + 3]!;
          break;
        }
      }
    } else if (pid === pmtPid && pusi && !audio) {
      const [s, e] = section(d, o, p);
      const infoLen = ((d[s + 10]! & 0x0f) << 8) | d[s + 11]!;
      for (let i = s + 12 + infoLen; i + 5 <= e; ) {
        const type = d[i]!;
        const esPid = ((d[i + 1]! & 0x1f) << 8) | d[i + 2]!;
        const esInfo = ((d[i + 3]! & 0x0f) << 8) | d[i + 4]!;
        if (AUDIO_TYPES.has(type)) {
          audio = { streamType: type, pid: esPid, pes: [] };
          break;
        }
        i += 5 + esInfo;
      }
    } else if (audio && pid === audio.pid) {
      let q = p;
      if (pusi) {
        if (q + 9 > o + PACKET || d[q] !== 0 || d[q + 1] !== 0 || d[q + 2] !== 1) throw new TsReadError(`no PES start code at ${q}`);
        const flags = d[q + 7]!;
        const headerLen = d[q + 8]!;
        let pts: number | null = null;
        if (flags & 0x80) {
          const t = q + 9;
          pts = (((d[t]! >> 1) & 0x07) * 2 ** 30) + (((d[t + 1]! << 7) | (d[t + 2]! >> 1)) << 15) + ((d[t + 3]! << 7) | (d[t + 4]! >> 1));
        }
        q += 9 + headerLen;
        if (q > o + PACKET) throw new TsReadError(`PES header at ${p} runs past its packet`);
        cur = { pts, payload: [], bytes: 0 };
        audio.pes.push(cur);
      }
      if (cur && q < o + PACKET) {
        cur.payload.push(d.subarray(q, o + PACKET));
        cur.bytes += o + PACKET - q;
      }
    }
  }
  if (!audio) throw new TsReadError(pmtPid < 0 ? 'no PAT' : 'no audio stream in the PMT');
  return audio;
}
