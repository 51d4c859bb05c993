// CRC-32/MPEG-2 for PSI sections (ISO/IEC 13818-1 Annex A): polynomial 0x04C11DB7, initial value
// 0xFFFFFFFF, MSB first, no reflection, no final XOR. crc32_mpeg2("123456789") == 0x0376E6E7.
#pragma once
#include <cstddef>
#include <cstdint>

namespace skylark::mux::ts {

uint32_t crc32_mpeg2(const uint8_t* data, size_t size);

}  // namespace skylark::mux::ts
