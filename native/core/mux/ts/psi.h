// PSI tables, one writer each, one TS packet each: the PAT (§2.4.4.3) and an audio-only PMT
// (§2.4.4.8): one elementary stream, stream_type 0x0F (ADTS AAC) or 0x03/0x04 (MPEG-1/-2 audio: MP3), PCR_PID = the audio PID,
// no descriptors (so no phantom video stream). Sections are CRC-32/MPEG-2 protected.
#pragma once
#include <cstdint>

#include "core/mux/ts/constants.h"
#include "core/util/bytes.h"

namespace skylark::mux::ts {

/** Writes one 188-byte packet carrying the PAT (program 1 → `pmt_pid`) with continuity `cc`. */
void write_pat_packet(util::ByteWriter& w, uint16_t pmt_pid, uint8_t cc);
/** Writes one 188-byte packet carrying the PMT of program 1 (one audio stream of `stream_type` on
 *  `audio_pid`, which also carries the PCR) with continuity `cc`. */
void write_pmt_packet(util::ByteWriter& w, uint16_t pmt_pid, uint16_t audio_pid, uint8_t cc,
                      uint8_t stream_type = kStreamTypeAdtsAac);

}  // namespace skylark::mux::ts
