// The HLS segmenter: FLV AUDIODATA bodies (classic FLV and Enhanced RTMP) with their RTMP timestamps
// in; MPEG-TS or fragmented MP4 (CMAF) segments, and LL-HLS parts, cut on audio duration out
// (docs/native-api.md "Segmenter"; RFC 8216 §3.2-§3.3, §4.3.2.1, §4.3.2.3; RFC 8216bis parts).
//
// Codecs in: AAC (SoundFormat 10, E-RTMP FourCC 'mp4a': sequence header = AudioSpecificConfig, then
// one raw_data_block per tag), MP3 (SoundFormat 2/14, E-RTMP '.mp3': any run of bytes; frames are
// found by Mp3FrameSplitter, no sequence header), Opus (E-RTMP 'Opus': sequence header = OpusHead,
// then one Opus packet per tag, duration from its TOC). Containers out: MPEG-TS (AAC as ADTS
// stream_type 0x0F, MP3 as 0x03/0x04) and fMP4 (AAC/MP3 'mp4a'+esds, Opus 'Opus'+dOps). Opus is
// carried in fMP4 only.
//
// Timing: sample counts, not RTMP timestamps. Frame n of a timeline is presented at
//   origin + samples_before_n * 90000 / clock_rate               (90 kHz, `pts90k`)
//   origin_dts + samples_before_n                                  (fMP4 tfdt, timescale = clock_rate)
// where clock_rate is the AAC core rate, the MP3 rate, or 48000 for Opus, and origin_dts =
// origin * clock_rate / 90000 each time the timeline is (re-)originated. The first frame anchors the
// timeline at PTS = first RTMP timestamp * 90 + 0.7 s (the TS PCR lead: both containers share it, so
// pts90k of the TS and fMP4 layers of one stream agree). RTMP timestamps are only compared with the
// sample clock:
//   * drift within ±1 s (kResyncThresholdMs): ignored (jitter, encoder clock skew).
//   * RTMP clock ahead by more than 1 s (the publisher dropped audio): the open segment is closed,
//     the timeline jumps forward to the RTMP clock, and the next segment is flagged discontinuity.
//   * RTMP clock behind by more than 1 s (the publisher restarted its clock): PTS never go back;
//     only the RTMP reference is re-anchored; no cut.
// RTMP timestamps are 32-bit ms and wrap after ~49.7 days; deltas are taken modulo 2^32.
//
// Cutting (the same rule for every layer and container, so segmenters fed the same timeline cut at
// the same frames): a segment is closed, and emitted at once, on the first frame boundary where its
// duration reaches the target; with parts (fMP4, part_target_ms > 0) a part is closed on the first
// frame boundary where it reaches the part target, and closing a segment closes its open part. A
// segment's bytes are exactly its parts' bytes concatenated (each part is one moof+mdat); every part
// and segment starts with an independent frame (audio). flush() and discontinuities close early.
//
// Configuration: the first sequence header (AAC, Opus) or MP3 frame configures the stream and emits
// `config` (with the init segment in fMP4). An identical one is ignored; a different valid one (or
// another codec) closes the open segment, emits a new `config` and flags the next segment
// discontinuity (PTS continue, re-timed at the new rate). A malformed one is an error event and the
// previous config stays in force.
//
// Byte caps (SegmenterOptions; 0 = none): a frame (AAC raw_data_block, Opus packet, MP3 frame) over
// max_frame_bytes is dropped with frame_too_large (AAC frames over 8184 bytes, what one ADTS frame
// carries, always are); a frame that would take the open segment's frame bytes over
// max_segment_bytes is dropped with segment_too_large. Dropped frames leave the sample clock
// behind the RTMP clock, so a run of them past 1 s re-anchors the timeline as any gap does.
//
// Timed metadata (push_metadata; docs/behaviour.md §11 "Now playing"): a now-playing change becomes one
// ID3v2.4 tag (mux/id3) presented with one audio frame: the first frame not yet written out (the
// open part with parts, else the open segment) whose RTMP timestamp is >= the change's, or, when
// no such frame is pending, the next frame pushed. It is written with that frame:
//   * fMP4: an `emsg` box (version 1, scheme https://aomedia.org/emsg/ID3, value "", timescale =
//     the track timescale, presentation_time = that frame's decode time (tfdt units),
//     event_duration 0xFFFFFFFF, id = the change's number) just before the `moof` of the fragment
//     holding the frame, i.e. at the start of that LL-HLS part. A segment is still exactly its parts
//     concatenated, so it carries the emsg before the moof of that same fragment (AOM ID3-in-CMAF:
//     presentation_time within the fragment's interval); hls.js reads every top-level emsg of a
//     part or a segment. Without parts the fragment is the segment.
//   * MPEG-TS, MP3: an ID3 PES (stream_id 0xBD, PTS = the frame's PTS) on its own PID, just before
//     the audio PES that holds that frame; the PMT of every MP3 segment declares that stream
//     (mux/ts/psi.h), with or without metadata. AAC in MPEG-TS (no HLS layer uses it: AAC layers are
//     fMP4) keeps its audio-only PMT and drops changes.
// The part / segment events list the changes they carry (`metadata`). At most one change per frame
// (a later one for the same frame replaces it) and kMaxMetadataPerFragment per fragment (fMP4) or
// segment (TS): one more drops the earliest-presented change of that fragment (it would be
// superseded within the fragment anyway). Strings are cut to 256 characters (mux/id3/text.h).
// Nothing else changes: output without changes is byte for byte what it was.
//
// Errors (the tag or the bytes are dropped, the segmenter goes on; one event per tag):
//   audio_before_sequence_header, bad_audio_specific_config, bad_opus_head, bad_opus_packet,
//   bad_mp3_header, unsupported_codec, codec_mismatch (with expected/received), invalid_audio_tag,
//   frame_too_large, segment_too_large.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/codec/aac.h"
#include "core/codec/flv_audio.h"
#include "core/codec/mp3.h"
#include "core/codec/opus.h"
#include "core/mux/fmp4/boxes.h"
#include "core/mux/id3/tag.h"
#include "core/mux/ts/segment_writer.h"

namespace skylark::segment {

inline constexpr uint32_t kDefaultTargetDurationMs = 2000;
inline constexpr int64_t kResyncThresholdMs = 1000;

/** Stable error codes (the `code` JS sees). */
inline constexpr const char* kErrAudioBeforeSequenceHeader = "audio_before_sequence_header";
inline constexpr const char* kErrBadAudioSpecificConfig = "bad_audio_specific_config";
inline constexpr const char* kErrBadOpusHead = "bad_opus_head";
inline constexpr const char* kErrBadOpusPacket = "bad_opus_packet";
inline constexpr const char* kErrBadMp3Header = "bad_mp3_header";
inline constexpr const char* kErrUnsupportedCodec = "unsupported_codec";
inline constexpr const char* kErrCodecMismatch = "codec_mismatch";
inline constexpr const char* kErrInvalidAudioTag = "invalid_audio_tag";
inline constexpr const char* kErrFrameTooLarge = "frame_too_large";
inline constexpr const char* kErrSegmentTooLarge = "segment_too_large";

/** Changes kept per fragment (fMP4: a part, or a segment without parts) or segment (TS). */
inline constexpr size_t kMaxMetadataPerFragment = 4;

enum class Container : uint8_t { kTs, kFmp4 };
using codec::AudioCodec;

struct SegmenterOptions {
  Container container = Container::kTs;
  uint32_t target_duration_ms = kDefaultTargetDurationMs;  // 0 = default
  uint32_t part_target_ms = 0;           // fMP4 only; 0 = no parts
  AudioCodec expect = AudioCodec::kNone; // not kNone: any other codec is codec_mismatch
  uint32_t max_frame_bytes = 0;          // larger frames: frame_too_large (0 = no cap)
  uint32_t max_segment_bytes = 0;        // frame bytes of one segment: segment_too_large (0 = no cap)
  // fMP4 with parts: whether segment events carry the segment's bytes (the concatenation of its
  // parts' bytes, in order). false: they carry none (empty `data`) and the consumer joins the parts
  // it got, so the bytes are not made twice. Ignored without parts.
  bool segment_bytes = true;
};

/** One now-playing change as written into a part / segment. */
struct MetadataMark {
  uint32_t id = 0;                 // the change's number (from 1; the fMP4 emsg id)
  uint32_t timestamp_ms = 0;       // as pushed (RTMP clock, ms)
  uint64_t pts90k = 0;             // PTS of the frame it is presented with (90 kHz, not wrapped)
  uint64_t presentation_time = 0;  // fMP4: emsg presentation_time (timescale units); TS: 0
};

struct SegmenterEvent {
  enum class Type : uint8_t { kConfig, kSegment, kPart, kError } type = Type::kError;
  // kConfig
  AudioCodec codec = AudioCodec::kNone;
  char codecs[16] = {};          // RFC 6381 / HLS CODECS: "mp4a.40.2", "mp4a.40.34" (MP3), "opus"
  uint32_t sample_rate = 0;      // output rate, Hz (the SBR rate for HE-AAC, 48000 for Opus)
  uint32_t channels = 0;         // output channels
  uint8_t audio_object_type = 0; // AAC only: as in `codecs` (2 LC, 5 HE, 29 HEv2, ...)
  uint32_t timescale = 0;        // fMP4 timescale = sample clock rate (kConfig, kSegment, kPart)
  std::vector<uint8_t> init;     // fMP4 only: the init segment (ftyp + moov)
  // kSegment / kPart
  uint64_t sequence = 0;         // media sequence number of the segment (from 0); for a part: of
                                 // the segment it belongs to
  uint32_t part_index = 0;       // kPart: index within its segment, from 0; kSegment: number of parts
  std::vector<uint8_t> data;     // TS: multiple of 188 bytes; fMP4: moof+mdat (segment: its parts')
  double duration_ms = 0;        // samples * 1000 / clock rate
  uint64_t pts90k = 0;           // PTS of the first frame, 90 kHz, not wrapped
  uint64_t base_media_decode_time = 0;  // fMP4: tfdt of the first frame (timescale units)
  bool discontinuity = false;    // kSegment only
  bool independent = true;       // always (audio frames are all sync samples)
  uint32_t frames = 0;
  std::vector<MetadataMark> metadata;  // now-playing changes it carries, in presentation order
  // kError
  const char* code = "";
  std::string message;
  std::string expected, received;  // codec_mismatch only
};

class Segmenter {
 public:
  explicit Segmenter(const SegmenterOptions& options = {});

  /** One FLV AUDIODATA body with its RTMP timestamp (ms, 32-bit clock); appends events to `out`. */
  void push_audio(uint32_t timestamp_ms, const uint8_t* data, size_t size, std::vector<SegmenterEvent>& out);
  /** A now-playing change at `timestamp_ms` on the push_audio clock (see "Timed metadata" above).
   *  Emits nothing itself: the change goes out with the part / segment of its frame. */
  void push_metadata(uint32_t timestamp_ms, const mux::id3::NowPlaying& fields);
  /** Closes the open segment (emitted when it holds audio). */
  void flush(std::vector<SegmenterEvent>& out);
  /** The next audio closes the open segment and starts a new one flagged discontinuity; PTS carry
   *  on from the end of the timeline, re-anchored to the new RTMP clock. MP3 bytes pending from the
   *  old publisher are dropped. */
  void discontinuity();

  /** Media time (ms) the open part (with parts) or segment still needs before it reaches its
   *  target, i.e. roughly how soon a frame will close it; 0 when unknown (not configured, nothing
   *  open). Ingest reads lazily while this is large (binding/rtmp_addon.cc merged reads). */
  uint32_t ms_to_next_cut() const;

  /** Bytes the segmenter holds for the open segment: its frames not yet written, the parts written
   *  so far (fMP4 with parts), MP3 bytes waiting for the rest of their frame and ID3 tags not yet
   *  written (at most kMaxMetadataPerFragment + 1 of ≤ mux::id3::kMaxNowPlayingTagSize bytes). */
  size_t held_bytes() const { return raw_.size() + seg_bytes_.size() + mp3_.pending() + meta_bytes_; }
  /** Now-playing changes waiting for their frame to be written. */
  size_t pending_metadata() const { return meta_.size() + (has_meta_next_ ? 1 : 0); }
  /** Bytes of their ID3 tags (part of held_bytes()). */
  size_t pending_metadata_bytes() const { return meta_bytes_; }
  /** Frame bytes in the open segment (what max_segment_bytes caps). */
  size_t open_frame_bytes() const { return seg_frame_bytes_; }
  /** Media time in the open segment, ms (0 when nothing is open). */
  double open_media_ms() const {
    return seg_frames_ == 0 || cfg_.clock_rate == 0 ? 0 : static_cast<double>(samples_ - seg_first_sample_) * 1000.0 / cfg_.clock_rate;
  }
  /** Frames in the open segment; parts written of it (fMP4 with parts). */
  uint32_t open_frames() const { return seg_frames_; }
  uint32_t open_parts() const { return part_index_; }

  const SegmenterOptions& options() const { return opt_; }
  uint32_t target_duration_ms() const { return opt_.target_duration_ms; }
  bool configured() const { return configured_; }
  AudioCodec codec() const { return cfg_.codec; }

 private:
  struct TrackConfig {
    AudioCodec codec = AudioCodec::kNone;
    codec::AudioSpecificConfig asc;
    std::vector<uint8_t> asc_bytes;
    codec::Mp3Header mp3;
    codec::OpusHead opus;
    uint32_t clock_rate = 0;         // sample clock = fMP4 timescale
    uint32_t samples_per_frame = 0;  // AAC/MP3; 0 for Opus (per packet)
  };
  static bool same_config(const TrackConfig& a, const TrackConfig& b);

  void on_aac(const codec::FlvAudioHeader& h, uint32_t ts, const uint8_t* p, size_t n, std::vector<SegmenterEvent>& out);
  void on_opus(const codec::FlvAudioHeader& h, uint32_t ts, const uint8_t* p, size_t n, std::vector<SegmenterEvent>& out);
  void on_mp3(uint32_t ts, const uint8_t* p, size_t n, std::vector<SegmenterEvent>& out);
  void on_config(TrackConfig&& c, std::vector<SegmenterEvent>& out);
  void on_frame(uint32_t timestamp_ms, const uint8_t* frame, size_t size, uint32_t samples,
                std::vector<SegmenterEvent>& out);
  void close_part(std::vector<SegmenterEvent>& out);
  void close_segment(std::vector<SegmenterEvent>& out);
  void write_fragment(std::vector<uint8_t>& dst, uint64_t first_sample, std::vector<MetadataMark>& marks);
  /** A change waiting to be written with frame `frame` of raw_ (or, for meta_next_, the next frame). */
  struct PendingMetadata {
    uint32_t id = 0;
    uint32_t timestamp_ms = 0;
    size_t frame = 0;
    std::vector<uint8_t> tag;
  };
  void attach_metadata(PendingMetadata&& m, size_t frame);
  void clear_unwritten();  // raw_, sizes_, durations_, frame_ts_ and the changes attached to them
  void error(std::vector<SegmenterEvent>& out, const char* code, std::string message);
  /** PTS of the next frame on the sample clock. */
  uint64_t next_pts() const { return origin_pts_ + samples_ * 90000 / cfg_.clock_rate; }
  uint64_t pts_at(uint64_t sample) const { return origin_pts_ + sample * 90000 / cfg_.clock_rate; }
  bool parts() const { return opt_.container == Container::kFmp4 && opt_.part_target_ms > 0; }

  SegmenterOptions opt_;
  bool configured_ = false;
  TrackConfig cfg_;
  mux::ts::TsSegmentWriter ts_;
  codec::Mp3FrameSplitter mp3_;
  std::vector<codec::Mp3FrameSplitter::Frame> mp3_frames_;  // scratch

  // Sample clock: samples_ counted since origin_pts_/origin_dts_ (re-originated on jumps and rate changes).
  bool clock_started_ = false;
  uint64_t origin_pts_ = 0;
  uint64_t origin_dts_ = 0;
  uint64_t samples_ = 0;
  // RTMP reference: the unwrapped RTMP time anchor_ms_ corresponds to anchor_pts_.
  uint32_t last_rtmp_ = 0;
  int64_t rtmp_ms_ = 0;  // unwrapped
  int64_t anchor_ms_ = 0;
  uint64_t anchor_pts_ = 0;

  // Frames not yet written (TS: the open segment's; fMP4: since the last fragment). Buffers keep
  // their capacity across segments.
  std::vector<uint8_t> raw_;
  std::vector<uint32_t> sizes_;
  std::vector<uint32_t> durations_;
  std::vector<uint32_t> frame_ts_;  // their RTMP timestamps (where a change lands)
  // Now-playing changes: attached to frames not yet written (by frame, ascending), or for the next
  // frame pushed; the bytes of their tags.
  std::vector<PendingMetadata> meta_;
  PendingMetadata meta_next_;
  bool has_meta_next_ = false;
  size_t meta_bytes_ = 0;
  uint32_t metadata_id_ = 0;
  std::vector<mux::fmp4::EventMessage> events_scratch_;
  std::vector<mux::ts::TsMetadata> ts_meta_scratch_;
  // The open segment.
  uint32_t seg_frames_ = 0;
  size_t seg_frame_bytes_ = 0;
  uint64_t seg_first_sample_ = 0;
  bool seg_discontinuity_ = false;
  std::vector<uint8_t> seg_bytes_;  // fMP4 with parts: the parts so far
  std::vector<MetadataMark> seg_marks_;  // fMP4 with parts: the changes those parts carry
  // The open part (fMP4 with parts).
  uint64_t part_first_sample_ = 0;
  uint32_t part_index_ = 0;
  uint32_t fragment_sequence_ = 0;  // mfhd sequence_number of the last fragment written

  bool pending_discontinuity_ = false;  // discontinuity() called, not yet applied
  bool next_discontinuity_ = false;     // the next segment opened is flagged
  uint64_t sequence_ = 0;
};

}  // namespace skylark::segment
