// Cuts one PES packet into 188-byte TS packets on one PID (ISO/IEC 13818-1 §2.4.3.2-§2.4.3.5).
// payload_unit_start_indicator on the first packet; a PCR (§2.4.3.5, PCR_PID = this PID) in the
// adaptation field of the first packet and of any later packet whose audio is at least
// `pcr_interval90k` newer than the last PCR, so PCRs stay <= 100 ms apart even in long PES packets;
// random_access_indicator on the first packet of a segment; the last packet is padded with
// adaptation-field stuffing (never payload), so every PES ends on a packet boundary.
//
// The same walk (lay_out_pes) counts packets (size first) and writes them, so they cannot disagree.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/mux/ts/constants.h"
#include "core/mux/ts/continuity.h"
#include "core/util/bytes.h"

namespace skylark::mux::ts {

/** adaptation_field_length + flags + 6-byte PCR. */
inline constexpr size_t kPcrAdaptationSize = 8;

/** The frames of one PES: ES size of each (ADTS header included) and its PTS (90 kHz). The PES
 *  header precedes frame 0. */
struct PesFrames {
  const uint32_t* es_sizes = nullptr;
  const uint64_t* pts = nullptr;
  size_t count = 0;
};

/** One TS packet of a PES, as decided by lay_out_pes. */
struct PacketPlan {
  bool first = false;    // carries the PES start (payload_unit_start_indicator)
  bool pcr = false;      // adaptation field with a PCR
  uint64_t time90k = 0;  // PTS of the frame this packet's payload starts in (PCR = time - lead)
  size_t offset = 0;     // first PES byte in this packet
  size_t payload = 0;    // PES bytes in this packet (1..184)
};

/** Walks the TS packets of a PES of `header_size` + sum(es_sizes) bytes, calling `sink(plan)` for
 *  each; returns the packet count. */
template <class Sink>
size_t lay_out_pes(size_t header_size, const PesFrames& f, uint64_t pcr_interval90k, Sink&& sink) {
  size_t total = header_size;
  for (size_t i = 0; i < f.count; ++i) total += f.es_sizes[i];
  size_t pos = 0, frame = 0, frame_end = header_size + (f.count ? f.es_sizes[0] : 0), n = 0;
  uint64_t last_pcr = 0;
  while (pos < total) {
    while (frame + 1 < f.count && pos >= frame_end) frame_end += f.es_sizes[++frame];
    PacketPlan p;
    p.first = n == 0;
    p.time90k = f.count ? f.pts[frame] : 0;
    p.pcr = p.first || (p.time90k > last_pcr && p.time90k - last_pcr >= pcr_interval90k);
    if (p.pcr) last_pcr = p.time90k;
    const size_t capacity = kPacketPayloadMax - (p.pcr ? kPcrAdaptationSize : 0);
    p.offset = pos;
    p.payload = total - pos < capacity ? total - pos : capacity;
    sink(static_cast<const PacketPlan&>(p));
    pos += p.payload;
    ++n;
  }
  return n;
}

/** Packets lay_out_pes produces (size first). */
inline size_t count_pes_packets(size_t header_size, const PesFrames& f, uint64_t pcr_interval90k) {
  return lay_out_pes(header_size, f, pcr_interval90k, [](const PacketPlan&) {});
}

/** lay_out_pes's packet count, kept up to date while frames are appended one by one (O(packets)
 *  in total instead of O(packets) per count): appending never changes the packets already laid
 *  out, it only fills the open last packet and opens new ones, which start inside the new frame. */
class PesPacketCounter {
 public:
  void begin(size_t header_size, uint32_t es_size, uint64_t pts, uint64_t pcr_interval90k) {
    interval_ = pcr_interval90k;
    open_pos_ = 0;
    open_capacity_ = kPacketPayloadMax - kPcrAdaptationSize;  // the first packet carries a PCR
    last_pcr_ = pts;
    total_ = header_size;
    packets_ = 1;
    add(es_size, pts);
  }
  void add(uint32_t es_size, uint64_t pts) {
    total_ += es_size;
    while (total_ - open_pos_ > open_capacity_) {
      open_pos_ += open_capacity_;
      const bool pcr = pts > last_pcr_ && pts - last_pcr_ >= interval_;
      if (pcr) last_pcr_ = pts;
      open_capacity_ = kPacketPayloadMax - (pcr ? kPcrAdaptationSize : 0);
      ++packets_;
    }
  }
  size_t packets() const { return packets_; }
  size_t bytes() const { return total_; }

 private:
  uint64_t interval_ = 0, last_pcr_ = 0;
  size_t open_pos_ = 0, open_capacity_ = 0, total_ = 0, packets_ = 0;
};

struct PacketizeParams {
  uint16_t pid = 0;
  uint64_t pcr_lead90k = 0;      // PCR = packet time - lead (modulo 2^33; extension 0)
  uint64_t pcr_interval90k = 0;  // see lay_out_pes
  bool random_access = false;    // random_access_indicator in the first packet
};

/** Writes the PES `pes` (header + frames, contiguous, as described by header_size and `f`) as TS
 *  packets; returns the packet count. */
size_t packetize_pes(util::ByteWriter& w, ContinuityCounter& cc, const uint8_t* pes, size_t header_size,
                     const PesFrames& f, const PacketizeParams& p);

/** TS packets of a PES of `pes_size` bytes on a PID that carries no PCR (e.g. timed ID3): full
 *  184-byte payloads, the last one padded with adaptation-field stuffing. */
constexpr size_t count_plain_pes_packets(size_t pes_size) {
  return (pes_size + kPacketPayloadMax - 1) / kPacketPayloadMax;
}
/** Writes that PES (payload_unit_start_indicator on the first packet, no PCR, no
 *  random_access_indicator); returns the packet count. */
size_t packetize_plain_pes(util::ByteWriter& w, ContinuityCounter& cc, uint16_t pid, const uint8_t* pes, size_t size);

/** Writes the 6-byte program_clock_reference (33-bit base, 6 reserved bits, 9-bit extension 0). */
void write_pcr(util::ByteWriter& w, uint64_t pcr90k);

}  // namespace skylark::mux::ts
