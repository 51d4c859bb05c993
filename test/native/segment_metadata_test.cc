// Now-playing changes through the Segmenter (push_metadata) on the AAC, Opus and MP3 fixtures: the
// change lands with the right frame (the next frame pushed, or the first pending frame at or after
// its timestamp), in that LL-HLS part and its segment (fMP4: an emsg before the part's moof, its
// presentation_time = the frame's decode time) or in that MPEG-TS segment (an ID3 PES on its own
// PID, PTS = the frame's); the events report it; everything else is byte for byte the output of a
// run without changes; one change per frame and kMaxMetadataPerFragment per fragment.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "check.h"
#include "core/segment/segmenter.h"
#include "media_test_util.h"

using namespace skylark;
using namespace media_test;
using segment::Container;
using segment::MetadataMark;
using segment::Segmenter;
using segment::SegmenterEvent;
using segment::SegmenterOptions;
using Type = SegmenterEvent::Type;

namespace {

SegmenterOptions fmp4(uint32_t part = 0) {
  SegmenterOptions o;
  o.container = Container::kFmp4;
  o.part_target_ms = part;
  return o;
}
SegmenterOptions ts() {
  SegmenterOptions o;
  o.container = Container::kTs;
  return o;
}

const mux::id3::NowPlaying kSong{"So What", "Miles Davis", "Kind of Blue", "https://example.com/so-what"};

// Indices of the tags that carry a frame (AAC/Opus coded frames; every MP3 tag here holds one).
std::vector<size_t> frame_tags(const std::vector<Tag>& tags) {
  std::vector<size_t> r;
  for (size_t i = 0; i < tags.size(); ++i) {
    const auto& b = tags[i].body;
    const bool enhanced = (b[0] >> 4) == 9;
    const bool coded = enhanced ? (b[0] & 0x0F) == 1 : (b[0] >> 4) == 2 || b[1] == 1;
    if (coded) r.push_back(i);
  }
  return r;
}

struct Run {
  std::vector<SegmenterEvent> ev;
  std::vector<const SegmenterEvent*> of(Type t) const {
    std::vector<const SegmenterEvent*> r;
    for (auto& e : ev) if (e.type == t) r.push_back(&e);
    return r;
  }
};

// Pushes `tags`; calls `before(i, s, out)` before tag i is pushed and `after(i, ...)` after it.
template <class Before, class After>
Run run(const std::vector<Tag>& tags, const SegmenterOptions& o, Before before, After after) {
  Segmenter s(o);
  Run r;
  for (size_t i = 0; i < tags.size(); ++i) {
    before(i, s);
    s.push_audio(tags[i].ts, tags[i].body.data(), tags[i].body.size(), r.ev);
    after(i, s);
  }
  s.flush(r.ev);
  return r;
}
Run plain(const std::vector<Tag>& tags, const SegmenterOptions& o) {
  return run(tags, o, [](size_t, Segmenter&) {}, [](size_t, Segmenter&) {});
}

// The one emsg of a fragment list, or nullptr.
const ParsedEmsg* only_event(const std::vector<ParsedFragment>& pf) {
  const ParsedEmsg* e = nullptr;
  size_t n = 0;
  for (auto& f : pf) for (auto& x : f.events) { e = &x; ++n; }
  return n == 1 ? e : nullptr;
}

void check_song(const std::vector<uint8_t>& tag) {
  const Id3Tag t = read_id3(tag.data(), tag.size());
  CHECK(t.ok);
  CHECK(t.find("TIT2") && t.find("TIT2")->text == "So What");
  CHECK(t.find("TPE1") && t.find("TPE1")->text == "Miles Davis");
  CHECK(t.find("TALB") && t.find("TALB")->text == "Kind of Blue");
  CHECK(t.find("WXXX") && t.find("WXXX")->url == "https://example.com/so-what");
}

// Every part/segment of `a` equals `b`'s, except those that carry metadata, which equal b's once
// their emsg boxes are removed (fMP4).
void check_only_marked_differ(const Run& a, const Run& b, bool fmp4) {
  CHECK_EQ(a.ev.size(), b.ev.size());
  for (size_t i = 0; i < a.ev.size() && i < b.ev.size(); ++i) {
    const auto& x = a.ev[i];
    const auto& y = b.ev[i];
    CHECK(x.type == y.type);
    if (x.type != Type::kPart && x.type != Type::kSegment) continue;
    CHECK(y.metadata.empty());
    if (x.metadata.empty()) CHECK(x.data == y.data);
    else if (fmp4) CHECK(strip_emsg(x.data) == y.data);
    else CHECK(x.data != y.data);
  }
}

}  // namespace

TEST(aac_fmp4_parts_change_lands_in_its_part_and_segment) {
  const auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  const auto frames = frame_tags(tags);
  // 48 kHz AAC, 2000/500: segments of 94 frames in parts of 24/24/24/22. Frame 130 = segment 1,
  // part 1, its 12th frame (index 12).
  const size_t k = frames[130];
  const Run base = plain(tags, fmp4(500));
  // Pushed before its frame: nothing pending is at or after it, so the next frame pushed.
  const Run a = run(tags, fmp4(500), [&](size_t i, Segmenter& s) { if (i == k) s.push_metadata(tags[k].ts, kSong); },
                    [](size_t, Segmenter&) {});
  CHECK(a.of(Type::kError).empty());
  std::vector<const SegmenterEvent*> marked_parts, marked_segs;
  for (auto* e : a.of(Type::kPart)) if (!e->metadata.empty()) marked_parts.push_back(e);
  for (auto* e : a.of(Type::kSegment)) if (!e->metadata.empty()) marked_segs.push_back(e);
  CHECK_EQ(marked_parts.size(), 1u);
  CHECK_EQ(marked_segs.size(), 1u);
  if (marked_parts.size() != 1 || marked_segs.size() != 1) return;
  const SegmenterEvent& part = *marked_parts[0];
  const SegmenterEvent& seg = *marked_segs[0];
  CHECK_EQ(part.sequence, 1u);
  CHECK_EQ(part.part_index, 1u);
  CHECK_EQ(seg.sequence, 1u);
  const MetadataMark& m = part.metadata[0];
  CHECK_EQ(part.metadata.size(), 1u);
  CHECK_EQ(m.id, 1u);
  CHECK_EQ(m.timestamp_ms, tags[k].ts);
  CHECK_EQ(m.pts90k, part.pts90k + 12 * 1920);  // 1024 samples at 48 kHz = 1920 ticks
  CHECK_EQ(m.presentation_time, part.base_media_decode_time + 12 * 1024);
  CHECK_EQ(m.presentation_time * 90000 / 48000, m.pts90k);
  CHECK(seg.metadata.size() == 1 && seg.metadata[0].id == m.id && seg.metadata[0].pts90k == m.pts90k);
  // The part: emsg, then the moof + mdat it was without it.
  std::vector<ParsedFragment> pf;
  CHECK(parse_fragments(part.data, pf));
  CHECK_EQ(pf.size(), 1u);
  CHECK_EQ(pf[0].events.size(), 1u);
  CHECK(pf[0].data_offset_ok);
  const ParsedEmsg* e = only_event(pf);
  CHECK(e != nullptr);
  if (e) {
    CHECK_EQ(e->version, 1);
    CHECK(e->scheme_id_uri == "https://aomedia.org/emsg/ID3");
    CHECK(e->value.empty());
    CHECK_EQ(e->timescale, 48000u);
    CHECK_EQ(e->presentation_time, m.presentation_time);
    CHECK_EQ(e->event_duration, 0xFFFFFFFFu);
    CHECK_EQ(e->id, 1u);
    check_song(e->message_data);
    // AOM ID3-in-CMAF: presentation_time within the fragment it precedes.
    CHECK(e->presentation_time >= pf[0].tfdt && e->presentation_time < pf[0].tfdt + pf[0].duration_sum);
  }
  // The segment: still its parts concatenated, so it carries the emsg before that part's moof.
  std::vector<uint8_t> concat;
  for (auto* p : a.of(Type::kPart)) if (p->sequence == 1) concat.insert(concat.end(), p->data.begin(), p->data.end());
  CHECK(concat == seg.data);
  std::vector<ParsedFragment> sf;
  CHECK(parse_fragments(seg.data, sf));
  CHECK_EQ(sf.size(), 4u);
  if (sf.size() == 4) {
    CHECK(sf[0].events.empty() && sf[1].events.size() == 1 && sf[2].events.empty() && sf[3].events.empty());
    for (auto& f : sf) CHECK(f.data_offset_ok);
  }
  check_only_marked_differ(a, base, true);

  // Pushed later, while its frame and a few after it are still pending (the part is open): the
  // first pending frame at or after its timestamp — the same frame, byte for byte the same output.
  const Run b = run(tags, fmp4(500), [](size_t, Segmenter&) {},
                    [&](size_t i, Segmenter& s) { if (i == frames[134]) s.push_metadata(tags[k].ts, kSong); });
  CHECK_EQ(a.ev.size(), b.ev.size());
  for (size_t i = 0; i < a.ev.size() && i < b.ev.size(); ++i) CHECK(a.ev[i].data == b.ev[i].data);
}

TEST(aac_fmp4_without_parts_emsg_before_the_segment_moof) {
  const auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  const auto frames = frame_tags(tags);
  const size_t k = frames[94 + 40];  // segment 1, frame 40
  const Run base = plain(tags, fmp4());
  const Run a = run(tags, fmp4(), [&](size_t i, Segmenter& s) { if (i == k) s.push_metadata(tags[k].ts, kSong); },
                    [](size_t, Segmenter&) {});
  const auto segs = a.of(Type::kSegment);
  CHECK(segs.size() >= 3);
  CHECK(a.of(Type::kPart).empty());
  for (auto* s : segs) CHECK_EQ(s->metadata.size(), s->sequence == 1 ? 1u : 0u);
  check_only_marked_differ(a, base, true);
  if (segs.size() < 2 || segs[1]->metadata.empty()) return;
  std::vector<ParsedFragment> pf;
  CHECK(parse_fragments(segs[1]->data, pf));
  CHECK(pf.size() == 1 && pf[0].data_offset_ok && pf[0].events.size() == 1);
  std::vector<Box> top;
  CHECK(parse_boxes(segs[1]->data.data(), segs[1]->data.size(), 0, top));
  CHECK(top.size() == 3 && top[0].type == "emsg" && top[1].type == "moof" && top[2].type == "mdat");
  const ParsedEmsg* e = only_event(pf);
  CHECK(e && e->presentation_time == segs[1]->base_media_decode_time + 40 * 1024);
  CHECK(e && e->presentation_time == segs[1]->metadata[0].presentation_time);
}

TEST(opus_fmp4_parts) {
  const auto tags = opus_tags_from_ogg("opus/sine48k_stereo_128k.ogg");
  const auto frames = frame_tags(tags);
  CHECK(frames.size() > 300);
  // 20 ms packets, 2000/500: 25 packets per part, 100 per segment. Packet 160 = segment 1, part 2, index 10.
  const size_t k = frames[160];
  const Run base = plain(tags, fmp4(500));
  const Run a = run(tags, fmp4(500), [&](size_t i, Segmenter& s) { if (i == k) s.push_metadata(tags[k].ts, kSong); },
                    [](size_t, Segmenter&) {});
  CHECK(a.of(Type::kError).empty());
  const SegmenterEvent* part = nullptr;
  for (auto* p : a.of(Type::kPart)) if (!p->metadata.empty()) part = p;
  CHECK(part && part->sequence == 1 && part->part_index == 2);
  if (!part) return;
  std::vector<ParsedFragment> pf;
  CHECK(parse_fragments(part->data, pf));
  const ParsedEmsg* e = only_event(pf);
  CHECK(e && e->timescale == 48000 && e->presentation_time == part->base_media_decode_time + 10 * 960);
  if (e) check_song(e->message_data);
  check_only_marked_differ(a, base, true);
}

TEST(mp3_ts_pmt_declares_id3_and_the_pes_lands_in_its_segment) {
  const auto tags = read_flv_audio("mp3/sine44k1_stereo_128k.flv");
  const auto frames = frame_tags(tags);
  // 44.1 kHz MPEG-1: 1152 samples per frame, 77 frames (2011 ms) per 2 s segment; frame 77 + 30.
  const size_t k = frames[77 + 30];
  const Run base = plain(tags, ts());
  const Run a = run(tags, ts(), [&](size_t i, Segmenter& s) { if (i == k) s.push_metadata(tags[k].ts, kSong); },
                    [](size_t, Segmenter&) {});
  CHECK(a.of(Type::kError).empty());
  const auto segs = a.of(Type::kSegment);
  CHECK(segs.size() >= 3);
  for (auto* s : segs) {
    // Every segment's PMT declares the ID3 stream (packet 1; section at byte 5).
    const uint8_t* pmt = s->data.data() + 188 + 5;
    CHECK_EQ(((pmt[10] & 0x0F) << 8) | pmt[11], 17);  // program_info: metadata_pointer_descriptor
    CHECK_EQ(pmt[12], 0x25);
    CHECK_EQ(pmt[12 + 17], 0x03);                      // the MPEG-1 audio stream
    CHECK_EQ(pmt[12 + 17 + 5], 0x15);                  // the ID3 stream
    CHECK_EQ(((pmt[12 + 17 + 6] & 0x1F) << 8) | pmt[12 + 17 + 7], 0x101);
    CHECK_EQ(s->metadata.size(), s->sequence == 1 ? 1u : 0u);
  }
  check_only_marked_differ(a, base, false);
  // Continuity counters run on per PID across all segments (the ID3 PID's included).
  std::map<int, int> next_cc;
  int id3_packets = 0;
  for (auto* s : segs)
    for (size_t i = 0; i + 188 <= s->data.size(); i += 188) {
      const uint8_t* p = &s->data[i];
      const int pid = ((p[1] & 0x1F) << 8) | p[2];
      if (next_cc.count(pid)) CHECK_EQ(p[3] & 0x0F, next_cc[pid]);
      next_cc[pid] = ((p[3] & 0x0F) + 1) & 15;
      id3_packets += pid == 0x101;
    }
  CHECK(id3_packets >= 1);
  if (segs.size() < 2 || segs[1]->metadata.empty()) return;
  const MetadataMark& m = segs[1]->metadata[0];
  const uint64_t expect = segs[1]->pts90k + 30ull * 1152 * 90000 / 44100;  // ±1 tick of rounding
  CHECK(m.pts90k + 1 >= expect && m.pts90k <= expect + 1);
  CHECK_EQ(m.presentation_time, 0u);
  // The ID3 PES on PID 0x101: its PTS, the whole tag; without its packets the segment is the plain one.
  const auto& d = segs[1]->data;
  std::vector<uint8_t> id3, rest;
  for (size_t i = 0; i < d.size(); i += 188) {
    const uint8_t* p = &d[i];
    const int pid = ((p[1] & 0x1F) << 8) | p[2];
    if (pid != 0x101) { rest.insert(rest.end(), p, p + 188); continue; }
    const size_t at = (p[3] & 0x20) ? 5 + p[4] : 4;
    id3.insert(id3.end(), p + at, p + 188);
  }
  CHECK(rest == base.of(Type::kSegment)[1]->data);
  CHECK(id3.size() > 14 && id3[3] == 0xBD);
  if (id3.size() <= 14) return;
  const uint64_t pts = (uint64_t(id3[9] & 0x0E) << 29) | (uint64_t(id3[10]) << 22) | (uint64_t(id3[11] & 0xFE) << 14) |
                       (uint64_t(id3[12]) << 7) | (id3[13] >> 1);
  CHECK_EQ(pts, m.pts90k & ((uint64_t{1} << 33) - 1));
  check_song(std::vector<uint8_t>(id3.begin() + 14, id3.end()));
}

TEST(aac_ts_keeps_its_audio_only_pmt_and_drops_changes) {
  const auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  const Run base = plain(tags, ts());
  const Run a = run(tags, ts(), [&](size_t i, Segmenter& s) { if (i % 50 == 0) s.push_metadata(tags[i].ts, kSong); },
                    [](size_t, Segmenter&) {});
  CHECK_EQ(a.ev.size(), base.ev.size());
  for (size_t i = 0; i < a.ev.size() && i < base.ev.size(); ++i) {
    CHECK(a.ev[i].data == base.ev[i].data);
    CHECK(a.ev[i].metadata.empty());
  }
}

TEST(next_frame_rule_one_change_per_frame_and_the_fragment_cap) {
  const auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  const auto frames = frame_tags(tags);
  // Changes far ahead of everything pending land on the next frame pushed (not on a later one);
  // two for the same frame: the later call wins.
  {
    Segmenter s(fmp4(500));
    Run r;
    for (size_t i = 0; i <= frames[100]; ++i) s.push_audio(tags[i].ts, tags[i].body.data(), tags[i].body.size(), r.ev);
    const size_t held = s.held_bytes();
    s.push_metadata(tags[frames[100]].ts + 60000, {"Early", "", "", ""});
    s.push_metadata(tags[frames[100]].ts + 90000, kSong);
    CHECK_EQ(s.pending_metadata(), 1u);
    CHECK_EQ(s.held_bytes() - held, mux::id3::now_playing_tag(kSong).size());  // the tag waits, once
    for (size_t i = frames[100] + 1; i < tags.size(); ++i) s.push_audio(tags[i].ts, tags[i].body.data(), tags[i].body.size(), r.ev);
    s.flush(r.ev);
    CHECK_EQ(s.pending_metadata(), 0u);
    std::vector<MetadataMark> marks;
    for (auto* p : r.of(Type::kPart)) for (auto& m : p->metadata) marks.push_back(m);
    CHECK_EQ(marks.size(), 1u);
    if (marks.size() == 1) {
      CHECK_EQ(marks[0].id, 2u);
      // Frame 101 = segment 1, part 0, index 7.
      const SegmenterEvent* part = nullptr;
      for (auto* p : r.of(Type::kPart)) if (!p->metadata.empty()) part = p;
      CHECK(part && part->sequence == 1 && part->part_index == 0 && marks[0].pts90k == part->pts90k + 7 * 1920);
    }
  }
  // Six changes for six pending frames of one open part: the four presented last are kept.
  {
    Segmenter s(fmp4(500));
    Run r;
    // Segment 1, part 0 holds frames 94..117; 94..110 are pushed (pending).
    for (size_t i = 0; i <= frames[110]; ++i) s.push_audio(tags[i].ts, tags[i].body.data(), tags[i].body.size(), r.ev);
    for (size_t j = 0; j < 6; ++j) s.push_metadata(tags[frames[96 + 2 * j]].ts, {std::to_string(j), "", "", ""});
    CHECK_EQ(s.pending_metadata(), segment::kMaxMetadataPerFragment);
    for (size_t i = frames[110] + 1; i < tags.size(); ++i) s.push_audio(tags[i].ts, tags[i].body.data(), tags[i].body.size(), r.ev);
    s.flush(r.ev);
    const SegmenterEvent* part = nullptr;
    for (auto* p : r.of(Type::kPart)) if (!p->metadata.empty()) part = p;
    CHECK(part && part->metadata.size() == 4);
    if (!part || part->metadata.size() != 4) return;
    std::vector<ParsedFragment> pf;
    CHECK(parse_fragments(part->data, pf));
    CHECK(pf.size() == 1 && pf[0].events.size() == 4);
    for (size_t j = 0; j < 4 && pf.size() == 1 && pf[0].events.size() == 4; ++j) {
      const auto& e = pf[0].events[j];
      CHECK_EQ(e.id, uint32_t(3 + j));                                // changes 2..5 (ids 3..6)
      CHECK_EQ(e.presentation_time, pf[0].tfdt + (2 + 2 * (2 + j)) * 1024);  // frames 98+2j... in part order
      const Id3Tag t = read_id3(e.message_data.data(), e.message_data.size());
      CHECK(t.ok && t.find("TIT2") && t.find("TIT2")->text == std::to_string(2 + j));
      CHECK_EQ(part->metadata[j].id, e.id);
    }
    // The segment reports what its parts carry.
    for (auto* sg : r.of(Type::kSegment))
      if (sg->sequence == 1) CHECK(sg->metadata.size() == 4 && sg->metadata[3].id == 6u);
  }
}

TEST(held_bytes_are_bounded_under_a_flood_of_changes) {
  const auto tags = read_flv_audio("mp3/sine44k1_stereo_128k.flv");
  const std::string long_text(400, 'x');
  for (const SegmenterOptions& o : {ts(), fmp4(), fmp4(250)}) {
    Segmenter s(o);
    std::vector<SegmenterEvent> ev;
    size_t worst = 0;
    for (size_t i = 0; i < tags.size(); ++i) {
      for (int j = 0; j < 3; ++j) s.push_metadata(tags[i].ts - 30 + 20 * j, {long_text, long_text, long_text, long_text});
      s.push_audio(tags[i].ts, tags[i].body.data(), tags[i].body.size(), ev);
      CHECK(s.pending_metadata() <= segment::kMaxMetadataPerFragment + 1);
      CHECK(s.pending_metadata_bytes() <= (segment::kMaxMetadataPerFragment + 1) * mux::id3::kMaxNowPlayingTagSize);
      if (s.pending_metadata_bytes() > worst) worst = s.pending_metadata_bytes();
      for (auto& e : ev) {
        const size_t cap = segment::kMaxMetadataPerFragment * (e.type == Type::kSegment && e.part_index ? e.part_index : 1);
        CHECK(e.metadata.size() <= cap);
        CHECK(e.metadata.size() > 0 || e.type == Type::kConfig);  // a change for every frame: every fragment has some
      }
      ev.clear();
    }
    CHECK(worst >= 2 * 256 * 4);
  }
}

TEST_MAIN
