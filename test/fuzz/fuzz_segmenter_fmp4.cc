// libFuzzer target: the Segmenter end to end (FLV/E-RTMP tag parsing, AAC/MP3/Opus configs and
// frames, fMP4 init/fragment writers, LL-HLS parts, MPEG-TS for MP3/AAC, timed ID3). Input layout:
//   byte 0   options: bits 0-1 target (100/500/1000/2000 ms), bits 2-3 parts (0/100/250/500 ms),
//            bit 4 container TS instead of fMP4 (then no parts), bits 5-6 expectCodec (none/aac/mp3/opus),
//            bit 7 byte caps on (maxFrameBytes 2048, maxSegmentBytes 16384)
//   then records: [u16 length][u8 timestamp delta in 4 ms units; 0xFF = discontinuity() first;
//            0xFE = a now-playing change instead of audio][body]
//   a change's body: [i8 timestamp offset in 16 ms units from the current timestamp][title 0x00
//            artist 0x00 album 0x00 url] (missing strings are empty)
// Invariants: the bytes of each fMP4 segment equal its parts concatenated, fragments/init have
// consistent box sizes, TS segments are whole 188-byte packets, sequences and part indices count up,
// with the caps no open segment holds more frame bytes than maxSegmentBytes; timed ID3 is bounded:
// at most kMaxMetadataPerFragment changes per fragment (TS: segment), each reported and written
// once (fMP4: one emsg per change before the moof, its id and presentation_time as reported; TS:
// one PES start on the ID3 PID), no tag over kMaxNowPlayingTagSize, a segment reports exactly its
// parts' changes, and what waits for a frame is at most kMaxMetadataPerFragment + 1 tags.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/mux/id3/tag.h"
#include "core/segment/segmenter.h"

using namespace skylark::segment;
namespace id3 = skylark::mux::id3;

namespace {
uint32_t be32(const uint8_t* p) { return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]; }
uint64_t be64(const uint8_t* p) { return uint64_t{be32(p)} << 32 | be32(p + 4); }

bool boxes_ok(const std::vector<uint8_t>& b) {
  size_t off = 0;
  while (off < b.size()) {
    if (b.size() - off < 8) return false;
    const size_t s = be32(&b[off]);
    if (s < 8 || s > b.size() - off) return false;
    off += s;
  }
  return true;
}

// The emsg boxes of a part / segment (top level) against its reported changes: one each, in order,
// version 1, the ID3 scheme, the reported id and presentation_time, a bounded ID3 tag. At most
// kMaxMetadataPerFragment before one moof.
void check_emsg(const SegmenterEvent& e) {
  size_t k = 0, run = 0;
  for (size_t off = 0; off < e.data.size(); off += be32(&e.data[off])) {
    const uint8_t* b = &e.data[off];
    if (std::memcmp(b + 4, "emsg", 4) != 0) {
      run = 0;
      continue;
    }
    const size_t size = be32(b);
    const std::string_view scheme = skylark::mux::fmp4::kId3EventScheme;
    if (++run > kMaxMetadataPerFragment || k >= e.metadata.size()) std::abort();
    if (size < 32 + scheme.size() + 2 + 10 || b[8] != 1) std::abort();
    if (be64(b + 16) != e.metadata[k].presentation_time || be32(b + 28) != e.metadata[k].id) std::abort();
    if (std::memcmp(b + 32, scheme.data(), scheme.size()) != 0 || b[32 + scheme.size()] != 0) std::abort();
    const size_t tag = size - (32 + scheme.size() + 2);
    if (tag > id3::kMaxNowPlayingTagSize || std::memcmp(b + 32 + scheme.size() + 2, "ID3\x04", 4) != 0) std::abort();
    ++k;
  }
  if (k != e.metadata.size()) std::abort();
}

// TS: one PES start on the ID3 PID per reported change, none beyond kMaxMetadataPerFragment.
void check_ts_id3(const SegmenterEvent& e) {
  size_t starts = 0;
  for (size_t i = 0; i + 188 <= e.data.size(); i += 188) {
    const uint8_t* p = &e.data[i];
    const int pid = (p[1] & 0x1F) << 8 | p[2];
    if (pid == 0x101 && (p[1] & 0x40)) ++starts;
  }
  if (starts != e.metadata.size() || starts > kMaxMetadataPerFragment) std::abort();
}

struct Checker {
  bool ts = false;
  std::vector<uint8_t> parts;
  std::vector<MetadataMark> part_marks;
  uint64_t next_seq = 0;
  uint32_t next_part = 0;
  void check(std::vector<SegmenterEvent>& ev) {
    for (auto& e : ev) {
      if (e.type == SegmenterEvent::Type::kConfig && !ts && !boxes_ok(e.init)) std::abort();
      if (e.type == SegmenterEvent::Type::kPart) {
        if (ts || e.sequence != next_seq || e.part_index != next_part++ || !boxes_ok(e.data)) std::abort();
        if (e.metadata.size() > kMaxMetadataPerFragment) std::abort();
        check_emsg(e);
        parts.insert(parts.end(), e.data.begin(), e.data.end());
        part_marks.insert(part_marks.end(), e.metadata.begin(), e.metadata.end());
      }
      if (e.type == SegmenterEvent::Type::kSegment) {
        if (e.sequence != next_seq++ || e.frames == 0 || e.data.empty()) std::abort();
        if (ts ? e.data.size() % 188 != 0 : !boxes_ok(e.data)) std::abort();
        if (ts) check_ts_id3(e);
        else check_emsg(e);
        if (next_part > 0) {
          if (e.data != parts || e.metadata.size() != part_marks.size()) std::abort();
          for (size_t i = 0; i < part_marks.size(); ++i)
            if (e.metadata[i].id != part_marks[i].id || e.metadata[i].pts90k != part_marks[i].pts90k) std::abort();
        } else if (e.metadata.size() > kMaxMetadataPerFragment) {
          std::abort();
        }
        parts.clear();
        part_marks.clear();
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
    const size_t n = len < size - pos ? len : size - pos;
    if (delta == 0xFE) {
      // A now-playing change: offset, then up to four NUL-separated strings (any bytes).
      const uint8_t* body = data + pos;
      const int8_t off = n > 0 ? static_cast<int8_t>(body[0]) : 0;
      std::string_view f[4];
      size_t at = n > 0 ? 1 : 0;
      for (int k = 0; k < 4 && at <= n; ++k) {
        size_t end = at;
        while (end < n && body[end] != 0) ++end;
        f[k] = std::string_view(reinterpret_cast<const char*>(body + at), end - at);
        at = end + 1;
      }
      seg.push_metadata(ts + static_cast<uint32_t>(off * 16), {f[0], f[1], f[2], f[3]});
    } else {
      if (delta == 0xFF) seg.discontinuity();
      else ts += delta * 4u;
      seg.push_audio(ts, data + pos, n, ev);
    }
    if (o.max_segment_bytes != 0 && seg.open_frame_bytes() > o.max_segment_bytes) std::abort();
    if (seg.pending_metadata() > kMaxMetadataPerFragment + 1 ||
        seg.pending_metadata_bytes() > (kMaxMetadataPerFragment + 1) * id3::kMaxNowPlayingTagSize)
      std::abort();
    c.check(ev);
    pos += n;
  }
  seg.flush(ev);
  c.check(ev);
  return 0;
}
