// See packetizer.h.
#include "core/mux/ts/packetizer.h"

namespace skylark::mux::ts {

void write_pcr(util::ByteWriter& w, uint64_t pcr90k) {
  const uint64_t b = pcr90k & kPtsMask;
  w.be32(static_cast<uint32_t>(b >> 1));
  w.u8(static_cast<uint8_t>(((b & 1) << 7) | 0x7E));  // base[0], 6 reserved bits, extension[8] = 0
  w.u8(0x00);                                          // extension[7..0]
}

size_t packetize_pes(util::ByteWriter& w, ContinuityCounter& cc, const uint8_t* pes, size_t header_size,
                     const PesFrames& f, const PacketizeParams& p) {
  return lay_out_pes(header_size, f, p.pcr_interval90k, [&](const PacketPlan& k) {
    const bool adaptation = k.pcr || k.payload < kPacketPayloadMax;
    w.u8(kSyncByte);
    w.u8(static_cast<uint8_t>((k.first ? 0x40 : 0x00) | ((p.pid >> 8) & 0x1F)));
    w.u8(static_cast<uint8_t>(p.pid));
    w.u8(static_cast<uint8_t>((adaptation ? 0x30 : 0x10) | cc.next()));  // adaptation_field_control
    if (adaptation) {
      const size_t af_length = kPacketPayloadMax - 1 - k.payload;  // bytes after the length byte
      w.u8(static_cast<uint8_t>(af_length));
      if (k.pcr) {
        // discontinuity 0, random_access_indicator, priority 0, PCR_flag 1, no OPCR/splice/private/ext.
        w.u8(k.first && p.random_access ? 0x50 : 0x10);
        write_pcr(w, k.time90k - p.pcr_lead90k);
        w.fill(0xFF, af_length - 7);
      } else if (af_length > 0) {
        w.u8(0x00);  // no flags
        w.fill(0xFF, af_length - 1);
      }
    }
    w.bytes(pes + k.offset, k.payload);
  });
}

size_t packetize_plain_pes(util::ByteWriter& w, ContinuityCounter& cc, uint16_t pid, const uint8_t* pes, size_t size) {
  size_t n = 0;
  for (size_t pos = 0; pos < size; pos += kPacketPayloadMax, ++n) {
    const size_t payload = size - pos < kPacketPayloadMax ? size - pos : kPacketPayloadMax;
    const bool adaptation = payload < kPacketPayloadMax;
    w.u8(kSyncByte);
    w.u8(static_cast<uint8_t>((pos == 0 ? 0x40 : 0x00) | ((pid >> 8) & 0x1F)));
    w.u8(static_cast<uint8_t>(pid));
    w.u8(static_cast<uint8_t>((adaptation ? 0x30 : 0x10) | cc.next()));
    if (adaptation) {
      const size_t af_length = kPacketPayloadMax - 1 - payload;
      w.u8(static_cast<uint8_t>(af_length));
      if (af_length > 0) {
        w.u8(0x00);  // no flags
        w.fill(0xFF, af_length - 1);
      }
    }
    w.bytes(pes + pos, payload);
  }
  return n;
}

}  // namespace skylark::mux::ts
