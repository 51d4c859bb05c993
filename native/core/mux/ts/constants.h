// MPEG-TS constants shared by the TS writers (ISO/IEC 13818-1).
#pragma once
#include <cstddef>
#include <cstdint>

namespace skylark::mux::ts {

inline constexpr size_t kPacketSize = 188;
inline constexpr size_t kPacketHeaderSize = 4;
inline constexpr size_t kPacketPayloadMax = kPacketSize - kPacketHeaderSize;  // 184
inline constexpr uint8_t kSyncByte = 0x47;
inline constexpr uint16_t kPatPid = 0x0000;
inline constexpr uint16_t kDefaultPmtPid = 0x1000;
inline constexpr uint16_t kDefaultAudioPid = 0x0100;
inline constexpr uint16_t kDefaultMetadataPid = 0x0101;  // timed ID3 (when the PMT declares it)
inline constexpr uint16_t kProgramNumber = 1;
inline constexpr uint16_t kTransportStreamId = 1;
inline constexpr uint8_t kStreamTypeAdtsAac = 0x0F;  // ISO/IEC 13818-7 Audio with ADTS transport syntax
inline constexpr uint8_t kStreamTypeMpeg1Audio = 0x03;  // ISO/IEC 11172-3 (MP3, MPEG-1)
inline constexpr uint8_t kStreamTypeMpeg2Audio = 0x04;  // ISO/IEC 13818-3 (MP3, MPEG-2/2.5 LSF)
inline constexpr uint8_t kStreamTypeMetadata = 0x15;   // metadata carried in PES packets (§2.12.9; ID3)
inline constexpr uint8_t kStreamIdAudio = 0xC0;      // first MPEG audio stream
inline constexpr uint8_t kStreamIdPrivate1 = 0xBD;   // private_stream_1: timed ID3 (Apple timed metadata §2.2)
inline constexpr uint8_t kDescriptorMetadataPointer = 0x25;  // metadata_pointer_descriptor (§2.6.58)
inline constexpr uint8_t kDescriptorMetadata = 0x26;         // metadata_descriptor (§2.6.60)
inline constexpr uint64_t kPtsMask = (uint64_t{1} << 33) - 1;  // PTS/PCR base are 33-bit, 90 kHz

}  // namespace skylark::mux::ts
