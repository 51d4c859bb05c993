// See adts.h. Bit layout (ISO/IEC 13818-7 §6.2.1): syncword 12, ID 1, layer 2, protection_absent 1,
// profile 2, sampling_frequency_index 4, private_bit 1, channel_configuration 3, original_copy 1,
// home 1 | copyright_identification_bit 1, copyright_identification_start 1, frame_length 13,
// adts_buffer_fullness 11, number_of_raw_data_blocks_in_frame 2.
#include "core/icecast/adts.h"

#include "core/codec/aac.h"

namespace skylark::icecast {

AdtsStatus parse_adts_header(const uint8_t* d, size_t size, AdtsHeader* out) {
  if (size < 2) return AdtsStatus::kTruncated;
  if (d[0] != 0xFF || (d[1] & 0xF0) != 0xF0) return AdtsStatus::kNoSync;
  if ((d[1] & 0x06) != 0) return AdtsStatus::kBadLayer;
  AdtsHeader h;
  h.mpeg2 = (d[1] & 0x08) != 0;
  h.crc = (d[1] & 0x01) == 0;
  h.header_size = static_cast<uint32_t>(h.crc ? kAdtsHeaderCrcBytes : kAdtsHeaderBytes);
  if (size < h.header_size) return AdtsStatus::kTruncated;
  h.profile = d[2] >> 6;
  h.frequency_index = (d[2] >> 2) & 0x0F;
  if (h.frequency_index >= 13) return AdtsStatus::kBadFrequency;
  h.sample_rate = codec::kAacSampleRates[h.frequency_index];
  h.channel_configuration = static_cast<uint8_t>(((d[2] & 1) << 2) | (d[3] >> 6));
  h.frame_length = (uint32_t{d[3]} & 3) << 11 | uint32_t{d[4]} << 3 | d[5] >> 5;
  if (h.frame_length <= h.header_size) return AdtsStatus::kBadLength;
  h.raw_data_blocks = static_cast<uint8_t>((d[6] & 3) + 1);
  *out = h;
  return AdtsStatus::kOk;
}

void adts_audio_specific_config(const AdtsHeader& h, uint8_t out[2]) {
  const uint32_t asc = uint32_t{h.audio_object_type()} << 11 | uint32_t{h.frequency_index} << 7 |
                       uint32_t{h.channel_configuration & 0x0Fu} << 3;
  out[0] = static_cast<uint8_t>(asc >> 8);
  out[1] = static_cast<uint8_t>(asc);
}

}  // namespace skylark::icecast
