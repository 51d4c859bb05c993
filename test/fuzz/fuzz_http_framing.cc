// libFuzzer target: request framing by llhttp (core/http/framing.h), the decision of which reads
// a stored media object may answer (docs/http.md "Framing"). Invariants: every target points into
// the input; a read that ends exactly holds at least one request (or no bytes); a read that is
// exactly one request has no proper non-empty prefix that ends exactly (its bytes are one message,
// whatever a body inside it looks like); framing is deterministic.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/http/framing.h"

using namespace skylark::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Framing f = FrameRequests(data, size);
  const char* begin = reinterpret_cast<const char*>(data);
  const size_t shown = f.heads_count < kMaxFramedHeads ? f.heads_count : kMaxFramedHeads;
  for (size_t i = 0; i < shown; ++i) {
    const std::string_view t = f.heads[i].target;
    if (!t.empty() && (t.data() < begin || t.data() + t.size() > begin + size)) std::abort();
  }
  if (f.end == FrameEnd::kExact && size > 0 && f.heads_count == 0) std::abort();
  if (f.heads_count > 0 && !f.line_complete) std::abort();
  const Framing again = FrameRequests(data, size);
  if (again.end != f.end || again.heads_count != f.heads_count || again.fields != f.fields) std::abort();
  if (f.end == FrameEnd::kExact && f.heads_count == 1 && size > 1) {
    const size_t cut = 1 + data[0] % (size - 1);
    if (FrameRequests(data, cut).end == FrameEnd::kExact) std::abort();
  }
  return 0;
}
