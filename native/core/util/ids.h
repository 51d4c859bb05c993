// Ids for live objects (connections) that are never handed out twice while in use: a counter that
// wraps after `max` and skips every id the caller says is still taken.
//
//   IdCounter ids;                                        // ids 1..2^31-1
//   uint32_t id = ids.next([&](uint32_t i) { return conns.count(i) != 0; });   // 0: all taken
#pragma once
#include <cstdint>

namespace skylark::util {

class IdCounter {
 public:
  explicit IdCounter(uint32_t max = 0x7FFFFFFF) : max_(max == 0 ? 1 : max) {}

  /** The next id after the last one handed out (1..max, wrapping to 1) for which `taken(id)` is
   *  false; 0 when every id is taken. At most `max` calls of `taken`. */
  template <class Taken>
  uint32_t next(Taken&& taken) {
    for (uint32_t tries = 0; tries < max_; ++tries) {
      last_ = last_ >= max_ ? 1 : last_ + 1;
      if (!taken(last_)) return last_;
    }
    return 0;
  }

 private:
  uint32_t max_;
  uint32_t last_ = 0;
};

}  // namespace skylark::util
