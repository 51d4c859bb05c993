// fMP4 box writers round-tripped (write → parse back: every size consistent, the fields we wrote),
// and the Segmenter end to end on the AAC, MP3 and Opus fixtures: fMP4 fragments parse back, tfdt
// continuity across segments and parts, trun sample counts and duration sums == segment durations,
// parts concatenate to their segment byte for byte, identical cut points across containers and part
// settings, MP3 in MPEG-TS (PMT stream_type 0x03/0x04), MP3 split across tags, and error events.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "check.h"
#include "core/mux/fmp4/boxes.h"
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

struct Run {
  std::vector<SegmenterEvent> ev;
  std::vector<const SegmenterEvent*> of(Type t) const {
    std::vector<const SegmenterEvent*> r;
    for (auto& e : ev) if (e.type == t) r.push_back(&e);
    return r;
  }
};

Run run(const std::vector<Tag>& tags, SegmenterOptions opt) {
  Segmenter s(opt);
  Run r;
  for (auto& t : tags) s.push_audio(t.ts, t.body.data(), t.body.size(), r.ev);
  s.flush(r.ev);
  return r;
}

SegmenterOptions fmp4(uint32_t part = 0, uint32_t target = 2000) {
  SegmenterOptions o;
  o.container = Container::kFmp4;
  o.part_target_ms = part;
  o.target_duration_ms = target;
  return o;
}
SegmenterOptions ts(uint32_t target = 2000) {
  SegmenterOptions o;
  o.container = Container::kTs;
  o.target_duration_ms = target;
  return o;
}

// Checks an init segment's structure; returns the sample entry box.
const Box* check_init(const std::vector<uint8_t>& init, std::vector<Box>& boxes, uint32_t timescale) {
  CHECK(parse_boxes(init.data(), init.size(), 0, boxes));
  CHECK_EQ(boxes.size(), 2u);
  const Box* ftyp = find(boxes, "ftyp");
  CHECK(ftyp && std::memcmp(ftyp->body, "iso6", 4) == 0 && std::memcmp(ftyp->body + 8, "iso6cmfc", 8) == 0);
  const Box* mdhd = find(boxes, "moov/trak/mdia/mdhd");
  CHECK(mdhd && be32(mdhd->body + 12) == timescale);
  const Box* hdlr = find(boxes, "moov/trak/mdia/hdlr");
  CHECK(hdlr && std::memcmp(hdlr->body + 8, "soun", 4) == 0);
  CHECK(find(boxes, "moov/trak/mdia/minf/smhd") && find(boxes, "moov/trak/mdia/minf/dinf/dref"));
  for (const char* t : {"stts", "stsc", "stco"}) {
    const Box* b = find(boxes, std::string("moov/trak/mdia/minf/stbl/") + t);
    CHECK(b && be32(b->body + 4) == 0);
  }
  const Box* trex = find(boxes, "moov/mvex/trex");
  CHECK(trex && be32(trex->body + 4) == 1);
  CHECK(!find(boxes, "moov/trak/tref"));  // one track, nothing else
  const Box* stsd = find(boxes, "moov/trak/mdia/minf/stbl/stsd");
  CHECK(stsd && be32(stsd->body + 4) == 1 && stsd->children.size() == 1);
  return stsd && !stsd->children.empty() ? &stsd->children[0] : nullptr;
}

// Descriptor walk inside esds: returns (OTI, DecoderSpecificInfo).
std::pair<uint8_t, std::vector<uint8_t>> parse_esds(const Box& esds) {
  const uint8_t* p = esds.body + 4;
  const uint8_t* end = esds.body + esds.body_size;
  auto len = [&](const uint8_t*& q) { size_t n = 0; for (int i = 0; i < 4; ++i) { uint8_t b = *q++; n = n << 7 | (b & 0x7F); if (!(b & 0x80)) break; } return n; };
  uint8_t oti = 0;
  std::vector<uint8_t> dsi;
  if (*p++ != 0x03) return {0, {}};
  len(p);
  p += 3;
  if (*p++ != 0x04) return {0, {}};
  const size_t dcd = len(p);
  const uint8_t* dcd_end = p + dcd;
  oti = p[0];
  p += 13;
  if (p < dcd_end && *p == 0x05) { ++p; size_t n = len(p); dsi.assign(p, p + n); p += n; }
  CHECK(p == dcd_end);
  CHECK(p + 3 == end && p[0] == 0x06 && p[1] == 1 && p[2] == 2);
  return {oti, dsi};
}

// Frame payloads out of fragments (mdat split by trun sizes).
std::vector<std::vector<uint8_t>> samples_of(const std::vector<uint8_t>& bytes) {
  std::vector<std::vector<uint8_t>> out;
  std::vector<Box> top;
  parse_boxes(bytes.data(), bytes.size(), 0, top);
  std::vector<ParsedFragment> frags;
  if (!parse_fragments(bytes, frags)) return out;
  for (size_t i = 0; i < frags.size(); ++i) {
    const Box& mdat = top[2 * i + 1];
    size_t at = 0;
    for (uint32_t s : frags[i].sizes) { out.emplace_back(mdat.body + at, mdat.body + at + s); at += s; }
  }
  return out;
}

}  // namespace

TEST(init_segment_aac_round_trip) {
  const uint8_t asc[] = {0x11, 0x90};
  mux::fmp4::AudioTrack t;
  t.timescale = t.sample_rate = 48000;
  t.decoder_specific = asc;
  t.decoder_specific_size = 2;
  auto init = mux::fmp4::write_init_segment(t);
  CHECK_EQ(init.size(), mux::fmp4::init_segment_size(t));
  std::vector<Box> boxes;
  const Box* entry = check_init(init, boxes, 48000);
  CHECK(entry && entry->type == "mp4a");
  CHECK(entry && be16(entry->body + 16) == 2 && be32(entry->body + 24) == (48000u << 16));
  CHECK(!find(boxes, "moov/trak/edts"));
  const Box* esds = entry ? find(entry->children, "esds") : nullptr;
  CHECK(esds != nullptr);
  if (esds) {
    auto [oti, dsi] = parse_esds(*esds);
    CHECK_EQ(oti, 0x40);
    CHECK((dsi == std::vector<uint8_t>{0x11, 0x90}));
  }
  // A long DecoderSpecificInfo takes the 4-byte descriptor length form.
  std::vector<uint8_t> big(200, 0x5A);
  t.decoder_specific = big.data();
  t.decoder_specific_size = big.size();
  init = mux::fmp4::write_init_segment(t);
  boxes.clear();
  entry = check_init(init, boxes, 48000);
  esds = entry ? find(entry->children, "esds") : nullptr;
  CHECK(esds && parse_esds(*esds).second == big);
}

TEST(init_segment_opus_and_mp3_round_trip) {
  mux::fmp4::AudioTrack t;
  t.kind = mux::fmp4::AudioTrack::Kind::kOpus;
  t.timescale = t.sample_rate = 48000;
  t.channels = 6;
  t.opus.channels = 6;
  t.opus.pre_skip = 312;
  t.opus.input_sample_rate = 44100;
  t.opus.output_gain = -256;
  t.opus.mapping_family = 1;
  t.opus.stream_count = 4;
  t.opus.coupled_count = 2;
  const uint8_t map[6] = {0, 4, 1, 2, 3, 5};
  std::memcpy(t.opus.mapping, map, 6);
  t.edit_media_time = 312;
  t.roll_distance = -4;
  auto init = mux::fmp4::write_init_segment(t);
  std::vector<Box> boxes;
  const Box* entry = check_init(init, boxes, 48000);
  CHECK(entry && entry->type == "Opus" && be16(entry->body + 16) == 6);
  const Box* dops = entry ? find(entry->children, "dOps") : nullptr;
  CHECK(dops && dops->body_size == 11 + 2 + 6);
  if (dops) {
    const uint8_t* d = dops->body;
    CHECK_EQ(d[0], 0);
    CHECK_EQ(d[1], 6);
    CHECK_EQ(be16(d + 2), 312);                    // PreSkip, big-endian
    CHECK_EQ(be32(d + 4), 44100u);
    CHECK_EQ(static_cast<int16_t>(be16(d + 8)), -256);
    CHECK_EQ(d[10], 1);
    CHECK_EQ(d[11], 4);
    CHECK_EQ(d[12], 2);
    CHECK(std::memcmp(d + 13, map, 6) == 0);
  }
  const Box* elst = find(boxes, "moov/trak/edts/elst");
  CHECK(elst && be32(elst->body + 4) == 1 && be32(elst->body + 8) == 0 && be32(elst->body + 12) == 312 &&
        be16(elst->body + 16) == 1);
  const Box* sgpd = find(boxes, "moov/trak/mdia/minf/stbl/sgpd");
  CHECK(sgpd && sgpd->body[0] == 1 && std::memcmp(sgpd->body + 4, "roll", 4) == 0 &&
        static_cast<int16_t>(be16(sgpd->body + 16)) == -4);

  mux::fmp4::AudioTrack m;
  m.kind = mux::fmp4::AudioTrack::Kind::kMp3;
  m.timescale = m.sample_rate = 44100;
  m.object_type_indication = 0x6B;
  m.avg_bitrate = m.max_bitrate = 128000;
  init = mux::fmp4::write_init_segment(m);
  boxes.clear();
  entry = check_init(init, boxes, 44100);
  const Box* esds = entry ? find(entry->children, "esds") : nullptr;
  CHECK(esds && parse_esds(*esds).first == 0x6B && parse_esds(*esds).second.empty());
}

TEST(fragment_round_trip) {
  const uint8_t data[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const uint32_t sizes[] = {1, 2, 3, 4};
  const uint32_t durs[] = {960, 960, 480, 2880};
  for (bool roll : {false, true}) {
    mux::fmp4::Fragment f;
    f.sequence_number = 7;
    f.base_media_decode_time = (uint64_t{1} << 33) + 5;  // needs tfdt version 1
    f.data = data;
    f.sizes = sizes;
    f.durations = durs;
    f.count = 4;
    f.roll_group = roll;
    std::vector<uint8_t> out(mux::fmp4::fragment_size(f));
    util::ByteWriter w(out.data(), out.size());
    mux::fmp4::write_fragment(w, f);
    CHECK(w.ok() && w.size() == out.size());
    std::vector<ParsedFragment> pf;
    CHECK(parse_fragments(out, pf));
    CHECK_EQ(pf.size(), 1u);
    if (pf.size() != 1) continue;
    CHECK_EQ(pf[0].sequence_number, 7u);
    CHECK_EQ(pf[0].tfdt, f.base_media_decode_time);
    CHECK((pf[0].durations == std::vector<uint32_t>{960, 960, 480, 2880}));
    CHECK((pf[0].sizes == std::vector<uint32_t>{1, 2, 3, 4}));
    CHECK(pf[0].data_offset_ok);
    CHECK_EQ(pf[0].has_sbgp, roll);
    CHECK(std::memcmp(out.data() + out.size() - 10, data, 10) == 0);
  }
}

TEST(aac_fmp4_segments_parse_back_with_continuous_tfdt) {
  auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  Run r = run(tags, fmp4());
  CHECK(r.of(Type::kError).empty());
  auto configs = r.of(Type::kConfig);
  CHECK_EQ(configs.size(), 1u);
  CHECK(std::string(configs[0]->codecs) == "mp4a.40.2");
  CHECK_EQ(configs[0]->timescale, 48000u);
  std::vector<Box> boxes;
  check_init(configs[0]->init, boxes, 48000);
  auto segs = r.of(Type::kSegment);
  CHECK(segs.size() >= 4);
  CHECK(r.of(Type::kPart).empty());
  uint64_t next_tfdt = segs[0]->base_media_decode_time, frames = 0;
  uint32_t next_seq = 1;
  for (auto* s : segs) {
    std::vector<ParsedFragment> pf;
    CHECK(parse_fragments(s->data, pf));
    CHECK_EQ(pf.size(), 1u);
    if (pf.size() != 1) continue;
    CHECK_EQ(pf[0].tfdt, next_tfdt);
    CHECK_EQ(s->base_media_decode_time, pf[0].tfdt);
    CHECK_EQ(pf[0].sequence_number, next_seq++);
    CHECK_EQ(pf[0].sizes.size(), s->frames);
    CHECK(pf[0].data_offset_ok);
    CHECK(std::abs(pf[0].duration_sum * 1000.0 / 48000 - s->duration_ms) < 1e-6);
    for (uint32_t d : pf[0].durations) CHECK_EQ(d, 1024u);
    next_tfdt += pf[0].duration_sum;
    frames += s->frames;
    // pts90k and tfdt are the same instant.
    CHECK_EQ(s->pts90k * 48000 / 90000, s->base_media_decode_time);
  }
  size_t coded = 0;
  for (auto& t : tags) coded += t.body[1] == 1;
  CHECK_EQ(frames, coded);
  // Frame payloads are the FLV raw frames, unchanged.
  std::vector<std::vector<uint8_t>> all;
  for (auto* s : segs) for (auto& x : samples_of(s->data)) all.push_back(std::move(x));
  size_t k = 0;
  bool same = all.size() == coded;
  for (auto& t : tags)
    if (t.body[1] == 1 && same) same = all[k++] == std::vector<uint8_t>(t.body.begin() + 2, t.body.end());
  CHECK(same);
}

TEST(parts_concatenate_to_segments) {
  auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  Run r = run(tags, fmp4(500));
  CHECK(r.of(Type::kError).empty());
  std::map<uint64_t, std::vector<uint8_t>> concat;
  std::map<uint64_t, uint32_t> count;
  std::map<uint64_t, double> dur;
  uint64_t next_tfdt = 0;
  bool first = true;
  uint32_t expect_index = 0;
  uint64_t expect_seq = 0;
  for (auto& e : r.ev) {
    if (e.type == Type::kPart) {
      CHECK_EQ(e.sequence, expect_seq);
      CHECK_EQ(e.part_index, expect_index++);
      CHECK(e.independent);
      CHECK(e.duration_ms <= 512 + 1e-9);
      std::vector<ParsedFragment> pf;
      CHECK(parse_fragments(e.data, pf));
      CHECK_EQ(pf.size(), 1u);
      if (pf.empty()) continue;
      if (!first) CHECK_EQ(pf[0].tfdt, next_tfdt);
      first = false;
      next_tfdt = pf[0].tfdt + pf[0].duration_sum;
      CHECK(std::abs(pf[0].duration_sum * 1000.0 / 48000 - e.duration_ms) < 1e-6);
      concat[e.sequence].insert(concat[e.sequence].end(), e.data.begin(), e.data.end());
      count[e.sequence]++;
      dur[e.sequence] += e.duration_ms;
    } else if (e.type == Type::kSegment) {
      CHECK(concat[e.sequence] == e.data);       // byte for byte
      CHECK_EQ(count[e.sequence], e.part_index);  // the segment reports its part count
      CHECK(std::abs(dur[e.sequence] - e.duration_ms) < 1e-6);
      ++expect_seq;
      expect_index = 0;
    }
  }
  auto segs = r.of(Type::kSegment);
  CHECK(segs.size() >= 4);
  // 48 kHz AAC: 24 frames (512 ms) per part, 94 frames (2005 ms) per segment → parts 24/24/24/22.
  CHECK_EQ(count[0], 4u);
  CHECK_EQ(segs[0]->frames, 94u);
}

// segment_bytes = false: the same parts and segment events, the segments without bytes (the
// consumer joins the parts), nothing else held for them.
TEST(segments_without_bytes_keep_every_part_and_segment_field) {
  auto tags = read_flv_audio("aac/sine48k_stereo_128k.flv");
  Run with = run(tags, fmp4(500));
  SegmenterOptions o = fmp4(500);
  o.segment_bytes = false;
  Run without = run(tags, o);
  CHECK(without.of(Type::kError).empty());
  CHECK_EQ(with.ev.size(), without.ev.size());
  for (size_t i = 0; i < with.ev.size() && i < without.ev.size(); ++i) {
    const auto& a = with.ev[i];
    const auto& b = without.ev[i];
    CHECK(a.type == b.type);
    CHECK_EQ(a.sequence, b.sequence);
    CHECK_EQ(a.part_index, b.part_index);
    CHECK_EQ(a.frames, b.frames);
    CHECK_EQ(a.pts90k, b.pts90k);
    CHECK(std::abs(a.duration_ms - b.duration_ms) < 1e-9);
    if (a.type == Type::kSegment) {
      CHECK(!a.data.empty());
      CHECK(b.data.empty());
    } else {
      CHECK(a.data == b.data);
    }
  }
  CHECK(without.of(Type::kSegment).size() >= 4);
}

TEST(identical_cut_points_across_containers_and_parts) {
  auto tags = read_flv_audio("aac/sine44k1_mono_64k.flv");
  Run a = run(tags, ts()), b = run(tags, fmp4()), c = run(tags, fmp4(300)), d = run(tags, fmp4(500));
  auto sa = a.of(Type::kSegment), sb = b.of(Type::kSegment), sc = c.of(Type::kSegment), sd = d.of(Type::kSegment);
  CHECK(sa.size() >= 3);
  CHECK_EQ(sa.size(), sb.size());
  CHECK_EQ(sa.size(), sc.size());
  CHECK_EQ(sa.size(), sd.size());
  for (size_t i = 0; i < sa.size() && i < sb.size() && i < sc.size() && i < sd.size(); ++i) {
    CHECK_EQ(sa[i]->frames, sb[i]->frames);
    CHECK_EQ(sa[i]->pts90k, sb[i]->pts90k);
    CHECK_EQ(sb[i]->pts90k, sc[i]->pts90k);
    CHECK_EQ(sc[i]->frames, sd[i]->frames);
    CHECK_EQ(sb[i]->base_media_decode_time, sd[i]->base_media_decode_time);
    CHECK(sa[i]->duration_ms == sd[i]->duration_ms);
  }
  // Two layers with the same timeline but different frame sizes (bytes) cut at the same frames.
  std::vector<Tag> shrunk = tags;
  for (auto& t : shrunk) if (t.body[1] == 1 && t.body.size() > 10) t.body.resize(t.body.size() / 2);
  Run e = run(shrunk, fmp4(500));
  auto se = e.of(Type::kSegment);
  CHECK_EQ(se.size(), sd.size());
  for (size_t i = 0; i < se.size() && i < sd.size(); ++i) CHECK_EQ(se[i]->frames, sd[i]->frames);
  auto pd = d.of(Type::kPart), pe = e.of(Type::kPart);
  CHECK_EQ(pd.size(), pe.size());
  for (size_t i = 0; i < pd.size() && i < pe.size(); ++i) CHECK_EQ(pd[i]->pts90k, pe[i]->pts90k);
}

TEST(opus_fmp4_from_ogg_fixture) {
  auto tags = opus_tags_from_ogg("opus/sine48k_stereo_128k.ogg");
  CHECK(tags.size() > 400);
  Run r = run(tags, fmp4(500));
  CHECK(r.of(Type::kError).empty());
  auto configs = r.of(Type::kConfig);
  CHECK_EQ(configs.size(), 1u);
  if (configs.empty()) return;
  CHECK(std::string(configs[0]->codecs) == "opus");
  CHECK(configs[0]->codec == codec::AudioCodec::kOpus);
  CHECK_EQ(configs[0]->sample_rate, 48000u);
  CHECK_EQ(configs[0]->channels, 1u);  // the lavfi sine is mono
  std::vector<Box> boxes;
  const Box* entry = check_init(configs[0]->init, boxes, 48000);
  CHECK(entry && entry->type == "Opus");
  const Box* elst = find(boxes, "moov/trak/edts/elst");
  CHECK(elst && be32(elst->body + 12) == 312);  // media_time = pre-skip
  uint64_t samples = 0, frames = 0;
  for (auto* s : r.of(Type::kSegment)) {
    std::vector<ParsedFragment> pf;
    CHECK(parse_fragments(s->data, pf));
    uint64_t sum = 0;
    for (auto& f : pf) { sum += f.duration_sum; for (uint32_t dd : f.durations) CHECK_EQ(dd, 960u); }
    CHECK(std::abs(sum * 1000.0 / 48000 - s->duration_ms) < 1e-6);
    samples += sum;
    frames += s->frames;
  }
  CHECK_EQ(frames, tags.size() - 1);
  CHECK_EQ(samples, (tags.size() - 1) * 960);
  auto segs = r.of(Type::kSegment);
  CHECK(segs.size() >= 5);
  CHECK(segs[0]->duration_ms == 2000);  // 100 packets of 20 ms: exactly the target
  CHECK_EQ(segs[0]->part_index, 4u);    // 25 packets (500 ms) per part
}

TEST(mp3_in_ts_declares_mpeg_audio_stream_types) {
  struct { const char* fixture; uint8_t stream_type; uint32_t rate; uint32_t spf; } cases[] = {
      {"mp3/sine44k1_stereo_128k.flv", 0x03, 44100, 1152}, {"mp3/sine22k05_mono_32k.flv", 0x04, 22050, 576}};
  for (auto& c : cases) {
    auto tags = read_flv_audio(c.fixture);
    Run r = run(tags, ts());
    CHECK(r.of(Type::kError).empty());
    auto configs = r.of(Type::kConfig);
    CHECK_EQ(configs.size(), 1u);
    CHECK(!configs.empty() && std::string(configs[0]->codecs) == "mp4a.40.34" && configs[0]->sample_rate == c.rate);
    auto segs = r.of(Type::kSegment);
    CHECK(segs.size() >= 2);
    for (auto* s : segs) {
      CHECK(s->data.size() % 188 == 0);
      // Packet 1 is the PMT: section at byte 5; after the 17-byte program info (the timed ID3
      // metadata_pointer_descriptor) the audio stream, then the ID3 stream (stream_type 0x15).
      const uint8_t* pmt = s->data.data() + 188;
      CHECK_EQ(pmt[5], 0x02);
      CHECK_EQ(((pmt[5 + 10] & 0x0F) << 8 | pmt[5 + 11]), 17);
      CHECK_EQ(pmt[5 + 29], c.stream_type);
      CHECK_EQ(((pmt[5 + 8] & 0x1F) << 8 | pmt[5 + 9]), ((pmt[5 + 30] & 0x1F) << 8 | pmt[5 + 31]));  // PCR PID = audio PID
      CHECK_EQ(pmt[5 + 34], 0x15);
      CHECK_EQ(pmt[5 + 2], 55);  // audio + ID3, no other stream
      // The PES payload starts with an MP3 sync word.
      const uint8_t* p = s->data.data() + 2 * 188;
      const size_t af = (p[3] & 0x20) ? 1 + p[4] : 0;
      const uint8_t* pes = p + 4 + af;
      CHECK(pes[0] == 0 && pes[1] == 0 && pes[2] == 1 && pes[3] == 0xC0);
      CHECK(pes[14] == 0xFF && (pes[15] & 0xE0) == 0xE0);
    }
    CHECK(std::abs(segs[0]->duration_ms - segs[0]->frames * c.spf * 1000.0 / c.rate) < 1e-6);
    // fMP4 too: OTI by version, sample durations = samples per frame.
    Run f = run(tags, fmp4());
    auto fc = f.of(Type::kConfig);
    std::vector<Box> boxes;
    const Box* entry = fc.empty() ? nullptr : check_init(fc[0]->init, boxes, c.rate);
    const Box* esds = entry ? find(entry->children, "esds") : nullptr;
    CHECK(esds && parse_esds(*esds).first == (c.stream_type == 0x03 ? 0x6B : 0x69));
    for (auto* s : f.of(Type::kSegment)) {
      std::vector<ParsedFragment> pf;
      CHECK(parse_fragments(s->data, pf));
      for (auto& x : pf) for (uint32_t dd : x.durations) CHECK_EQ(dd, c.spf);
    }
    CHECK_EQ(f.of(Type::kSegment).size(), segs.size());
  }
}

TEST(mp3_split_across_tags_gives_the_same_frames) {
  auto tags = read_flv_audio("mp3/sine44k1_stereo_128k.flv");
  std::vector<uint8_t> stream;
  for (auto& t : tags) stream.insert(stream.end(), t.body.begin() + 1, t.body.end());
  // Re-chunk into tags of 300 bytes (classic) and 1000 bytes (E-RTMP '.mp3'), timestamps by position.
  std::vector<Tag> classic, ex;
  for (size_t at = 0; at < stream.size(); at += 300) {
    std::vector<uint8_t> b = {0x2F};
    b.insert(b.end(), stream.begin() + at, stream.begin() + std::min(stream.size(), at + 300));
    classic.push_back({static_cast<uint32_t>(at * 8 / 128), b});
  }
  for (size_t at = 0; at < stream.size(); at += 1000) {
    std::vector<uint8_t> p(stream.begin() + at, stream.begin() + std::min(stream.size(), at + 1000));
    ex.push_back({static_cast<uint32_t>(at * 8 / 128), ex_audio_tag(1, ".mp3", p)});
  }
  Run a = run(tags, fmp4()), b = run(classic, fmp4()), c = run(ex, fmp4());
  CHECK(a.of(Type::kError).empty() && b.of(Type::kError).empty() && c.of(Type::kError).empty());
  auto frames = [](const Run& r) {
    std::vector<std::vector<uint8_t>> all;
    for (auto* s : r.of(Type::kSegment)) for (auto& x : samples_of(s->data)) all.push_back(std::move(x));
    return all;
  };
  auto fa = frames(a);
  CHECK_EQ(fa.size(), tags.size());
  CHECK(fa == frames(b));
  CHECK(fa == frames(c));
}

TEST(errors_are_events_and_frames_are_dropped) {
  auto opus = opus_tags_from_ogg("opus/sine48k_stereo_128k.ogg");
  Segmenter s(fmp4());
  std::vector<SegmenterEvent> ev;
  auto codes = [&]() { std::vector<std::string> c; for (auto& e : ev) if (e.type == Type::kError) c.push_back(e.code); ev.clear(); return c; };
  s.push_audio(0, opus[1].body.data(), opus[1].body.size(), ev);
  CHECK((codes() == std::vector<std::string>{"audio_before_sequence_header"}));
  auto bad_head = opus[0].body;
  bad_head[5] = 'X';
  s.push_audio(0, bad_head.data(), bad_head.size(), ev);
  CHECK((codes() == std::vector<std::string>{"bad_opus_head"}));
  s.push_audio(0, opus[0].body.data(), opus[0].body.size(), ev);
  CHECK(codes().empty());
  auto empty_packet = ex_audio_tag(1, "Opus", {});
  s.push_audio(0, empty_packet.data(), empty_packet.size(), ev);
  CHECK((codes() == std::vector<std::string>{"bad_opus_packet"}));
  auto multitrack = std::vector<uint8_t>{0x95, 0x00, 'O', 'p', 'u', 's', 0x00};
  s.push_audio(0, multitrack.data(), multitrack.size(), ev);
  CHECK((codes() == std::vector<std::string>{"unsupported_codec"}));
  auto flac = ex_audio_tag(1, "fLaC", {1, 2, 3});
  s.push_audio(0, flac.data(), flac.size(), ev);
  CHECK((codes() == std::vector<std::string>{"unsupported_codec"}));
  const uint8_t garbage[] = {0x2F, 0x00, 0x01, 0x02, 0x03, 0x04};
  s.push_audio(0, garbage, sizeof garbage, ev);
  CHECK((codes() == std::vector<std::string>{"bad_mp3_header"}));
  const uint8_t bad_asc[] = {0xAF, 0x00, 0x00, 0x00};
  s.push_audio(0, bad_asc, sizeof bad_asc, ev);
  CHECK((codes() == std::vector<std::string>{"bad_audio_specific_config"}));

  // Opus into MPEG-TS: refused per tag.
  Segmenter t(ts());
  t.push_audio(0, opus[0].body.data(), opus[0].body.size(), ev);
  CHECK((codes() == std::vector<std::string>{"unsupported_codec"}));

  // expect: anything else is codec_mismatch with expected/received.
  SegmenterOptions o = fmp4();
  o.expect = codec::AudioCodec::kAac;
  Segmenter m(o);
  m.push_audio(0, opus[0].body.data(), opus[0].body.size(), ev);
  CHECK_EQ(ev.size(), 1u);
  CHECK(!ev.empty() && std::string(ev[0].code) == "codec_mismatch" && ev[0].expected == "aac" && ev[0].received == "opus");
  ev.clear();
  const uint8_t pcm[] = {0x3E, 0x00, 0x00};
  m.push_audio(0, pcm, sizeof pcm, ev);
  CHECK(!ev.empty() && std::string(ev[0].code) == "codec_mismatch" && ev[0].received == "pcm_le");
  ev.clear();
  m.push_audio(0, multitrack.data(), multitrack.size(), ev);
  CHECK(!ev.empty() && std::string(ev[0].code) == "codec_mismatch" && ev[0].received == "opus");
  ev.clear();
  const uint8_t seq[] = {0xAF, 0x00, 0x11, 0x90};
  m.push_audio(0, seq, sizeof seq, ev);
  CHECK(ev.size() == 1 && ev[0].type == Type::kConfig);
}

TEST(codec_change_emits_new_config_and_discontinuity) {
  auto aac = read_flv_audio("aac/sine48k_stereo_128k.flv");
  auto mp3 = read_flv_audio("mp3/sine44k1_stereo_128k.flv");
  Segmenter s(fmp4(500));
  std::vector<SegmenterEvent> ev;
  for (size_t i = 0; i < 120; ++i) s.push_audio(aac[i].ts, aac[i].body.data(), aac[i].body.size(), ev);
  const uint32_t base = aac[119].ts + 23;
  for (size_t i = 0; i < 100; ++i) s.push_audio(base + mp3[i].ts, mp3[i].body.data(), mp3[i].body.size(), ev);
  s.flush(ev);
  std::vector<const SegmenterEvent*> configs, segs;
  for (auto& e : ev) {
    CHECK(e.type != Type::kError);
    if (e.type == Type::kConfig) configs.push_back(&e);
    if (e.type == Type::kSegment) segs.push_back(&e);
  }
  CHECK_EQ(configs.size(), 2u);
  CHECK(configs.size() == 2 && configs[1]->codec == codec::AudioCodec::kMp3 && configs[1]->timescale == 44100);
  bool saw = false;
  for (size_t i = 1; i < segs.size(); ++i)
    if (segs[i]->discontinuity) {
      saw = true;
      CHECK(segs[i]->pts90k >= segs[i - 1]->pts90k + static_cast<uint64_t>(segs[i - 1]->duration_ms * 90) - 1);
    }
  CHECK(saw);
}

TEST_MAIN
