// Helpers for the RTMP core tests: a client-side byte builder (handshake, chunked messages, AMF0
// commands) and a parser for the server's output.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/rtmp/amf0.h"
#include "core/rtmp/chunk.h"
#include "core/rtmp/handshake.h"
#include "core/rtmp/session.h"
#include "core/util/bytes.h"

namespace rtmp_test {
using namespace skylark;
using Bytes = std::vector<uint8_t>;

/** Builds what a publisher sends. */
struct Client {
  Bytes bytes;
  uint32_t chunk_size = 128;
  bool ext_on_type3 = true;  // FFmpeg convention: repeat the extended timestamp on type-3 chunks

  void handshake() {
    bytes.push_back(3);
    for (size_t i = 0; i < 2 * rtmp::kHandshakeSize; ++i) bytes.push_back(static_cast<uint8_t>(i * 7));
  }
  void basic(unsigned fmt, uint32_t csid) {
    if (csid < 64) {
      bytes.push_back(static_cast<uint8_t>(fmt << 6 | csid));
    } else if (csid < 320) {
      bytes.push_back(static_cast<uint8_t>(fmt << 6));
      bytes.push_back(static_cast<uint8_t>(csid - 64));
    } else {
      bytes.push_back(static_cast<uint8_t>(fmt << 6 | 1));
      bytes.push_back(static_cast<uint8_t>((csid - 64) & 0xFF));
      bytes.push_back(static_cast<uint8_t>((csid - 64) >> 8));
    }
  }
  /** One message: a header of type `fmt` (0..3) then type-3 continuations. `ts` is the absolute
   *  timestamp (fmt 0) or the delta (fmt 1/2; for fmt 3 only used to decide the extended field). */
  void message(uint32_t csid, uint8_t type, uint32_t sid, uint32_t ts, const Bytes& payload, unsigned fmt = 0) {
    util::VecWriter w(bytes);
    const bool ext = ts >= 0xFFFFFF;
    basic(fmt, csid);
    if (fmt <= 2) w.be24(ext ? 0xFFFFFF : ts);
    if (fmt <= 1) { w.be24(static_cast<uint32_t>(payload.size())); w.u8(type); }
    if (fmt == 0) w.le32(sid);
    if (ext && (fmt <= 2 || ext_on_type3)) w.be32(ts);
    size_t off = 0;
    do {
      if (off > 0) {
        basic(3, csid);
        if (ext && ext_on_type3) w.be32(ts);
      }
      size_t n = std::min<size_t>(chunk_size, payload.size() - off);
      w.bytes(payload.data() + off, n);
      off += n;
    } while (off < payload.size());
  }
  void set_chunk_size(uint32_t n) {
    Bytes b;
    util::VecWriter(b).be32(n);
    message(2, rtmp::kMsgSetChunkSize, 0, 0, b);
    chunk_size = n;
  }
  void command(const Bytes& amf, uint32_t sid = 0, uint32_t csid = 3) { message(csid, rtmp::kMsgCommandAmf0, sid, 0, amf); }
};

/** AMF0 builder. */
struct Amf {
  Bytes b;
  util::VecWriter w{b};
  Amf& str(std::string_view s) { rtmp::amf0_put_string(w, s); return *this; }
  Amf& num(double v) { rtmp::amf0_put_number(w, v); return *this; }
  Amf& boolean(bool v) { rtmp::amf0_put_bool(w, v); return *this; }
  Amf& null() { rtmp::amf0_put_null(w); return *this; }
  Amf& obj() { rtmp::amf0_begin_object(w); return *this; }
  Amf& key(std::string_view k) { rtmp::amf0_put_key(w, k); return *this; }
  Amf& end() { rtmp::amf0_end_object(w); return *this; }
  Amf& raw(std::initializer_list<uint8_t> r) { b.insert(b.end(), r); return *this; }
};

inline Bytes connect_cmd(std::string_view app = "live/stm_test") {
  return Amf().str("connect").num(1).obj().key("app").str(app).key("type").str("nonprivate")
      .key("flashVer").str("FMLE/3.0").key("tcUrl").str("rtmp://127.0.0.1/live/stm_test").end().b;
}
inline Bytes publish_cmd(std::string_view name = "sk_euw1_testkey") {
  return Amf().str("publish").num(5).null().str(name).str("live").b;
}

/** A publisher up to and including `publish` on message stream 1. */
inline Client publisher() {
  Client c;
  c.handshake();
  c.command(connect_cmd());
  c.command(Amf().str("releaseStream").num(2).null().str("sk_euw1_testkey").b);
  c.command(Amf().str("FCPublish").num(3).null().str("sk_euw1_testkey").b);
  c.command(Amf().str("createStream").num(4).null().b);
  c.command(publish_cmd(), 1, 4);
  return c;
}

/** Parses the server's output after S0+S1+S2 into messages (applying its Set Chunk Size). */
inline std::vector<rtmp::Message> parse_output(const Bytes& out, size_t skip = 1 + 2 * rtmp::kHandshakeSize) {
  std::vector<rtmp::Message> msgs;
  rtmp::ChunkReader r(1 << 20);
  size_t pos = skip;
  while (pos < out.size()) {
    size_t used = 0;
    rtmp::Message m;
    auto res = r.next(out.data() + pos, out.size() - pos, used, m);
    pos += used;
    if (res != rtmp::ChunkReader::Result::kMessage) break;
    if (m.type == rtmp::kMsgSetChunkSize && m.body.size == 4) {
      util::ByteReader br(m.body.data.get(), 4);
      r.set_chunk_size(br.be32());
    }
    msgs.push_back(std::move(m));
  }
  return msgs;
}

/** Feeds `in` to a fresh session in pieces of `step` bytes (accepting the publish when asked). */
inline std::vector<rtmp::Event> run(const Bytes& in, size_t step, rtmp::Session* keep = nullptr,
                                    rtmp::SessionOptions opts = {}) {
  rtmp::Session local(opts);
  rtmp::Session& s = keep ? *keep : local;
  std::vector<rtmp::Event> all;
  for (size_t i = 0; i < in.size(); i += step) {
    s.push(in.data() + i, std::min(step, in.size() - i));
    for (auto& e : s.events()) {
      bool pub = e.type == rtmp::Event::Type::kPublish;
      all.push_back(std::move(e));
      if (pub) s.accept_publish();
    }
    s.events().clear();
  }
  return all;
}

inline bool has_error(const std::vector<rtmp::Event>& ev, util::Status code) {
  for (auto& e : ev)
    if (e.type == rtmp::Event::Type::kError && e.code == code) return true;
  return false;
}

inline std::string cmd_name(const rtmp::Message& m) {
  std::vector<rtmp::Amf0Node> nodes;
  if (rtmp::amf0_decode_all(m.body.span(), nodes) != util::Status::kOk) return "";
  return std::string(rtmp::amf0_root(nodes, 0).str());
}
}  // namespace rtmp_test
