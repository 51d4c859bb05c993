/**
 * The audio codecs Skylark takes in and the one reader of the FLV / Enhanced RTMP audio tag header
 * (FLV spec v10.1 §E.4.2.1 AUDIODATA; Enhanced RTMP v2 "ExAudioTagHeader"). Every JS part that
 * needs to know what an ingest audio body carries asks `readAudioTag`; the C++ core has its own
 * (native/core/codec/flv_audio) for the segmenter and the RTMP listener.
 */

import type { AudioCodec } from '../../native/segmenter.js';

/** An ingest codec (docs/behaviour.md §2 `codec`): declared once, by the native segmenter that takes it. */
export type { AudioCodec };

/** Every AudioCodec, for validation and loops. */
export const AUDIO_CODECS: readonly AudioCodec[] = ['aac', 'mp3', 'opus'];

/** Whether `s` names an AudioCodec. */
export const isAudioCodec = (s: string): s is AudioCodec => s === 'aac' || s === 'mp3' || s === 'opus';

/**
 * What one audio body carries: a sequence header (AAC AudioSpecificConfig, E-RTMP SequenceStart
 * such as OpusHead), a coded frame (AAC raw, E-RTMP CodedFrames, classic MP3), or anything else
 * (E-RTMP SequenceEnd, MultichannelConfig, a body too short to tell).
 */
export type AudioPacketKind = 'header' | 'frame' | 'other';

/** One audio body, read. */
export interface AudioTag {
  /**
   * The codec: an AudioCodec, else the FLV SoundFormat's name (`pcm`, `speex`, …) or the E-RTMP
   * FourCC (`fLaC`, …); 'unknown' for an empty body.
   */
  codec: AudioCodec | (string & {});
  kind: AudioPacketKind;
  /** The codec payload after the tag header (a view of the body, not a copy). */
  payload: Uint8Array;
}

const SOUND_FORMATS = ['pcm', 'adpcm', 'mp3', 'pcm_le', 'nellymoser16', 'nellymoser8', 'nellymoser', 'g711a', 'g711u', 'exheader', 'aac', 'speex'];
const EMPTY = new Uint8Array(0);

/**
 * Reads the tag header of one FLV AUDIODATA body: byte 0 is SoundFormat(4) | rate(2) | size(1) |
 * type(1); AAC (10) adds AACPacketType (0 = AudioSpecificConfig); MP3 (2, and 14 = MP3 8 kHz) has
 * none; ExHeader (9) is byte 0 = 9 << 4 | AudioPacketType, then a FourCC (`Opus`, `mp4a`, `.mp3`).
 * Pure; never throws (a body too short to tell is `other`).
 */
export function readAudioTag(d: Uint8Array): AudioTag {
  if (d.length === 0) return { codec: 'unknown', kind: 'other', payload: EMPTY };
  const format = d[0]! >> 4;
  if (format === 10) {
    if (d.length < 2) return { codec: 'aac', kind: 'other', payload: EMPTY };
    return { codec: 'aac', kind: d[1] === 0 ? 'header' : 'frame', payload: d.subarray(2) };
  }
  if (format === 2 || format === 14) return { codec: 'mp3', kind: d.length > 1 ? 'frame' : 'other', payload: d.subarray(1) };
  if (format === 9) {
    if (d.length < 5) return { codec: 'exheader', kind: 'other', payload: EMPTY };
    const fourCc = String.fromCharCode(d[1]!, d[2]!, d[3]!, d[4]!);
    const codec = fourCc === 'Opus' ? 'opus' : fourCc === 'mp4a' ? 'aac' : fourCc === '.mp3' ? 'mp3' : fourCc;
    const packetType = d[0]! & 0x0f;
    const payload = d.subarray(5);
    const kind: AudioPacketKind = packetType === 0 ? 'header' : packetType === 1 && payload.length > 0 ? 'frame' : 'other';
    return { codec, kind, payload };
  }
  return { codec: SOUND_FORMATS[format] ?? `format${format}`, kind: 'other', payload: EMPTY };
}

