// libFuzzer target: the plain-GET reader (core/http/plain_get.h) on any bytes.
// Invariants: a target is only returned for a read that starts with "GET " and ends with the
// head's empty line; it lies inside the input, starts with the prefix and holds only path
// characters; and appending any byte to an accepted read refuses it (nothing may follow the head).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/http/plain_get.h"

using namespace skylark::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view t = PlainGetTarget(data, size, "/hls/");
  if (t.empty()) return 0;
  if (size < 4 || std::memcmp(data, "GET ", 4) != 0 || std::memcmp(data + size - 4, "\r\n\r\n", 4) != 0) std::abort();
  const auto* p = reinterpret_cast<const uint8_t*>(t.data());
  if (p < data || p + t.size() > data + size) std::abort();
  if (t.substr(0, 5) != "/hls/") std::abort();
  for (char c : t)
    if (c == '?' || c == '%' || c == '#' || c == ' ' || static_cast<unsigned char>(c) < 0x21) std::abort();
  std::string more(reinterpret_cast<const char*>(data), size);
  more.push_back('x');
  if (!PlainGetTarget(reinterpret_cast<const uint8_t*>(more.data()), more.size(), "/hls/").empty()) std::abort();
  return 0;
}
