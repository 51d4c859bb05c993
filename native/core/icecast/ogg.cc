// See ogg.h.
#include "core/icecast/ogg.h"

#include <array>
#include <cstring>

namespace skylark::icecast {
namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t r = i << 24;
    for (int j = 0; j < 8; ++j) r = (r & 0x80000000u) ? (r << 1) ^ 0x04C11DB7u : r << 1;
    t[i] = r;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

uint32_t le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

bool starts_with(const uint8_t* p, size_t size, const char* magic, size_t n) {
  return size >= n && std::memcmp(p, magic, n) == 0;
}

}  // namespace

OggPageStatus parse_ogg_page_header(const uint8_t* d, size_t size, OggPage* out) {
  if (size >= 4 && std::memcmp(d, "OggS", 4) != 0) return OggPageStatus::kNoCapture;
  if (size < 4 && std::memcmp(d, "OggS", size) != 0) return OggPageStatus::kNoCapture;
  if (size < kOggHeaderBytes) return OggPageStatus::kNeedMore;
  OggPage p;
  p.version = d[4];
  p.flags = d[5];
  p.granule = uint64_t{le32(d + 6)} | uint64_t{le32(d + 10)} << 32;
  p.serial = le32(d + 14);
  p.sequence = le32(d + 18);
  p.crc = le32(d + 22);
  p.segments = d[26];
  p.header_size = kOggHeaderBytes + p.segments;
  if (size < p.header_size) return OggPageStatus::kNeedMore;
  p.lacing = d + kOggHeaderBytes;
  for (size_t i = 0; i < p.segments; ++i) p.body_size += p.lacing[i];
  *out = p;
  return OggPageStatus::kOk;
}

uint32_t ogg_crc32(const uint8_t* d, size_t size, uint32_t crc) {
  for (size_t i = 0; i < size; ++i) crc = (crc << 8) ^ kCrcTable[((crc >> 24) ^ d[i]) & 0xFF];
  return crc;
}

bool ogg_page_crc_ok(const uint8_t* d, const OggPage& page) {
  static constexpr uint8_t kZeros[4] = {0, 0, 0, 0};
  uint32_t crc = ogg_crc32(d, 22);
  crc = ogg_crc32(kZeros, 4, crc);
  crc = ogg_crc32(d + 26, page.size() - 26, crc);
  return crc == page.crc;
}

const char* ogg_identify_codec(const uint8_t* p, size_t size) {
  if (starts_with(p, size, "OpusHead", 8)) return "opus";
  if (starts_with(p, size, "\x01vorbis", 7)) return "vorbis";
  if (starts_with(p, size, "\x7F" "FLAC", 5) || starts_with(p, size, "fLaC", 4)) return "flac";
  if (starts_with(p, size, "Speex   ", 8)) return "speex";
  if (starts_with(p, size, "\x80theora", 7)) return "theora";
  if (starts_with(p, size, "fishead\0", 8)) return "skeleton";
  return "ogg";
}

}  // namespace skylark::icecast
