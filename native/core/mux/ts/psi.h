// PSI tables, one writer each, one TS packet each: the PAT (§2.4.4.3) and an audio PMT (§2.4.4.8):
// one audio elementary stream, stream_type 0x0F (ADTS AAC) or 0x03/0x04 (MPEG-1/-2 audio: MP3),
// PCR_PID = the audio PID (so no phantom video stream), and optionally a timed ID3 stream as
// Apple's "Timed Metadata for HTTP Live Streaming" §2.3 declares it: a metadata_pointer_descriptor
// in the program info loop, and an elementary stream of stream_type 0x15 whose ES info holds a
// metadata_descriptor. Sections are CRC-32/MPEG-2 protected.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/mux/ts/constants.h"
#include "core/util/bytes.h"

namespace skylark::mux::ts {

/** Writes one 188-byte packet carrying the PAT (program 1 → `pmt_pid`) with continuity `cc`. */
void write_pat_packet(util::ByteWriter& w, uint16_t pmt_pid, uint8_t cc);

/** metadata_pointer_descriptor (§2.6.58) pointing at ID3 metadata in this program:
 *  metadata_application_format 0xFFFF + identifier 'ID3 ', metadata_format 0xFF + identifier
 *  'ID3 ', metadata_service_id 0, no locator record, MPEG_carriage_flags 0 (same transport
 *  stream), program_number. Tag and length included. */
inline constexpr size_t kId3MetadataPointerDescriptorSize = 2 + 15;
void write_id3_metadata_pointer_descriptor(util::ByteWriter& w, uint16_t program_number);

/** metadata_descriptor (§2.6.60) of the ID3 stream: formats as above, metadata_service_id 0,
 *  decoder_config_flags 0, DSM-CC_flag 0. Tag and length included. */
inline constexpr size_t kId3MetadataDescriptorSize = 2 + 13;
void write_id3_metadata_descriptor(util::ByteWriter& w);

/** Writes one 188-byte packet carrying the PMT of program 1 (one audio stream of `stream_type` on
 *  `audio_pid`, which also carries the PCR; when `metadata_pid` is not 0, also the timed ID3
 *  stream on it) with continuity `cc`. */
void write_pmt_packet(util::ByteWriter& w, uint16_t pmt_pid, uint16_t audio_pid, uint8_t cc,
                      uint8_t stream_type = kStreamTypeAdtsAac, uint16_t metadata_pid = 0);

}  // namespace skylark::mux::ts
