// Writes one complete, self-contained MPEG-TS segment: PAT, PMT, then the segment's audio frames
// (AAC as ADTS built from the AudioSpecificConfig, MP3 frames as they are) in PES packets (PTS only) on the audio PID, the first packet of each PES with a PCR and the
// first of the segment with random_access_indicator. Continuity counters carry on across the
// segments of one writer. Size first (plan the PES packets, count TS packets), allocate once, write.
//
// Timed ID3 (TsAudioFormat::timed_metadata): the PMT also declares the ID3 stream on the metadata
// PID (psi.h), in every segment whether or not it carries a tag, so the PMT never changes when
// metadata appears. A tag attached to frame i is one PES (stream_id 0xBD, PTS = frame i's PTS, the
// whole tag) on the metadata PID with its own continuity counter, written just before the audio
// PES that holds frame i. The audio PES and their packets are the same with or without tags: a
// segment with tags is the segment without them plus the tags' packets, and the segments after it
// are unchanged.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/codec/aac.h"
#include "core/mux/ts/constants.h"
#include "core/mux/ts/continuity.h"
#include "core/mux/ts/pes_plan.h"

namespace skylark::mux::ts {

/** The PCR runs this far (90 kHz ticks, 0.7 s) ahead of the PTS it is sent with: the decoder's
 *  buffering time (FFmpeg's default mpegts max_delay). */
inline constexpr uint64_t kPcrLead90k = 63000;
/** PCRs are at most this far apart (ISO/IEC 13818-1 §2.7.2). */
inline constexpr uint32_t kMaxPcrIntervalMs = 100;
/** A PES spans at most this much audio (a PTS must come at least every 700 ms, §2.7.4; nginx-rtmp's
 *  hls_max_audio_delay is also 300 ms) and at most kMaxPesBytes ES bytes (bounds what a demuxer
 *  buffers per PES at high bitrates). Measured at 128 kbps / 48 kHz stereo, 2 s segments: total
 *  overhead over the raw AAC bytes 7.1 % (100 ms PES: 11.3 %, 700 ms: 6.5 %); the PES plan, not the
 *  cap, is what removes most of the stuffing. */
inline constexpr uint32_t kMaxPesDurationMs = 300;
inline constexpr size_t kMaxPesBytes = 8192;

/** Raw audio frames stored back to back (AAC: raw_data_block, no ADTS; MP3: whole frames). */
struct AacFrames {
  const uint8_t* data = nullptr;
  const uint32_t* sizes = nullptr;  // each <= codec::kAdtsMaxPayload
  size_t count = 0;
};

/** Frame i is presented at origin_pts90k + (first_sample + i * samples_per_frame) * 90000 / sample_rate. */
struct FrameClock {
  uint64_t origin_pts90k = 0;
  uint64_t first_sample = 0;
  uint32_t samples_per_frame = 1024;
  uint32_t sample_rate = 48000;
  uint64_t pts_of(size_t i) const {
    return origin_pts90k + (first_sample + uint64_t{i} * samples_per_frame) * 90000 / sample_rate;
  }
};

using AudioFrames = AacFrames;

/** What the PMT declares and how frames become ES bytes. */
struct TsAudioFormat {
  uint8_t stream_type = kStreamTypeAdtsAac;
  const codec::AudioSpecificConfig* adts = nullptr;  // AAC: an ADTS header per frame from this config
                                                      // (must be ADTS-compatible); nullptr: frames as-is
  bool timed_metadata = false;                        // the PMT declares the timed ID3 stream
};

/** A whole ID3 tag presented with frame `frame` of the segment (ignored unless the format has
 *  timed_metadata). Tags are given in frame order; one that is out of order, past the last frame
 *  or larger than a PES carries (kPesMaxPayload) is left out. */
struct TsMetadata {
  size_t frame = 0;
  const uint8_t* tag = nullptr;
  size_t size = 0;
};

class TsSegmentWriter {
 public:
  explicit TsSegmentWriter(uint16_t pmt_pid = kDefaultPmtPid, uint16_t audio_pid = kDefaultAudioPid,
                           uint16_t metadata_pid = kDefaultMetadataPid)
      : pmt_pid_(pmt_pid), audio_pid_(audio_pid), metadata_pid_(metadata_pid) {}

  /** Returns the segment bytes (a multiple of 188). `asc` must be ADTS-compatible; frames non-empty. */
  std::vector<uint8_t> write(const codec::AudioSpecificConfig& asc, const AacFrames& frames,
                             const FrameClock& clock) {
    return write(TsAudioFormat{kStreamTypeAdtsAac, &asc}, frames, clock);
  }
  /** Same for any audio format (MP3: {kStreamTypeMpeg1Audio or kStreamTypeMpeg2Audio, nullptr}),
   *  with `metadata_count` timed ID3 tags. */
  std::vector<uint8_t> write(const TsAudioFormat& format, const AudioFrames& frames, const FrameClock& clock,
                             const TsMetadata* metadata = nullptr, size_t metadata_count = 0);

  uint16_t audio_pid() const { return audio_pid_; }
  uint16_t pmt_pid() const { return pmt_pid_; }
  uint16_t metadata_pid() const { return metadata_pid_; }

 private:
  uint16_t pmt_pid_, audio_pid_, metadata_pid_;
  ContinuityCounter pat_cc_, pmt_cc_, audio_cc_, metadata_cc_;
  PesPlanner planner_;
  std::vector<uint32_t> es_sizes_, counts_;              // scratch, reused
  std::vector<uint64_t> pts_;                             // scratch, reused
  std::vector<uint8_t> pes_;                              // scratch: one PES, reused
  std::vector<const TsMetadata*> tags_;                   // scratch: the tags written, in order
};

}  // namespace skylark::mux::ts
