// Server handshake; see handshake.h.
#include "core/rtmp/handshake.h"

#include <algorithm>
#include <cstring>

namespace skylark::rtmp {

size_t ServerHandshake::feed(const uint8_t* data, size_t size, std::vector<uint8_t>& out) {
  size_t used = 0;
  while (used < size && state_ != State::kDone && state_ != State::kError) {
    switch (state_) {
      case State::kC0:
        if (data[used++] != kRtmpVersion) {
          state_ = State::kError;
          return used;
        }
        state_ = State::kC1;
        have_ = 0;
        break;
      case State::kC1: {
        size_t n = std::min(size - used, kHandshakeSize - have_);
        std::memcpy(c1_ + have_, data + used, n);
        have_ += n;
        used += n;
        if (have_ == kHandshakeSize) {
          // S0, S1 (time 0, zero "version", filler), S2 = C1 echoed.
          size_t at = out.size();
          out.resize(at + 1 + 2 * kHandshakeSize);
          uint8_t* p = out.data() + at;
          p[0] = kRtmpVersion;
          uint8_t* s1 = p + 1;
          std::memset(s1, 0, 8);
          uint32_t x = 0x9E3779B9u;  // filler: a fixed xorshift sequence (no secrecy needed)
          for (size_t i = 8; i < kHandshakeSize; ++i) {
            x ^= x << 13; x ^= x >> 17; x ^= x << 5;
            s1[i] = static_cast<uint8_t>(x);
          }
          std::memcpy(s1 + kHandshakeSize, c1_, kHandshakeSize);
          state_ = State::kC2;
          have_ = 0;
        }
        break;
      }
      case State::kC2: {
        size_t n = std::min(size - used, kHandshakeSize - have_);
        have_ += n;
        used += n;
        if (have_ == kHandshakeSize) state_ = State::kDone;
        break;
      }
      default:
        break;
    }
  }
  return used;
}

}  // namespace skylark::rtmp
