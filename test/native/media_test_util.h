// Test helpers for the media tests: FLV audio tags from a fixture, Ogg Opus packets, E-RTMP tag
// builders and a small ISOBMFF box reader (for round trips: write boxes, parse them back).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"

namespace media_test {

struct Tag {
  uint32_t ts;
  std::vector<uint8_t> body;
};

/** The audio tags (type 8) of an FLV fixture as (timestamp, body). */
inline std::vector<Tag> read_flv_audio(const std::string& rel) {
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

/** The packets of the first logical stream of an Ogg file (RFC 3533): lacing values of 255
 *  continue a packet, across pages too. */
inline std::vector<std::vector<uint8_t>> read_ogg_packets(const std::string& rel) {
  std::vector<uint8_t> b = skylark_test::read_fixture(rel);
  std::vector<std::vector<uint8_t>> packets;
  std::vector<uint8_t> cur;
  size_t off = 0;
  while (off + 27 <= b.size() && std::memcmp(&b[off], "OggS", 4) == 0) {
    const size_t nseg = b[off + 26];
    if (off + 27 + nseg > b.size()) break;
    const uint8_t* lacing = &b[off + 27];
    size_t body = off + 27 + nseg;
    for (size_t i = 0; i < nseg; ++i) {
      if (body + lacing[i] > b.size()) return packets;
      cur.insert(cur.end(), &b[body], &b[body] + lacing[i]);
      body += lacing[i];
      if (lacing[i] < 255) {
        packets.push_back(std::move(cur));
        cur.clear();
      }
    }
    off = body;
  }
  return packets;
}

/** An Enhanced RTMP audio tag: (9 << 4 | packet_type), FourCC, payload. */
inline std::vector<uint8_t> ex_audio_tag(uint8_t packet_type, const char* fourcc, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> t = {static_cast<uint8_t>(0x90 | packet_type)};
  t.insert(t.end(), fourcc, fourcc + 4);
  t.insert(t.end(), payload.begin(), payload.end());
  return t;
}


// ---- ISOBMFF reader.
struct Box {
  std::string type;
  size_t offset = 0;   // of the box header in the parsed buffer
  size_t size = 0;     // whole box
  size_t header = 8;
  const uint8_t* body = nullptr;  // after the 8-byte header
  size_t body_size = 0;
  std::vector<Box> children;
};

inline uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
inline uint64_t be64(const uint8_t* p) { return uint64_t(be32(p)) << 32 | be32(p + 4); }
inline uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

inline bool is_container(const std::string& t) {
  return t == "moov" || t == "trak" || t == "mdia" || t == "minf" || t == "stbl" || t == "dinf" || t == "edts" ||
         t == "mvex" || t == "moof" || t == "traf";
}


inline const Box* find(const std::vector<Box>& boxes, const std::string& path) {
  const std::vector<Box>* level = &boxes;
  const Box* found = nullptr;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string name = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    found = nullptr;
    for (const Box& b : *level)
      if (b.type == name) { found = &b; break; }
    if (!found) return nullptr;
    level = &found->children;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return found;
}

/** One parsed fragment (moof + mdat). */
struct ParsedFragment {
  uint32_t sequence_number = 0;
  uint64_t tfdt = 0;
  std::vector<uint32_t> durations, sizes;
  uint64_t duration_sum = 0;
  size_t mdat_payload = 0;
  bool data_offset_ok = false;
  bool has_sbgp = false;
};


// ---- implementations
// Boxes in [data, data+size), parsed recursively (containers, stsd entries, sample entries); false
// when any size is inconsistent (below 8 or past its parent).
// parse_fragments: a run of moof+mdat pairs parsed back; false when the structure is wrong.
// opus_tags_from_ogg: E-RTMP Opus tags from an Ogg Opus fixture: SequenceStart (OpusHead), then one
// CodedFrames tag per audio packet (OpusTags skipped), timestamps from the TOC durations.



inline bool parse_boxes(const uint8_t* data, size_t size, size_t base, std::vector<Box>& out) {
  size_t off = 0;
  while (off < size) {
    if (size - off < 8) return false;
    Box b;
    b.size = be32(data + off);
    b.type.assign(reinterpret_cast<const char*>(data + off + 4), 4);
    b.offset = base + off;
    if (b.size < 8 || b.size > size - off) return false;
    b.body = data + off + 8;
    b.body_size = b.size - 8;
    if (is_container(b.type)) {
      if (!parse_boxes(b.body, b.body_size, b.offset + 8, b.children)) return false;
    } else if (b.type == "stsd") {
      if (b.body_size < 8) return false;
      if (!parse_boxes(b.body + 8, b.body_size - 8, b.offset + 16, b.children)) return false;
    } else if (b.type == "mp4a" || b.type == "Opus") {
      if (b.body_size < 28) return false;
      if (!parse_boxes(b.body + 28, b.body_size - 28, b.offset + 36, b.children)) return false;
    }
    out.push_back(std::move(b));
    off += out.back().size;
  }
  return true;
}

inline bool parse_fragments(const std::vector<uint8_t>& bytes, std::vector<ParsedFragment>& out) {
  std::vector<Box> top;
  if (!parse_boxes(bytes.data(), bytes.size(), 0, top)) return false;
  if (top.size() % 2 != 0) return false;
  for (size_t i = 0; i < top.size(); i += 2) {
    const Box& moof = top[i];
    const Box& mdat = top[i + 1];
    if (moof.type != "moof" || mdat.type != "mdat") return false;
    ParsedFragment f;
    const Box* mfhd = find(moof.children, "mfhd");
    const Box* tfhd = find(moof.children, "traf/tfhd");
    const Box* tfdt = find(moof.children, "traf/tfdt");
    const Box* trun = find(moof.children, "traf/trun");
    f.has_sbgp = find(moof.children, "traf/sbgp") != nullptr;
    if (!mfhd || !tfhd || !tfdt || !trun) return false;
    f.sequence_number = be32(mfhd->body + 4);
    if ((be32(tfhd->body) & 0x020000) == 0) return false;  // default-base-is-moof
    if (tfdt->body[0] != 1) return false;
    f.tfdt = be64(tfdt->body + 4);
    const uint32_t flags = be32(trun->body) & 0xFFFFFF;
    if (flags != 0x301) return false;
    const uint32_t n = be32(trun->body + 4);
    if (trun->body_size != 12 + 8 * size_t(n)) return false;
    const uint32_t data_offset = be32(trun->body + 8);
    f.data_offset_ok = moof.offset + data_offset == mdat.offset + 8;
    size_t total = 0;
    for (uint32_t k = 0; k < n; ++k) {
      f.durations.push_back(be32(trun->body + 12 + 8 * k));
      f.sizes.push_back(be32(trun->body + 16 + 8 * k));
      f.duration_sum += f.durations.back();
      total += f.sizes.back();
    }
    f.mdat_payload = mdat.body_size;
    if (total != mdat.body_size) return false;
    out.push_back(std::move(f));
  }
  return true;
}

inline std::vector<Tag> opus_tags_from_ogg(const std::string& rel) {
  auto packets = read_ogg_packets(rel);
  std::vector<Tag> tags;
  if (packets.size() < 2) return tags;
  tags.push_back({0, ex_audio_tag(0, "Opus", packets[0])});
  uint64_t samples = 0;
  for (size_t i = 2; i < packets.size(); ++i) {
    const auto& p = packets[i];
    tags.push_back({static_cast<uint32_t>(samples / 48), ex_audio_tag(1, "Opus", p)});
    // TOC duration (RFC 6716 §3.1), code 0..3.
    const uint8_t cfg = p[0] >> 3;
    static const uint32_t kSilk[4] = {480, 960, 1920, 2880};
    uint32_t frame = cfg < 12 ? kSilk[cfg & 3] : cfg < 16 ? ((cfg & 1) ? 960 : 480) : 120u << (cfg & 3);
    uint32_t count = (p[0] & 3) == 0 ? 1 : (p[0] & 3) < 3 ? 2 : (p.size() > 1 ? p[1] & 0x3F : 1);
    samples += frame * count;
  }
  return tags;
}

}  // namespace media_test
