// ADTS frame headers (ISO/IEC 13818-7 §6.2 adts_fixed_header + adts_variable_header; ISO/IEC
// 14496-3 §1.A.2.2) as an Icecast AAC source sends them, and the 2-byte AudioSpecificConfig
// (ISO/IEC 14496-3 §1.6.2.1) an FLV/RTMP AAC sequence header carries for the same stream.
// Pure functions over (data, size): no allocation, no state.
#pragma once
#include <cstddef>
#include <cstdint>

namespace skylark::icecast {

/** Bytes of an ADTS header without / with the 16-bit CRC (protection_absent = 1 / 0). */
inline constexpr size_t kAdtsHeaderBytes = 7;
inline constexpr size_t kAdtsHeaderCrcBytes = 9;

struct AdtsHeader {
  bool mpeg2 = false;                 // ID bit: 1 = MPEG-2 AAC, 0 = MPEG-4 (the ASC does not care)
  bool crc = false;                   // protection_absent == 0: a CRC follows the 7 fixed bytes
  uint8_t profile = 0;                // profile_ObjectType: 0 Main, 1 LC, 2 SSR, 3 LTP (object type - 1)
  uint8_t frequency_index = 0;        // sampling_frequency_index, 0..12
  uint32_t sample_rate = 0;           // Hz, from the index (the core rate: HE-AAC signals half its output rate)
  uint8_t channel_configuration = 0;  // 0 = program_config_element inside the raw data, 1..7
  uint32_t frame_length = 0;          // whole frame, header included (13 bits)
  uint32_t header_size = 0;           // 7 or 9
  uint8_t raw_data_blocks = 1;        // number_of_raw_data_blocks_in_frame + 1 (1..4)

  /** The raw_data_block bytes after the header (and CRC). */
  uint32_t payload_size() const { return frame_length - header_size; }
  /** audioObjectType of the stream (profile + 1: 1 Main, 2 LC, 3 SSR, 4 LTP). */
  uint8_t audio_object_type() const { return static_cast<uint8_t>(profile + 1); }
};

enum class AdtsStatus : uint8_t {
  kOk = 0,
  kTruncated,     // fewer bytes than the header (7, or 9 with CRC)
  kNoSync,        // no 0xFFF syncword
  kBadLayer,      // layer != 0 (MPEG audio Layer I/II/III share the syncword)
  kBadFrequency,  // sampling_frequency_index 13..15 (reserved / escape)
  kBadLength,     // frame_length not larger than the header
};

/** Parses the ADTS header at `data`. kTruncated when `size` is short of the header. */
AdtsStatus parse_adts_header(const uint8_t* data, size_t size, AdtsHeader* out);

/** Same stream configuration (object type, sampling frequency, channels): a frame that may follow
 *  `a` without a new AudioSpecificConfig. */
inline bool adts_same_config(const AdtsHeader& a, const AdtsHeader& b) {
  return a.profile == b.profile && a.frequency_index == b.frequency_index &&
         a.channel_configuration == b.channel_configuration;
}

/** The AudioSpecificConfig of the stream `h` heads (ISO/IEC 14496-3 §1.6.2.1: audioObjectType 5
 *  bits, samplingFrequencyIndex 4, channelConfiguration 4, GASpecificConfig frameLengthFlag,
 *  dependsOnCoreCoder and extensionFlag all 0), into out[0..1]. */
void adts_audio_specific_config(const AdtsHeader& h, uint8_t out[2]);

}  // namespace skylark::icecast
