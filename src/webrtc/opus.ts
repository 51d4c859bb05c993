/**
 * Opus packet facts the WebRTC side needs (RFC 6716 §3.1): the duration of a packet from its TOC
 * byte, in 48 kHz samples (the RTP clock of Opus, RFC 7587 §4.1).
 */

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
