// Timed metadata writers round-tripped: ID3v2.4 tags (native/core/mux/id3) written and read back
// by a reader that walks them as hls.js does (header, sync-safe sizes, frames filling the tag
// exactly), the text cleaning (UTF-8 repair, control characters, the 256-character cut on a
// character boundary, URL percent-encoding), and the fMP4 emsg box (version 1) written alone and
// before a fragment's moof, parsed back as hls.js `parseEmsg` reads it.
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "core/mux/fmp4/boxes.h"
#include "core/mux/id3/tag.h"
#include "core/mux/id3/text.h"
#include "media_test_util.h"

using namespace skylark;
using namespace media_test;
using mux::id3::NowPlaying;

namespace {
// Code points in well-formed UTF-8 (-1 when ill-formed).
long utf8_chars(const std::string& s) {
  long n = 0;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return -1;
    for (size_t k = 1; k < len; ++k) if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return -1;
    i += len;
    ++n;
  }
  return n;
}
std::string repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}
}  // namespace

TEST(syncsafe_integers) {
  for (uint32_t v : {0u, 1u, 127u, 128u, 1025u, 6199u, 0x0FFFFFFFu}) {
    uint8_t b[4];
    util::ByteWriter w(b, 4);
    mux::id3::write_syncsafe32(w, v);
    CHECK(w.ok() && syncsafe_ok(b));
    CHECK_EQ(syncsafe(b), v);
  }
  uint8_t b[4];
  util::ByteWriter w(b, 4);
  mux::id3::write_syncsafe32(w, 200);
  CHECK(b[0] == 0 && b[1] == 0 && b[2] == 1 && b[3] == 0x48);  // 200 = 1 << 7 | 72
}

TEST(now_playing_tag_round_trip) {
  const auto tag = mux::id3::now_playing_tag({"Blue in Green", "Miles Davis", "Kind of Blue", "https://example.com/kob"});
  const Id3Tag t = read_id3(tag.data(), tag.size());
  CHECK(t.ok);
  CHECK_EQ(t.major, 4);
  CHECK_EQ(t.revision, 0);
  CHECK_EQ(t.flags, 0);
  CHECK_EQ(t.frames.size(), 4u);
  const char* order[] = {"TIT2", "TPE1", "TALB", "WXXX"};
  for (size_t i = 0; i < t.frames.size() && i < 4; ++i) {
    CHECK(t.frames[i].id == order[i]);
    CHECK_EQ(t.frames[i].flags, 0);
    CHECK_EQ(t.frames[i].encoding, 0x03);  // UTF-8
  }
  CHECK(t.find("TIT2") && t.find("TIT2")->text == "Blue in Green");
  CHECK(t.find("TPE1") && t.find("TPE1")->text == "Miles Davis");
  CHECK(t.find("TALB") && t.find("TALB")->text == "Kind of Blue");
  CHECK(t.find("WXXX") && t.find("WXXX")->description.empty() && t.find("WXXX")->url == "https://example.com/kob");
  // Exact bytes of the smallest tag: header + TIT2 "A".
  const auto small = mux::id3::now_playing_tag({"A", "", "", ""});
  const uint8_t want[] = {'I', 'D', '3', 4, 0, 0, 0, 0, 0, 12, 'T', 'I', 'T', '2', 0, 0, 0, 2, 0, 0, 3, 'A'};
  CHECK_EQ(small.size(), sizeof want);
  CHECK(small.size() == sizeof want && std::memcmp(small.data(), want, sizeof want) == 0);
}

TEST(absent_fields_are_not_written_title_always_is) {
  const auto tag = mux::id3::now_playing_tag({"", "", "Album only", ""});
  const Id3Tag t = read_id3(tag.data(), tag.size());
  CHECK(t.ok);
  CHECK_EQ(t.frames.size(), 2u);
  CHECK(t.find("TIT2") && t.find("TIT2")->text.empty());
  CHECK(!t.find("TPE1") && !t.find("WXXX"));
  CHECK(t.find("TALB") && t.find("TALB")->text == "Album only");
}

TEST(unicode_and_the_256_character_cut) {
  const std::string mixed = "Café — 東京 🎵";
  const auto tag = mux::id3::now_playing_tag({mixed, mixed, "", ""});
  const Id3Tag t = read_id3(tag.data(), tag.size());
  CHECK(t.ok && t.find("TIT2") && t.find("TIT2")->text == mixed);
  // 300 characters of 1, 2, 3 and 4 bytes: 256 kept, never a partial character.
  for (const std::string ch : {"a", "é", "東", "🎵"}) {
    const std::string long_text = repeat(ch, 300);
    const auto big = mux::id3::now_playing_tag({long_text, long_text, long_text, long_text});
    const Id3Tag b = read_id3(big.data(), big.size());
    CHECK(b.ok);
    CHECK(b.find("TIT2") && b.find("TIT2")->text == repeat(ch, 256));
    CHECK(b.find("TALB") && utf8_chars(b.find("TALB")->text) == 256);
    CHECK(big.size() <= mux::id3::kMaxNowPlayingTagSize);
    if (ch == "🎵") {
      // The largest tag there is: 3 × 1024-byte texts, the URL percent-encoded to 3072 bytes.
      CHECK_EQ(big.size(), mux::id3::kMaxNowPlayingTagSize);
      CHECK_EQ(b.find("WXXX")->url.size(), 3072u);
      CHECK_EQ(b.find("TIT2")->body.size(), 1025u);  // frame size 1025 written sync-safe
    }
  }
  // A cut inside a character is impossible: 255 ASCII + one 4-byte character = 256 characters.
  const std::string edge = repeat("x", 255) + "🎵" + "tail";
  CHECK(mux::id3::clean_text(edge) == repeat("x", 255) + "🎵");
}

TEST(text_cleaning) {
  using mux::id3::clean_text;
  using mux::id3::clean_url;
  // Control characters (NUL, newlines, DEL) become spaces: nothing ends a string early.
  CHECK(clean_text(std::string("a\0b\nc\x7f", 6)) == "a b c ");
  // Ill-formed UTF-8: each bad byte is U+FFFD; overlongs and surrogates are ill-formed.
  CHECK(clean_text("\xff") == "\xEF\xBF\xBD");
  CHECK(clean_text("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");          // overlong '/'
  CHECK(clean_text("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // U+D800
  CHECK(clean_text("ok\xE6\x9D") == "ok\xEF\xBF\xBD\xEF\xBF\xBD");       // truncated 3-byte sequence
  CHECK(clean_text("\xF4\x90\x80\x80").size() == 12);                   // above U+10FFFF
  CHECK(utf8_chars(clean_text("\xF4\x8F\xBF\xBF")) == 1);               // U+10FFFF itself
  // URLs: printable ASCII kept, the rest percent-encoded (UTF-8 bytes).
  CHECK(clean_url("https://ex.com/a b/ü?q=1#x") == "https://ex.com/a%20b/%C3%BC?q=1#x");
  CHECK(clean_url(std::string("x\ny", 3)) == "x%20y");
  CHECK(clean_url("") == "");
  // Any bytes: well-formed output, bounded.
  std::string junk;
  for (int i = 0; i < 4000; ++i) junk.push_back(static_cast<char>((i * 97 + 13) & 0xFF));
  const std::string c = clean_text(junk);
  CHECK(utf8_chars(c) == 256);
  CHECK(c.size() <= mux::id3::max_text_bytes(256));
  const std::string u = clean_url(junk);
  CHECK(u.size() <= mux::id3::max_url_bytes(256));
  for (char ch : u) CHECK(static_cast<uint8_t>(ch) >= 0x21 && static_cast<uint8_t>(ch) <= 0x7E);
}

TEST(emsg_round_trip) {
  const auto tag = mux::id3::now_playing_tag({"Title", "Artist", "", ""});
  mux::fmp4::EventMessage e;
  e.timescale = 44100;
  e.presentation_time = (uint64_t{1} << 33) + 7;  // needs the 64-bit field
  e.id = 42;
  e.scheme_id_uri = mux::fmp4::kId3EventScheme;
  e.message_data = tag.data();
  e.message_size = tag.size();
  std::vector<uint8_t> out(mux::fmp4::emsg_size(e));
  util::ByteWriter w(out.data(), out.size());
  mux::fmp4::write_emsg(w, e);
  CHECK(w.ok() && w.size() == out.size());
  std::vector<Box> boxes;
  CHECK(parse_boxes(out.data(), out.size(), 0, boxes));
  CHECK(boxes.size() == 1 && boxes[0].type == "emsg");
  if (boxes.size() != 1) return;
  const ParsedEmsg p = parse_emsg(boxes[0].body, boxes[0].body_size);
  CHECK(p.ok);
  CHECK_EQ(p.version, 1);
  CHECK_EQ(be32(boxes[0].body) & 0xFFFFFF, 0u);  // flags 0
  CHECK_EQ(p.timescale, 44100u);
  CHECK_EQ(p.presentation_time, e.presentation_time);
  CHECK_EQ(p.event_duration, 0xFFFFFFFFu);
  CHECK_EQ(p.id, 42u);
  CHECK(p.scheme_id_uri == "https://aomedia.org/emsg/ID3");
  CHECK(p.value.empty());
  CHECK(p.message_data == tag);
  const Id3Tag t = read_id3(p.message_data.data(), p.message_data.size());
  CHECK(t.ok && t.find("TPE1") && t.find("TPE1")->text == "Artist");
}

TEST(emsg_before_moof_moves_nothing_inside_the_fragment) {
  const uint8_t data[] = {1, 2, 3, 4, 5, 6};
  const uint32_t sizes[] = {2, 4};
  const uint32_t durs[] = {1024, 1024};
  const auto t1 = mux::id3::now_playing_tag({"One", "", "", ""});
  const auto t2 = mux::id3::now_playing_tag({"Two", "", "", "https://x.test/"});
  mux::fmp4::EventMessage ev[2];
  for (int i = 0; i < 2; ++i) {
    ev[i].timescale = 48000;
    ev[i].presentation_time = 96000 + 1024u * i;
    ev[i].id = 1 + i;
    ev[i].scheme_id_uri = mux::fmp4::kId3EventScheme;
    ev[i].message_data = i ? t2.data() : t1.data();
    ev[i].message_size = i ? t2.size() : t1.size();
  }
  mux::fmp4::Fragment f;
  f.sequence_number = 3;
  f.base_media_decode_time = 96000;
  f.data = data;
  f.sizes = sizes;
  f.durations = durs;
  f.count = 2;
  std::vector<uint8_t> plain(mux::fmp4::fragment_size(f));
  util::ByteWriter pw(plain.data(), plain.size());
  mux::fmp4::write_fragment(pw, f);
  f.events = ev;
  f.event_count = 2;
  std::vector<uint8_t> with(mux::fmp4::fragment_size(f));
  util::ByteWriter ww(with.data(), with.size());
  mux::fmp4::write_fragment(ww, f);
  CHECK(pw.ok() && ww.ok() && ww.size() == with.size());
  CHECK_EQ(with.size(), plain.size() + mux::fmp4::emsg_size(ev[0]) + mux::fmp4::emsg_size(ev[1]));
  std::vector<ParsedFragment> pf;
  CHECK(parse_fragments(with, pf));
  CHECK_EQ(pf.size(), 1u);
  if (pf.size() != 1) return;
  CHECK(pf[0].data_offset_ok);  // trun data_offset counts from the moof: unchanged
  CHECK_EQ(pf[0].events.size(), 2u);
  CHECK_EQ(pf[0].events[1].presentation_time, 97024u);
  CHECK(strip_emsg(with) == plain);  // the moof + mdat bytes are those of the fragment without events
}

TEST_MAIN
