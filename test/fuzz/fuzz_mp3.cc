// libFuzzer target: MP3 frame headers at every offset and the frame splitter fed the input in
// data-driven chunks (byte 0 picks the chunk size; 0 = one byte at a time). Invariants: every frame
// handed out starts with a header that parses, has exactly that header's frame size, and the bytes
// handed out plus the bytes skipped plus the bytes pending add up to the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/codec/mp3.h"

using namespace skylark::codec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    Mp3Header h;
    if (parse_mp3_header(data + i, size - i, &h) == Mp3Status::kOk &&
        (h.frame_size < 24 || h.frame_size > kMp3MaxFrameSize || h.sample_rate < 8000))
      std::abort();
  }
  if (size < 1) return 0;
  const size_t chunk = data[0] == 0 ? 1 : data[0] * 7u;
  Mp3FrameSplitter s;
  std::vector<Mp3FrameSplitter::Frame> frames;
  size_t out = 0, skipped = 0;
  for (size_t at = 1; at < size; at += chunk) {
    frames.clear();
    const size_t n = chunk < size - at ? chunk : size - at;
    skipped += s.push(data + at, n, frames);
    for (const auto& f : frames) {
      Mp3Header h;
      if (parse_mp3_header(f.data, f.size, &h) != Mp3Status::kOk || h.frame_size != f.size) std::abort();
      out += f.size;
    }
  }
  if (out + skipped + s.pending() != size - 1) std::abort();
  return 0;
}
