// The segmenter (native/core/segment) fed the FLV fixtures; its segments demuxed back (sync bytes,
// PIDs, continuity, PES PTS, PCR, ADTS frames == input frames), cut points, discontinuities,
// timestamp jumps, config changes, flush and error events.
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "check.h"
#include "core/segment/segmenter.h"

using namespace skylark;
using segment::SegmenterEvent;
using segment::Segmenter;
using Type = SegmenterEvent::Type;

namespace {

// AAC into MPEG-TS as ingest runs it: container TS, any other codec refused (codec_mismatch).
segment::SegmenterOptions ts_aac(uint32_t target_duration_ms = segment::kDefaultTargetDurationMs) {
  segment::SegmenterOptions o;
  o.container = segment::Container::kTs;
  o.target_duration_ms = target_duration_ms;
  o.expect = codec::AudioCodec::kAac;
  return o;
}

struct Tag {
  uint32_t ts;
  std::vector<uint8_t> body;
};

// A tiny FLV reader: the audio tags (type 8) as (timestamp, body).
std::vector<Tag> read_flv_audio(const std::string& rel) {
  std::vector<uint8_t> b = skylark_test::read_fixture(rel);
  std::vector<Tag> tags;
  if (b.size() < 13 || std::memcmp(b.data(), "FLV", 3) != 0) return tags;
  size_t off = (size_t(b[5]) << 24 | b[6] << 16 | b[7] << 8 | b[8]) + 4;
  while (off + 11 <= b.size()) {
    const size_t size = size_t(b[off + 1]) << 16 | b[off + 2] << 8 | b[off + 3];
    const uint32_t ts = uint32_t(b[off + 4]) << 16 | b[off + 5] << 8 | b[off + 6] | uint32_t(b[off + 7]) << 24;
    if (off + 11 + size > b.size()) break;
    if (b[off] == 8) tags.push_back({ts, std::vector<uint8_t>(&b[off + 11], &b[off + 11] + size)});
    off += 11 + size + 4;
  }
  return tags;
}

// Demuxes concatenated segments: checks the TS structure, returns the ADTS frames' payloads with
// their PTS.
struct Demuxed {
  std::vector<std::vector<uint8_t>> frames;  // raw AAC (ADTS header stripped)
  std::vector<uint64_t> frame_pts;           // PES PTS + index * 1920 within the PES (48 kHz)
  std::vector<uint64_t> pes_pts;
  int pat = 0, pmt = 0, pes = 0, pcrs = 0;
  uint64_t max_pcr_gap = 0;
  bool ok = true;
};

uint64_t read_ts(const uint8_t* p) {
  return (uint64_t(p[0] & 0x0E) << 29) | (uint64_t(p[1]) << 22) | (uint64_t(p[2] & 0xFE) << 14) |
         (uint64_t(p[3]) << 7) | (p[4] >> 1);
}

void check(Demuxed& d, bool cond, const char* what) {
  if (!cond && d.ok) {
    std::fprintf(stderr, "demux: %s\n", what);
    d.ok = false;
  }
}

void parse_pes(Demuxed& d, const std::vector<uint8_t>& p, uint32_t ticks_per_frame) {
  check(d, p.size() >= 14 && p[0] == 0 && p[1] == 0 && p[2] == 1 && p[3] == 0xC0, "PES start code / stream_id");
  if (!d.ok) return;
  check(d, size_t((p[4] << 8) | p[5]) + 6 == p.size(), "PES_packet_length");
  check(d, (p[7] & 0xC0) == 0x80 && p[8] == 5, "PTS only");
  const uint64_t pts = read_ts(p.data() + 9);
  d.pes_pts.push_back(pts);
  ++d.pes;
  size_t at = 14, i = 0;
  while (at < p.size() && d.ok) {
    check(d, p.size() - at >= 7 && p[at] == 0xFF && (p[at + 1] & 0xF6) == 0xF0, "ADTS sync");
    if (!d.ok) return;
    const size_t len = ((p[at + 3] & 3) << 11) | (p[at + 4] << 3) | (p[at + 5] >> 5);
    check(d, len >= 7 && at + len <= p.size(), "ADTS length");
    if (!d.ok) return;
    d.frames.emplace_back(p.begin() + at + 7, p.begin() + at + len);
    d.frame_pts.push_back(pts + i++ * ticks_per_frame);
    at += len;
  }
}

Demuxed demux(const std::vector<const std::vector<uint8_t>*>& segments, uint32_t ticks_per_frame = 1920) {
  Demuxed d;
  std::map<int, int> next_cc;
  std::vector<uint8_t> pes;
  uint64_t last_pcr = 0;
  for (const auto* seg : segments) {
    check(d, seg->size() % 188 == 0, "segment size is a multiple of 188");
    bool first_audio = true;
    for (size_t i = 0; i + 188 <= seg->size() && d.ok; i += 188) {
      const uint8_t* k = seg->data() + i;
      check(d, k[0] == 0x47, "sync byte");
      const int pid = ((k[1] & 0x1F) << 8) | k[2];
      const bool pusi = k[1] & 0x40;
      const int afc = (k[3] >> 4) & 3;
      const int cc = k[3] & 0x0F;
      if (next_cc.count(pid)) check(d, cc == next_cc[pid], "continuity counter");
      next_cc[pid] = (cc + 1) & 15;
      if (i == 0) check(d, pid == 0, "segment starts with the PAT");
      if (i == 188) check(d, pid == 0x1000, "then the PMT");
      if (pid == 0) { ++d.pat; continue; }
      if (pid == 0x1000) {
        ++d.pmt;
        // Section at k + 5: PCR_PID at [8..9], stream_type at [12], elementary_PID at [13..14].
        check(d, k[5] == 0x02 && (((k[13] & 0x1F) << 8) | k[14]) == 0x100, "PCR on the audio PID");
        check(d, k[17] == 0x0F && (((k[18] & 0x1F) << 8) | k[19]) == 0x100, "ADTS AAC stream");
        check(d, (((k[6] & 0x0F) << 8) | k[7]) == 18, "PMT has exactly one stream");
        continue;
      }
      check(d, pid == 0x100, "only PAT, PMT and audio PIDs");
      size_t at = 4;
      if (afc & 2) {
        const size_t len = k[4];
        if (len > 0) {
          if (first_audio) check(d, (k[5] & 0x40) != 0, "random_access_indicator on the segment's first packet");
          if (k[5] & 0x10) {
            const uint64_t pcr = (uint64_t(k[6]) << 25) | (uint64_t(k[7]) << 17) | (uint64_t(k[8]) << 9) |
                                 (uint64_t(k[9]) << 1) | (k[10] >> 7);
            if (d.pcrs > 0 && pcr > last_pcr && pcr - last_pcr > d.max_pcr_gap) d.max_pcr_gap = pcr - last_pcr;
            last_pcr = pcr;
            ++d.pcrs;
          }
        }
        at = 5 + len;
      }
      if (first_audio) check(d, pusi, "a segment starts with a PES");
      first_audio = false;
      if (pusi && !pes.empty()) {
        parse_pes(d, pes, ticks_per_frame);
        pes.clear();
      }
      pes.insert(pes.end(), k + at, k + 188);
    }
    if (!pes.empty()) parse_pes(d, pes, ticks_per_frame);  // PES never span segments
    pes.clear();
  }
  return d;
}

struct Run {
  std::vector<SegmenterEvent> events;
  std::vector<const SegmenterEvent*> segments() const {
    std::vector<const SegmenterEvent*> s;
    for (auto& e : events) if (e.type == Type::kSegment) s.push_back(&e);
    return s;
  }
  std::vector<const SegmenterEvent*> of(Type t) const {
    std::vector<const SegmenterEvent*> s;
    for (auto& e : events) if (e.type == t) s.push_back(&e);
    return s;
  }
};

std::vector<const std::vector<uint8_t>*> data_of(const std::vector<const SegmenterEvent*>& segs) {
  std::vector<const std::vector<uint8_t>*> d;
  for (auto* s : segs) d.push_back(&s->data);
  return d;
}

std::vector<std::vector<uint8_t>> raw_frames(const std::vector<Tag>& tags) {
  std::vector<std::vector<uint8_t>> f;
  for (auto& t : tags)
    if (t.body.size() > 2 && t.body[1] == 1) f.emplace_back(t.body.begin() + 2, t.body.end());
  return f;
}

const uint8_t kSeqLc48Stereo[] = {0xAF, 0x00, 0x11, 0x90};

}  // namespace

TEST(fixture_48k_segments_and_round_trip) {
  auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  CHECK(tags.size() > 400);
  Segmenter s(ts_aac());
  Run r;
  for (auto& t : tags) s.push_audio(t.ts, t.body.data(), t.body.size(), r.events);
  s.flush(r.events);
  auto configs = r.of(Type::kConfig);
  CHECK_EQ(configs.size(), 1u);
  CHECK(std::string(configs[0]->codecs) == "mp4a.40.2");
  CHECK_EQ(configs[0]->sample_rate, 48000u);
  CHECK_EQ(configs[0]->channels, 2u);
  CHECK_EQ(configs[0]->audio_object_type, 2);
  CHECK(r.of(Type::kError).empty());
  auto segs = r.segments();
  const auto input = raw_frames(tags);
  CHECK(segs.size() >= 5);
  uint64_t raw_bytes = 0, ts_bytes = 0;
  for (auto& f : input) raw_bytes += f.size();
  for (size_t i = 0; i < segs.size(); ++i) {
    CHECK_EQ(segs[i]->sequence, i);
    CHECK(!segs[i]->discontinuity);
    ts_bytes += segs[i]->data.size();
    if (i + 1 < segs.size()) {
      CHECK_EQ(segs[i]->frames, 94u);  // first boundary at >= 2000 ms: 94 × 21.33 ms
      CHECK(std::fabs(segs[i]->duration_ms - 2005.333) < 0.01);
    }
    if (i > 0) CHECK_EQ(segs[i]->pts90k, segs[i - 1]->pts90k + segs[i - 1]->frames * 1920ull);
  }
  CHECK_EQ(segs[0]->pts90k, 63000u);  // first timestamp 0 ms + the 0.7 s PCR lead
  Demuxed d = demux(data_of(segs));
  CHECK(d.ok);
  CHECK_EQ(d.pat, static_cast<int>(segs.size()));
  CHECK_EQ(d.pmt, static_cast<int>(segs.size()));
  CHECK(d.frames == input);  // ADTS frames == input frames, in order
  for (size_t i = 0; i < d.frame_pts.size(); ++i) CHECK_EQ(d.frame_pts[i], 63000 + i * 1920);
  CHECK(d.max_pcr_gap <= 9000);
  const double overhead = (double(ts_bytes) / raw_bytes - 1) * 100;
  std::printf("48 kHz stereo 128 kbps: %zu segments, %d PES, raw AAC %llu B, TS %llu B, overhead %.2f %%\n",
              segs.size(), d.pes, (unsigned long long)raw_bytes, (unsigned long long)ts_bytes, overhead);
  CHECK(overhead < 11.0);
}

TEST(fixture_44k1_mono) {
  auto tags = read_flv_audio("aac/sine44k1_mono_64k.flv");
  Segmenter s(ts_aac());
  Run r;
  for (auto& t : tags) s.push_audio(t.ts, t.body.data(), t.body.size(), r.events);
  s.flush(r.events);
  auto configs = r.of(Type::kConfig);
  CHECK_EQ(configs.size(), 1u);
  CHECK_EQ(configs[0]->sample_rate, 44100u);
  CHECK_EQ(configs[0]->channels, 1u);
  auto segs = r.segments();
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    CHECK_EQ(segs[i]->frames, 87u);  // ceil(2000 / 23.22)
    CHECK(std::fabs(segs[i]->duration_ms - 2000.0) <= 500);
  }
  std::vector<const std::vector<uint8_t>*> data = data_of(segs);
  Demuxed d = demux(data, 0);
  CHECK(d.ok);
  CHECK(d.frames == raw_frames(tags));
  uint64_t raw = 0, ts = 0;
  for (auto& f : d.frames) raw += f.size();
  for (auto* p : data) ts += p->size();
  std::printf("44.1 kHz mono 64 kbps: overhead %.2f %%\n", (double(ts) / raw - 1) * 100);
}

TEST(cut_points_for_other_targets) {
  auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  for (uint32_t target : {1000u, 2000u, 4000u, 6000u}) {
    Segmenter s(ts_aac(target));
    Run r;
    for (auto& t : tags) s.push_audio(t.ts, t.body.data(), t.body.size(), r.events);
    auto segs = r.segments();  // no flush: all cut on duration
    CHECK(!segs.empty());
    const uint32_t want = (target * 48 + 1023) / 1024;  // first frame boundary >= target
    for (auto* g : segs) {
      CHECK_EQ(g->frames, want);
      CHECK(g->duration_ms >= target && g->duration_ms < target + 21.34);
    }
  }
}

TEST(flush_emits_partial_then_nothing) {
  auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  Segmenter s(ts_aac());
  Run r;
  for (size_t i = 0; i < 31; ++i) s.push_audio(tags[i].ts, tags[i].body.data(), tags[i].body.size(), r.events);
  CHECK(r.segments().empty());
  s.flush(r.events);
  auto segs = r.segments();
  CHECK_EQ(segs.size(), 1u);
  CHECK_EQ(segs[0]->frames, 30u);  // tag 0 is the sequence header
  std::vector<SegmenterEvent> again;
  s.flush(again);
  CHECK(again.empty());
}

TEST(discontinuity_continues_pts_and_flags_next_segment) {
  auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  Segmenter s(ts_aac());
  Run r;
  const size_t half = 150;
  for (size_t i = 0; i < half; ++i) s.push_audio(tags[i].ts, tags[i].body.data(), tags[i].body.size(), r.events);
  s.discontinuity();
  // The publisher reconnects: its clock restarts at 0 and it resends the sequence header.
  for (size_t i = 0; i < half; ++i) s.push_audio(tags[i].ts, tags[i].body.data(), tags[i].body.size(), r.events);
  s.flush(r.events);
  CHECK_EQ(r.of(Type::kConfig).size(), 1u);  // same config: no second event
  CHECK(r.of(Type::kError).empty());
  auto segs = r.segments();
  // 149 frames: one full segment (94) + 55 closed by the discontinuity; then 94 + 55 again.
  CHECK_EQ(segs.size(), 4u);
  CHECK_EQ(segs[1]->frames, 55u);
  CHECK(!segs[0]->discontinuity && !segs[1]->discontinuity);
  CHECK(segs[2]->discontinuity);
  CHECK(!segs[3]->discontinuity);
  for (size_t i = 1; i < segs.size(); ++i) {
    CHECK_EQ(segs[i]->sequence, i);
    CHECK_EQ(segs[i]->pts90k, segs[i - 1]->pts90k + segs[i - 1]->frames * 1920ull);  // no jump back
  }
  CHECK(demux(data_of(segs)).ok);
}

TEST(discontinuity_before_any_audio_is_ignored) {
  Segmenter s(ts_aac());
  Run r;
  s.discontinuity();
  const uint8_t seq44_mono[] = {0xAF, 0x00, 0x12, 0x08};
  s.push_audio(0, seq44_mono, sizeof seq44_mono, r.events);  // a config change before any audio
  s.push_audio(0, kSeqLc48Stereo, sizeof kSeqLc48Stereo, r.events);
  CHECK_EQ(r.of(Type::kConfig).size(), 2u);
  const uint8_t frame[] = {0xAF, 0x01, 0x21, 0x10, 0x04};
  for (int i = 0; i < 100; ++i) s.push_audio(i * 21, frame, sizeof frame, r.events);
  auto segs = r.segments();
  CHECK_EQ(segs.size(), 1u);
  CHECK(!segs[0]->discontinuity);
}

TEST(timestamp_jumps) {
  const uint8_t frame[] = {0xAF, 0x01, 0x21, 0x10, 0x04};
  // Forward jump of 5 s after 50 frames: closes the segment, PTS follow, next flagged.
  {
    Segmenter s(ts_aac());
    Run r;
    s.push_audio(1000, kSeqLc48Stereo, sizeof kSeqLc48Stereo, r.events);
    for (int i = 0; i < 50; ++i) s.push_audio(1000 + i * 64 / 3, frame, sizeof frame, r.events);
    CHECK(r.segments().empty());
    const uint32_t after = 1000 + 50 * 64 / 3 + 5000;
    for (int i = 0; i < 100; ++i) s.push_audio(after + i * 64 / 3, frame, sizeof frame, r.events);
    auto segs = r.segments();
    CHECK_EQ(segs.size(), 2u);
    CHECK_EQ(segs[0]->frames, 50u);
    CHECK(segs[1]->discontinuity);
    CHECK_EQ(segs[0]->pts90k, 1000 * 90 + 63000u);
    const uint64_t gap_ms = (segs[1]->pts90k - segs[0]->pts90k) / 90;
    CHECK(gap_ms >= 6066 && gap_ms <= 6068);  // 50 frames (1066.7 ms) + the 5 s jump, minus jitter
  }
  // Jitter within ±1 s and a backward jump: pure sample clock, no cut, no discontinuity.
  {
    Segmenter s(ts_aac());
    Run r;
    s.push_audio(0, kSeqLc48Stereo, sizeof kSeqLc48Stereo, r.events);
    for (int i = 0; i < 300; ++i) {
      uint32_t ts = i * 64 / 3 + (i % 7) * 100;         // up to 600 ms of jitter
      if (i >= 120) ts = (i - 120) * 64 / 3;            // clock restarted (backward jump)
      s.push_audio(ts, frame, sizeof frame, r.events);
    }
    auto segs = r.segments();
    CHECK_EQ(segs.size(), 3u);
    for (size_t i = 0; i < segs.size(); ++i) {
      CHECK(!segs[i]->discontinuity);
      CHECK_EQ(segs[i]->frames, 94u);
      CHECK_EQ(segs[i]->pts90k, 63000 + i * 94 * 1920ull);
    }
  }
  // RTMP 32-bit wrap: continues smoothly.
  {
    Segmenter s(ts_aac());
    Run r;
    const uint32_t start = 0xFFFFFFFFu - 1000;
    s.push_audio(start, kSeqLc48Stereo, sizeof kSeqLc48Stereo, r.events);
    for (int i = 0; i < 200; ++i) s.push_audio(start + static_cast<uint32_t>(i * 64 / 3), frame, sizeof frame, r.events);
    auto segs = r.segments();
    CHECK_EQ(segs.size(), 2u);
    CHECK(!segs[1]->discontinuity);
    CHECK_EQ(segs[1]->pts90k, segs[0]->pts90k + 94 * 1920ull);
  }
}

TEST(config_change_mid_stream) {
  const uint8_t frame[] = {0xAF, 0x01, 0x21, 0x10, 0x04};
  const uint8_t seq44_mono[] = {0xAF, 0x00, 0x12, 0x08};
  Segmenter s(ts_aac());
  Run r;
  s.push_audio(0, kSeqLc48Stereo, sizeof kSeqLc48Stereo, r.events);
  for (int i = 0; i < 10; ++i) s.push_audio(i * 21, frame, sizeof frame, r.events);
  s.push_audio(220, kSeqLc48Stereo, sizeof kSeqLc48Stereo, r.events);  // repeated: ignored
  CHECK(r.segments().empty());
  s.push_audio(230, seq44_mono, sizeof seq44_mono, r.events);
  auto segs = r.segments();
  CHECK_EQ(segs.size(), 1u);
  CHECK_EQ(segs[0]->frames, 10u);
  auto configs = r.of(Type::kConfig);
  CHECK_EQ(configs.size(), 2u);
  CHECK_EQ(configs[1]->sample_rate, 44100u);
  CHECK_EQ(configs[1]->channels, 1u);
  for (int i = 0; i < 87; ++i) s.push_audio(230 + i * 23, frame, sizeof frame, r.events);
  segs = r.segments();
  CHECK_EQ(segs.size(), 2u);
  CHECK(segs[1]->discontinuity);
  CHECK_EQ(segs[1]->pts90k, segs[0]->pts90k + 10 * 1920ull);  // PTS continue
  CHECK(std::fabs(segs[1]->duration_ms - 87 * 1024 * 1000.0 / 44100) < 1e-6);
  // The ADTS headers of the second segment say 44.1 kHz mono.
  const auto& d = segs[1]->data;
  size_t i = 376;
  size_t at = 4 + 1 + d[i + 4];  // after the adaptation field
  CHECK_EQ(d[i + at + 14], 0xFF);
  CHECK_EQ((d[i + at + 14 + 2] >> 2) & 0xF, 4);  // sampling_frequency_index 4
}

TEST(error_events) {
  Segmenter s(ts_aac());
  Run r;
  const uint8_t frame[] = {0xAF, 0x01, 0x21, 0x10, 0x04};
  s.push_audio(0, frame, sizeof frame, r.events);
  const uint8_t bad_asc[] = {0xAF, 0x00, 0x11};           // truncated ASC
  const uint8_t reserved[] = {0xAF, 0x00, 0x16, 0x90};    // frequency index 13
  const uint8_t usac[] = {0xAF, 0x00, 0xF9, 0x46, 0x40};  // AOT 42
  const uint8_t mp3[] = {0x2F, 0xFF, 0xFB, 0x90, 0x00};
  const uint8_t empty_frame[] = {0xAF, 0x01};
  const uint8_t odd_type[] = {0xAF, 0x07, 0x00};
  s.push_audio(0, bad_asc, sizeof bad_asc, r.events);
  s.push_audio(0, reserved, sizeof reserved, r.events);
  s.push_audio(0, usac, sizeof usac, r.events);
  s.push_audio(0, mp3, sizeof mp3, r.events);
  s.push_audio(0, nullptr, 0, r.events);
  s.push_audio(0, kSeqLc48Stereo, sizeof kSeqLc48Stereo, r.events);
  s.push_audio(0, empty_frame, sizeof empty_frame, r.events);
  s.push_audio(0, odd_type, sizeof odd_type, r.events);
  std::vector<uint8_t> huge(2 + 8185, 0);
  huge[0] = 0xAF;
  huge[1] = 0x01;
  s.push_audio(0, huge.data(), huge.size(), r.events);
  s.push_audio(0, bad_asc, sizeof bad_asc, r.events);  // bad header mid-stream: old config stays
  s.push_audio(0, frame, sizeof frame, r.events);
  s.flush(r.events);
  std::vector<std::string> codes;
  for (auto* e : r.of(Type::kError)) codes.push_back(e->code);
  const std::vector<std::string> want = {
      "audio_before_sequence_header", "bad_audio_specific_config", "bad_audio_specific_config",
      "unsupported_codec", "codec_mismatch", "invalid_audio_tag", "invalid_audio_tag",
      "invalid_audio_tag", "frame_too_large", "bad_audio_specific_config"};
  CHECK(codes == want);
  for (auto* e : r.of(Type::kError)) CHECK(!e->message.empty());
  CHECK_EQ(r.of(Type::kConfig).size(), 1u);
  auto segs = r.segments();
  CHECK_EQ(segs.size(), 1u);
  CHECK_EQ(segs[0]->frames, 1u);  // the segmenter went on
}

TEST(byte_soup_never_crashes) {
  // Arbitrary tag bodies after a valid config (ASan/UBSan watch the reads).
  Segmenter s(ts_aac());
  std::vector<SegmenterEvent> ev;
  s.push_audio(0, kSeqLc48Stereo, sizeof kSeqLc48Stereo, ev);
  uint32_t x = 12345;
  std::vector<uint8_t> body;
  for (int i = 0; i < 5000; ++i) {
    body.resize(x % 40);
    for (auto& b : body) { x = x * 1103515245 + 12345; b = static_cast<uint8_t>(x >> 16); }
    if (!body.empty() && i % 3 == 0) body[0] = 0xAF;
    x = x * 1103515245 + 12345;
    s.push_audio(x, body.data(), body.size(), ev);
    if (ev.size() > 100) ev.clear();
  }
  s.flush(ev);
  CHECK(true);
}

TEST_MAIN
