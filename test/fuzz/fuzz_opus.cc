// libFuzzer target: OpusHead (RFC 7845 §5.1) and the TOC duration (RFC 6716 §3.1) on arbitrary
// bytes; a parsed OpusHead also goes through the fMP4 init writer (Opus sample entry + dOps) whose
// output must have consistent box sizes. Invariants: durations are 0 or a multiple of 120 samples
// up to 120 ms; mapping entries index existing streams.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/codec/opus.h"
#include "core/mux/fmp4/boxes.h"

using namespace skylark;

namespace {
bool boxes_ok(const uint8_t* p, size_t n) {
  size_t off = 0;
  while (off < n) {
    if (n - off < 8) return false;
    const size_t s = size_t{p[off]} << 24 | size_t{p[off + 1]} << 16 | size_t{p[off + 2]} << 8 | p[off + 3];
    if (s < 8 || s > n - off) return false;
    off += s;
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint32_t samples = codec::opus_packet_samples(data, size);
  if (samples % 120 != 0 || samples > codec::kOpusMaxPacketSamples) std::abort();
  codec::OpusHead h;
  if (codec::parse_opus_head(data, size, &h) != codec::OpusHeadStatus::kOk) return 0;
  if (h.channels == 0 || (h.mapping_family == 0 && h.channels > 2) || h.channels > 8) std::abort();
  for (unsigned i = 0; h.mapping_family == 1 && i < h.channels; ++i)
    if (h.mapping[i] != 255 && h.mapping[i] >= h.stream_count + h.coupled_count) std::abort();
  mux::fmp4::AudioTrack t;
  t.kind = mux::fmp4::AudioTrack::Kind::kOpus;
  t.opus = h;
  t.channels = h.channels;
  t.edit_media_time = h.pre_skip;
  t.roll_distance = -4;
  const auto init = mux::fmp4::write_init_segment(t);
  if (init.size() != mux::fmp4::init_segment_size(t) || !boxes_ok(init.data(), init.size())) std::abort();
  return 0;
}
