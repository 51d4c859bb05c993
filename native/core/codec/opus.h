// Opus codec headers: the identification header OpusHead (RFC 7845 §5.1) and the packet TOC
// (RFC 6716 §3.1) for packet durations. Pure functions over (data, size); all durations are in
// 48 kHz samples (Opus always runs its clock at 48 kHz, whatever the input rate was).
#pragma once
#include <cstddef>
#include <cstdint>

namespace skylark::codec {

inline constexpr uint32_t kOpusClockRate = 48000;
/** Longest packet RFC 6716 §3.2.5 allows: 120 ms. */
inline constexpr uint32_t kOpusMaxPacketSamples = 5760;
/** Decoder pre-roll the Opus-in-ISOBMFF spec and RFC 7845 §4.6 recommend: 80 ms. */
inline constexpr uint32_t kOpusPreRollSamples = 3840;

struct OpusHead {
  uint8_t version = 1;
  uint8_t channels = 0;           // output channel count, 1..255 (1..2 for family 0, 1..8 for family 1)
  uint16_t pre_skip = 0;          // 48 kHz samples to discard at the start of the stream
  uint32_t input_sample_rate = 0; // informational only
  int16_t output_gain = 0;        // Q7.8 dB
  uint8_t mapping_family = 0;     // 0 (mono/stereo) or 1 (Vorbis order, up to 8 channels)
  uint8_t stream_count = 1;       // family != 0 only (family 0: 1)
  uint8_t coupled_count = 0;      // family != 0 only (family 0: channels - 1)
  uint8_t mapping[8] = {};        // family != 0 only: channel → stream index (255 = silent)

  bool operator==(const OpusHead&) const = default;
};

enum class OpusHeadStatus : uint8_t {
  kOk = 0,
  kTruncated,         // shorter than 19 bytes or than its channel mapping table
  kBadMagic,          // does not start with "OpusHead"
  kBadVersion,        // major version (upper nibble) is not 0
  kBadChannels,       // 0 channels, or more than the mapping family allows
  kBadMappingFamily,  // family other than 0 or 1
  kBadStreamCounts,   // stream count 0, coupled > streams, streams + coupled > 255
  kBadMapping,        // a mapping entry >= streams + coupled (and not 255)
};

const char* opus_head_status_message(OpusHeadStatus s);

/** Parses OpusHead (RFC 7845 §5.1, little-endian). Trailing bytes are ignored. */
OpusHeadStatus parse_opus_head(const uint8_t* data, size_t size, OpusHead* out);

/** 48 kHz samples in one frame of TOC configuration `config` (0..31): SILK 10/20/40/60 ms,
 *  Hybrid 10/20 ms, CELT 2.5/5/10/20 ms (RFC 6716 §3.1 Table 2). */
uint32_t opus_frame_samples(uint8_t config);

/** Duration of one Opus packet in 48 kHz samples from its TOC (and, for code 3, the frame count
 *  byte), or 0 when the packet is malformed: empty, code 1 with an odd payload, code 2/3 too short,
 *  code 3 with 0 frames, or longer than 120 ms (RFC 6716 §3.1, §3.2.5, requirements R1-R5 as far as
 *  the TOC decides them). */
uint32_t opus_packet_samples(const uint8_t* data, size_t size);

}  // namespace skylark::codec
