// See mp3.h. Tables: ISO/IEC 11172-3 §2.4.2.3 (bitrate_index, sampling_frequency), ISO/IEC 13818-3
// §2.4.2.3 (lower sampling frequencies); frame length = 144 * bitrate / rate (+1 padding) for MPEG-1,
// 72 * bitrate / rate for MPEG-2/2.5 (576 samples per frame).
#include "core/codec/mp3.h"

#include <algorithm>

namespace skylark::codec {
namespace {

constexpr uint16_t kBitrateV1[16] = {0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0};
constexpr uint16_t kBitrateV2[16] = {0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0};
constexpr uint32_t kRateV1[3] = {44100, 48000, 32000};

}  // namespace

const char* mp3_status_message(Mp3Status s) {
  switch (s) {
    case Mp3Status::kOk: return "ok";
    case Mp3Status::kTruncated: return "MP3 frame header is truncated";
    case Mp3Status::kNoSync: return "no MP3 frame sync word";
    case Mp3Status::kBadVersion: return "MP3 frame header has the reserved MPEG version";
    case Mp3Status::kNotLayer3: return "MPEG audio is not Layer III";
    case Mp3Status::kFreeFormat: return "free-format MP3 (bitrate index 0) is not supported";
    case Mp3Status::kBadBitrate: return "MP3 frame header has the invalid bitrate index 15";
    case Mp3Status::kBadSampleRate: return "MP3 frame header has the reserved sampling frequency";
    case Mp3Status::kBadEmphasis: return "MP3 frame header has the reserved emphasis";
  }
  return "unknown";
}

Mp3Status parse_mp3_header(const uint8_t* d, size_t size, Mp3Header* out) {
  if (size < kMp3HeaderSize) return Mp3Status::kTruncated;
  if (d[0] != 0xFF || (d[1] & 0xE0) != 0xE0) return Mp3Status::kNoSync;
  Mp3Header h;
  h.version = static_cast<MpegVersion>((d[1] >> 3) & 3);
  if (h.version == MpegVersion::kReserved) return Mp3Status::kBadVersion;
  if (((d[1] >> 1) & 3) != 1) return Mp3Status::kNotLayer3;
  h.crc = (d[1] & 1) == 0;
  const uint32_t bitrate_index = d[2] >> 4;
  const uint32_t rate_index = (d[2] >> 2) & 3;
  if (bitrate_index == 0) return Mp3Status::kFreeFormat;
  if (bitrate_index == 15) return Mp3Status::kBadBitrate;
  if (rate_index == 3) return Mp3Status::kBadSampleRate;
  if ((d[3] & 3) == 2) return Mp3Status::kBadEmphasis;
  h.padding = (d[2] >> 1) & 1;
  h.channel_mode = d[3] >> 6;
  const bool v1 = h.mpeg1();
  h.bitrate_kbps = v1 ? kBitrateV1[bitrate_index] : kBitrateV2[bitrate_index];
  h.sample_rate = kRateV1[rate_index] >> (v1 ? 0 : h.version == MpegVersion::k2 ? 1 : 2);
  h.samples_per_frame = v1 ? 1152 : 576;
  h.frame_size = (v1 ? 144u : 72u) * h.bitrate_kbps * 1000u / h.sample_rate + (h.padding ? 1u : 0u);
  *out = h;
  return Mp3Status::kOk;
}

size_t Mp3FrameSplitter::push(const uint8_t* data, size_t size, std::vector<Frame>& frames) {
  buf_.insert(buf_.end(), data, data + size);
  out_.clear();
  if (out_.capacity() > kMaxPending) std::vector<uint8_t>().swap(out_);  // an outsized push grew it
  struct Span { size_t at; uint32_t size; Mp3Header h; };
  std::vector<Span> found;  // offsets into out_ (out_ may reallocate while we append)
  size_t pos = 0, skipped = 0;
  const size_t n = buf_.size();
  while (n - pos >= kMp3HeaderSize) {
    Mp3Header h;
    if (parse_mp3_header(&buf_[pos], n - pos, &h) != Mp3Status::kOk) {
      synced_ = false;
      ++pos;
      ++skipped;
      continue;
    }
    if (n - pos < h.frame_size) break;  // need more bytes
    if (!synced_) {
      // Confirm: the next header must parse and describe the same stream.
      const size_t next = pos + h.frame_size;
      if (n - next < kMp3HeaderSize) break;  // cannot confirm yet
      Mp3Header h2;
      if (parse_mp3_header(&buf_[next], n - next, &h2) != Mp3Status::kOk || !mp3_same_stream(h, h2)) {
        ++pos;
        ++skipped;
        continue;
      }
    }
    found.push_back({out_.size(), h.frame_size, h});
    out_.insert(out_.end(), buf_.begin() + static_cast<ptrdiff_t>(pos),
                buf_.begin() + static_cast<ptrdiff_t>(pos + h.frame_size));
    pos += h.frame_size;
    synced_ = true;
  }
  buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(pos));
  if (buf_.size() > kMaxPending) {  // cannot happen with a valid header in front; bound it anyway
    skipped += buf_.size() - kMaxPending;
    buf_.erase(buf_.begin(), buf_.end() - static_cast<ptrdiff_t>(kMaxPending));
    synced_ = false;
  }
  if (buf_.capacity() > 2 * kMaxPending) buf_.shrink_to_fit();
  for (const Span& s : found) frames.push_back({out_.data() + s.at, s.size, s.h});
  return skipped;
}

}  // namespace skylark::codec
