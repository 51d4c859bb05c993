// See crc32.h. Table-driven, the table built at compile time.
#include "core/mux/ts/crc32.h"

#include <array>

namespace skylark::mux::ts {
namespace {

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i << 24;
    for (int k = 0; k < 8; ++k) c = (c & 0x80000000u) ? (c << 1) ^ 0x04C11DB7u : (c << 1);
    t[i] = c;
  }
  return t;
}
constexpr auto kTable = make_table();

}  // namespace

uint32_t crc32_mpeg2(const uint8_t* data, size_t size) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = (crc << 8) ^ kTable[((crc >> 24) ^ data[i]) & 0xFF];
  return crc;
}

}  // namespace skylark::mux::ts
