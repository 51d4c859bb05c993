// The AAC → MPEG-TS HLS segmenter: FLV AUDIODATA bodies with their RTMP timestamps in, immutable
// MPEG-TS segments cut on audio duration out (docs/native-api.md "TsSegmenter"; RFC 8216 §3.2
// (MPEG-TS segments), §4.3.2.1 (EXTINF from our durations), §4.3.2.3 (discontinuities)).
//
// Timing: sample counts, not RTMP timestamps. Frame n of a timeline is presented at
//   origin + (n * 1024) * 90000 / core_sample_rate          (90 kHz; HE-AAC counts core samples)
// The first frame anchors the timeline at PTS = first RTMP timestamp * 90 + 0.7 s (the PCR lead, so
// the first PCR equals the RTMP clock). RTMP timestamps are only compared with the sample clock:
//   * drift within ±1 s (kResyncThresholdMs): ignored (jitter, encoder clock skew).
//   * RTMP clock ahead by more than 1 s (the publisher dropped audio): the open segment is closed,
//     the timeline jumps forward to the RTMP clock, and the next segment is flagged discontinuity,
//     so no segment has a hole and the timeline keeps wall-clock position.
//   * RTMP clock behind by more than 1 s (the publisher restarted its clock): PTS never go back;
//     only the RTMP reference is re-anchored; no cut.
// RTMP timestamps are 32-bit ms and wrap after ~49.7 days; deltas are taken modulo 2^32.
//
// Cutting: a segment is closed (and emitted at once) on the first frame boundary where its
// duration reaches the target; flush() and discontinuities close it early.
//
// Sequence headers: an identical one is ignored; a different valid one closes the open segment,
// emits a new `config` event and flags the next segment discontinuity (PTS continue, re-timed at the
// new rate). A malformed or non-ADTS one is an error event and the previous config stays in force.
//
// Errors (the tag is dropped, the segmenter goes on; one event per dropped tag):
//   audio_before_sequence_header, bad_audio_specific_config, unsupported_codec, invalid_audio_tag.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/codec/aac.h"
#include "core/mux/ts/segment_writer.h"

namespace skylark::segment {

inline constexpr uint32_t kDefaultTargetDurationMs = 2000;
inline constexpr int64_t kResyncThresholdMs = 1000;

/** Stable error codes (the `code` JS sees). */
inline constexpr const char* kErrAudioBeforeSequenceHeader = "audio_before_sequence_header";
inline constexpr const char* kErrBadAudioSpecificConfig = "bad_audio_specific_config";
inline constexpr const char* kErrUnsupportedCodec = "unsupported_codec";
inline constexpr const char* kErrInvalidAudioTag = "invalid_audio_tag";

struct SegmenterEvent {
  enum class Type : uint8_t { kConfig, kSegment, kError } type = Type::kError;
  // kConfig
  char codecs[16] = {};          // RFC 6381, e.g. "mp4a.40.2"
  uint32_t sample_rate = 0;      // output rate, Hz (the SBR rate for HE-AAC)
  uint32_t channels = 0;         // output channels
  uint8_t audio_object_type = 0; // as in `codecs` (2 LC, 5 HE, 29 HEv2, ...)
  // kSegment
  uint64_t sequence = 0;         // media sequence number, from 0
  std::vector<uint8_t> data;     // the whole segment (multiple of 188 bytes)
  double duration_ms = 0;        // frames * 1024 * 1000 / core rate
  uint64_t pts90k = 0;           // PTS of the first frame, 90 kHz, not wrapped (the TS carries it mod 2^33)
  bool discontinuity = false;
  uint32_t frames = 0;
  // kError
  const char* code = "";
  std::string message;
};

class TsSegmenter {
 public:
  explicit TsSegmenter(uint32_t target_duration_ms = kDefaultTargetDurationMs);

  /** One FLV AUDIODATA body with its RTMP timestamp (ms, 32-bit clock); appends events to `out`. */
  void push_audio(uint32_t timestamp_ms, const uint8_t* data, size_t size, std::vector<SegmenterEvent>& out);
  /** Closes the open segment (emitted when it holds audio). */
  void flush(std::vector<SegmenterEvent>& out);
  /** The next audio closes the open segment and starts a new one flagged discontinuity; PTS carry
   *  on from the end of the timeline, re-anchored to the new RTMP clock. */
  void discontinuity() { pending_discontinuity_ = true; }

  uint32_t target_duration_ms() const { return target_ms_; }
  bool configured() const { return configured_; }

 private:
  void on_sequence_header(const uint8_t* asc, size_t size, std::vector<SegmenterEvent>& out);
  void on_frame(uint32_t timestamp_ms, const uint8_t* frame, size_t size, std::vector<SegmenterEvent>& out);
  void close_segment(std::vector<SegmenterEvent>& out);
  void error(std::vector<SegmenterEvent>& out, const char* code, std::string message);
  /** PTS of the next frame on the sample clock. */
  uint64_t next_pts() const { return origin_pts_ + samples_ * 90000 / asc_.sample_rate; }

  uint32_t target_ms_;
  bool configured_ = false;
  codec::AudioSpecificConfig asc_;
  mux::ts::TsSegmentWriter writer_;

  // Sample clock: samples_ counted since origin_pts_ (re-originated on jumps and rate changes).
  bool clock_started_ = false;
  uint64_t origin_pts_ = 0;
  uint64_t samples_ = 0;
  // RTMP reference: the unwrapped RTMP time anchor_ms_ corresponds to anchor_pts_.
  uint32_t last_rtmp_ = 0;
  int64_t rtmp_ms_ = 0;  // unwrapped
  int64_t anchor_ms_ = 0;
  uint64_t anchor_pts_ = 0;

  // The open segment (buffers keep their capacity across segments).
  std::vector<uint8_t> raw_;
  std::vector<uint32_t> sizes_;
  uint64_t seg_origin_pts_ = 0;
  uint64_t seg_first_sample_ = 0;
  bool seg_discontinuity_ = false;

  bool pending_discontinuity_ = false;  // discontinuity() called, not yet applied
  bool next_discontinuity_ = false;     // the next segment opened is flagged
  uint64_t sequence_ = 0;
};

}  // namespace skylark::segment
