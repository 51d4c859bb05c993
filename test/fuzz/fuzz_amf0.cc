// libFuzzer target: the AMF0 decoder alone, plus a walk over everything it decoded (the views must
// stay inside the node list, strings inside the input). Seeds (test/fuzz/corpus/fuzz_amf0) are the
// command and data message bodies of the recorded FFmpeg publish.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/rtmp/amf0.h"

using namespace skylark::rtmp;

namespace {
void walk(const Amf0View& v, const uint8_t* begin, const uint8_t* end, size_t depth) {
  if (depth > kAmf0MaxDepth + 1) std::abort();
  auto inside = [&](std::string_view s) {
    if (s.empty()) return;
    auto* p = reinterpret_cast<const uint8_t*>(s.data());
    if (p < begin || p + s.size() > end) std::abort();
  };
  inside(v.str());
  inside(v.key());
  Amf0View c = v.first_child();
  for (uint32_t i = 0; i < v.child_count(); ++i, c = c.next()) {
    if (!c.valid()) std::abort();
    walk(c, begin, end, depth + 1);
  }
  (void)v.get("app").str();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<Amf0Node> nodes;
  if (amf0_decode_all({data, size}, nodes) != skylark::util::Status::kOk) return 0;
  if (nodes.size() > kAmf0MaxNodes) std::abort();
  for (size_t i = 0; amf0_root(nodes, i).valid(); ++i) walk(amf0_root(nodes, i), data, data + size, 0);
  return 0;
}
