// See opus.h.
#include "core/codec/opus.h"

#include <cstring>

namespace skylark::codec {

const char* opus_head_status_message(OpusHeadStatus s) {
  switch (s) {
    case OpusHeadStatus::kOk: return "ok";
    case OpusHeadStatus::kTruncated: return "OpusHead is truncated";
    case OpusHeadStatus::kBadMagic: return "OpusHead magic signature is missing";
    case OpusHeadStatus::kBadVersion: return "OpusHead has an unsupported major version";
    case OpusHeadStatus::kBadChannels: return "OpusHead has an invalid channel count for its mapping family";
    case OpusHeadStatus::kBadMappingFamily: return "OpusHead channel mapping family is not 0 or 1";
    case OpusHeadStatus::kBadStreamCounts: return "OpusHead has invalid stream/coupled stream counts";
    case OpusHeadStatus::kBadMapping: return "OpusHead channel mapping refers to a missing stream";
  }
  return "unknown";
}

OpusHeadStatus parse_opus_head(const uint8_t* d, size_t size, OpusHead* out) {
  if (size < 8 || std::memcmp(d, "OpusHead", 8) != 0) return size < 8 ? OpusHeadStatus::kTruncated : OpusHeadStatus::kBadMagic;
  if (size < 19) return OpusHeadStatus::kTruncated;
  OpusHead h;
  h.version = d[8];
  if (h.version >> 4) return OpusHeadStatus::kBadVersion;  // RFC 7845: reject major version != 0
  h.channels = d[9];
  h.pre_skip = static_cast<uint16_t>(d[10] | d[11] << 8);
  h.input_sample_rate = uint32_t{d[12]} | uint32_t{d[13]} << 8 | uint32_t{d[14]} << 16 | uint32_t{d[15]} << 24;
  h.output_gain = static_cast<int16_t>(static_cast<uint16_t>(d[16] | d[17] << 8));
  h.mapping_family = d[18];
  if (h.channels == 0) return OpusHeadStatus::kBadChannels;
  if (h.mapping_family == 0) {
    if (h.channels > 2) return OpusHeadStatus::kBadChannels;
    h.stream_count = 1;
    h.coupled_count = static_cast<uint8_t>(h.channels - 1);
  } else if (h.mapping_family == 1) {
    if (h.channels > 8) return OpusHeadStatus::kBadChannels;
    if (size < 21u + h.channels) return OpusHeadStatus::kTruncated;
    h.stream_count = d[19];
    h.coupled_count = d[20];
    if (h.stream_count == 0 || h.coupled_count > h.stream_count || h.stream_count + h.coupled_count > 255)
      return OpusHeadStatus::kBadStreamCounts;
    for (unsigned i = 0; i < h.channels; ++i) {
      h.mapping[i] = d[21 + i];
      if (h.mapping[i] != 255 && h.mapping[i] >= h.stream_count + h.coupled_count) return OpusHeadStatus::kBadMapping;
    }
  } else {
    return OpusHeadStatus::kBadMappingFamily;
  }
  *out = h;
  return OpusHeadStatus::kOk;
}

uint32_t opus_frame_samples(uint8_t config) {
  config &= 31;
  if (config < 12) {                          // SILK-only: 10, 20, 40, 60 ms
    static constexpr uint32_t kSilk[4] = {480, 960, 1920, 2880};
    return kSilk[config & 3];
  }
  if (config < 16) return (config & 1) ? 960 : 480;  // Hybrid: 10, 20 ms
  return 120u << (config & 3);               // CELT-only: 2.5, 5, 10, 20 ms
}

uint32_t opus_packet_samples(const uint8_t* d, size_t size) {
  if (size < 1) return 0;                    // R1: at least one byte
  const uint32_t frame = opus_frame_samples(d[0] >> 3);
  uint32_t count = 0;
  switch (d[0] & 3) {
    case 0: count = 1; break;
    case 1:
      if ((size - 1) % 2 != 0) return 0;     // R3: two equal-size frames
      count = 2;
      break;
    case 2:
      if (size < 2) return 0;                // R4: the first frame's length must be there
      count = 2;
      break;
    case 3:
      if (size < 2) return 0;                // R6: the frame count byte
      count = d[1] & 0x3F;
      if (count == 0) return 0;              // R5
      break;
  }
  const uint32_t samples = frame * count;
  return samples > kOpusMaxPacketSamples ? 0 : samples;  // R5: at most 120 ms
}

}  // namespace skylark::codec
