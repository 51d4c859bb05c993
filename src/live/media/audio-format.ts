/**
 * The output format (sample rate, channel count) an ingest audio body announces, read from the
 * codec's own header: AAC from its AudioSpecificConfig (ISO/IEC 14496-3 §1.6.2.1), MP3 from a
 * frame header (ISO/IEC 11172-3 §2.4.1.3, ISO/IEC 13818-3 §2.4.2.3 and MPEG-2.5), Opus from its
 * identification header (RFC 7845 §5.1: the output is 48 kHz whatever the input rate was). The
 * stream's fallback is encoded at the format of its last live source (docs/streams.md
 * "Fallback"), so that a switch never changes what a decoder is fed.
 */
import type { AudioTag } from './codec.js';

/** A decoded audio format: samples per second (Hz) and channels. */
export interface AudioFormat {
  sampleRate: number;
  channels: number;
}

/** The format a stream's fallback takes before any live source has published: 48 kHz stereo. */
export const DEFAULT_AUDIO_FORMAT: AudioFormat = { sampleRate: 48000, channels: 2 };

/** ISO/IEC 14496-3 Table 1.18 samplingFrequencyIndex → Hz (index 15: explicit 24-bit value). */
const AAC_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];
/** MPEG audio sampling_frequency per version (bits 19–20 of the header: 3 = MPEG-1, 2 = MPEG-2, 0 = MPEG-2.5). */
const MP3_RATES: Record<number, number[]> = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };

/** Reads `n` bits from `d` at bit offset `pos.bit` (most significant first); -1 past the end. */
function bits(d: Uint8Array, pos: { bit: number }, n: number): number {
  let v = 0;
  for (let i = 0; i < n; i++, pos.bit++) {
    const byte = d[pos.bit >> 3];
    if (byte === undefined) return -1;
    v = v * 2 + ((byte >> (7 - (pos.bit & 7))) & 1);
  }
  return v;
}

/** The sampling frequency at `pos` (index, or an explicit 24-bit value after index 15); 0 when unknown. */
function aacRate(d: Uint8Array, pos: { bit: number }): number {
  const index = bits(d, pos, 4);
  if (index === 15) return Math.max(0, bits(d, pos, 24));
  return AAC_RATES[index] ?? 0;
}

/**
 * The output format of an AudioSpecificConfig: the core rate, or the SBR extension rate when the
 * config signals SBR explicitly (audioObjectType 5 or 29, §1.6.2.1); channelConfiguration 1–6 as
 * is, 7 as 8 channels; 0 (a program config element) as stereo. Null when it is too short or odd.
 */
export function aacFormat(asc: Uint8Array): AudioFormat | null {
  const pos = { bit: 0 };
  let type = bits(asc, pos, 5);
  if (type === 31) type = 32 + bits(asc, pos, 6);
  let rate = aacRate(asc, pos);
  const config = bits(asc, pos, 4);
  if (type === 5 || type === 29) rate = aacRate(asc, pos) || rate;
  if (rate <= 0 || config < 0 || config > 7) return null;
  return { sampleRate: rate, channels: config === 0 ? 2 : config === 7 ? 8 : config };
}

/** The format of the MPEG audio frame header at the start of `frame`, or null when there is none. */
export function mp3Format(frame: Uint8Array): AudioFormat | null {
  if (frame.length < 4 || frame[0] !== 0xff || (frame[1]! & 0xe0) !== 0xe0) return null;
  const rate = MP3_RATES[(frame[1]! >> 3) & 3]?.[(frame[2]! >> 2) & 3];
  if (!rate) return null;
  return { sampleRate: rate, channels: (frame[3]! >> 6) === 3 ? 1 : 2 };
}

/** The format of an Opus identification header (`OpusHead`, RFC 7845 §5.1): 48 kHz, its channel count; null when it is not one. */
export function opusFormat(head: Uint8Array): AudioFormat | null {
  if (head.length < 19 || Buffer.from(head.subarray(0, 8)).toString('latin1') !== 'OpusHead') return null;
  const channels = head[9]!;
  return channels > 0 ? { sampleRate: 48000, channels } : null;
}

/**
 * The format one ingest audio body announces (codec.ts `readAudioTag`): an AAC or Opus sequence
 * header, or an MP3 frame (which carries its own header). Null for every other body (coded AAC
 * and Opus frames, other codecs, bodies too short). Pure; never throws.
 */
export function audioFormatOf(tag: AudioTag): AudioFormat | null {
  if (tag.codec === 'aac') return tag.kind === 'header' ? aacFormat(tag.payload) : null;
  if (tag.codec === 'opus') return tag.kind === 'header' ? opusFormat(tag.payload) : null;
  if (tag.codec === 'mp3') return tag.kind === 'frame' ? mp3Format(tag.payload) : null;
  return null;
}
