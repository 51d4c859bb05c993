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

constexpr char kId3Format[] = "ID3 ";  // the registered format_identifier (0x49443320)

// metadata_application_format(_identifier), metadata_format(_identifier), metadata_service_id:
// the 12 bytes both descriptors start with.
void write_id3_formats(util::ByteWriter& w) {
  w.be16(0xFFFF);  // metadata_application_format: the identifier follows
  w.bytes(kId3Format, 4);
  w.u8(0xFF);      // metadata_format: the identifier follows
  w.bytes(kId3Format, 4);
  w.u8(0x00);      // metadata_service_id
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

void write_id3_metadata_pointer_descriptor(util::ByteWriter& w, uint16_t program_number) {
  w.u8(kDescriptorMetadataPointer);
  w.u8(static_cast<uint8_t>(kId3MetadataPointerDescriptorSize - 2));
  write_id3_formats(w);
  w.u8(0x1F);  // metadata_locator_record_flag 0, MPEG_carriage_flags 0 (this stream), reserved 11111
  w.be16(program_number);
}

void write_id3_metadata_descriptor(util::ByteWriter& w) {
  w.u8(kDescriptorMetadata);
  w.u8(static_cast<uint8_t>(kId3MetadataDescriptorSize - 2));
  write_id3_formats(w);
  w.u8(0x0F);  // decoder_config_flags 000, DSM-CC_flag 0, reserved 1111
}

void write_pmt_packet(util::ByteWriter& w, uint16_t pmt_pid, uint16_t audio_pid, uint8_t cc, uint8_t stream_type,
                      uint16_t metadata_pid) {
  const bool id3 = metadata_pid != 0;
  const size_t program_info = id3 ? kId3MetadataPointerDescriptorSize : 0;
  // 1. Sizes: section_length counts from after itself to the end of the CRC.
  const size_t streams = 5 + (id3 ? 5 + kId3MetadataDescriptorSize : 0);
  const size_t section_length = 9 + program_info + streams + 4;
  uint8_t section[3 + 9 + kId3MetadataPointerDescriptorSize + 5 + 5 + kId3MetadataDescriptorSize];
  const size_t size = 3 + section_length - 4;  // CRC excluded
  // 2. Write.
  util::ByteWriter s(section, size);
  s.u8(0x02);                                                            // table_id: TS_program_map_section
  s.be16(static_cast<uint16_t>(0xB000 | section_length));               // syntax 1, '0', reserved 11, length
  s.be16(kProgramNumber);
  s.u8(0xC1);                                                            // reserved 11, version 0, current_next 1
  s.u8(0x00);                                                            // section_number
  s.u8(0x00);                                                            // last_section_number
  s.be16(static_cast<uint16_t>(0xE000 | (audio_pid & 0x1FFF)));         // reserved 111, PCR_PID = the audio PID
  s.be16(static_cast<uint16_t>(0xF000 | program_info));                 // reserved 1111, program_info_length
  if (id3) write_id3_metadata_pointer_descriptor(s, kProgramNumber);
  s.u8(stream_type);
  s.be16(static_cast<uint16_t>(0xE000 | (audio_pid & 0x1FFF)));         // reserved 111, elementary_PID
  s.be16(0xF000);                                                        // reserved 1111, ES_info_length 0
  if (id3) {
    s.u8(kStreamTypeMetadata);
    s.be16(static_cast<uint16_t>(0xE000 | (metadata_pid & 0x1FFF)));
    s.be16(static_cast<uint16_t>(0xF000 | kId3MetadataDescriptorSize));
    write_id3_metadata_descriptor(s);
  }
  write_section_packet(w, pmt_pid, cc, section, s.ok() ? s.size() : 0);
}

}  // namespace skylark::mux::ts
