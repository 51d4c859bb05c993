// See psi.h.
#include "core/mux/ts/psi.h"

#include "core/mux/ts/constants.h"
#include "core/mux/ts/crc32.h"

namespace skylark::mux::ts {
namespace {

// Packet header (payload only, payload_unit_start_indicator set), pointer_field 0, then the section
// from `section` (`section_size` bytes, CRC excluded), its CRC, and 0xFF stuffing to 188 bytes.
void write_section_packet(util::ByteWriter& w, uint16_t pid, uint8_t cc, const uint8_t* section,
                          size_t section_size) {
  const size_t start = w.size();
  w.u8(kSyncByte);
  w.u8(static_cast<uint8_t>(0x40 | ((pid >> 8) & 0x1F)));
  w.u8(static_cast<uint8_t>(pid));
  w.u8(static_cast<uint8_t>(0x10 | (cc & 0x0F)));
  w.u8(0x00);  // pointer_field
  w.bytes(section, section_size);
  w.be32(crc32_mpeg2(section, section_size));
  w.fill(0xFF, kPacketSize - (w.size() - start));
}

}  // namespace

void write_pat_packet(util::ByteWriter& w, uint16_t pmt_pid, uint8_t cc) {
  // section_length = 5 (ids, version, numbers) + 4 (one program) + 4 (CRC) = 13.
  const uint8_t section[] = {
      0x00,                                   // table_id: program_association_section
      0xB0, 0x0D,                             // section_syntax_indicator 1, '0', reserved 11, length 13
      kTransportStreamId >> 8, kTransportStreamId & 0xFF,
      0xC1,                                   // reserved 11, version 0, current_next_indicator 1
      0x00, 0x00,                             // section_number, last_section_number
      kProgramNumber >> 8, kProgramNumber & 0xFF,
      static_cast<uint8_t>(0xE0 | ((pmt_pid >> 8) & 0x1F)), static_cast<uint8_t>(pmt_pid),
  };
  write_section_packet(w, kPatPid, cc, section, sizeof section);
}

void write_pmt_packet(util::ByteWriter& w, uint16_t pmt_pid, uint16_t audio_pid, uint8_t cc, uint8_t stream_type) {
  // section_length = 9 (program, version, numbers, PCR_PID, program_info_length) + 5 (one stream) + 4 (CRC).
  const uint8_t hi = static_cast<uint8_t>(0xE0 | ((audio_pid >> 8) & 0x1F));
  const uint8_t lo = static_cast<uint8_t>(audio_pid);
  const uint8_t section[] = {
      0x02,                                   // table_id: TS_program_map_section
      0xB0, 0x12,                             // section_syntax_indicator 1, '0', reserved 11, length 18
      kProgramNumber >> 8, kProgramNumber & 0xFF,
      0xC1,                                   // reserved 11, version 0, current_next_indicator 1
      0x00, 0x00,                             // section_number, last_section_number
      hi, lo,                                 // reserved 111, PCR_PID = the audio PID
      0xF0, 0x00,                             // reserved 1111, program_info_length 0
      stream_type, hi, lo,                    // stream_type, reserved 111, elementary_PID
      0xF0, 0x00,                             // reserved 1111, ES_info_length 0
  };
  write_section_packet(w, pmt_pid, cc, section, sizeof section);
}

}  // namespace skylark::mux::ts
