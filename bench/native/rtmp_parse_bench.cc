// RTMP bytes parsed per second by the native core (rtmp::Session, native/core/rtmp), the way the
// ingest server's I/O layer drives it (native/io): a long synthetic publish — the recorded FFmpeg
// fixture's AAC audio bodies re-chunked as FFmpeg does (chunk size 4096, type-1 headers with 21 ms
// timestamp deltas on csid 4), ~4 MB per session — through a fresh session each round (handshake,
// connect, publish, accept included); after each read the events are drained (each audio body
// touched) and the replies taken. Two read patterns: 64 KiB socket-sized reads (many messages per
// read), and one message per read (a live publisher: one read per ~21 ms AAC frame).
//
//   rtmp_parse_bench <ffmpeg-aac-48k.bin> [seconds per case, default 2]
// prints one JSON object per case and line: {"name", "reads", "bytesPerRound", "rounds",
// "seconds", "mbPerSec", "messagesPerSec"}. bench/rtmp-parse.bench.ts builds and runs it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/rtmp/session.h"

using namespace skylark;
using Bytes = std::vector<uint8_t>;

namespace {

constexpr size_t kTargetBytes = 4 * 1024 * 1024;
constexpr size_t kReadSize = 64 * 1024;
constexpr size_t kChunk = 4096;

struct Fixture {
  Bytes preamble;             // handshake and commands up to and including publish
  std::vector<Bytes> bodies;  // the audio bodies, sequence header first
};

// The fixture fed byte by byte: where its publish ends, and its audio bodies.
Fixture FromFixture(const Bytes& bytes) {
  Fixture f;
  rtmp::Session s;
  size_t preamble_end = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    s.push(bytes.data() + i, 1);
    for (const rtmp::Event& e : s.events()) {
      if (e.type == rtmp::Event::Type::kPublish && preamble_end == 0) preamble_end = i + 1;
      if (e.type == rtmp::Event::Type::kAudio) f.bodies.emplace_back(e.data.data.get(), e.data.data.get() + e.data.size);
    }
    s.events().clear();
    s.output().clear();
  }
  f.preamble.assign(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(preamble_end));
  return f;
}

void Put24(Bytes& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v >> 16));
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}

// Set Chunk Size 4096, then audio messages on csid 4, message stream 1: a type-0 header, then
// type-1 headers (21 ms deltas) and type-3 continuation chunks. `starts`: each message's offset.
Bytes AudioStream(const std::vector<Bytes>& bodies, std::vector<size_t>* starts) {
  Bytes out = {0x02, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0x10, 0};
  for (size_t n = 0; out.size() < kTargetBytes; ++n) {
    const Bytes& body = bodies[n == 0 ? 0 : 1 + (n - 1) % (bodies.size() - 1)];
    starts->push_back(out.size());
    out.push_back(n == 0 ? 0x04 : 0x44);
    Put24(out, n == 0 ? 0 : 21);
    Put24(out, static_cast<uint32_t>(body.size()));
    out.push_back(8);
    if (n == 0) out.insert(out.end(), {1, 0, 0, 0});
    for (size_t off = 0; off < body.size(); off += kChunk) {
      if (off > 0) out.push_back(0xC4);
      out.insert(out.end(), body.begin() + static_cast<std::ptrdiff_t>(off),
                 body.begin() + static_cast<std::ptrdiff_t>(std::min(body.size(), off + kChunk)));
    }
  }
  return out;
}

struct Read {
  size_t at, size;
};

volatile uint64_t g_sink = 0;  // keeps the checksum alive

// Rounds of: a fresh session, the preamble, accept, every read; for `seconds` after a warm-up.
void Measure(const char* name, const Fixture& f, const Bytes& stream, const std::vector<Read>& reads, double seconds) {
  uint64_t audio = 0, checksum = 0;
  auto round = [&] {
    rtmp::Session s;
    s.push(f.preamble.data(), f.preamble.size());
    s.events().clear();
    s.accept_publish();
    s.output().clear();
    for (const Read& r : reads) {
      s.push(stream.data() + r.at, r.size);
      for (const rtmp::Event& e : s.events()) {
        if (e.type == rtmp::Event::Type::kAudio) {
          ++audio;
          checksum += e.data.data[e.data.size - 1];
        } else if (e.type == rtmp::Event::Type::kError) {
          std::fprintf(stderr, "%s: %s\n", util::status_code(e.code).data(), e.message.c_str());
          std::exit(1);
        }
      }
      s.events().clear();
      if (!s.output().empty()) s.output().clear();
    }
  };
  using Clock = std::chrono::steady_clock;
  for (auto until = Clock::now() + std::chrono::milliseconds(300); Clock::now() < until;) round();
  audio = 0;
  uint64_t rounds = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    round();
    ++rounds;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  g_sink = checksum;
  const double per_round = static_cast<double>(f.preamble.size() + stream.size());
  std::printf(
      "{\"name\":\"%s\",\"reads\":%zu,\"bytesPerRound\":%.0f,\"rounds\":%llu,\"seconds\":%.3f,\"mbPerSec\":%.1f,"
      "\"messagesPerSec\":%.0f}\n",
      name, reads.size(), per_round, static_cast<unsigned long long>(rounds), elapsed,
      per_round * static_cast<double>(rounds) / elapsed / 1e6, static_cast<double>(audio) / elapsed);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: rtmp_parse_bench <ffmpeg-aac-48k.bin> [seconds]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  const Bytes bytes((std::istreambuf_iterator<char>(in)), {});
  const double seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  const Fixture f = FromFixture(bytes);
  if (f.preamble.empty() || f.bodies.size() < 2) {
    std::fprintf(stderr, "%s: no publish or no audio\n", argv[1]);
    return 2;
  }
  std::vector<size_t> starts;
  const Bytes stream = AudioStream(f.bodies, &starts);
  std::vector<Read> fixed, per_message;
  for (size_t at = 0; at < stream.size(); at += kReadSize) fixed.push_back({at, std::min(kReadSize, stream.size() - at)});
  per_message.push_back({0, 16});  // Set Chunk Size
  for (size_t i = 0; i < starts.size(); ++i)
    per_message.push_back({starts[i], (i + 1 < starts.size() ? starts[i + 1] : stream.size()) - starts[i]});
  Measure("64 KiB reads", f, stream, fixed, seconds);
  Measure("one message per read", f, stream, per_message, seconds);
  return 0;
}
