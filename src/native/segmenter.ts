/**
 * The native segmenter (native/binding/segmenter.cc, docs/native-api.md "Segmenter"): sans-I/O,
 * FLV audio bodies in, MPEG-TS or fMP4 segments and LL-HLS parts out as events. Media problems come
 * back as `error` events, never as throws.
 */
import { loadedAddon } from './addon.js';

/** Audio codecs the segmenter takes. */
export type AudioCodec = 'aac' | 'mp3' | 'opus';
/** Output containers: MPEG-TS (AAC, MP3) or fragmented MP4 / CMAF (AAC, MP3, Opus; LL-HLS parts). */
export type Container = 'ts' | 'fmp4';

/** Options of `new Segmenter(...)`. Durations in ms. */
export interface SegmenterOptions {
  container: Container;
  /** Segment target, integer 100..60000 (default 2000). */
  targetDurationMs?: number;
  /** LL-HLS part target (fmp4 only), 0 = no parts (default) or an integer 50..targetDurationMs. */
  partTargetMs?: number;
  /** When set, audio of any other codec is refused with an error event `codec_mismatch`. */
  expectCodec?: AudioCodec;
  /** Largest frame (AAC raw_data_block, MP3 frame, Opus packet; bytes), integer 0..16777215;
   *  larger: error `frame_too_large`, dropped. 0 / unset = no cap (AAC is always capped at 8184,
   *  what one ADTS frame carries). */
  maxFrameBytes?: number;
  /** Frame bytes of one segment, integer 0..4294967295; a frame that would exceed it: error
   *  `segment_too_large`, dropped. 0 / unset = no cap. */
  maxSegmentBytes?: number;
  /**
   * With parts only: whether segment events carry the segment's bytes, the concatenation of its
   * parts' bytes in order (default true). false: their `data` is empty and the caller joins the
   * parts it got — the bytes are not made (and allocated) twice. Throws TypeError when not a boolean.
   */
  segmentBytes?: boolean;
}

/** Stable error codes of `{type: 'error'}` segmenter events (docs/native-api.md). */
export type SegmenterErrorCode =
  | 'audio_before_sequence_header'
  | 'bad_audio_specific_config'
  | 'bad_opus_head'
  | 'bad_opus_packet'
  | 'bad_mp3_header'
  | 'unsupported_codec'
  | 'codec_mismatch'
  | 'invalid_audio_tag'
  | 'frame_too_large'
  | 'segment_too_large';

/** `config`: the stream's codec is known (first sequence header / MP3 frame, or a change). */
export interface ConfigEvent {
  type: 'config';
  codec: AudioCodec;
  /** HLS CODECS / RFC 6381: 'mp4a.40.2', 'mp4a.40.5', 'mp4a.40.29', 'mp4a.40.34' (MP3), 'opus'. */
  codecs: string;
  /** Output sample rate (Hz): the SBR rate for HE-AAC, 48000 for Opus. */
  sampleRate: number;
  channels: number;
  /** AAC only: the object type in `codecs`. */
  audioObjectType?: number;
  /** fmp4 only: the fMP4 timescale (= the sample clock: AAC core rate, MP3 rate, 48000 Opus). */
  timescale?: number;
  /** fmp4 only: the init segment (ftyp + moov) for `#EXT-X-MAP`; replaces the previous one. */
  init?: Buffer;
}

/** A now-playing change (`Segmenter.pushMetadata`) as written into a part / segment. */
export interface SegmenterMetadataMark {
  /** The change's number, from 1 (fmp4: the emsg `id`; the same change in a part and its segment). */
  id: number;
  /** The timestamp it was pushed with (RTMP clock, ms, modulo 2^32). */
  timestampMs: number;
  /** PTS of the audio frame it is presented with (90 kHz, same timeline as the events' `pts90k`). */
  pts90k: number;
  /** fmp4 only: the emsg presentation_time, in `timescale` units (the frame's decode time). */
  presentationTime?: number;
}

/** The fields of `Segmenter.pushMetadata` (docs/behaviour.md §11). UTF-8; each cut to 256 characters. */
export interface SegmenterMetadataFields {
  title: string;
  artist?: string | null;
  album?: string | null;
  url?: string | null;
}

/** `part`: one LL-HLS part (fmp4 with partTargetMs), emitted as soon as it closes. */
export interface PartEvent {
  type: 'part';
  /** Media sequence number of the segment the part belongs to. */
  sequence: number;
  /** Index of the part within its segment, from 0. */
  partIndex: number;
  /** One moof+mdat (external buffer). */
  data: Buffer;
  durationMs: number;
  pts90k: number;
  frames: number;
  independent: true;
  baseMediaDecodeTime: number;
  timescale: number;
  /** Now-playing changes it carries (an emsg each before its moof), in presentation order; absent when none. */
  metadata?: SegmenterMetadataMark[];
}

/** `segment`: a finished, immutable media segment. */
export interface SegmentDoneEvent {
  type: 'segment';
  sequence: number;
  /** TS: 188-byte packets; fmp4: moof+mdat (with parts: exactly its parts' bytes concatenated). */
  data: Buffer;
  /** From sample counts (EXTINF), may be fractional. */
  durationMs: number;
  /** PTS of the first frame, 90 kHz (the same timeline in both containers). */
  pts90k: number;
  discontinuity: boolean;
  frames: number;
  independent: true;
  /** fmp4 with parts: how many parts the segment has. */
  parts?: number;
  /** fmp4 only: tfdt of the first frame, in `timescale` units. */
  baseMediaDecodeTime?: number;
  timescale?: number;
  /** Now-playing changes it carries (fmp4: those of its parts; ts: an ID3 PES each), in
   *  presentation order; absent when none. */
  metadata?: SegmenterMetadataMark[];
}

export interface SegmenterErrorEvent {
  type: 'error';
  code: SegmenterErrorCode | (string & {});
  message: string;
  /** codec_mismatch only. */
  expected?: AudioCodec;
  /** codec_mismatch only: what the tag carried ('aac', 'mp3', 'opus', 'pcm', 'fLaC', ...). */
  received?: string;
}

export type SegmenterEvent = ConfigEvent | PartEvent | SegmentDoneEvent | SegmenterErrorEvent;

/** Per-stream-layer segmenter: FLV audio (AAC, MP3, Opus; classic and Enhanced RTMP) in, MPEG-TS or
 *  fMP4 segments (and LL-HLS parts) cut on audio duration out. Never throws for bad media. */
export interface Segmenter {
  /** One FLV AUDIODATA body with its RTMP timestamp (ms). */
  pushAudio(timestampMs: number, data: Uint8Array): SegmenterEvent[];
  /**
   * A now-playing change at `timestampMs` on the pushAudio clock (RTMP ms). It is presented with
   * the first audio frame not yet written out whose timestamp is ≥ it, or, when none is pending,
   * with the next frame pushed, and goes out with that frame's part and segment as timed ID3
   * (ID3v2.4 TIT2/TPE1/TALB/WXXX): fmp4 an `emsg` (scheme https://aomedia.org/emsg/ID3) before
   * the part's `moof`; ts (MP3) an ID3 PES declared in the PMT (Apple timed metadata). Those
   * events list it in `metadata`. Strings are cut to 256 characters; content never throws.
   * @throws TypeError when timestampMs is not a finite number, fields not an object, title not a
   *   string, or artist/album/url not a string, null or undefined
   */
  pushMetadata(timestampMs: number, fields: SegmenterMetadataFields): void;
  /** Ends the open segment (and part). */
  flush(): SegmenterEvent[];
  /** The next audio starts a new segment flagged `discontinuity`. */
  discontinuity(): void;
}

/** Constructor of Segmenter (see SegmenterOptions). Throws TypeError for invalid options. */
export const Segmenter = (loadedAddon as { Segmenter: new (options: SegmenterOptions) => Segmenter }).Segmenter;
