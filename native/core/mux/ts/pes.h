// PES packet header (ISO/IEC 13818-1 §2.4.3.6 / §2.4.3.7): PTS only, data_alignment_indicator set
// (the payload starts with an ADTS/MP3 syncword, or a whole ID3 tag), explicit PES_packet_length
// (audio PES must not use the unbounded length 0). stream_id 0xC0 for audio, 0xBD
// (private_stream_1) for timed ID3 (Apple "Timed Metadata for HTTP Live Streaming" §2.2).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/mux/ts/constants.h"
#include "core/util/bytes.h"

namespace skylark::mux::ts {

/** 6 (start code, stream_id, length) + 3 (flags, header_data_length) + 5 (PTS). */
inline constexpr size_t kPesHeaderSize = 14;
/** Largest payload a PES with a PTS can carry (PES_packet_length is 16 bits and counts 8 header bytes). */
inline constexpr size_t kPesMaxPayload = 0xFFFF - (kPesHeaderSize - 6);

/** Writes the 14-byte header of a PES of `stream_id` carrying `payload_size` bytes (<=
 *  kPesMaxPayload) presented at `pts90k` (written modulo 2^33). */
void write_pes_header(util::ByteWriter& w, size_t payload_size, uint64_t pts90k, uint8_t stream_id = kStreamIdAudio);

/** Writes a 5-byte PTS field with the 4-bit prefix `prefix` ('0010' for PTS only) and markers. */
void write_timestamp(util::ByteWriter& w, uint8_t prefix, uint64_t ts90k);

}  // namespace skylark::mux::ts
