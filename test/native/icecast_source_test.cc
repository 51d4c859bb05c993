// SourceStream (native/core/icecast): Icecast source request bodies made by FFmpeg 5.1
// (test/fixtures/icecast, see its README) → FLV audio messages, checked against what FFmpeg's own
// demuxers see (ffprobe packet positions and sizes in *.packets) and against an independent Ogg
// reader. Every stream is fed whole, in random splits and one byte at a time, with the same result.
// Also: ID3v2 tags and junk between frames, LAME info frames, ADTS configuration changes, Ogg pages
// re-paginated (packets across pages), bad CRCs, chained streams, OpusTags, every sticky error, and
// the bound on retained bytes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "core/codec/aac.h"
#include "core/codec/mp3.h"
#include "core/codec/opus.h"
#include "core/icecast/adts.h"
#include "core/icecast/ogg.h"
#include "core/icecast/sniff.h"
#include "core/icecast/source_stream.h"
#include "media_test_util.h"

using namespace skylark;
using namespace skylark::icecast;
using Bytes = std::vector<uint8_t>;

namespace {

struct Msg {
  SourceItem::Type type;
  uint32_t ts;
  Bytes body;                         // kAudio
  std::string code, received;         // kError
  std::string vendor;                 // kTags
  std::vector<std::string> comments;  // kTags
  bool truncated = false;
  bool operator==(const Msg&) const = default;
};

struct Run {
  std::vector<Msg> msgs;
  SourceStats stats;
  size_t max_retained = 0;
  size_t bytes_at_error = 0;  // bytes pushed when the error item came out (0: none)
  bool bounded = true;        // retained bytes and capacity stayed under max_retained_bytes()
  std::vector<Msg> audio() const {
    std::vector<Msg> a;
    for (const Msg& m : msgs)
      if (m.type == SourceItem::Type::kAudio) a.push_back(m);
    return a;
  }
  const Msg* error() const {
    for (const Msg& m : msgs)
      if (m.type == SourceItem::Type::kError) return &m;
    return nullptr;
  }
  std::vector<const Msg*> tags() const {
    std::vector<const Msg*> t;
    for (const Msg& m : msgs)
      if (m.type == SourceItem::Type::kTags) t.push_back(&m);
    return t;
  }
};

void collect(SourceStream& s, Run& r, size_t pushed) {
  const SourceBatch& b = s.batch();
  for (const SourceItem& it : b.items) {
    Msg m{it.type, it.timestamp_ms, {}, {}, {}, {}, {}, false};
    if (it.type == SourceItem::Type::kAudio) {
      m.body.assign(b.arena.begin() + static_cast<ptrdiff_t>(it.offset),
                    b.arena.begin() + static_cast<ptrdiff_t>(it.offset + it.size));
    } else {
      const SourceNotice& n = b.notices[it.notice];
      m.code = n.code;
      m.received = n.received;
      m.vendor = n.vendor;
      m.comments = n.comments;
      m.truncated = n.truncated;
      if (it.type == SourceItem::Type::kError && r.bytes_at_error == 0) r.bytes_at_error = pushed;
    }
    r.msgs.push_back(std::move(m));
  }
  r.max_retained = std::max(r.max_retained, s.retained_bytes());
  if (s.retained_bytes() > s.max_retained_bytes() || s.retained_capacity() > s.max_retained_bytes()) r.bounded = false;
}

/** Feeds `data` in chunks: chunk = 0 → whole; chunk = 1 → byte by byte; otherwise random sizes in
 *  1..chunk from `seed`. */
Run feed(SourceCodec codec, const Bytes& data, size_t chunk = 0, uint32_t seed = 1, uint32_t max_frame = kDefaultMaxFrameBytes) {
  SourceStream s({.codec = codec, .max_frame_bytes = max_frame});
  Run r;
  std::mt19937 rng(seed);
  size_t at = 0;
  while (at < data.size()) {
    size_t n = data.size() - at;
    if (chunk == 1) n = 1;
    else if (chunk > 1) n = std::min(n, size_t{1} + rng() % chunk);
    s.push(data.data() + at, n);
    at += n;
    collect(s, r, at);
  }
  r.stats = s.stats();
  return r;
}

/** The same items whatever the split: whole, 7 random splittings, byte by byte. */
Run feed_all_ways(SourceCodec codec, const Bytes& data, uint32_t max_frame = kDefaultMaxFrameBytes) {
  Run whole = feed(codec, data, 0, 1, max_frame);
  CHECK(whole.bounded);
  const size_t chunks[] = {2, 5, 64, 417, 1500, 4096, 70000};
  for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; ++i) {
    Run split = feed(codec, data, chunks[i], static_cast<uint32_t>(100 + i), max_frame);
    CHECK(split.msgs == whole.msgs);
    CHECK(split.bounded);
  }
  Run bytes = feed(codec, data, 1, 1, max_frame);
  CHECK(bytes.msgs == whole.msgs);
  CHECK(bytes.bounded);
  CHECK_EQ(bytes.stats.junk_bytes, whole.stats.junk_bytes);
  return whole;
}

Bytes fixture(const std::string& name) { return skylark_test::read_fixture("icecast/" + name); }

struct Packet { size_t pos, size; };
/** ffprobe -show_packets positions and sizes (made with the fixtures; see the README). */
std::vector<Packet> packets_of(const std::string& name) {
  Bytes text = fixture(name + ".packets");
  std::istringstream in(std::string(text.begin(), text.end()));
  std::vector<Packet> out;
  size_t pos, size;
  while (in >> pos >> size) out.push_back({pos, size});
  return out;
}

uint32_t ms_at(uint64_t samples, uint32_t rate) { return static_cast<uint32_t>((samples * 1000 + rate / 2) / rate); }

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes slice(const Bytes& b, size_t at, size_t n) { return Bytes(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n)); }

/** An ID3v2.4 tag of `body` zero bytes (with a footer when asked). */
Bytes id3_tag(size_t body, bool footer = false) {
  Bytes t = {'I', 'D', '3', 4, 0, static_cast<uint8_t>(footer ? 0x10 : 0), static_cast<uint8_t>((body >> 21) & 0x7F),
             static_cast<uint8_t>((body >> 14) & 0x7F), static_cast<uint8_t>((body >> 7) & 0x7F), static_cast<uint8_t>(body & 0x7F)};
  t.resize(10 + body, 0);
  if (footer) {
    Bytes f = {'3', 'D', 'I', 4, 0, 0x10, t[6], t[7], t[8], t[9]};
    t.insert(t.end(), f.begin(), f.end());
  }
  return t;
}

Bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// ---- An independent Ogg writer (RFC 3533), for re-paginated, corrupted and chained streams.
uint32_t crc_bitwise(const Bytes& page) {
  uint32_t crc = 0;
  for (uint8_t byte : page) {
    crc ^= uint32_t{byte} << 24;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x80000000u) ? (crc << 1) ^ 0x04C11DB7u : crc << 1;
  }
  return crc;
}

struct OggWriter {
  explicit OggWriter(uint32_t s) : serial(s) {}
  uint32_t serial;
  uint32_t sequence = 0;
  Bytes out;
  void page(uint8_t flags, const std::vector<uint8_t>& lacing, const Bytes& body, uint64_t granule = 0) {
    Bytes p = {'O', 'g', 'g', 'S', 0, flags};
    for (int i = 0; i < 8; ++i) p.push_back(static_cast<uint8_t>(granule >> (8 * i)));
    for (int i = 0; i < 4; ++i) p.push_back(static_cast<uint8_t>(serial >> (8 * i)));
    for (int i = 0; i < 4; ++i) p.push_back(static_cast<uint8_t>(sequence >> (8 * i)));
    p.insert(p.end(), 4, 0);
    p.push_back(static_cast<uint8_t>(lacing.size()));
    p.insert(p.end(), lacing.begin(), lacing.end());
    p.insert(p.end(), body.begin(), body.end());
    const uint32_t crc = crc_bitwise(p);
    for (int i = 0; i < 4; ++i) p[22 + i] = static_cast<uint8_t>(crc >> (8 * i));
    out.insert(out.end(), p.begin(), p.end());
    ++sequence;
  }
  /** Packets laced into pages of at most `max_segments` segments (packets continue across pages). */
  void packets(const std::vector<Bytes>& packets, size_t max_segments, uint8_t last_flags = 0) {
    std::vector<uint8_t> lacing;
    Bytes body;
    bool continued = false, next_continued = false;
    auto flush = [&](uint8_t extra) {
      page(static_cast<uint8_t>((continued ? kOggContinued : 0) | extra), lacing, body);
      lacing.clear();
      body.clear();
      continued = next_continued;
    };
    for (size_t k = 0; k < packets.size(); ++k) {
      const Bytes& pk = packets[k];
      size_t left = pk.size();
      size_t at = 0;
      while (true) {
        const size_t seg = std::min<size_t>(left, 255);
        lacing.push_back(static_cast<uint8_t>(seg));
        body.insert(body.end(), pk.begin() + static_cast<ptrdiff_t>(at), pk.begin() + static_cast<ptrdiff_t>(at + seg));
        at += seg;
        left -= seg;
        const bool done = seg < 255;
        if (lacing.size() == max_segments) {
          next_continued = !done;
          flush(0);
        }
        if (done) break;
      }
    }
    if (!lacing.empty() || last_flags) {
      next_continued = false;
      flush(last_flags);
    }
  }
  /** OpusHead page (BOS), OpusTags, then `audio`. */
  void opus(const Bytes& head, const Bytes& tags, const std::vector<Bytes>& audio, size_t max_segments, bool eos = true) {
    page(kOggBos, {static_cast<uint8_t>(head.size())}, head);
    packets({tags}, 255);
    packets(audio, max_segments, eos ? kOggEos : 0);
  }
};

Bytes opus_tags(const std::string& vendor, const std::vector<std::string>& comments) {
  Bytes t = {'O', 'p', 'u', 's', 'T', 'a', 'g', 's'};
  auto le32 = [&t](uint32_t v) { for (int i = 0; i < 4; ++i) t.push_back(static_cast<uint8_t>(v >> (8 * i))); };
  le32(static_cast<uint32_t>(vendor.size()));
  t.insert(t.end(), vendor.begin(), vendor.end());
  le32(static_cast<uint32_t>(comments.size()));
  for (const auto& c : comments) {
    le32(static_cast<uint32_t>(c.size()));
    t.insert(t.end(), c.begin(), c.end());
  }
  return t;
}

/** The Opus packets of a fixture as an independent reader sees them: [0] OpusHead, [1] OpusTags, audio. */
std::vector<Bytes> ogg_packets(const std::string& name) { return media_test::read_ogg_packets("icecast/" + name); }

Bytes ex_body(uint8_t type, const Bytes& payload) {
  Bytes b = {static_cast<uint8_t>(0x90 | type), 'O', 'p', 'u', 's'};
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

/** Expected E-RTMP messages for Opus packets (head first), timestamps from the TOC at 48 kHz. */
void check_opus_audio(const std::vector<Msg>& audio, const std::vector<Bytes>& packets, size_t first_msg, uint64_t samples0) {
  uint64_t samples = samples0;
  CHECK_EQ(audio.size() - first_msg, packets.size());
  for (size_t i = 0; i < packets.size() && first_msg + i < audio.size(); ++i) {
    const Msg& m = audio[first_msg + i];
    CHECK(m.body == ex_body(1, packets[i]));
    CHECK_EQ(m.ts, ms_at(samples, 48000));
    samples += codec::opus_packet_samples(packets[i].data(), packets[i].size());
  }
}

}  // namespace

// ---- Pure parts.

TEST(adts_header_and_asc) {
  Bytes b = fixture("aac_48k_stereo_96k.aac");
  AdtsHeader h;
  CHECK(parse_adts_header(b.data(), b.size(), &h) == AdtsStatus::kOk);
  CHECK_EQ(h.profile, 1);  // LC
  CHECK_EQ(h.sample_rate, 48000u);
  CHECK_EQ(h.channel_configuration, 2);
  CHECK(!h.crc);
  CHECK_EQ(h.frame_length, 235u);  // = ffprobe's first packet
  CHECK_EQ(h.raw_data_blocks, 1);
  uint8_t asc[2];
  adts_audio_specific_config(h, asc);
  CHECK_EQ(asc[0], 0x11);  // LC (2) << 3 | index 3 >> 1
  CHECK_EQ(asc[1], 0x90);  // index 3 & 1 << 7 | channels 2 << 3
  codec::AudioSpecificConfig parsed;
  CHECK(codec::parse_audio_specific_config(asc, 2, &parsed) == codec::AscStatus::kOk);
  CHECK_EQ(parsed.sample_rate, 48000u);
  CHECK_EQ(parsed.channel_configuration, 2);
  CHECK_EQ(parsed.audio_object_type, 2);
  const uint8_t crc_hdr[9] = {0xFF, 0xF0, 0x50, 0x80, 0x02, 0x1F, 0xFC, 0, 0};  // protection_absent 0
  CHECK(parse_adts_header(crc_hdr, 9, &h) == AdtsStatus::kOk);
  CHECK(h.crc);
  CHECK_EQ(h.header_size, 9u);
  CHECK(parse_adts_header(crc_hdr, 8, &h) == AdtsStatus::kTruncated);
  const uint8_t layer1[7] = {0xFF, 0xF3, 0x50, 0x80, 0x02, 0x1F, 0xFC};
  CHECK(parse_adts_header(layer1, 7, &h) == AdtsStatus::kBadLayer);
  const uint8_t bad_rate[7] = {0xFF, 0xF1, 0x7C, 0x80, 0x02, 0x1F, 0xFC};  // index 15
  CHECK(parse_adts_header(bad_rate, 7, &h) == AdtsStatus::kBadFrequency);
  const uint8_t short_len[7] = {0xFF, 0xF1, 0x50, 0x80, 0x00, 0xFF, 0xFC};  // frame_length 7
  CHECK(parse_adts_header(short_len, 7, &h) == AdtsStatus::kBadLength);
}

TEST(ogg_page_header_crc_identify) {
  Bytes b = fixture("opus_48k_stereo_64k.ogg");
  OggPage p;
  CHECK(parse_ogg_page_header(b.data(), b.size(), &p) == OggPageStatus::kOk);
  CHECK_EQ(p.flags, kOggBos);
  CHECK_EQ(p.segments, 1);
  CHECK_EQ(p.body_size, 19u);
  CHECK(ogg_page_crc_ok(b.data(), p));
  CHECK(std::strcmp(ogg_identify_codec(b.data() + p.header_size, 8), "opus") == 0);
  b[30] ^= 1;
  CHECK(!ogg_page_crc_ok(b.data(), p));
  CHECK(parse_ogg_page_header(b.data(), 26, &p) == OggPageStatus::kNeedMore);
  CHECK(parse_ogg_page_header(b.data(), 2, &p) == OggPageStatus::kNeedMore);
  const uint8_t no[4] = {'O', 'g', 'g', 'X'};
  CHECK(parse_ogg_page_header(no, 4, &p) == OggPageStatus::kNoCapture);
  Bytes v = fixture("vorbis_44k1_stereo.ogg");
  CHECK(parse_ogg_page_header(v.data(), v.size(), &p) == OggPageStatus::kOk);
  CHECK(ogg_page_crc_ok(v.data(), p));
  CHECK(std::strcmp(ogg_identify_codec(v.data() + p.header_size, 8), "vorbis") == 0);
  Bytes f = fixture("flac_44k1_mono.ogg");
  CHECK(parse_ogg_page_header(f.data(), f.size(), &p) == OggPageStatus::kOk);
  CHECK(std::strcmp(ogg_identify_codec(f.data() + p.header_size, 8), "flac") == 0);
  CHECK(std::strcmp(ogg_identify_codec(reinterpret_cast<const uint8_t*>("Speex   "), 8), "speex") == 0);
  CHECK(std::strcmp(ogg_identify_codec(reinterpret_cast<const uint8_t*>("fishead\0"), 8), "skeleton") == 0);
  CHECK(std::strcmp(ogg_identify_codec(reinterpret_cast<const uint8_t*>("Opus"), 4), "ogg") == 0);
}

TEST(sniff_names_codecs) {
  const char* name = "";
  size_t need = 0;
  Bytes mp3 = fixture("mp3_22k05_mono_32k.mp3");
  CHECK(sniff_codec(mp3.data(), mp3.size(), &name, &need) == Sniff::kFound);
  CHECK(std::strcmp(name, "mp3") == 0);
  CHECK(sniff_codec(mp3.data(), 50, &name, &need) == Sniff::kNeedMore);
  CHECK_EQ(need, 104u + 4u);
  Bytes mp2 = fixture("mp2_44k1_stereo.mp2");
  CHECK(sniff_codec(mp2.data(), mp2.size(), &name, &need) == Sniff::kFound);
  CHECK(std::strcmp(name, "mp2") == 0);
  Bytes aac = fixture("aac_44k1_mono_48k.aac");
  CHECK(sniff_codec(aac.data(), aac.size(), &name, &need) == Sniff::kFound);
  CHECK(std::strcmp(name, "aac") == 0);
  Bytes opus = fixture("opus_48k_mono_32k.ogg");
  CHECK(sniff_codec(opus.data(), opus.size(), &name, &need) == Sniff::kFound);
  CHECK(std::strcmp(name, "opus") == 0);
  CHECK(sniff_codec(opus.data(), 20, &name, &need) == Sniff::kNeedMore);
  CHECK_EQ(need, 27u);
  const uint8_t zeros[16] = {};
  CHECK(sniff_codec(zeros, 16, &name, &need) == Sniff::kNone);
  size_t total = 0;
  Bytes tag = id3_tag(300, true);
  CHECK(parse_id3v2_header(tag.data(), tag.size(), &total) == Id3Status::kOk);
  CHECK_EQ(total, 320u);
  CHECK(parse_id3v2_header(tag.data(), 5, &total) == Id3Status::kNeedMore);
  tag[7] = 0x80;  // not syncsafe
  CHECK(parse_id3v2_header(tag.data(), tag.size(), &total) == Id3Status::kNotId3);
}

// ---- MP3.

TEST(mp3_fixture_frames_equal_ffprobe_packets) {
  const Bytes file = fixture("mp3_44k1_stereo_128k.mp3");
  const auto packets = packets_of("mp3_44k1_stereo_128k.mp3");
  Run r = feed_all_ways(SourceCodec::kMp3, file);
  CHECK(r.error() == nullptr);
  auto audio = r.audio();
  CHECK_EQ(audio.size(), packets.size());
  for (size_t i = 0; i < audio.size() && i < packets.size(); ++i) {
    CHECK_EQ(audio[i].body[0], 0x2F);  // MP3, 44 kHz, 16-bit, stereo: FFmpeg's FLV byte
    CHECK(Bytes(audio[i].body.begin() + 1, audio[i].body.end()) == slice(file, packets[i].pos, packets[i].size));
    CHECK_EQ(audio[i].ts, ms_at(i * 1152, 44100));
  }
  CHECK_EQ(r.stats.tag_bytes, 45u);   // FFmpeg's ID3v2.4 tag
  CHECK_EQ(r.stats.info_frames, 1u);  // and its Xing "Info" frame
  CHECK_EQ(r.stats.junk_bytes, 0u);
}

TEST(mp3_lsf_fixture_576_samples_per_frame) {
  const Bytes file = fixture("mp3_22k05_mono_32k.mp3");
  const auto packets = packets_of("mp3_22k05_mono_32k.mp3");
  Run r = feed_all_ways(SourceCodec::kMp3, file);
  auto audio = r.audio();
  CHECK_EQ(audio.size(), packets.size());
  Bytes frames;
  for (size_t i = 0; i < audio.size(); ++i) {
    CHECK_EQ(audio[i].body[0], 0x2A);  // 22 kHz class, 16-bit, mono
    CHECK_EQ(audio[i].ts, ms_at(i * 576, 22050));
    frames.insert(frames.end(), audio[i].body.begin() + 1, audio[i].body.end());
  }
  CHECK(frames == file);  // no tag, no info frame: the frames are the whole input
}

TEST(mp3_id3_and_junk_between_frames_skipped) {
  const Bytes file = fixture("mp3_22k05_mono_32k.mp3");
  const auto packets = packets_of("mp3_22k05_mono_32k.mp3");
  // A footer-flagged ID3v2.4 tag first; after frame 10 an ID3v2 tag (a new file), after frame 20
  // an ID3v1 "TAG" block, after frame 30 random junk, after frame 40 junk holding a sync word and a
  // header of the stream (not followed by a frame: not taken).
  Bytes in = id3_tag(500, true);
  Bytes tag1(128, 0);
  std::memcpy(tag1.data(), "TAG", 3);
  for (size_t i = 0; i < packets.size(); ++i) {
    Bytes f = slice(file, packets[i].pos, packets[i].size);
    in.insert(in.end(), f.begin(), f.end());
    if (i == 10) { Bytes t = id3_tag(2000); in.insert(in.end(), t.begin(), t.end()); }
    if (i == 20) in.insert(in.end(), tag1.begin(), tag1.end());
    if (i == 30) { Bytes j = random_bytes(3000, 7); in.insert(in.end(), j.begin(), j.end()); }
    if (i == 40) { Bytes j = {1, 2, 0xFF, 0xF3, 0x40, 0xC0, 3}; in.insert(in.end(), j.begin(), j.end()); }
  }
  Run r = feed_all_ways(SourceCodec::kMp3, in);
  CHECK(r.error() == nullptr);
  auto audio = r.audio();
  CHECK_EQ(audio.size(), packets.size());
  Bytes frames;
  for (const Msg& m : audio) frames.insert(frames.end(), m.body.begin() + 1, m.body.end());
  CHECK(frames == file);
  for (size_t i = 0; i < audio.size(); ++i) CHECK_EQ(audio[i].ts, ms_at(i * 576, 22050));
  CHECK_EQ(r.stats.tag_bytes, 520u + 2010u);
  CHECK_EQ(r.stats.junk_bytes, 128u + 3000u + 7u);
  CHECK_EQ(r.stats.sync_losses, 3u);
}

TEST(mp3_garbage_is_no_sync_within_the_limit) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    Bytes garbage = random_bytes(200 * 1024, seed);
    Run r = feed(SourceCodec::kMp3, garbage, 4096, seed);
    CHECK(r.error() != nullptr);
    if (!r.error()) continue;
    CHECK(r.error()->code == "no_sync");
    CHECK(r.bytes_at_error > kMaxResyncBytes);
    CHECK(r.bytes_at_error <= kMaxResyncBytes + kSniffMaxBytes + 4096);
    CHECK(r.audio().empty());
    CHECK(r.bounded);
    CHECK_EQ(r.msgs.size(), 1u);  // sticky: nothing after the error
  }
  // Junk after good frames: the sync is lost, then given up after the limit.
  Bytes in = cat({fixture("mp3_22k05_mono_32k.mp3"), Bytes(100 * 1024, 0)});
  Run r = feed(SourceCodec::kMp3, in, 1000);
  CHECK_EQ(r.audio().size(), packets_of("mp3_22k05_mono_32k.mp3").size());
  CHECK(r.error() && r.error()->code == "no_sync");
}

TEST(mp3_other_codecs_are_codec_mismatch) {
  struct Case { const char* file; const char* received; };
  for (Case c : {Case{"aac_44k1_mono_48k.aac", "aac"}, Case{"mp2_44k1_stereo.mp2", "mp2"},
                 Case{"opus_48k_stereo_64k.ogg", "opus"}, Case{"vorbis_44k1_stereo.ogg", "vorbis"}}) {
    Run r = feed_all_ways(SourceCodec::kMp3, fixture(c.file));
    CHECK(r.error() != nullptr);
    if (!r.error()) continue;
    CHECK(r.error()->code == "codec_mismatch");
    CHECK(r.error()->received == c.received);
    CHECK(r.audio().empty());
  }
}

// ---- AAC.

TEST(aac_fixture_round_trips_to_the_adts_bytes) {
  const Bytes file = fixture("aac_48k_stereo_96k.aac");
  const auto packets = packets_of("aac_48k_stereo_96k.aac");
  Run r = feed_all_ways(SourceCodec::kAac, file);
  CHECK(r.error() == nullptr);
  auto audio = r.audio();
  CHECK_EQ(audio.size(), packets.size() + 1);
  if (audio.empty()) return;
  // Sequence header: 0xAF 0x00 + AudioSpecificConfig.
  CHECK_EQ(audio[0].body.size(), 4u);
  CHECK_EQ(audio[0].body[0], 0xAF);
  CHECK_EQ(audio[0].body[1], 0x00);
  CHECK_EQ(audio[0].ts, 0u);
  codec::AudioSpecificConfig asc;
  CHECK(codec::parse_audio_specific_config(audio[0].body.data() + 2, 2, &asc) == codec::AscStatus::kOk);
  CHECK_EQ(asc.sample_rate, 48000u);
  CHECK_EQ(asc.channel_configuration, 2);
  // Each raw frame + an ADTS header rebuilt from the sequence header = FFmpeg's ADTS frame.
  Bytes rebuilt;
  for (size_t i = 1; i < audio.size(); ++i) {
    const Msg& m = audio[i];
    CHECK_EQ(m.body[0], 0xAF);
    CHECK_EQ(m.body[1], 0x01);
    CHECK_EQ(m.ts, ms_at((i - 1) * 1024, 48000));
    uint8_t hdr[7];
    codec::write_adts_header(hdr, asc, m.body.size() - 2);
    rebuilt.insert(rebuilt.end(), hdr, hdr + 7);
    rebuilt.insert(rebuilt.end(), m.body.begin() + 2, m.body.end());
    if (i - 1 < packets.size()) CHECK_EQ(m.body.size() - 2 + 7, packets[i - 1].size);
  }
  CHECK(rebuilt == file);
}

TEST(aac_configuration_change_sends_a_new_sequence_header) {
  const Bytes a = fixture("aac_48k_stereo_96k.aac"), b = fixture("aac_44k1_mono_48k.aac");
  const size_t na = packets_of("aac_48k_stereo_96k.aac").size(), nb = packets_of("aac_44k1_mono_48k.aac").size();
  Run r = feed_all_ways(SourceCodec::kAac, cat({id3_tag(100), a, Bytes{0, 1, 2, 3}, b}));
  CHECK(r.error() == nullptr);
  auto audio = r.audio();
  CHECK_EQ(audio.size(), na + nb + 2);
  if (audio.size() != na + nb + 2) return;
  const Msg& seq2 = audio[1 + na];
  CHECK_EQ(seq2.body[1], 0x00);
  codec::AudioSpecificConfig asc;
  CHECK(codec::parse_audio_specific_config(seq2.body.data() + 2, 2, &asc) == codec::AscStatus::kOk);
  CHECK_EQ(asc.sample_rate, 44100u);
  CHECK_EQ(asc.channel_configuration, 1);
  // The timeline goes on: the rate change re-bases at the time reached.
  const uint32_t base = ms_at(na * 1024, 48000);
  CHECK_EQ(seq2.ts, base);
  for (size_t k = 0; k < nb; ++k) CHECK_EQ(audio[2 + na + k].ts, base + ms_at(k * 1024, 44100));
  CHECK_EQ(r.stats.junk_bytes, 4u);
  CHECK_EQ(r.stats.tag_bytes, 110u);
}

TEST(aac_unsupported_adts_is_bad_header_and_mp3_is_codec_mismatch) {
  Bytes file = fixture("aac_48k_stereo_96k.aac");
  // Channel configuration 0 in every header (bits 0..2 of byte 2, 6..7 of byte 3).
  Bytes pce = file;
  for (const Packet& p : packets_of("aac_48k_stereo_96k.aac")) {
    pce[p.pos + 2] &= 0xFE;
    pce[p.pos + 3] &= 0x3F;
  }
  Run r = feed_all_ways(SourceCodec::kAac, pce);
  CHECK(r.error() && r.error()->code == "bad_header");
  CHECK(r.audio().empty());
  Run m = feed_all_ways(SourceCodec::kAac, fixture("mp3_44k1_stereo_128k.mp3"));
  CHECK(m.error() && m.error()->code == "codec_mismatch" && m.error()->received == "mp3");
  Run g = feed(SourceCodec::kAac, random_bytes(100 * 1024, 9), 3000);
  CHECK(g.error() && g.error()->code == "no_sync");
}

TEST(frame_too_large) {
  // MP3 frames of 417/418 bytes against... the smallest limit still takes them; a 1441-byte frame
  // (320 kbps, 32 kHz, padded) does not fit 1024.
  Bytes big;
  for (int i = 0; i < 3; ++i) {
    Bytes f(1441, 0x11);
    f[0] = 0xFF; f[1] = 0xFB; f[2] = 0xEA; f[3] = 0x00;
    big.insert(big.end(), f.begin(), f.end());
  }
  Run r = feed_all_ways(SourceCodec::kMp3, big, 1024);
  CHECK(r.error() && r.error()->code == "frame_too_large");
  CHECK(r.audio().empty());
  Run ok = feed(SourceCodec::kMp3, big, 0, 1, 2048);
  CHECK(ok.error() == nullptr);
  CHECK_EQ(ok.audio().size(), 3u);
}

// ---- Opus.

TEST(opus_fixture_packets_equal_the_ogg_reader_and_ffprobe) {
  const auto packets = ogg_packets("opus_48k_stereo_64k.ogg");
  const auto probe = packets_of("opus_48k_stereo_64k.ogg");
  Run r = feed_all_ways(SourceCodec::kOpus, fixture("opus_48k_stereo_64k.ogg"));
  CHECK(r.error() == nullptr);
  auto audio = r.audio();
  CHECK(!audio.empty());
  if (audio.empty()) return;
  CHECK(audio[0].body == ex_body(0, packets[0]));  // SequenceStart + OpusHead
  CHECK_EQ(audio[0].ts, 0u);
  std::vector<Bytes> pk(packets.begin() + 2, packets.end());
  check_opus_audio(audio, pk, 1, 0);
  CHECK_EQ(pk.size(), probe.size());
  for (size_t i = 0; i < pk.size() && i < probe.size(); ++i) CHECK_EQ(pk[i].size(), probe[i].size);
  // OpusTags before the audio, with FFmpeg's vendor and the -metadata comments.
  auto tags = r.tags();
  CHECK_EQ(tags.size(), 1u);
  if (tags.size() == 1) {
    CHECK(tags[0]->vendor == "Lavf59.27.100");
    CHECK_EQ(tags[0]->comments.size(), 3u);
    CHECK(tags[0]->comments.size() == 3 && tags[0]->comments[1] == "title=First Song");
    CHECK(tags[0]->comments.size() == 3 && tags[0]->comments[2] == "artist=Some Artist");
    CHECK(!tags[0]->truncated);
  }
  CHECK(r.msgs.size() > 2 && r.msgs[1].type == SourceItem::Type::kTags);
  SourceStream s({.codec = SourceCodec::kOpus});
  Bytes f = fixture("opus_48k_stereo_64k.ogg");
  s.push(f.data(), f.size());
  CHECK(s.tags() != nullptr && s.tags()->comments.size() == 3);
}

TEST(opus_packets_across_pages_and_bad_crc_pages) {
  const auto packets = ogg_packets("opus_48k_stereo_64k.ogg");
  std::vector<Bytes> audio_packets(packets.begin() + 2, packets.end());
  // Pages of 3 segments: nearly every packet (≥ 255 bytes: 2 segments) spans pages.
  OggWriter w(0x1234);
  w.opus(packets[0], packets[1], audio_packets, 3);
  Run r = feed_all_ways(SourceCodec::kOpus, w.out);
  CHECK(r.error() == nullptr);
  check_opus_audio(r.audio(), audio_packets, 1, 0);
  CHECK_EQ(r.stats.dropped_packets, 0u);

  // Big packets (2000 bytes, valid TOC: CELT 20 ms, code 0) across 1-segment pages.
  std::vector<Bytes> big(5, Bytes(2000, 0x55));
  for (auto& b : big) b[0] = 0xFC;
  OggWriter wb(7);
  wb.opus(packets[0], packets[1], big, 1);
  Run rb = feed_all_ways(SourceCodec::kOpus, wb.out);
  CHECK(rb.error() == nullptr);
  check_opus_audio(rb.audio(), big, 1, 0);
  // ... which the limit refuses.
  Run rl = feed_all_ways(SourceCodec::kOpus, wb.out, 1024);
  CHECK(rl.error() && rl.error()->code == "frame_too_large");
  CHECK(rl.bounded);

  // A page with a bad CRC: skipped and counted; its packets (and the one it continues) are lost,
  // the others arrive with the timeline counting only what arrived.
  OggWriter w2(0x99);
  w2.opus(packets[0], packets[1], audio_packets, 4);
  Bytes corrupt = w2.out;
  // Find the 6th page and flip a byte in its body.
  size_t at = 0;
  for (int i = 0; i < 6; ++i) {
    OggPage p;
    parse_ogg_page_header(corrupt.data() + at, corrupt.size() - at, &p);
    at += p.size();
  }
  OggPage p6;
  parse_ogg_page_header(corrupt.data() + at, corrupt.size() - at, &p6);
  corrupt[at + p6.header_size + 1] ^= 0x40;
  Run rc = feed_all_ways(SourceCodec::kOpus, corrupt);
  CHECK(rc.error() == nullptr);
  CHECK_EQ(rc.stats.bad_crc_pages, 1u);
  CHECK_EQ(rc.stats.page_gaps, 1u);
  CHECK(rc.audio().size() < audio_packets.size() + 1);
  CHECK(rc.audio().size() >= audio_packets.size() + 1 - 6);
  // Every packet that arrived is one of the originals, in order.
  size_t k = 0;
  for (size_t i = 1; i < rc.audio().size(); ++i) {
    while (k < audio_packets.size() && ex_body(1, audio_packets[k]) != rc.audio()[i].body) ++k;
    CHECK(k < audio_packets.size());
  }
}

TEST(opus_chained_streams_continue_the_timeline) {
  const auto a = ogg_packets("opus_48k_stereo_64k.ogg");
  const auto b = ogg_packets("opus_48k_stereo_64k_b.ogg");
  const auto m = ogg_packets("opus_48k_mono_32k.ogg");
  Run r = feed_all_ways(SourceCodec::kOpus, cat({fixture("opus_48k_stereo_64k.ogg"), fixture("opus_48k_stereo_64k_b.ogg"),
                                                 fixture("opus_48k_mono_32k.ogg")}));
  CHECK(r.error() == nullptr);
  CHECK_EQ(r.stats.chained_streams, 2u);
  auto audio = r.audio();
  // a: head + packets; b: same layout → no head, packets; m: mono → a new head, packets.
  std::vector<Bytes> pa(a.begin() + 2, a.end()), pb(b.begin() + 2, b.end()), pm(m.begin() + 2, m.end());
  CHECK_EQ(audio.size(), 1 + pa.size() + pb.size() + 1 + pm.size());
  if (audio.size() != 1 + pa.size() + pb.size() + 1 + pm.size()) return;
  uint64_t samples = 0, samples_b = 0;
  for (const auto& p : pb) samples_b += codec::opus_packet_samples(p.data(), p.size());
  std::vector<Msg> first(audio.begin(), audio.begin() + static_cast<ptrdiff_t>(1 + pa.size()));
  check_opus_audio(first, pa, 1, 0);
  for (const auto& p : pa) samples += codec::opus_packet_samples(p.data(), p.size());
  std::vector<Msg> second(audio.begin() + static_cast<ptrdiff_t>(pa.size()), audio.begin() + static_cast<ptrdiff_t>(1 + pa.size() + pb.size()));
  check_opus_audio(second, pb, 1, samples);
  for (const auto& p : pb) samples += codec::opus_packet_samples(p.data(), p.size());
  const Msg& head2 = audio[1 + pa.size() + pb.size()];
  CHECK(head2.body == ex_body(0, m[0]));
  CHECK_EQ(head2.ts, ms_at(samples, 48000));
  std::vector<Msg> third(audio.begin() + static_cast<ptrdiff_t>(1 + pa.size() + pb.size()), audio.end());
  check_opus_audio(third, pm, 1, samples);
  // Three OpusTags, each before its stream's audio: the now-playing changes with the track.
  auto tags = r.tags();
  CHECK_EQ(tags.size(), 3u);
  if (tags.size() == 3) {
    CHECK(tags[1]->comments.size() == 3 && tags[1]->comments[1] == "title=Second Song");
    CHECK_EQ(tags[1]->ts, ms_at(samples - samples_b, 48000));  // at the start of the second stream
  }
}

TEST(opus_tags_large_and_truncated) {
  const auto packets = ogg_packets("opus_48k_mono_32k.ogg");
  std::vector<std::string> comments = {"TITLE=Long", "ARTIST=Someone"};
  comments.push_back("METADATA_BLOCK_PICTURE=" + std::string(100000, 'A'));  // cover art, cut at 16 KiB
  comments.push_back("ALBUM=After the picture");
  OggWriter w(5);
  w.opus(packets[0], opus_tags("vendor x", comments), {packets.begin() + 2, packets.end()}, 255);
  Run r = feed_all_ways(SourceCodec::kOpus, w.out);
  CHECK(r.error() == nullptr);
  auto tags = r.tags();
  CHECK_EQ(tags.size(), 1u);
  if (tags.size() != 1) return;
  CHECK(tags[0]->vendor == "vendor x");
  CHECK_EQ(tags[0]->comments.size(), 2u);
  CHECK(tags[0]->truncated);
  CHECK_EQ(r.audio().size(), packets.size() - 1);
  CHECK(r.max_retained <= kOggMaxPageBytes + kMaxOpusTagsBytes);
}

TEST(opus_errors) {
  const auto packets = ogg_packets("opus_48k_mono_32k.ogg");
  // Not Opus: Vorbis, FLAC → codec_mismatch naming them.
  Run v = feed_all_ways(SourceCodec::kOpus, fixture("vorbis_44k1_stereo.ogg"));
  CHECK(v.error() && v.error()->code == "codec_mismatch" && v.error()->received == "vorbis");
  Run f = feed_all_ways(SourceCodec::kOpus, fixture("flac_44k1_mono.ogg"));
  CHECK(f.error() && f.error()->code == "codec_mismatch" && f.error()->received == "flac");
  // A chained Vorbis stream after Opus: the Opus audio, then codec_mismatch.
  Run cv = feed_all_ways(SourceCodec::kOpus, cat({fixture("opus_48k_mono_32k.ogg"), fixture("vorbis_44k1_stereo.ogg")}));
  CHECK_EQ(cv.audio().size(), packets.size() - 1);
  CHECK(cv.error() && cv.error()->received == "vorbis");
  // MP3 / ADTS sent as Ogg.
  Run m = feed_all_ways(SourceCodec::kOpus, fixture("mp3_44k1_stereo_128k.mp3"));
  CHECK(m.error() && m.error()->code == "codec_mismatch" && m.error()->received == "mp3");
  Run a = feed_all_ways(SourceCodec::kOpus, fixture("aac_44k1_mono_48k.aac"));
  CHECK(a.error() && a.error()->code == "codec_mismatch" && a.error()->received == "aac");
  // A bad OpusHead, a missing OpusTags.
  Bytes head = packets[0];
  head[9] = 0;  // 0 channels
  OggWriter w(1);
  w.opus(head, packets[1], {packets.begin() + 2, packets.end()}, 255);
  Run h = feed_all_ways(SourceCodec::kOpus, w.out);
  CHECK(h.error() && h.error()->code == "bad_header");
  OggWriter w2(2);
  w2.page(kOggBos, {19}, packets[0]);
  w2.packets({packets.begin() + 2, packets.end()}, 255);
  Run t = feed_all_ways(SourceCodec::kOpus, w2.out);
  CHECK(t.error() && t.error()->code == "bad_header");
  CHECK_EQ(t.audio().size(), 1u);  // the head went out before
  // Garbage: no_sync; a run of fake page headers with bad CRCs: no_sync too, within the CRC budget.
  Run g = feed(SourceCodec::kOpus, random_bytes(100 * 1024, 3), 5000);
  CHECK(g.error() && g.error()->code == "no_sync");
  Bytes fake;
  while (fake.size() < 2 * 1024 * 1024) {
    Bytes p = {'O', 'g', 'g', 'S', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 255};
    p.insert(p.end(), 255, 255);
    p.resize(p.size() + 255 * 255, 0);
    fake.insert(fake.end(), p.begin(), p.end());
  }
  Run fk = feed(SourceCodec::kOpus, fake, 65536);
  CHECK(fk.error() && fk.error()->code == "no_sync");
  CHECK(fk.bytes_at_error <= kMaxResyncCrcBytes + 2 * kOggMaxPageBytes + 65536);
  CHECK(fk.bounded);
  // Sticky: nothing after the error, whatever follows.
  SourceStream s({.codec = SourceCodec::kOpus});
  Bytes vb = fixture("vorbis_44k1_stereo.ogg");
  s.push(vb.data(), vb.size());
  CHECK(s.failed());
  Bytes ok = fixture("opus_48k_mono_32k.ogg");
  s.push(ok.data(), ok.size());
  CHECK(s.batch().items.empty());
  CHECK_EQ(s.retained_bytes(), 0u);
}

TEST_MAIN
