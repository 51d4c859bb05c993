// See sniff.h. Tables: ISO/IEC 11172-3 §2.4.2.3 (bitrate_index per layer, sampling_frequency),
// ISO/IEC 13818-3 §2.4.2.3 (lower sampling frequencies); frame length: Layer I (12 * bitrate /
// rate + padding) * 4 bytes, Layer II 144 * bitrate / rate + padding, Layer III 144 (MPEG-1) or
// 72 (MPEG-2/2.5) * bitrate / rate + padding.
#include "core/icecast/sniff.h"

#include <algorithm>
#include <cstring>

#include "core/icecast/adts.h"
#include "core/icecast/ogg.h"

namespace skylark::icecast {
namespace {

constexpr uint16_t kBitrateV1[3][16] = {
    {0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 0},  // Layer I
    {0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 0},     // Layer II
    {0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0},      // Layer III
};
constexpr uint16_t kBitrateV2[3][16] = {
    {0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256, 0},     // Layer I
    {0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0},          // Layer II
    {0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0},          // Layer III
};
constexpr uint32_t kRateV1[3] = {44100, 48000, 32000};

const char* mpeg_layer_name(uint8_t layer) { return layer == 1 ? "mp1" : layer == 2 ? "mp2" : "mp3"; }

}  // namespace

Id3Status parse_id3v2_header(const uint8_t* d, size_t size, size_t* total) {
  static constexpr uint8_t kMagic[3] = {'I', 'D', '3'};
  if (std::memcmp(d, kMagic, std::min<size_t>(size, 3)) != 0) return Id3Status::kNotId3;
  if (size < kId3HeaderBytes) return Id3Status::kNeedMore;
  if (d[3] < 2 || d[3] > 4 || d[4] == 0xFF) return Id3Status::kNotId3;
  if ((d[6] | d[7] | d[8] | d[9]) & 0x80) return Id3Status::kNotId3;  // syncsafe: bit 7 always 0
  const size_t body = size_t{d[6]} << 21 | size_t{d[7]} << 14 | size_t{d[8]} << 7 | d[9];
  const bool footer = d[3] == 4 && (d[5] & 0x10) != 0;
  *total = kId3HeaderBytes + body + (footer ? kId3HeaderBytes : 0);
  return Id3Status::kOk;
}

bool is_mp3_info_frame(const uint8_t* f, const codec::Mp3Header& h) {
  const bool mono = h.channel_mode == 3;
  const size_t side = h.mpeg1() ? (mono ? 17 : 32) : (mono ? 9 : 17);
  const size_t at = codec::kMp3HeaderSize + (h.crc ? 2 : 0) + side;
  if (at + 4 <= h.frame_size && (std::memcmp(f + at, "Xing", 4) == 0 || std::memcmp(f + at, "Info", 4) == 0))
    return true;
  return 36 + 4 <= h.frame_size && std::memcmp(f + 36, "VBRI", 4) == 0;
}

bool parse_mpeg_audio_frame(const uint8_t* d, size_t size, MpegAudioFrame* out) {
  if (size < 4 || d[0] != 0xFF || (d[1] & 0xE0) != 0xE0) return false;
  const uint8_t version = (d[1] >> 3) & 3;
  const uint8_t layer_bits = (d[1] >> 1) & 3;
  const uint32_t bitrate_index = d[2] >> 4, rate_index = (d[2] >> 2) & 3;
  if (version == 1 || layer_bits == 0 || bitrate_index == 0 || bitrate_index == 15 || rate_index == 3 ||
      (d[3] & 3) == 2)
    return false;
  MpegAudioFrame f;
  f.layer = static_cast<uint8_t>(4 - layer_bits);
  f.version_bits = version;
  const bool v1 = version == 3;
  const uint32_t kbps = (v1 ? kBitrateV1 : kBitrateV2)[f.layer - 1][bitrate_index];
  f.sample_rate = kRateV1[rate_index] >> (v1 ? 0 : version == 2 ? 1 : 2);
  const uint32_t padding = (d[2] >> 1) & 1;
  if (f.layer == 1) f.frame_size = (12 * kbps * 1000 / f.sample_rate + padding) * 4;
  else if (f.layer == 2 || v1) f.frame_size = 144 * kbps * 1000 / f.sample_rate + padding;
  else f.frame_size = 72 * kbps * 1000 / f.sample_rate + padding;
  *out = f;
  return true;
}

Sniff sniff_codec(const uint8_t* d, size_t size, const char** name, size_t* need) {
  if (size == 0) { *need = 1; return Sniff::kNeedMore; }
  if (d[0] == 'O') {
    OggPage page;
    switch (parse_ogg_page_header(d, size, &page)) {
      case OggPageStatus::kNoCapture: return Sniff::kNone;
      case OggPageStatus::kNeedMore:
        *need = size < kOggHeaderBytes ? kOggHeaderBytes : kOggHeaderBytes + d[26];
        return Sniff::kNeedMore;
      case OggPageStatus::kOk: break;
    }
    size_t first = 0;  // bytes of the first packet on the page, as far as identification needs
    for (size_t i = 0; i < page.segments && first < kOggIdentifyBytes; ++i) {
      first += page.lacing[i];
      if (page.lacing[i] < 255) break;
    }
    first = std::min(first, kOggIdentifyBytes);
    if (size < page.header_size + first) { *need = page.header_size + first; return Sniff::kNeedMore; }
    *name = ogg_identify_codec(d + page.header_size, first);
    return Sniff::kFound;
  }
  if (d[0] != 0xFF) return Sniff::kNone;
  if (size < 2) { *need = 2; return Sniff::kNeedMore; }
  if ((d[1] & 0xF6) == 0xF0) {  // ADTS: syncword 0xFFF, layer 00
    AdtsHeader a, b;
    switch (parse_adts_header(d, size, &a)) {
      case AdtsStatus::kTruncated: *need = (d[1] & 1) ? kAdtsHeaderBytes : kAdtsHeaderCrcBytes; return Sniff::kNeedMore;
      case AdtsStatus::kOk: break;
      default: return Sniff::kNone;
    }
    if (size < a.frame_length + kAdtsHeaderCrcBytes) { *need = a.frame_length + kAdtsHeaderCrcBytes; return Sniff::kNeedMore; }
    if (parse_adts_header(d + a.frame_length, size - a.frame_length, &b) != AdtsStatus::kOk || !adts_same_config(a, b))
      return Sniff::kNone;
    *name = "aac";
    return Sniff::kFound;
  }
  if (size < 4) { *need = 4; return Sniff::kNeedMore; }
  MpegAudioFrame a, b;
  if (!parse_mpeg_audio_frame(d, size, &a)) return Sniff::kNone;
  if (size < a.frame_size + 4) { *need = a.frame_size + 4; return Sniff::kNeedMore; }
  if (!parse_mpeg_audio_frame(d + a.frame_size, size - a.frame_size, &b) || a.layer != b.layer ||
      a.version_bits != b.version_bits || a.sample_rate != b.sample_rate)
    return Sniff::kNone;
  *name = mpeg_layer_name(a.layer);
  return Sniff::kFound;
}

}  // namespace skylark::icecast
