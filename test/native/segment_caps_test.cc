// The segmenter's byte caps (native/core/segment): max_frame_bytes (frame_too_large, the frame
// dropped; AAC always at most 8184 bytes, what one ADTS frame carries), max_segment_bytes
// (segment_too_large, the frame dropped; no segment ever holds more frame bytes), how the stream
// goes on after drops, and that without caps nothing changes.
#include <algorithm>
#include <string>
#include <vector>

#include "check.h"
#include "core/segment/segmenter.h"
#include "media_test_util.h"

using namespace skylark;
using namespace media_test;
using segment::Container;
using segment::Segmenter;
using segment::SegmenterEvent;
using segment::SegmenterOptions;
using Type = SegmenterEvent::Type;

namespace {
SegmenterOptions opts(Container c, uint32_t max_frame, uint32_t max_segment, uint32_t part = 0) {
  SegmenterOptions o;
  o.container = c;
  o.part_target_ms = part;
  o.max_frame_bytes = max_frame;
  o.max_segment_bytes = max_segment;
  return o;
}
std::vector<std::string> error_codes(const std::vector<SegmenterEvent>& ev) {
  std::vector<std::string> r;
  for (auto& e : ev) if (e.type == Type::kError) r.push_back(e.code);
  return r;
}
// An Opus CodedFrames tag whose packet is one 20 ms CELT frame (TOC config 31, code 0) of `bytes`.
std::vector<uint8_t> opus_tag(size_t bytes) {
  std::vector<uint8_t> p(bytes, 0x55);
  p[0] = 31 << 3;
  return ex_audio_tag(1, "Opus", p);
}
}  // namespace

TEST(frames_over_max_frame_bytes_are_dropped_with_frame_too_large) {
  auto tags = opus_tags_from_ogg("opus/sine48k_stereo_128k.ogg");
  CHECK(tags.size() > 150u);
  Segmenter s(opts(Container::kFmp4, 1000, 0));
  std::vector<SegmenterEvent> ev;
  uint32_t pushed_frames = 0;
  for (size_t i = 0; i < 150; ++i) {
    s.push_audio(tags[i].ts, tags[i].body.data(), tags[i].body.size(), ev);
    if (i > 0) ++pushed_frames;
    if (i == 60) s.push_audio(tags[i].ts + 20, opus_tag(1001).data(), 1001 + 5, ev);  // one huge packet
  }
  s.flush(ev);
  CHECK(error_codes(ev) == std::vector<std::string>{"frame_too_large"});
  uint32_t frames = 0;
  for (auto& e : ev) if (e.type == Type::kSegment) frames += e.frames;
  CHECK_EQ(frames, pushed_frames);  // every real packet, not the huge one
  // Exactly at the cap is fine.
  Segmenter t(opts(Container::kFmp4, 1000, 0));
  std::vector<SegmenterEvent> ev2;
  t.push_audio(0, tags[0].body.data(), tags[0].body.size(), ev2);
  t.push_audio(0, opus_tag(1000).data(), 1000 + 5, ev2);
  CHECK(error_codes(ev2).empty());
  CHECK_EQ(t.open_frames(), 1u);
}

TEST(aac_frames_over_8184_bytes_are_frame_too_large_in_every_container) {
  auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  std::vector<uint8_t> huge(2 + 8185, 0x11);
  huge[0] = 0xAF;
  huge[1] = 0x01;
  std::vector<uint8_t> max(2 + 8184, 0x11);
  max[0] = 0xAF;
  max[1] = 0x01;
  for (Container c : {Container::kTs, Container::kFmp4}) {
    Segmenter s(opts(c, 0, 0));
    std::vector<SegmenterEvent> ev;
    s.push_audio(0, tags[0].body.data(), tags[0].body.size(), ev);
    s.push_audio(0, huge.data(), huge.size(), ev);
    s.push_audio(21, max.data(), max.size(), ev);
    CHECK(error_codes(ev) == std::vector<std::string>{"frame_too_large"});
    CHECK_EQ(s.open_frames(), 1u);
  }
}

TEST(no_segment_holds_more_than_max_segment_bytes_of_frames) {
  auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  CHECK(tags.size() > 200u);
  size_t largest = 0;
  for (size_t i = 1; i < tags.size(); ++i) largest = std::max(largest, tags[i].body.size() - 2);
  // 128 kbps: ~32 KB per 2 s segment. A cap of 20000 bytes is hit in every segment.
  const uint32_t cap = 20000;
  for (uint32_t part : {0u, 500u}) {
    Segmenter s(opts(Container::kFmp4, 0, cap, part));
    std::vector<SegmenterEvent> ev;
    for (auto& t : tags) {
      s.push_audio(t.ts, t.body.data(), t.body.size(), ev);
      CHECK(s.open_frame_bytes() <= cap);
    }
    s.flush(ev);
    size_t too_large = 0, segments = 0, discontinuities = 0, last = 0;
    for (auto& e : ev) if (e.type == Type::kSegment) ++last;
    for (auto& e : ev) {
      if (e.type == Type::kError) {
        CHECK(std::string(e.code) == std::string("segment_too_large"));
        ++too_large;
      }
      if (e.type == Type::kSegment) {
        ++segments;
        if (e.discontinuity) ++discontinuities;
        size_t frame_bytes = 0;
        // fMP4: mdat payload = the frames' bytes; the fragments' headers come on top.
        std::vector<ParsedFragment> frags;
        CHECK(parse_fragments(e.data, frags));
        for (auto& f : frags) frame_bytes += f.mdat_payload;
        CHECK(frame_bytes <= cap);
        if (segments < last) CHECK(frame_bytes + largest > cap);  // full (the last one is flushed)
      }
    }
    CHECK(too_large > 0u);
    // Dropped frames leave the sample clock behind; past 1 s the timeline re-anchors with a new
    // segment, so the stream keeps producing segments.
    CHECK(segments >= 2u);
    CHECK(discontinuities >= 1u);
  }
}

TEST(segment_cap_in_ts_counts_frame_bytes) {
  auto tags = read_flv_audio("mp3/sine44k1_stereo_128k.flv");
  const uint32_t cap = 12000;
  Segmenter s(opts(Container::kTs, 0, cap));
  std::vector<SegmenterEvent> ev;
  for (auto& t : tags) {
    s.push_audio(t.ts, t.body.data(), t.body.size(), ev);
    CHECK(s.open_frame_bytes() <= cap);
    CHECK(s.held_bytes() <= cap + codec::Mp3FrameSplitter::kMaxPending);
  }
  bool hit = false;
  for (auto& e : ev) hit = hit || (e.type == Type::kError && std::string(e.code) == "segment_too_large");
  CHECK(hit);
}

TEST(without_caps_nothing_changes) {
  auto tags = opus_tags_from_ogg("opus/sine48k_stereo_128k.ogg");
  Segmenter s(opts(Container::kFmp4, 0, 0));
  std::vector<SegmenterEvent> ev;
  s.push_audio(0, tags[0].body.data(), tags[0].body.size(), ev);
  s.push_audio(0, opus_tag(60000).data(), 60000 + 5, ev);  // a 60 KB packet: taken, as before
  CHECK(error_codes(ev).empty());
  CHECK_EQ(s.held_bytes(), 60000u);
}

TEST(huge_opus_packets_cannot_grow_a_segment_past_the_caps) {
  // The finding this guards: a key holder's 1 MiB-ish Opus packets made a "2 s" segment of 50 MiB.
  auto tags = opus_tags_from_ogg("opus/sine48k_stereo_128k.ogg");
  const uint32_t max_frame = 8192, max_segment = 8 * 128000 / 8 * 2;  // 8 x 128 kbps x 2 s
  Segmenter s(opts(Container::kFmp4, max_frame, max_segment, 500));
  std::vector<SegmenterEvent> ev;
  s.push_audio(0, tags[0].body.data(), tags[0].body.size(), ev);
  const auto big = opus_tag(max_frame);
  const auto huge = opus_tag(1 << 20);
  size_t most = 0;
  for (uint32_t i = 0; i < 2000; ++i) {
    const auto& t = i % 2 ? big : huge;
    s.push_audio(i * 20, t.data(), t.size(), ev);
    most = std::max(most, s.held_bytes());
    ev.clear();
  }
  CHECK(most <= max_segment + 4096u);  // frames + the parts' fMP4 headers
}

TEST_MAIN
