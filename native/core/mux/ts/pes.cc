// See pes.h.
#include "core/mux/ts/pes.h"

#include "core/mux/ts/constants.h"

namespace skylark::mux::ts {

void write_timestamp(util::ByteWriter& w, uint8_t prefix, uint64_t ts90k) {
  const uint64_t t = ts90k & kPtsMask;
  w.u8(static_cast<uint8_t>((prefix << 4) | ((t >> 29) & 0x0E) | 1));  // PTS[32..30], marker
  w.be16(static_cast<uint16_t>(((t >> 14) & 0xFFFE) | 1));             // PTS[29..15], marker
  w.be16(static_cast<uint16_t>(((t << 1) & 0xFFFE) | 1));              // PTS[14..0], marker
}

void write_pes_header(util::ByteWriter& w, size_t payload_size, uint64_t pts90k, uint8_t stream_id) {
  w.be24(0x000001);                                                 // packet_start_code_prefix
  w.u8(stream_id);
  w.be16(static_cast<uint16_t>(payload_size + kPesHeaderSize - 6));  // PES_packet_length
  w.u8(0x84);  // '10', not scrambled, priority 0, data_alignment_indicator 1, copyright 0, original 0
  w.u8(0x80);  // PTS_DTS_flags '10' (PTS only), no ESCR/ES_rate/trick/copy/CRC/extension
  w.u8(0x05);  // PES_header_data_length
  write_timestamp(w, 0x2, pts90k);
}

}  // namespace skylark::mux::ts
