// libFuzzer target: client bytes into an RTMP server session (chunk reader, control messages, AMF0
// commands). Input layout:
//   byte 0      flags: 1 = a valid C0+C1+C2 handshake is pushed first (so seeds hold only chunks),
//               2 = accept each publish, 4 = reject it instead, 8 = feed the first part byte by byte
//   bytes 1..2  split point (big-endian, modulo the payload length): the payload is pushed in two
//               pieces, exercising incremental feeding at a data-driven place
//   bytes 3..   the payload
// Invariants checked: nothing after an error event, at most one error, end() never crashes.
// Seeds (test/fuzz/corpus/fuzz_rtmp) are prefixes of the recorded FFmpeg publish after its handshake.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/rtmp/session.h"

using namespace skylark::rtmp;

namespace {
size_t g_errors = 0;

void drain(Session& s, uint8_t flags) {
  for (auto& e : s.events()) {
    if (g_errors > 0) std::abort();  // an event after the sticky error
    if (e.type == Event::Type::kError) ++g_errors;
    if (e.type == Event::Type::kPublish) {
      if (flags & 4) s.reject_publish("NetStream.Publish.BadName", "fuzz");
      else if (flags & 2) s.accept_publish();
    }
    if (e.type == Event::Type::kAudio && e.data.size == 0) std::abort();
  }
  s.events().clear();
  s.output().clear();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t flags = data[0];
  const size_t split_raw = (size_t{data[1]} << 8) | data[2];
  data += 3;
  size -= 3;
  g_errors = 0;
  Session s(SessionOptions{.max_message_bytes = 64 * 1024});
  if (flags & 1) {
    std::vector<uint8_t> hs(1 + 2 * kHandshakeSize, 0);
    hs[0] = kRtmpVersion;
    s.push(hs.data(), hs.size());
    drain(s, flags);
  }
  const size_t split = size ? split_raw % (size + 1) : 0;
  if (flags & 8) {
    for (size_t i = 0; i < split; ++i) {
      s.push(data + i, 1);
      drain(s, flags);
    }
  } else {
    s.push(data, split);
    drain(s, flags);
  }
  s.push(data + split, size - split);
  drain(s, flags);
  s.end();
  drain(s, flags);
  if (s.bytes_in() != size + ((flags & 1) ? 1 + 2 * kHandshakeSize : 0)) std::abort();
  return 0;
}
