// Ogg pages (RFC 3533 §6: capture pattern "OggS", version, header type, granule position, serial,
// page sequence number, CRC-32, segment table) and the identification of the codec a logical
// stream carries from its first packet (RFC 7845 §5.1 OpusHead; Vorbis I §4.2.2; the Ogg FLAC
// mapping; Speex; Theora §6.2; Ogg Skeleton). Pure functions over (data, size).
#pragma once
#include <cstddef>
#include <cstdint>

namespace skylark::icecast {

/** Fixed part of a page header (before the segment table). */
inline constexpr size_t kOggHeaderBytes = 27;
/** Largest page: 27 + 255 lacing values + 255 segments of 255 bytes. */
inline constexpr size_t kOggMaxPageBytes = 27 + 255 + 255 * 255;

/** header_type flags. */
inline constexpr uint8_t kOggContinued = 0x01, kOggBos = 0x02, kOggEos = 0x04;

struct OggPage {
  uint8_t version = 0;         // stream_structure_version (0)
  uint8_t flags = 0;           // kOggContinued | kOggBos | kOggEos
  uint64_t granule = 0;        // granule_position (-1 = no packet ends on this page)
  uint32_t serial = 0;         // bitstream_serial_number
  uint32_t sequence = 0;       // page_sequence_number
  uint32_t crc = 0;            // CRC_checksum as stored
  uint8_t segments = 0;        // page_segments
  const uint8_t* lacing = nullptr;  // segments lacing values (points into the page)
  size_t header_size = 0;      // 27 + segments
  size_t body_size = 0;        // sum of the lacing values
  size_t size() const { return header_size + body_size; }
};

enum class OggPageStatus : uint8_t {
  kOk = 0,
  kNeedMore,    // fewer than 27 bytes, or than the header with its segment table
  kNoCapture,   // does not start with "OggS"
};

/** Parses the page header at `data` (the body need not be there yet: size() tells how many bytes
 *  the whole page has). Does not check the version or the CRC. */
OggPageStatus parse_ogg_page_header(const uint8_t* data, size_t size, OggPage* out);

/** Ogg's CRC-32 (polynomial 0x04C11DB7, MSB first, initial 0, no final xor) of `size` bytes. */
uint32_t ogg_crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

/** Whether the whole page at `data` (page.size() bytes) carries the right CRC: computed with the
 *  CRC field (bytes 22..25) taken as zeros (RFC 3533 §6). */
bool ogg_page_crc_ok(const uint8_t* data, const OggPage& page);

/** The codec of a logical stream from the start of its first packet: "opus", "vorbis", "flac",
 *  "speex", "theora", "skeleton" (an index stream to ignore), or "ogg" when unknown. Needs at
 *  most kOggIdentifyBytes bytes; `size` may be shorter (the packet is). */
inline constexpr size_t kOggIdentifyBytes = 8;
const char* ogg_identify_codec(const uint8_t* packet, size_t size);

}  // namespace skylark::icecast
