// libFuzzer target: the HTTP/1.x request-line reader (core/http/request_line.h) on any bytes.
// Invariants: a complete line's target lies inside the input, a version is only reported for a
// line that holds a LF, and the result does not depend on bytes after the first LF.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/http/request_line.h"

using namespace skylark::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const RequestLine l = ParseRequestLine(data, size);
  const bool has_lf = size > 0 && std::memchr(data, '\n', size) != nullptr;
  if (l.version != RequestVersion::kIncomplete && !has_lf) std::abort();
  if (!l.target.empty()) {
    const auto* t = reinterpret_cast<const uint8_t*>(l.target.data());
    if (t < data || t + l.target.size() > data + size) std::abort();
    if (l.version != RequestVersion::kHttp10 && l.version != RequestVersion::kHttp11) std::abort();
  }
  // Truncating after the line (past its LF, at most one leading empty line) changes nothing.
  if (has_lf) {
    const auto* lf = static_cast<const uint8_t*>(std::memchr(data, '\n', size));
    size_t cut = static_cast<size_t>(lf - data) + 1;
    if (cut <= 2 && cut < size) {
      const auto* lf2 = static_cast<const uint8_t*>(std::memchr(data + cut, '\n', size - cut));
      if (lf2) cut = static_cast<size_t>(lf2 - data) + 1;
    }
    const RequestLine again = ParseRequestLine(data, cut);
    if (again.version != l.version || again.target != l.target) std::abort();
  }
  (void)TargetStartsWith(l, "/listen/");
  return 0;
}
