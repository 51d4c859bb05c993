// RTMP handshake, server side (RTMP spec 1.0 §5.2): the simple handshake. C0 must be version 3.
// C1's content is not checked (the Flash-Player-9 digest variant FFmpeg and OBS send is accepted):
// S1 carries zero time and zero version bytes 4..7, which makes librtmp/OBS fall back to the simple
// scheme, and S2 echoes C1. C2 is read and ignored.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/util/status.h"

namespace skylark::rtmp {

inline constexpr uint8_t kRtmpVersion = 3;
inline constexpr size_t kHandshakeSize = 1536;  // C1/C2/S1/S2

class ServerHandshake {
 public:
  enum class State : uint8_t { kC0, kC1, kC2, kDone, kError };

  /** Consumes handshake bytes from `data` (at most up to the end of C2); returns how many were
   *  consumed. Appends S0+S1+S2 to `out` once C1 is complete. Check state() afterwards. */
  size_t feed(const uint8_t* data, size_t size, std::vector<uint8_t>& out);
  State state() const { return state_; }
  bool done() const { return state_ == State::kDone; }

 private:
  State state_ = State::kC0;
  size_t have_ = 0;                 // bytes of the current C1/C2 seen
  uint8_t c1_[kHandshakeSize] = {};  // kept to echo as S2
};

}  // namespace skylark::rtmp
