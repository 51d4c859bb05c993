// See pes_plan.h.
#include "core/mux/ts/pes_plan.h"

#include <algorithm>

#include "core/mux/ts/packetizer.h"
#include "core/mux/ts/pes.h"

namespace skylark::mux::ts {

void PesPlanner::plan(const uint32_t* es_sizes, const uint64_t* pts, size_t n, size_t max_frames,
                      size_t max_bytes, uint64_t pcr_interval90k, std::vector<uint32_t>& counts) {
  counts.clear();
  if (n == 0) return;
  if (max_frames == 0) max_frames = 1;
  if (max_bytes > kPesMaxPayload) max_bytes = kPesMaxPayload;
  cost_.assign(n + 1, UINT32_MAX);
  choice_.assign(n + 1, 1);
  cost_[0] = 0;
  // Forward: from each reachable start j, grow the PES frame by frame (the packet count updates
  // incrementally) and relax the end j + k. Starts are visited in order, so with the strict '<' a
  // tie keeps the earlier start, i.e. the larger (fewer) PES.
  PesPacketCounter counter;
  for (size_t j = 0; j < n; ++j) {
    counter.begin(kPesHeaderSize, es_sizes[j], pts[j], pcr_interval90k);
    size_t bytes = es_sizes[j];
    for (size_t k = 1; k <= max_frames && j + k <= n; ++k) {
      if (k > 1) {
        bytes += es_sizes[j + k - 1];
        if (bytes > max_bytes) break;
        counter.add(es_sizes[j + k - 1], pts[j + k - 1]);
      }
      const uint32_t c = cost_[j] + static_cast<uint32_t>(counter.packets());
      if (c < cost_[j + k]) {
        cost_[j + k] = c;
        choice_[j + k] = static_cast<uint32_t>(k);
      }
    }
  }
  for (size_t i = n; i > 0; i -= choice_[i]) counts.push_back(choice_[i]);
  std::reverse(counts.begin(), counts.end());
}

}  // namespace skylark::mux::ts
