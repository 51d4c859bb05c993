// libFuzzer target: the Segmenter end to end (FLV/E-RTMP tag parsing, AAC/MP3/Opus configs and
// frames, fMP4 init/fragment writers, LL-HLS parts, MPEG-TS for MP3/AAC). Input layout:
//   byte 0   options: bits 0-1 target (100/500/1000/2000 ms), bits 2-3 parts (0/100/250/500 ms),
//            bit 4 container TS instead of fMP4 (then no parts), bits 5-6 expectCodec (none/aac/mp3/opus),
//            bit 7 byte caps on (maxFrameBytes 2048, maxSegmentBytes 16384)
//   then tags: [u16 length][u8 timestamp delta in 4 ms units; 0xFF = discontinuity() first][body]
// Invariants: the bytes of each fMP4 segment equal its parts concatenated, fragments/init have
// consistent box sizes, TS segments are whole 188-byte packets, sequences and part indices count up,
// and with the caps no open segment holds more frame bytes than maxSegmentBytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/segment/segmenter.h"

using namespace skylark::segment;

namespace {
bool boxes_ok(const std::vector<uint8_t>& b) {
  size_t off = 0;
  while (off < b.size()) {
    if (b.size() - off < 8) return false;
    const size_t s = size_t{b[off]} << 24 | size_t{b[off + 1]} << 16 | size_t{b[off + 2]} << 8 | b[off + 3];
    if (s < 8 || s > b.size() - off) return false;
    off += s;
  }
  return true;
}

struct Checker {
  bool ts = false;
  std::vector<uint8_t> parts;
  uint64_t next_seq = 0;
  uint32_t next_part = 0;
  void check(std::vector<SegmenterEvent>& ev) {
    for (auto& e : ev) {
      if (e.type == SegmenterEvent::Type::kConfig && !ts && !boxes_ok(e.init)) std::abort();
      if (e.type == SegmenterEvent::Type::kPart) {
        if (ts || e.sequence != next_seq || e.part_index != next_part++ || !boxes_ok(e.data)) std::abort();
        parts.insert(parts.end(), e.data.begin(), e.data.end());
      }
      if (e.type == SegmenterEvent::Type::kSegment) {
        if (e.sequence != next_seq++ || e.frames == 0 || e.data.empty()) std::abort();
        if (ts ? e.data.size() % 188 != 0 : !boxes_ok(e.data)) std::abort();
        if (next_part > 0 && e.data != parts) std::abort();
        parts.clear();
        next_part = 0;
      }
    }
    ev.clear();
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const uint32_t kTargets[4] = {100, 500, 1000, 2000};
  static const uint32_t kParts[4] = {0, 100, 250, 500};
  SegmenterOptions o;
  o.target_duration_ms = kTargets[data[0] & 3];
  o.container = (data[0] & 0x10) ? Container::kTs : Container::kFmp4;
  o.part_target_ms = o.container == Container::kFmp4 ? kParts[(data[0] >> 2) & 3] : 0;
  if (o.part_target_ms > o.target_duration_ms) o.part_target_ms = o.target_duration_ms;
  o.expect = static_cast<AudioCodec>((data[0] >> 5) & 3);
  if (data[0] & 0x80) {
    o.max_frame_bytes = 2048;
    o.max_segment_bytes = 16384;
  }
  Segmenter seg(o);
  Checker c;
  c.ts = o.container == Container::kTs;
  std::vector<SegmenterEvent> ev;
  size_t pos = 1;
  uint32_t ts = 0;
  while (pos + 3 <= size) {
    const size_t len = size_t{data[pos]} << 8 | data[pos + 1];
    const uint8_t delta = data[pos + 2];
    pos += 3;
    if (delta == 0xFF) seg.discontinuity();
    else ts += delta * 4u;
    const size_t n = len < size - pos ? len : size - pos;
    seg.push_audio(ts, data + pos, n, ev);
    if (o.max_segment_bytes != 0 && seg.open_frame_bytes() > o.max_segment_bytes) std::abort();
    c.check(ev);
    pos += n;
  }
  seg.flush(ev);
  c.check(ev);
  return 0;
}
