// Groups the ADTS frames of one segment into PES packets so that as few TS packets as possible
// are spent: every PES costs a header and ends with a stuffed, partly empty packet, so where PES
// packets end matters as much as how many frames they hold. A small dynamic program over the
// segment's frames (all known before the segment is written), bounded by frames and bytes per PES.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace skylark::mux::ts {

class PesPlanner {
 public:
  /** Fills `counts` with the number of frames of each PES, in order (sum = n). Frame i has ES size
   *  `es_sizes[i]` (ADTS header included) and PTS `pts[i]`. A PES holds at most `max_frames`
   *  frames and at most `max_bytes` ES bytes (a frame alone may exceed it). Minimises the TS packet
   *  count (PCR placement as in lay_out_pes); ties go to fewer, larger PES packets. */
  void plan(const uint32_t* es_sizes, const uint64_t* pts, size_t n, size_t max_frames, size_t max_bytes,
            uint64_t pcr_interval90k, std::vector<uint32_t>& counts);

 private:
  std::vector<uint32_t> cost_;    // cost_[i]: fewest packets for frames [0, i)
  std::vector<uint32_t> choice_;  // choice_[i]: frames in the last PES of that optimum
};

}  // namespace skylark::mux::ts
