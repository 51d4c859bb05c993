/**
 * The format an ingest audio body announces (src/live/media/audio-format.ts): AAC
 * AudioSpecificConfig (ISO/IEC 14496-3 §1.6.2.1, with explicit SBR), MPEG audio frame headers of
 * the three versions, Opus identification headers (RFC 7845 §5.1), read from FLV audio bodies.
 */
import { describe, expect, it } from 'vitest';
import { aacFormat, audioFormatOf, mp3Format, opusFormat } from '../../../../src/live/media/audio-format.js';
import { readAudioTag } from '../../../../src/live/media/codec.js';

const flv = (...bytes: number[]) => readAudioTag(Uint8Array.from(bytes));

/** An OpusHead packet with `channels` and input rate `inputHz`. */
function opusHead(channels: number, inputHz: number): Uint8Array {
  const b = Buffer.alloc(19);
  b.write('OpusHead', 0, 'latin1');
  b[8] = 1;
  b[9] = channels;
  b.writeUInt32LE(inputHz, 12);
  return b;
}

describe('audio formats', () => {
  it('reads AAC AudioSpecificConfigs: LC at 44.1 and 48 kHz, mono, explicit HE-AAC, an explicit frequency', () => {
    expect(aacFormat(Uint8Array.from([0x12, 0x10]))).toEqual({ sampleRate: 44100, channels: 2 });
    expect(aacFormat(Uint8Array.from([0x11, 0x90]))).toEqual({ sampleRate: 48000, channels: 2 });
    expect(aacFormat(Uint8Array.from([0x12, 0x08]))).toEqual({ sampleRate: 44100, channels: 1 });
    // SBR (type 5): core 22 050 Hz, extension 44 100 Hz: the decoder outputs 44.1 kHz.
    expect(aacFormat(Uint8Array.from([0x2b, 0x92, 0x08]))).toEqual({ sampleRate: 44100, channels: 2 });
    // Index 15: a 24-bit frequency (37 800 Hz) follows.
    expect(aacFormat(Uint8Array.from([0x17, 0x80, 0x49, 0xd4, 0x10]))).toEqual({ sampleRate: 37800, channels: 2 });
    expect(aacFormat(Uint8Array.from([0x12]))).toBeNull();
    expect(aacFormat(Uint8Array.from([0x16, 0x90]))).toBeNull(); // index 13: reserved
  });

  it('reads MPEG audio frame headers of MPEG-1, MPEG-2 and MPEG-2.5, stereo and mono', () => {
    expect(mp3Format(Uint8Array.from([0xff, 0xfb, 0x90, 0x64]))).toEqual({ sampleRate: 44100, channels: 2 });
    expect(mp3Format(Uint8Array.from([0xff, 0xfb, 0x94, 0xc4]))).toEqual({ sampleRate: 48000, channels: 1 });
    expect(mp3Format(Uint8Array.from([0xff, 0xf3, 0x90, 0x44]))).toEqual({ sampleRate: 22050, channels: 2 });
    expect(mp3Format(Uint8Array.from([0xff, 0xe3, 0x98, 0x44]))).toEqual({ sampleRate: 8000, channels: 2 });
    expect(mp3Format(Uint8Array.from([0xff, 0xfb, 0x9c, 0x64]))).toBeNull(); // frequency index 3: reserved
    expect(mp3Format(Uint8Array.from([0x49, 0x44, 0x33, 0x04]))).toBeNull(); // not a frame header
  });

  it('reads Opus identification headers: 48 kHz whatever the input rate', () => {
    expect(opusFormat(opusHead(1, 44100))).toEqual({ sampleRate: 48000, channels: 1 });
    expect(opusFormat(opusHead(2, 16000))).toEqual({ sampleRate: 48000, channels: 2 });
    expect(opusFormat(opusHead(0, 48000))).toBeNull();
    expect(opusFormat(Buffer.from('OpusTags\0\0\0\0\0\0\0\0\0\0\0'))).toBeNull();
  });

  it('reads FLV and Enhanced RTMP audio bodies: headers and MP3 frames; coded AAC frames and other codecs carry none', () => {
    expect(audioFormatOf(flv(0xaf, 0x00, 0x12, 0x10))).toEqual({ sampleRate: 44100, channels: 2 });
    expect(audioFormatOf(flv(0xaf, 0x01, 0x12, 0x10))).toBeNull();
    expect(audioFormatOf(flv(0x2f, 0xff, 0xfb, 0x90, 0xc4))).toEqual({ sampleRate: 44100, channels: 1 });
    expect(audioFormatOf(readAudioTag(Buffer.concat([Buffer.from([0x90]), Buffer.from('Opus'), opusHead(2, 48000)])))).toEqual({ sampleRate: 48000, channels: 2 });
    expect(audioFormatOf(flv(0x0f, 0x00, 0x00))).toBeNull();
  });
});
