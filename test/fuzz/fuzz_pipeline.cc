// libFuzzer target: the ingest pipeline at depth — client bytes into an RTMP session with the
// production caps (1 MiB message cap, 64 KiB before the publish is accepted, optionally the
// 8192 + 5 byte audio message cap), each audio message into a Segmenter with the frame and segment
// byte caps on (8192 bytes; 8 × 128 kbps × 2 s = 256000 bytes), the publish accepted as ingest
// does. Input layout:
//   byte 0   options: bit 0 container TS (else fMP4), bits 1-2 LL-HLS part target 0/100/250/500 ms
//            (fMP4 only), bit 3 the audio message cap on
//   then records [u8 op][u16 n (big-endian)][...]:
//     op % 4 == 0: push the next n bytes as one socket read
//     op % 4 == 1: push the next n bytes one byte at a time
//     op % 4 == 2: [u8 value] push n × 64 bytes of `value` in reads of 64 KiB (reaches the 1 MiB
//                  message cap with a short input: a message body, or a run of chunk payload)
//     op % 4 == 3: no payload; segmenter flush() (op & 4) or discontinuity()
// A valid C0 C1 C2 handshake is pushed first, so seeds hold only chunks. Seeds
// (test/fuzz/corpus/fuzz_pipeline, made by test/fuzz/make_corpus.mjs) are the recorded FFmpeg AAC
// publishes and MP3 / E-RTMP Opus publishes built from the FFmpeg-made fixtures.
//
// Invariants, after every read while the session is alive (a failed session is closed by the
// listener; its bytes go with it):
//   session:   held_bytes() (partial messages at their declared length + replies) ≤ 64 KiB until
//              the publish is accepted, ≤ the in-flight budget (largest per-type cap + 256 KiB)
//              + the 1 MiB reply cap after;
//   segmenter: the open segment's frame bytes ≤ maxSegmentBytes, and what it holds (frames, parts
//              written, MP3 bytes awaiting their frame) ≤ maxSegmentBytes + fMP4 headers
//              (128 B per part + 8 B per frame) + one MP3 backlog (Mp3FrameSplitter::kMaxPending);
//   together:  retained = session + segmenter ≤ C + k × D, where D is the open segment's media time
//              (ms), k = (maxFrameBytes + 8) / 2.5 ms — the largest frame with its trun entry per the
//              shortest frame any codec has (an Opus 120-sample packet; AAC ≥ 10.7 ms, MP3 ≥ 24 ms)
//              — and C = the session bound + maxFrameBytes + 128 B per part + the MP3 backlog.
//              So memory grows with media time at no more than k (≈ 3.3 MB per s of media at the
//              production caps), and never past the segment term's absolute bound.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/rtmp/session.h"
#include "core/segment/segmenter.h"

using namespace skylark;

namespace {
constexpr uint32_t kMaxMessageBytes = 1024 * 1024;
constexpr uint32_t kPrePublishBytes = 64 * 1024;
constexpr uint32_t kMaxFrameBytes = 8192;
constexpr uint32_t kAudioMessageCap = kMaxFrameBytes + 5;
constexpr uint32_t kMaxSegmentBytes = 8 * 128000 / 8 * 2;
constexpr double kShortestFrameMs = 2.5;
constexpr size_t kFragmentHeaderBytes = 128, kSampleEntryBytes = 8;
constexpr size_t kReadBytes = 64 * 1024;

struct Pipeline {
  rtmp::Session session;
  segment::Segmenter seg;
  rtmp::ChunkReader reference;  // for the budget the session's reader has after the publish
  std::vector<segment::SegmenterEvent> ev;
  bool audio_cap;

  Pipeline(const rtmp::SessionOptions& so, const segment::SegmenterOptions& o, bool cap)
      : session(so), seg(o), reference(so.max_message_bytes, so.max_audio_message_bytes), audio_cap(cap) {}

  bool alive() const { return !session.failed(); }

  void push(const uint8_t* d, size_t n) {
    if (!alive()) return;
    session.push(d, n);
    check_session();  // before the replies are taken: they count too
    for (auto& e : session.events()) {
      if (e.type == rtmp::Event::Type::kPublish) session.accept_publish();
      if (e.type == rtmp::Event::Type::kAudio) {
        if (audio_cap && e.data.size > kAudioMessageCap) std::abort();
        seg.push_audio(e.timestamp, e.data.data.get(), e.data.size, ev);
        check_segmenter();
      }
    }
    session.events().clear();
    session.output().clear();
    drain();
    check_total();
  }

  void drain() {
    for (auto& e : ev)
      if (e.type == segment::SegmenterEvent::Type::kSegment && e.frames == 0) std::abort();
    ev.clear();
  }

  uint64_t session_bound() const {
    return session.publish_accepted() ? reference.default_inflight_budget() + rtmp::kMaxOutputBytes : kPrePublishBytes;
  }

  void check_session() const {
    if (alive() && session.held_bytes() > session_bound()) std::abort();
  }

  size_t headers() const {
    return kFragmentHeaderBytes * (seg.open_parts() + 1) + kSampleEntryBytes * seg.open_frames();
  }

  void check_segmenter() const {
    if (seg.open_frame_bytes() > kMaxSegmentBytes) std::abort();
    if (seg.held_bytes() > kMaxSegmentBytes + headers() + codec::Mp3FrameSplitter::kMaxPending) std::abort();
  }

  void check_total() const {
    if (!alive()) return;
    const double k = (kMaxFrameBytes + kSampleEntryBytes) / kShortestFrameMs;
    const double c = static_cast<double>(session_bound()) + kMaxFrameBytes +
                     kFragmentHeaderBytes * (seg.open_parts() + 1.0) + codec::Mp3FrameSplitter::kMaxPending;
    const double retained = static_cast<double>(session.held_bytes() + seg.held_bytes());
    if (retained > c + k * seg.open_media_ms()) std::abort();
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const uint32_t kParts[4] = {0, 100, 250, 500};
  const uint8_t opt = data[0];
  rtmp::SessionOptions so;
  so.max_message_bytes = kMaxMessageBytes;
  so.pre_publish_bytes = kPrePublishBytes;
  const bool audio_cap = (opt & 8) != 0;
  if (audio_cap) so.max_audio_message_bytes = kAudioMessageCap;
  segment::SegmenterOptions o;
  o.container = (opt & 1) ? segment::Container::kTs : segment::Container::kFmp4;
  o.part_target_ms = o.container == segment::Container::kFmp4 ? kParts[(opt >> 1) & 3] : 0;
  o.max_frame_bytes = kMaxFrameBytes;
  o.max_segment_bytes = kMaxSegmentBytes;
  Pipeline p(so, o, audio_cap);

  std::vector<uint8_t> hs(1 + 2 * rtmp::kHandshakeSize, 0);
  hs[0] = rtmp::kRtmpVersion;
  p.push(hs.data(), hs.size());

  static std::vector<uint8_t> fill(kReadBytes);
  size_t pos = 1;
  while (pos + 3 <= size && p.alive()) {
    const uint8_t op = data[pos];
    const size_t n = size_t{data[pos + 1]} << 8 | data[pos + 2];
    pos += 3;
    switch (op & 3) {
      case 0: {
        const size_t m = n < size - pos ? n : size - pos;
        p.push(data + pos, m);
        pos += m;
        break;
      }
      case 1: {
        const size_t m = n < size - pos ? n : size - pos;
        for (size_t i = 0; i < m && p.alive(); ++i) p.push(data + pos + i, 1);
        pos += m;
        break;
      }
      case 2: {
        if (pos >= size) break;
        const uint8_t value = data[pos++];
        std::fill(fill.begin(), fill.end(), value);
        for (size_t left = n * 64; left > 0 && p.alive();) {
          const size_t m = left < kReadBytes ? left : kReadBytes;
          p.push(fill.data(), m);
          left -= m;
        }
        break;
      }
      case 3:
        if (op & 4) p.seg.flush(p.ev);
        else p.seg.discontinuity();
        p.drain();
        break;
    }
  }
  p.session.end();
  p.session.events().clear();
  p.seg.flush(p.ev);
  p.drain();
  return 0;
}
