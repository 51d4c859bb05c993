/**
 * AAC in FLV → ADTS, for FFmpeg codec processes and recordings (ISO/IEC 14496-3 §1.6.2.1 AudioSpecificConfig, §1.A.2
 * ADTS): the FLV AAC sequence header carries the AudioSpecificConfig; every raw frame gets a
 * 7-byte ADTS header (no CRC) built from it.
 */

/** What an ADTS header needs from the AudioSpecificConfig. */
export interface AdtsConfig {
  /** MPEG-4 audio object type minus 1 (ADTS `profile`, 2 bits): AAC-LC = 1. */
  profile: number;
  samplingIndex: number;
  channelConfig: number;
}

/** Parses an AudioSpecificConfig (the body after the 2-byte FLV AAC header); null when unusable. */
export function parseAsc(asc: Uint8Array): AdtsConfig | null {
  if (asc.length < 2) return null;
  const objectType = asc[0]! >> 3;
  const samplingIndex = ((asc[0]! & 0x07) << 1) | (asc[1]! >> 7);
  const channelConfig = (asc[1]! >> 3) & 0x0f;
  // ADTS can carry object types 1–4 only; HE-AAC (5/29) signals as AAC-LC with SBR implicit.
  const base = objectType === 5 || objectType === 29 ? 2 : objectType;
  if (base < 1 || base > 4 || samplingIndex > 12 || channelConfig === 0 || channelConfig > 7) return null;
  return { profile: base - 1, samplingIndex, channelConfig };
}

/** ADTS header bytes (no CRC: `protection_absent` = 1). */
export const ADTS_HEADER_BYTES = 7;
/** Largest `frame_length` ADTS can state: 13 bits, header included (ISO/IEC 14496-3 §1.A.2.2.2). */
export const ADTS_MAX_FRAME_BYTES = 8191;
/** Largest raw AAC frame one ADTS frame carries (bytes): 8191 − 7 = 8184. */
export const ADTS_MAX_PAYLOAD_BYTES = ADTS_MAX_FRAME_BYTES - ADTS_HEADER_BYTES;

/**
 * One ADTS frame: a 7-byte header without CRC (ISO/IEC 14496-3 §1.A.2.2) followed by `raw`, one
 * raw AAC frame (`raw_data_block`) of at most ADTS_MAX_PAYLOAD_BYTES (8184) bytes.
 * @returns a new Buffer of `raw.length + 7` bytes
 * @throws RangeError when `raw` is longer than 8184 bytes: `frame_length` (13 bits, header
 *   included) cannot state it, and a header that wrapped would corrupt the stream after it. Callers
 *   drop such a frame.
 */
export function adtsFrame(c: AdtsConfig, raw: Uint8Array): Buffer {
  if (raw.length > ADTS_MAX_PAYLOAD_BYTES) {
    throw new RangeError(`AAC frame of ${raw.length} bytes does not fit ADTS (at most ${ADTS_MAX_PAYLOAD_BYTES} bytes)`);
  }
  const out = Buffer.allocUnsafe(raw.length + ADTS_HEADER_BYTES);
  writeAdtsFrame(c, raw, out, 0);
  return out;
}

/**
 * Writes one ADTS frame (7-byte header without CRC, then `raw`) into `out` at `offset`, for
 * writers that size their buffer first (progressive listening). The caller checks
 * `raw.length <= ADTS_MAX_PAYLOAD_BYTES` (8184) and that `out` has `raw.length + 7` bytes there.
 * @returns the offset after the frame
 */
export function writeAdtsFrame(c: AdtsConfig, raw: Uint8Array, out: Uint8Array, offset: number): number {
  const len = raw.length + ADTS_HEADER_BYTES;
  out[offset] = 0xff;
  out[offset + 1] = 0xf1; // MPEG-4, layer 0, no CRC
  out[offset + 2] = (c.profile << 6) | (c.samplingIndex << 2) | (c.channelConfig >> 2);
  out[offset + 3] = ((c.channelConfig & 3) << 6) | (len >> 11);
  out[offset + 4] = (len >> 3) & 0xff;
  out[offset + 5] = ((len & 7) << 5) | 0x1f;
  out[offset + 6] = 0xfc;
  out.set(raw, offset + ADTS_HEADER_BYTES);
  return offset + len;
}
