// Test helpers for the media tests: FLV audio tags from a fixture, Ogg Opus packets, E-RTMP tag
// builders, a small ISOBMFF box reader (for round trips: write boxes, parse them back), an emsg
// reader (ISO/IEC 23009-1 §5.10.3.3, as hls.js `parseEmsg` reads it) and an ID3v2.4 tag reader
// (as hls.js / @svta/cml-id3 `getId3Frames` walks it).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
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

/** One parsed emsg box (version 0 or 1). */
struct ParsedEmsg {
  uint8_t version = 0;
  uint32_t timescale = 0;
  uint64_t presentation_time = 0;  // version 1
  uint32_t presentation_time_delta = 0;  // version 0
  uint32_t event_duration = 0;
  uint32_t id = 0;
  std::string scheme_id_uri, value;
  std::vector<uint8_t> message_data;
  bool ok = false;  // the strings are terminated inside the box
};

/** Parses an emsg box body (after the 8-byte box header). */
inline ParsedEmsg parse_emsg(const uint8_t* body, size_t size) {
  ParsedEmsg e;
  if (size < 4) return e;
  e.version = body[0];
  size_t at = 4;
  auto cstr = [&](std::string& out) {
    for (size_t k = at; k < size; ++k)
      if (body[k] == 0) {
        out.assign(reinterpret_cast<const char*>(body + at), k - at);
        at = k + 1;
        return true;
      }
    return false;
  };
  if (e.version == 1) {
    if (size < at + 20) return e;
    e.timescale = be32(body + at);
    e.presentation_time = be64(body + at + 4);
    e.event_duration = be32(body + at + 12);
    e.id = be32(body + at + 16);
    at += 20;
    if (!cstr(e.scheme_id_uri) || !cstr(e.value)) return e;
  } else if (e.version == 0) {
    if (!cstr(e.scheme_id_uri) || !cstr(e.value) || size < at + 16) return e;
    e.timescale = be32(body + at);
    e.presentation_time_delta = be32(body + at + 4);
    e.event_duration = be32(body + at + 8);
    e.id = be32(body + at + 12);
    at += 16;
  } else {
    return e;
  }
  e.message_data.assign(body + at, body + size);
  e.ok = true;
  return e;
}

/** One frame of an ID3v2.4 tag. */
struct Id3Frame {
  std::string id;
  uint16_t flags = 0;
  std::vector<uint8_t> body;
  // Text frames (T***): the encoding byte and the text. WXXX: the description and the URL.
  uint8_t encoding = 0xFF;
  std::string text, description, url;
};
struct Id3Tag {
  bool ok = false;
  uint8_t major = 0, revision = 0, flags = 0;
  uint32_t size = 0;  // sync-safe size from the header: bytes after it
  std::vector<Id3Frame> frames;
  const Id3Frame* find(const std::string& id) const {
    for (const auto& f : frames) if (f.id == id) return &f;
    return nullptr;
  }
};

inline bool syncsafe_ok(const uint8_t* p) { return p[0] < 0x80 && p[1] < 0x80 && p[2] < 0x80 && p[3] < 0x80; }
inline uint32_t syncsafe(const uint8_t* p) { return uint32_t(p[0]) << 21 | p[1] << 14 | p[2] << 7 | p[3]; }

/** Reads a whole ID3v2.4 tag (no padding, no footer): header, then frames that fill it exactly. */
inline Id3Tag read_id3(const uint8_t* p, size_t n) {
  Id3Tag t;
  if (n < 10 || std::memcmp(p, "ID3", 3) != 0 || !syncsafe_ok(p + 6)) return t;
  t.major = p[3];
  t.revision = p[4];
  t.flags = p[5];
  t.size = syncsafe(p + 6);
  if (10 + size_t(t.size) != n) return t;
  size_t at = 10;
  while (at < n) {
    if (n - at < 10 || !syncsafe_ok(p + at + 4)) return t;
    Id3Frame f;
    f.id.assign(reinterpret_cast<const char*>(p + at), 4);
    const size_t size = syncsafe(p + at + 4);
    f.flags = uint16_t(p[at + 8] << 8 | p[at + 9]);
    if (n - at - 10 < size) return t;
    f.body.assign(p + at + 10, p + at + 10 + size);
    if (!f.body.empty() && (f.id[0] == 'T' || f.id == "WXXX")) {
      f.encoding = f.body[0];
      std::string rest(f.body.begin() + 1, f.body.end());
      if (f.id == "WXXX") {
        const size_t nul = rest.find('\0');
        if (nul == std::string::npos) return t;
        f.description = rest.substr(0, nul);
        f.url = rest.substr(nul + 1);
      } else {
        f.text = rest;
      }
    }
    t.frames.push_back(std::move(f));
    at += 10 + size;
  }
  t.ok = true;
  return t;
}

/** One parsed fragment (moof + mdat), with the emsg boxes just before its moof. */
struct ParsedFragment {
  uint32_t sequence_number = 0;
  uint64_t tfdt = 0;
  std::vector<uint32_t> durations, sizes;
  uint64_t duration_sum = 0;
  size_t mdat_payload = 0;
  bool data_offset_ok = false;
  bool has_sbgp = false;
  std::vector<ParsedEmsg> events;
  size_t moof_offset = 0;  // in the parsed buffer
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

// A run of ([emsg...] moof mdat) groups; false when the structure is wrong.
inline bool parse_fragments(const std::vector<uint8_t>& bytes, std::vector<ParsedFragment>& out) {
  std::vector<Box> top;
  if (!parse_boxes(bytes.data(), bytes.size(), 0, top)) return false;
  for (size_t i = 0; i < top.size(); i += 2) {
    ParsedFragment f;
    for (; i < top.size() && top[i].type == "emsg"; ++i) {
      f.events.push_back(parse_emsg(top[i].body, top[i].body_size));
      if (!f.events.back().ok) return false;
    }
    if (i + 1 >= top.size()) return false;
    const Box& moof = top[i];
    const Box& mdat = top[i + 1];
    if (moof.type != "moof" || mdat.type != "mdat") return false;
    f.moof_offset = moof.offset;
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

/** `bytes` without its top-level emsg boxes (what the fragments are without timed metadata). */
inline std::vector<uint8_t> strip_emsg(const std::vector<uint8_t>& bytes) {
  std::vector<Box> top;
  std::vector<uint8_t> out;
  if (!parse_boxes(bytes.data(), bytes.size(), 0, top)) return bytes;
  for (const Box& b : top)
    if (b.type != "emsg") out.insert(out.end(), bytes.begin() + b.offset, bytes.begin() + b.offset + b.size);
  return out;
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
