// The 4-bit continuity_counter of one PID (ISO/IEC 13818-1 §2.4.3.3): incremented for every packet
// that carries payload, wrapping 15 → 0. One per PID, kept across segments.
#pragma once
#include <cstdint>

namespace skylark::mux::ts {

class ContinuityCounter {
 public:
  /** The value for the next payload-carrying packet (then advances). */
  uint8_t next() {
    uint8_t v = value_;
    value_ = static_cast<uint8_t>((value_ + 1) & 0x0F);
    return v;
  }
  uint8_t peek() const { return value_; }

 private:
  uint8_t value_ = 0;
};

}  // namespace skylark::mux::ts
