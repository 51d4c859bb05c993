// MSB-first bit reader for codec headers (AudioSpecificConfig). Sticky failure on underrun.
#pragma once
#include <cstddef>
#include <cstdint>

namespace skylark::codec {

class BitReader {
 public:
  BitReader(const uint8_t* data, size_t size) : data_(data), bits_(size * 8) {}
  /** Reads `n` (0..32) bits; returns 0 and fails (sticky) when fewer remain. */
  uint32_t bits(unsigned n) {
    if (!ok_ || n > bits_ - pos_) { ok_ = false; return 0; }
    uint32_t v = 0;
    for (unsigned i = 0; i < n; ++i, ++pos_) v = (v << 1) | ((data_[pos_ >> 3] >> (7 - (pos_ & 7))) & 1u);
    return v;
  }
  bool ok() const { return ok_; }
  size_t remaining() const { return ok_ ? bits_ - pos_ : 0; }

 private:
  const uint8_t* data_;
  size_t bits_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace skylark::codec
