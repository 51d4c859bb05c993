// libFuzzer target: an Icecast source request body into SourceStream (native/core/icecast).
// Input layout:
//   byte 0      codec: % 3 → mp3, aac, opus; bit 7: max_frame_bytes = 1024 (else the default)
//   byte 1      chunking of the second run: 0 = one byte at a time, else chunks of 1 + (b * 37 % 5000)
//   bytes 2..   the body
// The body is pushed whole, then again in chunks. Invariants: both runs give the same items; the
// bytes kept between pushes (and their capacity) stay under max_retained_bytes(); nothing follows
// the error; every audio body is a well-formed FLV/E-RTMP message of the codec (a header that
// parses, a payload within max_frame_bytes); timestamps never go back.
// Seeds: test/fuzz/corpus/fuzz_icecast_source (node test/fuzz/make_icecast_corpus.mjs).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/codec/aac.h"
#include "core/codec/mp3.h"
#include "core/codec/opus.h"
#include "core/icecast/source_stream.h"

using namespace skylark;
using namespace skylark::icecast;

namespace {

struct Item {
  SourceItem::Type type;
  uint32_t ts;
  std::vector<uint8_t> body;
  std::string code;
  bool operator==(const Item&) const = default;
};

void check_body(SourceCodec codec, uint32_t max_frame, const uint8_t* b, size_t n) {
  if (n < 2) std::abort();
  switch (codec) {
    case SourceCodec::kMp3: {
      codec::Mp3Header h;
      if ((b[0] >> 4) != 2 || codec::parse_mp3_header(b + 1, n - 1, &h) != codec::Mp3Status::kOk ||
          h.frame_size != n - 1 || n - 1 > max_frame)
        std::abort();
      break;
    }
    case SourceCodec::kAac: {
      if (b[0] != 0xAF || b[1] > 1) std::abort();
      if (b[1] == 0) {
        codec::AudioSpecificConfig asc;
        if (n != 4 || codec::parse_audio_specific_config(b + 2, 2, &asc) != codec::AscStatus::kOk ||
            codec::adts_incompatibility(asc) != nullptr)
          std::abort();
      } else if (n - 2 > max_frame) {
        std::abort();
      }
      break;
    }
    case SourceCodec::kOpus: {
      if (n < 6 || std::memcmp(b + 1, "Opus", 4) != 0) std::abort();
      if (b[0] == 0x90) {
        codec::OpusHead h;
        if (codec::parse_opus_head(b + 5, n - 5, &h) != codec::OpusHeadStatus::kOk) std::abort();
      } else if (b[0] != 0x91 || n - 5 > max_frame || codec::opus_packet_samples(b + 5, n - 5) == 0) {
        std::abort();
      }
      break;
    }
  }
}

void drain(const SourceStream& s, std::vector<Item>& out, bool& failed, uint32_t& last_ts) {
  if (s.retained_bytes() > s.max_retained_bytes() || s.retained_capacity() > s.max_retained_bytes()) std::abort();
  const SourceBatch& b = s.batch();
  for (const SourceItem& it : b.items) {
    if (failed) std::abort();  // an item after the sticky error
    if (it.timestamp_ms < last_ts) std::abort();
    last_ts = it.timestamp_ms;
    Item m{it.type, it.timestamp_ms, {}, {}};
    if (it.type == SourceItem::Type::kAudio) {
      if (it.offset > b.arena.size() || it.size > b.arena.size() - it.offset) std::abort();
      const uint8_t* body = b.arena.data() + it.offset;
      check_body(s.options().codec, s.options().max_frame_bytes, body, it.size);
      m.body.assign(body, body + it.size);
    } else {
      if (it.notice >= b.notices.size()) std::abort();
      m.code = b.notices[it.notice].code;
      if (it.type == SourceItem::Type::kError) failed = true;
    }
    out.push_back(std::move(m));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const SourceStreamOptions opt{.codec = static_cast<SourceCodec>(data[0] % 3),
                                .max_frame_bytes = (data[0] & 0x80) ? 1024u : kDefaultMaxFrameBytes};
  const size_t chunk = data[1] == 0 ? 1 : 1 + (data[1] * 37u) % 5000u;
  data += 2;
  size -= 2;

  std::vector<Item> whole, split;
  bool failed = false;
  uint32_t last_ts = 0;
  SourceStream a(opt);
  a.push(data, size);
  drain(a, whole, failed, last_ts);

  failed = false;
  last_ts = 0;
  SourceStream b(opt);
  for (size_t at = 0; at < size; at += chunk) {
    b.push(data + at, chunk < size - at ? chunk : size - at);
    drain(b, split, failed, last_ts);
  }
  if (whole != split) std::abort();
  if (a.stats().bytes_in != size || b.stats().bytes_in != size) std::abort();
  return 0;
}
